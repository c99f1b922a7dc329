#!/usr/bin/env bash
# Builds (if needed) and runs one libFuzzer target for SECONDS on one core (docs/RELIABILITY.md).
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer options...]
#   TARGET: graph_json | hf_config | hardware | calibration | text | onnx | plan_file | project | published_runs
# The working corpus grows in build/fuzz/corpus/TARGET; it starts from fuzz/seeds/TARGET and the
# fixtures under tests/data. A finding is written to build/fuzz/artifacts/TARGET/ and the script
# exits non-zero; reproduce it with build/fuzz/fuzz_TARGET FILE.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 2 ]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
target="$1"; seconds="$2"; shift 2
build="${TP_FUZZ_BUILD_DIR:-build/fuzz}"

case "$target" in
  graph_json) fixtures=(tests/data/malformed/*.tpgraph.json); dict=fuzz/json.dict ;;
  hf_config)  fixtures=(tests/data/hf/*.json tests/data/hf/bad/*.json tests/data/malformed/*.hf.json); dict=fuzz/json.dict ;;
  hardware)   fixtures=(resources/hardware/*.json tests/data/malformed/*.hw.json); dict=fuzz/json.dict ;;
  calibration) fixtures=(); dict=fuzz/json.dict ;;
  text)       fixtures=(); dict="" ;;
  onnx)       fixtures=(tests/data/onnx/*.onnx tests/data/malformed/*.onnx); dict="" ;;
  plan_file)  fixtures=(tests/data/malformed/*.tpplan.json tests/data/plan/*.tpplan.json); dict=fuzz/json.dict ;;
  project)    fixtures=(tests/data/malformed/*.tpproj.json tests/data/plan/*.tpproj.json); dict=fuzz/json.dict ;;
  published_runs) fixtures=(resources/fidelity/*.json); dict=fuzz/json.dict ;;
  *) echo "fuzz.sh: unknown target '$target' (graph_json, hf_config, hardware, calibration, text, onnx, plan_file, project, published_runs)" >&2; exit 2 ;;
esac

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: needs clang++ and libclang-rt-14-dev (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fi
cmake --build "$build" --target "fuzz_$target" -j "${TP_FUZZ_BUILD_JOBS:-2}"

corpus="$build/corpus/$target"
seeds="$build/seeds/$target"
artifacts="$build/artifacts/$target"
mkdir -p "$corpus" "$artifacts"
rm -rf "$seeds" && mkdir -p "$seeds"
# Fixtures and hand-made seeds, copied so that .expected files and READMEs stay out.
for f in "${fixtures[@]}" fuzz/seeds/"$target"/*; do
  [ -f "$f" ] && cp "$f" "$seeds/"
done

options=(-max_total_time="$seconds" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1
         -artifact_prefix="$artifacts/")
[ -n "$dict" ] && options+=(-dict="$dict")
# ONNX seeds reach 300 KB; longer inputs make each execution slower without new paths.
[ "$target" = onnx ] && options+=(-max_len=65536)
echo "fuzz.sh: $target for ${seconds}s; corpus $corpus; findings in $artifacts"
exec "$build/fuzz_$target" "${options[@]}" "$@" "$corpus" "$seeds"

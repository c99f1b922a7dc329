#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test with ctest (offscreen).
#   scripts/test.sh [PRESET [CTEST ARGS...]]   dev (default) or asan (AddressSanitizer + UBSan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-dev}"
scripts/bootstrap.sh
scripts/build.sh "$preset"
export QT_QPA_PLATFORM=offscreen
ctest --preset "$preset" -j2 "${@:2}"

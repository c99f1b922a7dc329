#!/usr/bin/env bash
# Installs what is missing, builds, and opens TP Studio on a built-in model. With no display,
# plans the built-in model from the command line instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh dev
model="${1:-gpt3-175b}"
if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
  exec build/dev/app/tpstudio/tpstudio "$model" "${@:2}"
fi
echo "No display: planning $model from the command line (tpplan)."
if build/dev/app/tpplan --help | grep -q "tpplan plan"; then
  exec build/dev/app/tpplan plan "$model" --mesh 8x8 --micro-batch 1 "${@:2}"
fi
exec build/dev/app/tpplan info "$model" "${@:2}"

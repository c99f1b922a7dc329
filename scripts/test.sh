#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test with ctest (offscreen).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh dev
export QT_QPA_PLATFORM=offscreen
ctest --preset dev -j2

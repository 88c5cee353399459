#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (Catch2 through CTest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" -LE long

#!/usr/bin/env bash
# Configures and builds cgram in ./build (Ninja, RelWithDebInfo by default):
# everything, or only the targets named (scripts/build.sh cgram).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${CGRAM_BUILD_DIR:-build}
build_type=${CGRAM_BUILD_TYPE:-RelWithDebInfo}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" ${CGRAM_CMAKE_ARGS:-} >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"

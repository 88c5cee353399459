#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (Catch2 through CTest).
# Before the suite, a reduced ASan + UBSan pass (scripts/sanitize.sh ci: the
# fuzz targets' corpora and regressions, in ./build-asan; docs/FUZZING.md);
# CGRAM_CI_SANITIZE=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
if [ "${CGRAM_CI_SANITIZE:-1}" != 0 ]; then scripts/sanitize.sh ci; fi
cd build
ctest --output-on-failure -j "$(nproc)" -LE long

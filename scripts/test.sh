#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (Catch2 through CTest).
# Before the suite, a reduced ASan + UBSan pass (scripts/sanitize.sh ci: the
# fuzz targets' corpora and regressions, in ./build-asan; docs/FUZZING.md);
# CGRAM_CI_SANITIZE=0 skips it. With --no-build, only the suite runs (on
# the build there is).
#
# Tests that need ../shared (real vocabularies beside the checkout; a
# user's clone has none) are skipped without it: CTest lists them as not
# run, and their reasons are printed after its summary. CGRAM_SHARED_DIR
# points the tests elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != --no-build ]; then
  scripts/setup.sh
  scripts/build.sh
  if [ "${CGRAM_CI_SANITIZE:-1}" != 0 ]; then scripts/sanitize.sh ci; fi
fi
cd build
status=0
ctest --output-on-failure -j "$(nproc)" -LE long || status=$?
reasons=$(grep -ho "cgram-skip: .*" Testing/Temporary/LastTest.log | sort -u || true)
if [ -n "$reasons" ]; then
  echo "Why the tests above did not run:"
  echo "$reasons" | sed 's/^cgram-skip: /  /'
fi
exit "$status"

#!/usr/bin/env bash
# Builds cgram with sanitizers, each in its own directory, and runs tests:
#
#   scripts/sanitize.sh asan   ASan + UBSan (any UB is fatal), ./build-asan:
#                              the whole quick suite (ctest -LE long)
#   scripts/sanitize.sh tsan   ThreadSanitizer, ./build-tsan: the threaded
#                              tests (batch, lazy index under threads, the
#                              Compiler and its background JIT, the C API's
#                              threads, the server under load)
#   scripts/sanitize.sh ci     the reduced ASan + UBSan pass CI makes
#                              (scripts/test.sh; CGRAM_CI_SANITIZE=0 skips
#                              it): fuzz_replay and ceiling_tests only: the
#                              fuzz targets' seeds and regressions (label
#                              fuzz) and the nesting ceiling of every kind
#                              (label ceiling), in ./build-asan
#   scripts/sanitize.sh        asan, then tsan
#
# Builds are -O1 -g with the system compiler, -j2 at most, each under
# flock on $CGRAM_BUILD_LOCK (default /tmp/cgram-build.lock). Suppressions
# (with the reason for each) are in tests/sanitizers/. docs/FUZZING.md has
# the times measured.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
what=${1:-all}
lock=${CGRAM_BUILD_LOCK:-/tmp/cgram-build.lock}
jobs=$(( $(nproc) < 2 ? $(nproc) : 2 ))
supp=$root/tests/sanitizers

configure() {  # DIR OPTION
  flock "$lock" cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -D"$2"=ON >/dev/null
}

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1
export LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp

run_asan() {
  configure build-asan CGRAM_SANITIZE
  time flock "$lock" cmake --build build-asan -j "$jobs"
  # install.consumers builds programs outside this build's flags that load
  # its libcgram.so ("ASan runtime does not come first"): not run here.
  (cd build-asan && time ctest --output-on-failure -j "$jobs" -LE long -E '^install\.consumers$' --timeout 3600)
}

# CI's pass: the fuzz targets' seeds and regressions under ASan + UBSan
# (fuzz_replay needs every library, but none of the test programs).
run_ci() {
  configure build-asan CGRAM_SANITIZE
  time flock "$lock" cmake --build build-asan -j "$jobs" --target fuzz_replay ceiling_tests
  (cd build-asan && time ctest --output-on-failure -j "$jobs" -L 'fuzz|ceiling')
}

run_tsan() {
  configure build-tsan CGRAM_TSAN
  time flock "$lock" cmake --build build-tsan -j "$jobs" --target cgram_tests capi_test cgram-server bench_server_load
  # Catch2 tags: [threads] (tests/unit/matcher/threads_test.cpp), [batch], [service]
  # (the Compiler, background JIT), [jit] and [aot] (concurrent JIT
  # compilation, objects loaded while others run).
  (cd build-tsan && time tests/cgram_tests '[threads],[batch],[service],[jit],[aot]' --durations yes &&
     time ctest --output-on-failure -R '^(capi\.c|server\.load_smoke)$')
}

case $what in
  asan) run_asan ;;
  tsan) run_tsan ;;
  ci) run_ci ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan|ci|all]" >&2; exit 64 ;;
esac

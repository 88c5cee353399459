#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang-19 with ASan and UBSan, in
# ./build-fuzz) and runs them, each for SECONDS (default 600).
#
#   scripts/fuzz.sh                 every target, 600 s each
#   scripts/fuzz.sh TARGET [SECONDS]
#   scripts/fuzz.sh all SECONDS
#
# Targets: grammar regex vocab matcher tables aot json_schema gbnf
# (docs/FUZZING.md).
# Each run's log goes to $CGRAM_FUZZ_LOGS (default build-fuzz/logs/DATE);
# the corpus grows in build-fuzz/corpus/TARGET (seeded from
# tests/fuzz/corpus, the examples and seeds made here); crashes, leaks and
# timeouts are written to build-fuzz/findings/TARGET. A summary line per
# target gives executions, coverage (cov: edges, ft: features) and findings;
# the script exits 1 when any target found something.
# Environment: CGRAM_FUZZ_JOBS (parallel fuzzing processes, default 1),
# CGRAM_FUZZ_ARGS (extra libFuzzer flags), CGRAM_FUZZ_SEEDS (the seed
# directory, rebuilt by each run: give concurrent runs different ones),
# CGRAM_BUILD_LOCK (a lock file the build takes with flock, default
# /tmp/cgram-build.lock), CGRAM_FUZZ_BIN (a folder of fuzz_* binaries built
# earlier, e.g. a copy of build-fuzz/tests/fuzz: nothing is built, so long
# runs go on fuzzing one fixed build while the tree changes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
all_targets=(grammar regex vocab matcher tables aot json_schema gbnf server)
target=${1:-all}
seconds=${2:-600}
if [ "$target" = all ]; then targets=("${all_targets[@]}"); else targets=("$target"); fi
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (${all_targets[*]})" >&2; exit 64; }
done

# clang-19 and its runtimes (libFuzzer, ASan, UBSan) from Debian.
if ! command -v clang++-19 >/dev/null || ! ls /usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: installing clang-19 and libclang-rt-19-dev"
  sudo_cmd=(); if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends clang-19 libclang-rt-19-dev
fi

build=build-fuzz
lock=${CGRAM_BUILD_LOCK:-/tmp/cgram-build.lock}
jobs=$(( $(nproc) < 2 ? $(nproc) : 2 ))
bin=${CGRAM_FUZZ_BIN:-$build/tests/fuzz}
if [ -z "${CGRAM_FUZZ_BIN:-}" ]; then
  # -O1 with assertions, as libFuzzer's documentation suggests.
  flock "$lock" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCGRAM_FUZZ=ON >/dev/null
  flock "$lock" cmake --build "$build" -j "$jobs" --target fuzz_all
fi

# Seeds: the committed corpus, the grammars of the examples and the suite,
# vocabularies cut from the bundled one (and ../shared/vocab when there),
# saved tables and shared objects for the tiny vocabulary.
seeds=${CGRAM_FUZZ_SEEDS:-$build/seeds}  # one per concurrent run of this script
rm -rf "$seeds"
mkdir -p "$seeds/grammar" "$seeds/regex" "$seeds/vocab" "$seeds/json_schema"
for f in examples/*.cgram bench/suite/*/*.cgram; do cp "$f" "$seeds/grammar/$(echo "$f" | tr / _)"; done
# Real schemas (JSONSchemaBench, 128 of them, in tests/fuzz/corpus/json_schema),
# the regression schemas, and the bundled test schemas.
for f in tests/data/schemas/*.json tests/data/schemas/*/*.json; do cp "$f" "$seeds/json_schema/$(echo "$f" | tr / _)"; done
python3 tests/fuzz/make_seeds.py --grammars examples bench/suite --regex-out "$seeds/regex" \
  --vocab-out "$seeds/vocab" --gguf frontend/vocab/bundled/ggml-vocab-phi-3.gguf --shared ../shared/vocab
ASAN_OPTIONS=detect_leaks=0 "$bin/fuzz_replay" --make-seeds "$seeds" >/dev/null

logs=${CGRAM_FUZZ_LOGS:-$build/logs/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$logs"
status=0
printf '%-8s %8s %10s %8s %8s %7s %7s  %s\n' target seconds execs exec/s cov ft corpus findings
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t
  findings=$build/findings/$t
  mkdir -p "$corpus" "$findings"
  case $t in
    grammar|gbnf|server) max_len=4096 ;;
    json_schema) max_len=16384 ;;
    regex) max_len=512 ;;
    matcher) max_len=256 ;;
    vocab) max_len=65536 ;;
    tables|aot) max_len=262144 ;;
  esac
  before=$(ls "$findings" | wc -l)
  dirs=("$corpus")
  for d in "$seeds/$t" "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t"; do [ -d "$d" ] && dirs+=("$d"); done
  # Each finding is saved and fuzzing goes on (-fork keeps going after a
  # crash); the corpus directory comes first, so new inputs land there.
  set +e
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "$bin/fuzz_$t" "${dirs[@]}" \
    -fork="${CGRAM_FUZZ_JOBS:-1}" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -max_len="$max_len" -timeout=20 -rss_limit_mb=3072 \
    -artifact_prefix="$findings/" -print_final_stats=1 ${CGRAM_FUZZ_ARGS:-} >"$logs/$t.log" 2>&1
  rc=$?
  set -e
  # The last status line: "#EXECS: cov: C ft: F corp: N exec/s: E oom/timeout/crash: O/T/C time: S ..."
  last=$(grep -E '^#[0-9]+:? .*cov: ' "$logs/$t.log" | tail -1 || true)
  execs=$(echo "$last" | sed -nE 's/^#([0-9]+).*/\1/p')
  cov=$(echo "$last" | sed -nE 's/.* cov: ([0-9]+).*/\1/p')
  ft=$(echo "$last" | sed -nE 's/.* ft: ([0-9]+).*/\1/p')
  otc=$(echo "$last" | sed -nE 's#.*oom/timeout/crash: ([0-9/]+).*#\1#p')
  after=$(ls "$findings" | wc -l)
  new=$((after - before))
  printf '%-8s %8s %10s %8s %8s %7s %7s  %s\n' "$t" "$seconds" "${execs:-?}" "$(( ${execs:-0} / (seconds > 0 ? seconds : 1) ))" \
    "${cov:-?}" "${ft:-?}" "$(ls "$corpus" | wc -l)" "oom/timeout/crash ${otc:-?}; $new new file(s) in $findings (rc $rc)"
  if [ "$new" -gt 0 ] || [ "$rc" -ne 0 ]; then status=1; fi
done
echo "logs: $logs"
exit $status

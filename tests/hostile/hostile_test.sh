#!/usr/bin/env bash
# Nothing a request sends can take the process down (docs/LIMITS.md): every
# entry point that compiles (the cgram commands, the C API, Python) gets
# hostile input under a 2 GiB address-space cap, and must answer with a
# result or a clear error, in bounded time, never with a signal.
#
#   hostile_test.sh CGRAM COMPILE_FILE PYTHON SOURCE_DIR
#
# CGRAM is the cgram command, COMPILE_FILE the C API's compile_file, PYTHON
# the build's launcher (build/python/python; "-" when there is no Python
# package). Not in sanitizer builds: their shadow memory needs more address
# space than the cap.
set -uo pipefail
cgram=$1 compile_file=$2 python=$3 source_dir=$4
cap_kib=$((2 * 1024 * 1024))
limit_s=${CGRAM_HOSTILE_TIMEOUT:-120}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# --- Inputs ------------------------------------------------------------------
alternatives() {  # N FILE: one rule of N distinct literal alternatives
  awk -v n="$1" 'BEGIN { printf "start ::= "; for (i = 0; i < n; i++) printf "%s'"'"'w%d x'"'"'", (i ? " | " : ""), i; print " ;" }' >"$2"
}
alternatives 830000 "$work/alts830k.cgram"
alternatives 300000 "$work/alts300k.cgram"
awk 'BEGIN { n = 400000; print "start ::= r0 ;"; for (i = 0; i < n; i++) printf "r%d ::= '"'"'w%d x'"'"'%s ;\n", i, i, (i + 1 < n ? " | r" (i + 1) : "") }' \
  >"$work/chain400k.cgram"
awk 'BEGIN { printf "root ::= "; for (i = 0; i < 830000; i++) printf "%s\"w%d x\"", (i ? " | " : ""), i; print "" }' \
  >"$work/alts830k.gbnf"
printf "start ::= s ;\ns ::= s s | 'a' | '' ;\n" >"$work/ambiguous.cgram"
printf "start ::= e ;\ne ::= e '+' e | 'a' ;\n" >"$work/sums.cgram"
head -c 3000 /dev/zero | tr '\0' a >"$work/a3000.txt"
awk 'BEGIN { for (i = 0; i < 2000; i++) printf "a+"; printf "a" }' >"$work/sums2000.txt"
schemas=$source_dir/tests/data/schemas/jsonschemabench

# --- Running ------------------------------------------------------------------
# CASE EXPECT COMMAND...: EXPECT is "ok" (exit 0), "error" (a non-zero exit
# below 64 with "error" on stderr) or "any" (either). A signal, a time-out
# or an abort is always a failure.
run() {
  local name=$1 expect=$2
  shift 2
  local start end status
  start=$(date +%s.%N)
  (ulimit -v "$cap_kib"; exec timeout "$limit_s" "$@") >"$work/out" 2>"$work/err"
  status=$?
  end=$(date +%s.%N)
  local took
  took=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  local verdict=ok
  if ((status == 124)); then
    verdict="timed out after $limit_s s"
  elif ((status >= 64)); then
    verdict="exit $status (a signal, an abort or a usage error)"
  elif [[ $expect == ok && $status != 0 ]]; then
    verdict="exit $status, expected success"
  elif [[ $expect == error && $status == 0 ]]; then
    verdict="succeeded, expected an error"
  elif ((status != 0)) && ! grep -qiE "error|stopped" "$work/err"; then
    verdict="exit $status without an error message"
  fi
  local said
  said=$(grep -iE -m1 "error|stopped" "$work/err" | cut -c1-160)
  if [[ $verdict == ok ]]; then
    printf 'ok    %-38s %5ss  exit %d  %s\n' "$name" "$took" "$status" "$said"
  else
    printf 'FAIL  %-38s %5ss  %s\n      stderr: %s\n' "$name" "$took" "$verdict" "$(tail -c 600 "$work/err")"
    failures=$((failures + 1))
  fi
}

for f in alts830k alts300k chain400k; do
  run "check $f.cgram" error "$cgram" check "$work/$f.cgram"
done
run "check alts830k.gbnf" error "$cgram" check "$work/alts830k.gbnf"
run "convert alts830k.gbnf" error "$cgram" convert "$work/alts830k.gbnf" -o "$work/converted.cgram"
run "mask alts830k.cgram" error "$cgram" mask "$work/alts830k.cgram" --prefix w1
run "compile (AOT) alts300k.cgram" error "$cgram" compile "$work/alts300k.cgram" -o "$work/out.so"
run "C API alts830k.cgram" error "$compile_file" "$work/alts830k.cgram"
run "C API chain400k.cgram" error "$compile_file" "$work/chain400k.cgram"
if [[ $python != - ]]; then
  run "Python alts830k.cgram" error "$python" -c "
import sys, cgram
try:
    cgram.compile(open(sys.argv[1]).read())
except cgram.Error as e:
    sys.exit('error: ' + str(e)[:200])
" "$work/alts830k.cgram"
fi
for s in "$schemas"/*.json; do
  name=$(basename "$s")
  run "schema $name" any "$cgram" schema "$s" -o "$work/schema.cgram"
  run "mask $name" any "$cgram" mask "$s" --prefix "{"
done
# Ambiguous grammars: the per-sequence work budget ends them with its error.
run "mask ambiguous.cgram after 3000 a" error "$cgram" mask "$work/ambiguous.cgram" --prefix-file "$work/a3000.txt"
run "mask sums.cgram after 2000 a+" error "$cgram" mask "$work/sums.cgram" --prefix-file "$work/sums2000.txt"

if ((failures)); then
  echo "hostile inputs: $failures failed"
  exit 1
fi
echo "hostile inputs: every entry point answered within the cap"

#!/usr/bin/env bash
# Nothing a request sends can take the process down (docs/LIMITS.md): every
# entry point that compiles (the cgram commands, the C API, Python) gets
# hostile input under a 2 GiB address-space cap, and must answer with a
# result or a clear error, in bounded time, never with a signal.
#
#   hostile_test.sh CGRAM COMPILE_FILE PYTHON SOURCE_DIR SERVER
#
# CGRAM is the cgram command, COMPILE_FILE the C API's compile_file, PYTHON
# the build's launcher (build/python/python; "-" when there is no Python
# package), SERVER cgram-server (its requests under a tighter cap, below).
# Not in sanitizer builds: their shadow memory needs more address space
# than the cap.
set -uo pipefail
cgram=$1 compile_file=$2 python=$3 source_dir=$4 server=$5
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

# A saved canonical context that is a symlink loop, or under a directory
# name too long for the filesystem: passed over with a note, made anew.
vocab_dir=$work/vocab-dir
mkdir -p "$vocab_dir"
phi3=$source_dir/frontend/vocab/bundled/ggml-vocab-phi-3.gguf
printf "start ::= #'[a-z ]+' ;\n" >"$work/words.cgram"
saved=$(CGRAM_VOCAB_DIR=$vocab_dir "$cgram" vocab build "$phi3" 2>&1 | grep -o "$vocab_dir/[0-9a-f]*\.cgvocab" | head -1)
if [[ -n $saved ]]; then
  rm -f "$saved" && ln -s "$saved" "$saved"
  CGRAM_VOCAB_DIR=$vocab_dir run "mask --canonical, saved context a symlink loop" ok \
    "$cgram" mask "$work/words.cgram" --vocab "$phi3" --canonical --prefix hel
  grep -q "made anew" "$work/err" || { echo "FAIL  no note about the passed-over context"; failures=$((failures + 1)); }
fi
CGRAM_VOCAB_DIR=$vocab_dir/$(printf 'd%.0s' {1..300}) run "mask --canonical, directory name too long" ok \
  "$cgram" mask "$work/words.cgram" --vocab "$phi3" --canonical --prefix hel

# cgram-server, its requests under a 700 MB cap: an answer for every line,
# an error for each hostile one, and the server still serving after it.
server_cap_kib=$((700 * 1024))
serve() {  # NAME EXPECTED-ANSWERS CHECK-REGEX... < requests
  local name=$1 answers=$2
  shift 2
  (ulimit -v "$server_cap_kib"; exec timeout "$limit_s" "$server" --jit-threads 0 --threads 1) >"$work/answers" 2>"$work/err"
  local status=$? got verdict=ok
  got=$(wc -l <"$work/answers")
  if ((status != 0)); then
    verdict="exit $status"
  elif ((got != answers)); then
    verdict="$got answers for $answers requests"
  else
    for pattern in "$@"; do grep -qE -- "$pattern" "$work/answers" || verdict="no answer matches $pattern"; done
  fi
  if [[ $verdict == ok ]]; then
    printf 'ok    %-38s\n' "server: $name"
  else
    printf 'FAIL  %-38s %s\n      answers: %s\n      stderr: %s\n' "server: $name" "$verdict" \
      "$(head -c 600 "$work/answers")" "$(tail -c 300 "$work/err")"
    failures=$((failures + 1))
  fi
}
yes_no='{"op":"grammar","id":"g","text":"start ::= '"'"'yes'"'"' | '"'"'no'"'"' ;"}'
{ head -c 400000000 /dev/zero | tr '\0' x; printf '\n{"op":"stats"}\n'; } |
  serve "a 400 MB request line" 2 'over 16777216 bytes' '"ok":true'
{ echo "$yes_no"; awk 'BEGIN { for (i = 0; i < 100000; i++) printf "{\"op\":\"open\",\"grammar\":\"g\",\"seq\":\"s%d\"}\n", i }'
  echo '{"op":"stats"}'; } | serve "100,000 opens" 100002 'too many open sequences' '"sequences":10000'
resident=$(tail -1 "$work/answers" | grep -o '"resident_kb":[0-9]*' | cut -d: -f2)
if [[ -n $resident ]] && ((resident > 200 * 1024)); then
  echo "FAIL  server: 10,000 idle sequences hold ${resident} KB"; failures=$((failures + 1))
fi
{ echo "$yes_no"; echo '{"op":"open","grammar":"g","seq":"a"}'
  echo '{"op":"batch","steps":[{"seq":"a","tokens":[3582,999999]},{"seq":"a","tokens":[1e30]}]}'
  echo '{"op":"batch","steps":[{"seq":"a","tokens":[1.7]}]}'
  printf '{"op":"stats"}\0garbage\n'; echo '{"op":"stats"}'; } |
  serve "bad token ids and a NUL" 6 '"taken":0' 'tokens\[0\] is 1.7' 'NUL byte' '"sequences":1'

# Socket mode: an idle connection does not hold the others up.
if command -v python3 >/dev/null; then
  socket=$work/server.sock
  (ulimit -v "$server_cap_kib"; exec timeout 60 "$server" --socket "$socket" --jit-threads 0 --threads 1 \
    --idle-timeout-s 2) 2>"$work/server-err" &
  server_pid=$!
  if python3 - "$socket" <<'PY'; then
import json, socket, sys, time
path = sys.argv[1]
for _ in range(100):
    try:
        idle = socket.socket(socket.AF_UNIX); idle.connect(path); break
    except OSError:
        time.sleep(0.1)
busy = socket.socket(socket.AF_UNIX); busy.connect(path); busy.settimeout(10)
busy.sendall(b'{"op":"stats"}\n')
answer = json.loads(busy.makefile().readline())
assert answer["ok"], answer
idle.settimeout(10)
closed = idle.makefile().readline()  # the idle one is closed after its time-out, with a word
assert "no request" in closed, closed
PY
    printf 'ok    %-38s\n' "server: an idle socket connection"
  else
    echo "FAIL  server: an idle socket connection held the others up"; failures=$((failures + 1))
  fi
  kill "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
fi

if ((failures)); then
  echo "hostile inputs: $failures failed"
  exit 1
fi
echo "hostile inputs: every entry point answered within the cap"

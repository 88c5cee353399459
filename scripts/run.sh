#!/usr/bin/env bash
# The main job on the embedded default: installs what is missing, builds the
# cgram command (not the tests: scripts/test.sh builds everything), then
#  - generates a JSON document with examples/json.cgram and the bundled
#    vocabulary, sampling like the documents in bench/docs/json (a 5-gram
#    model of them stands in for a language model; cgram's masks keep every
#    step valid JSON);
#  - measures the matcher on those documents, and says what the figures mean.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
start=$(date +%s)
scripts/build.sh cgram
echo "(built in $(( $(date +%s) - start )) s)"
cgram=build/tools/cgram/cgram
echo
echo "== $cgram generate examples/json.cgram --corpus bench/docs/json --seed 4"
$cgram generate examples/json.cgram --corpus bench/docs/json --seed 4 --max-tokens 300
cat <<'TEXT'

  The vocabulary is the bundled one (Phi-3, 32,064 tokens). A 5-gram model of the four
  documents in bench/docs/json picked each token, the way a language model would; at every
  step cgram allowed only the tokens that keep the text on its way to valid JSON
  (examples/json.cgram), and end of sequence only where the document is complete.
  Without --corpus every allowed token is as likely. With Llama 3:
    build/tools/cgram/cgram generate examples/json.cgram --vocab path/to/tokenizer.json \
      --corpus bench/docs/json

TEXT
echo "== $cgram bench examples/json.cgram --docs bench/docs/json"
$cgram bench examples/json.cgram --docs bench/docs/json
cat <<'TEXT'

  mask: the time to compute the set of allowed next tokens, once per decoding step, over
    every step of the four documents (p50, p90, p99, worst). A decoding step of a 7B model
    takes 5 to 20 ms; the mask is computed beside it.
  advance: accepting the token the model chose.
  is_allowed: checking only the model's choice, without the whole mask.
  compile, first mask: how soon a grammar that just arrived can be used (the token index is
    built as the masks need it). memory: what the compiled grammar holds.
  More: cgram --help, README.md, docs/BENCHMARKS.md.
TEXT

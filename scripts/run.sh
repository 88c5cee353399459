#!/usr/bin/env bash
# The main job on the embedded default: installs what is missing, builds,
# generates a JSON document with examples/json.cgram and the bundled
# vocabulary (random valid text: uniform sampling over the allowed tokens),
# then benchmarks the matcher on the bundled JSON documents.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
echo "== cgram generate examples/json.cgram --seed 7 --max-tokens 120"
build/tools/cgram/cgram generate examples/json.cgram --seed 7 --max-tokens 120
echo
echo "== cgram bench examples/json.cgram --docs bench/docs/json"
build/tools/cgram/cgram bench examples/json.cgram --docs bench/docs/json

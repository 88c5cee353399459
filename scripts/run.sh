#!/usr/bin/env bash
# The main job on the embedded default: installs what is missing, builds,
# then checks the bundled JSON grammar and matches texts against it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/tools/cgram/cgram demo

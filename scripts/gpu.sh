#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, in one command: install what is missing,
# build, report the device, run the GPU tests (the device's masks and masked
# logits against the CPU's, along random walks), and the GPU benchmark
# (docs/GPU.md): the logits kernel on 64 x 128,256 against the memory
# bandwidth bound, and the device fill of 64 JSON rows.
#
#   scripts/gpu.sh              # Llama 3 from ../shared/vocab when present
#   CGRAM_GPU_VOCAB=path/to/tokenizer.json scripts/gpu.sh
#
# The report is printed, and written to $OUT/gpu-report.md when OUT is set.
# Exit 3 when the machine has no usable GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${CGRAM_BUILD_DIR:-build}
cgram=$build/tools/cgram/cgram
report=$(mktemp)
trap 'rm -f "$report"' EXIT

echo "# cgram GPU report, $(date -u +%Y-%m-%d)" >"$report"
status=0
devices=$("$cgram" gpu 2>&1) || status=$?
printf '\n```\n%s\n```\n\n' "$devices" | tee -a "$report"
if [ "$status" -ne 0 ]; then
  echo "scripts/gpu.sh: no usable GPU on this machine" >&2
  exit 3
fi

# A failure is recorded and the report still written; the worst status is
# the script's.
worst=0
set +e
"$build/tests/cgram_tests" "[gpu]" --durations yes 2>&1 | tee -a "$report"
tests_status=${PIPESTATUS[0]}
set -e
if [ "$tests_status" -ne 0 ]; then worst=$tests_status; fi

vocab=${CGRAM_GPU_VOCAB:-../shared/vocab/llama3-tokenizer.json}
width_args=()
if [ ! -f "$vocab" ]; then
  echo "scripts/gpu.sh: $vocab not found: the bundled vocabulary, with logits 128,256 wide" | tee -a "$report"
  vocab=""
  width_args=(--logits-width 128256)
fi
printf '\n## cgram bench --gpu, JSON, 64 rows\n\n' | tee -a "$report"
set +e
"$cgram" bench examples/json.cgram --docs bench/docs/json ${vocab:+--vocab "$vocab"} --gpu --rows 64 \
  --eager-index "${width_args[@]}" 2>&1 | tee -a "$report"
bench_status=${PIPESTATUS[0]}
set -e
if [ "$bench_status" -ne 0 ] && [ "$worst" -eq 0 ]; then worst=$bench_status; fi

if [ -n "${OUT:-}" ]; then cp "$report" "$OUT/gpu-report.md"; fi
exit "$worst"

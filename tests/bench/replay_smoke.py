#!/usr/bin/env python3
"""bench/schemas/replay.py on three schemas of MaskBench's shape with the bundled vocabulary.

Checks that the runner, bench_first_mask and bench_mask_tails still agree on
what is printed and read back (which schemas are taken, how many documents
are masked to their end); no figure is checked, nothing here is timed.

    replay_smoke.py SOURCE_DIR BUILD_DIR VOCABULARY
"""
import json
import os
import subprocess
import sys
import tempfile

CASES = {
    "Github_easy---point.json": {
        "schema": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                   "required": ["x", "y"], "additionalProperties": False},
        "tests": [{"valid": True, "data": {"x": 1, "y": -2}}, {"valid": False, "data": {"x": "a"}}],
    },
    "Kubernetes---names.json": {
        "schema": {"type": "array", "items": {"type": "string", "maxLength": 8}},
        "tests": [{"valid": True, "data": ["ab", "cd"]}, {"valid": True, "data": []}],
    },
    # Not one of the ten collections: left out.
    "BFCL_simple_0.json": {"schema": {"type": "integer"}, "tests": [{"valid": True, "data": 3}]},
}


def main():
    source, build, vocab = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="cgram-replay-smoke-") as data:
        for name, case in CASES.items():
            with open(os.path.join(data, name), "w", encoding="utf-8") as f:
                json.dump(case, f)
        done = subprocess.run([sys.executable, os.path.join(source, "bench/schemas/replay.py"), data, "--vocab", vocab,
                               "--build", build], capture_output=True, text=True, timeout=600)
    print(done.stdout)
    if done.returncode != 0:
        sys.exit(f"replay.py exited {done.returncode}:\n{done.stderr[-3000:]}")
    expected = ["2 schemas of JSONSchemaBench's ten collections (every 1), 2 with valid documents (3 documents)",
                "compiled 2 of 2 schemas; documents masked to their end 3 of 3;", "| mask (floors) |",
                "| schema → first mask, lazy (ms) |"]
    missing = [line for line in expected if line not in done.stdout]
    if missing:
        sys.exit(f"replay.py's report lacks {missing}")


if __name__ == "__main__":
    main()

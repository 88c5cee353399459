#!/usr/bin/env python3
"""JSONSchemaBench replayed as MaskBench does: each schema's own valid documents, token by token.

    bench/schemas/replay.py MASKBENCH_DATA --vocab llama3-tokenizer.json
        [--every K] [--mask-memo off|document] [--property-order any|schema] [--keep-suite DIR]

MASKBENCH_DATA is maskbench/data of guidance-ai/jsonschemabench (not in the
repository: no licence lets us ship it). The ten collections run.py measures
(9,557 schemas) are read; --every K keeps every K-th schema of them, for a
run that fits in minutes. Each schema becomes a suite folder with its
documents labelled valid, written compactly as serialisers write them, and
two of the project's benches run over the suite, one schema at a time as a
server meets them:

  bench_first_mask   schema → first mask, lazy index (the C API's default),
                     translation included: per schema, the median of --runs;
  bench_mask_tails   every mask of every document, on a fresh matcher per
                     document, the grammar compiled (eager index) right before
                     its documents; pooled p50/p90/p99/p99.9/max in µs and in
                     floors (one OR of a full-vocabulary bitset, measured in
                     the same run: support/or_floor.h).

The documents a conversion does not accept stop at their first refused
token (their masks up to there are counted) and are reported apart, as are
the schemas cgram does not compile. Figures go to docs/BENCHMARKS.md;
nothing here is a unit test.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from documents import COLLECTIONS, compact  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LINE_US = re.compile(r"first visits, (\d+) mask steps \(µs\): p50 ([\d.]+)  p90 ([\d.]+)  p99 ([\d.]+)  "
                     r"p99\.9 ([\d.]+)  max ([\d.]+)")
LINE_FLOORS = re.compile(r"in floors \(one OR of a full bitset: ([\d.]+) µs\): p50 ([\d.]+)  p90 ([\d.]+)  "
                         r"p99 ([\d.]+)  p99\.9 ([\d.]+)  max ([\d.]+)")
LINE_REPLAYED = re.compile(r"grammars compiled: (\d+) of (\d+); documents masked to their end: (\d+) of (\d+)")
FIRST_MASK_ROW = re.compile(r"^\| (.+?) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| \d+ \|$")


def schemas(data, every):
    names = sorted(n for n in os.listdir(data) if n.endswith(".json") and n.split("---")[0] in COLLECTIONS)
    return [os.path.join(data, n) for n in names[::every]]


def write_suite(paths, suite):
    """One folder per schema with valid documents; returns (schemas, documents) written."""
    written = documents = 0
    for n, path in enumerate(paths):
        with open(path, encoding="utf-8") as f:
            case = json.load(f)
        valid = [t["data"] for t in case.get("tests", []) if t.get("valid")]
        if not valid:
            continue
        name = f"s{n:05d}"
        os.makedirs(os.path.join(suite, name, "docs"))
        with open(os.path.join(suite, name, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(case["schema"], f, ensure_ascii=False)
        for i, document in enumerate(valid):
            with open(os.path.join(suite, name, "docs", f"{i}.json"), "w", encoding="utf-8") as f:
                f.write(compact(document))
        written += 1
        documents += len(valid)
    return written, documents


def run(command):
    """Its output; exit status 1 is a schema it could not compile (left out, said on stderr)."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 1) or not done.stdout.strip():
        sys.exit(f"{' '.join(command[:2])} … failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def pick(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="JSONSchemaBench's maskbench/data folder")
    parser.add_argument("--vocab", required=True, help="the vocabulary (Llama 3's tokenizer.json)")
    parser.add_argument("--build", default=os.path.join(HERE, "../../build"), help="the build folder")
    parser.add_argument("--every", type=int, default=1, help="every K-th schema (1: all)")
    parser.add_argument("--mask-memo", default="off", choices=("off", "document"))
    parser.add_argument("--property-order", default="any", choices=("any", "schema"))
    parser.add_argument("--runs", type=int, default=1, help="runs of each schema's first mask")
    parser.add_argument("--keep-suite", help="write the suite into this new folder and keep it")
    args = parser.parse_args()

    paths = schemas(args.data, max(1, args.every))
    if not paths:
        sys.exit(f"{args.data}: no schemas of JSONSchemaBench's collections")
    suite = args.keep_suite or tempfile.mkdtemp(prefix="cgram-replay-")
    if args.keep_suite:
        os.makedirs(suite)
    try:
        written, documents = write_suite(paths, suite)
        files = sorted(os.path.join(suite, d, d + ".json") for d in os.listdir(suite))
        first = run([os.path.join(args.build, "bench/bench_first_mask"), "--vocab", args.vocab, "--runs",
                     str(args.runs), "--whitespace", "compact", "--property-order", args.property_order, *files])
        tails = run([os.path.join(args.build, "bench/bench_mask_tails"), "--vocab", args.vocab, suite,
                     "--whitespace", "compact", "--property-order", args.property_order, "--mask-memo", args.mask_memo,
                     "--slowest", "10"])
    finally:
        if not args.keep_suite:
            shutil.rmtree(suite)

    first_ms = [float(m.group(5)) for m in map(FIRST_MASK_ROW.match, first.splitlines()) if m]
    us, floors, replayed = LINE_US.search(tails), LINE_FLOORS.search(tails), LINE_REPLAYED.search(tails)
    if not (us and floors and replayed and first_ms):
        sys.exit(f"unexpected bench output:\n{tails}\n{first[-2000:]}")
    print(f"{len(paths)} schemas of JSONSchemaBench's ten collections (every {args.every}), {written} with valid "
          f"documents ({documents} documents); vocabulary {os.path.basename(args.vocab)}, property order "
          f"'{args.property_order}', memo {args.mask_memo}.\n")
    print(f"compiled {replayed.group(1)} of {replayed.group(2)} schemas; documents masked to their end "
          f"{replayed.group(3)} of {replayed.group(4)}; {us.group(1)} masks; floor {floors.group(1)} µs\n")
    print("| | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|")
    print("| mask (µs) | " + " | ".join(us.group(i) for i in range(2, 7)) + " |")
    print("| mask (floors) | " + " | ".join(floors.group(i) for i in range(2, 7)) + " |")
    print("| schema → first mask, lazy (ms) | " +
          " | ".join(f"{pick(first_ms, q):.2f}" for q in (0.5, 0.9, 0.99, 0.999, 1.0)) + " |")
    print(f"\nmedian first mask {statistics.median(first_ms):.2f} ms over {len(first_ms)} schemas\n")
    print("the slowest masks:")
    print("\n".join(line for line in tails.splitlines() if line.startswith("  ") and "µs" in line))


if __name__ == "__main__":
    main()

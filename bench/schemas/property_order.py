#!/usr/bin/env python3
"""The cost of `--property-order any` against the schema's order, on JSONSchemaBench.

    bench/schemas/property_order.py MASKBENCH_DATA --vocab tokenizer.json [--prefix Glaiveai2K] [--count 100]

Takes `count` schemas whose name starts with `prefix` (in a fixed shuffled order)
from JSONSchemaBench's maskbench/data, with their valid documents, and reports:
  - LR states of each (`cgram check --ir`), schema order and any order;
  - `cgram bench --suite` in both orders (each schema a suite format): masks,
    first mask and memory.
Figures go to docs/BENCHMARKS.md; nothing here is a unit test.
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile


def make_suite(data, folder, prefix, count):
    names = sorted(f for f in os.listdir(data) if f.startswith(prefix))
    random.Random(1).shuffle(names)
    made = 0
    for name in names:
        with open(os.path.join(data, name), encoding="utf-8") as f:
            case = json.load(f)
        valid = [t["data"] for t in case.get("tests", []) if t.get("valid")]
        if not valid:
            continue
        fmt = os.path.join(folder, f"s{made:03d}")
        os.makedirs(os.path.join(fmt, "docs"))
        with open(os.path.join(fmt, f"s{made:03d}.json"), "w", encoding="utf-8") as f:
            json.dump(case["schema"], f, ensure_ascii=False)
        for i, document in enumerate(valid):
            with open(os.path.join(fmt, "docs", f"{i}.json"), "w", encoding="utf-8") as f:
                f.write(json.dumps(document, separators=(",", ":"), ensure_ascii=False))
        made += 1
        if made == count:
            break
    return made


def lr_states(cgram, schema, order):
    done = subprocess.run([cgram, "check", schema, "--format", "json-schema", "--whitespace", "compact",
                           "--property-order", order, "--ir"], capture_output=True, text=True)
    m = re.search(r"LALR\(1\): (\d+) states", done.stdout)
    return int(m.group(1)) if m else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="JSONSchemaBench's maskbench/data folder")
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--cgram", default=os.path.join(os.path.dirname(__file__), "../../build/tools/cgram/cgram"))
    parser.add_argument("--prefix", default="Glaiveai2K")
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    suite = tempfile.mkdtemp(prefix="cgram-order-suite-")
    try:
        made = make_suite(args.data, suite, args.prefix, args.count)
        if not made:
            sys.exit(f"{args.data}: no schemas named {args.prefix}… with valid documents")
        schemas = sorted(os.path.join(suite, d, d + ".json") for d in os.listdir(suite))
        states = {order: [lr_states(args.cgram, s, order) for s in schemas] for order in ("schema", "any")}
        pairs = [(a, b) for a, b in zip(states["schema"], states["any"]) if a and b]
        ratios = sorted(b / a for a, b in pairs)
        print(f"{made} schemas ({args.prefix}…). LR states, schema order → any order:")
        for label, pick in (("median", lambda v: statistics.median(v)), ("p90", lambda v: sorted(v)[int(0.9 * len(v))]),
                            ("max", max)):
            print(f"  {label}: {pick([a for a, _ in pairs])} → {pick([b for _, b in pairs])} "
                  f"(ratio {label}: {pick(ratios):.2f})")
        print("\n| order | steps | documents leaving the grammar | a schema's median mask (median) | "
              "a schema's p99 mask (median) | slowest mask | schema → first mask p50 / p99 | memory (median) |")
        print("|---|---|---|---|---|---|---|---|")
        for order in ("schema", "any"):
            done = subprocess.run([args.cgram, "bench", "--suite", suite, "--vocab", args.vocab, "--json", "--whitespace",
                                   "compact", "--property-order", order], capture_output=True, text=True)
            rows = json.loads(done.stdout)
            first = sorted(r["first_mask_ms"] for r in rows)
            print(f"| {order} | {sum(r['steps'] for r in rows)} | {sum(r['documents_leaving_language'] for r in rows)} | "
                  f"{statistics.median(r['mask_us']['p50'] for r in rows):.2f} µs | "
                  f"{statistics.median(r['mask_us']['p99'] for r in rows):.1f} µs | "
                  f"{max(r['mask_us']['max'] for r in rows):.0f} µs | "
                  f"{statistics.median(first):.1f} / {first[min(len(first) - 1, int(0.99 * len(first)))]:.0f} ms | "
                  f"{statistics.median(r['memory_mb'] for r in rows):.2f} MB |")
    finally:
        shutil.rmtree(suite)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Every schema of a JSONSchemaBench checkout through `cgram schema`.

JSONSchemaBench (github.com/guidance-ai/jsonschemabench) has no licence that
lets us ship its schemas, so they stay outside the repository: point this at
its `data` folder (one sub-folder per collection of `.json` schemas).

    bench/schemas/run.py DATA [--cgram build/tools/cgram/cgram] [--jobs 2]

Each schema is converted as a user would (`cgram schema S -o OUT --whitespace
compact`), with a time limit and a memory limit, and sorted into:
  exact      converted, no warning (notes, such as a key that is no keyword,
             are not warnings);
  loosened   converted with warnings: the grammar accepts more than the schema;
  refused    an error, counted by its first one;
  crashed    a time-out, a signal or an exit status other than 0 and 1.
It prints one markdown table by collection, then the refusals and loosening
warnings by kind (quoted names and numbers folded, so that one kind is one
row). Figures go to docs/BENCHMARKS.md; nothing here is a unit test.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

DIAGNOSTIC = re.compile(r"^(?:.*?:\d+:\d+: |cgram: )(error|warning|note): (.*)$")


KEYWORDS = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "not", "if", "then", "else",
    "dependentSchemas", "dependentRequired", "dependencies", "patternProperties", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems",
    "multipleOf", "minProperties", "maxProperties", "$dynamicRef", "$anchor", "$schema", "^", "$"}


def kind_of(message):
    """One row per kind of message: keywords kept, other quoted text and numbers folded."""
    def fold(m):
        return m.group(0) if m.group(1) in KEYWORDS else "'…'"
    message = re.sub(r"(?<![A-Za-z])'([^']*)'", fold, message)
    message = re.sub(r"\b\d[\d,.]*\b", "N", message)
    return message


def limit_memory(megabytes):
    def apply():
        limit = megabytes << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def convert(cgram, path, timeout, memory_mb):
    with tempfile.NamedTemporaryFile(suffix=".cgram") as out:
        start = time.monotonic()
        try:
            done = subprocess.run([cgram, "schema", path, "-o", out.name, "--whitespace", "compact"],
                                  capture_output=True, text=True, errors="replace", timeout=timeout,
                                  preexec_fn=limit_memory(memory_mb))
        except subprocess.TimeoutExpired:
            return {"outcome": "crashed", "why": f"time-out ({timeout} s)", "seconds": timeout}
    seconds = time.monotonic() - start
    errors, warnings = [], []
    for line in done.stderr.splitlines():
        m = DIAGNOSTIC.match(line)
        if m and m.group(1) == "error":
            errors.append(m.group(2))
        elif m and m.group(1) == "warning":
            warnings.append(m.group(2))
    if done.returncode not in (0, 1):
        return {"outcome": "crashed", "why": f"exit status {done.returncode}", "seconds": seconds}
    if done.returncode == 1 or errors:
        return {"outcome": "refused", "why": kind_of(errors[0]) if errors else "no message", "seconds": seconds}
    kinds = sorted({kind_of(w) for w in warnings})
    return {"outcome": "loosened" if kinds else "exact", "warnings": kinds, "seconds": seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="JSONSchemaBench's data folder (one folder per collection)")
    parser.add_argument("--cgram", default=os.path.join(os.path.dirname(__file__), "../../build/tools/cgram/cgram"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per schema")
    parser.add_argument("--memory", type=int, default=4096, help="MiB per schema (address space)")
    parser.add_argument("--limit", type=int, default=0, help="at most this many schemas per collection (0: all)")
    parser.add_argument("--examples", type=int, default=0, help="name this many schemas of each refusal and warning")
    parser.add_argument("--only", help="a file listing the schemas to run (paths relative to DATA, one per line)")
    parser.add_argument("--save", help="also write every schema's result to this JSON file")
    args = parser.parse_args()

    only = set(open(args.only).read().split()) if args.only else None
    jobs = []
    for collection in sorted(os.listdir(args.data)):
        folder = os.path.join(args.data, collection)
        if not os.path.isdir(folder):
            continue
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
        if args.limit:
            names = names[:args.limit]
        if only is not None:
            names = [n for n in names if f"{collection}/{n}" in only]
        jobs += [(collection, os.path.join(folder, n)) for n in names]
    if not jobs:
        sys.exit(f"{args.data}: no collections of .json schemas")

    results = collections.defaultdict(list)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(convert, args.cgram, path, args.timeout, args.memory): (collection, path)
                   for collection, path in jobs}
        for future in concurrent.futures.as_completed(futures):
            collection, path = futures[future]
            result = future.result()
            result["path"] = path
            results[collection].append(result)

    if args.save:
        with open(args.save, "w") as out:
            json.dump({c: rows for c, rows in results.items()}, out, indent=1)
    outcomes = ("exact", "loosened", "refused", "crashed")
    print("| collection | schemas | converted | exact | loosened | refused | crashed | p50 / p99 / max s |")
    print("|---|---|---|---|---|---|---|---|")
    everything = []
    for collection in sorted(results) + ["**all**"]:
        rows = everything if collection == "**all**" else results[collection]
        if collection != "**all**":
            everything += rows
        n = len(rows)
        count = collections.Counter(r["outcome"] for r in rows)
        seconds = sorted(r["seconds"] for r in rows)
        pick = lambda q: seconds[min(n - 1, int(q * n))]
        converted = count["exact"] + count["loosened"]
        print(f"| {collection} | {n} | {converted} ({100 * converted / n:.1f} %) | "
              f"{count['exact']} ({100 * count['exact'] / n:.1f} %) | "
              + " | ".join(str(count[o]) for o in outcomes[1:])
              + f" | {pick(0.5):.2f} / {pick(0.99):.2f} / {seconds[-1]:.2f} |")

    refusals = collections.Counter(r["why"] for r in everything if r["outcome"] == "refused")
    print("\n| schemas | refused by (first error) |\n|---|---|")
    def examples(rows):
        if not args.examples:
            return ""
        return " (" + ", ".join(os.path.relpath(r["path"], args.data) for r in rows[:args.examples]) + ")"
    for why, k in refusals.most_common(25):
        print(f"| {k} | {why}{examples([r for r in everything if r['outcome'] == 'refused' and r['why'] == why])} |")
    loosening = collections.Counter(w for r in everything if r["outcome"] == "loosened" for w in r["warnings"])
    print("\n| schemas | loosening warning |\n|---|---|")
    for why, k in loosening.most_common(25):
        print(f"| {k} | {why}{examples([r for r in everything if r['outcome'] == 'loosened' and why in r['warnings']])} |")
    crashed = [r for r in everything if r["outcome"] == "crashed"]
    if crashed:
        print("\nCrashed or timed out:")
        for r in sorted(crashed, key=lambda r: r["path"]):
            print(f"- {os.path.relpath(r['path'], args.data)}: {r['why']}")


if __name__ == "__main__":
    main()

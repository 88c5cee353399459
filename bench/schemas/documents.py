#!/usr/bin/env python3
"""JSONSchemaBench's test documents through cgram's grammars, against python3-jsonschema.

JSONSchemaBench's MaskBench folder (maskbench/data of guidance-ai/jsonschemabench)
holds each schema with valid and invalid documents. This reads that folder (no
download, no copy in the repository) for the ten collections run.py measures:

    bench/schemas/documents.py MASKBENCH_DATA [--property-order any] [--limit N]
        [--timing-sample N --vocab tokenizer.json [--keep-suite DIR]]

Verdicts. Each schema is translated as run.py does (`cgram schema S --whitespace
compact`, plus --property-order); each document, written compactly as JSON
serialisers write it, goes through `cgram match`. python3-jsonschema (its
validator for the schema's draft, formats checked) gives the reference verdict.
Reported per conversion (exact: no warning; loosened: warnings):
  valid documents accepted / rejected, invalid documents rejected / accepted.
An exact conversion must reject no valid document (with any property order)
and accept no invalid one.

Timing (--timing-sample N, needs --vocab): N exact schemas, each as a suite
format (the schema, its valid documents), through `cgram bench --suite`:
schema → first mask on the lazy index (translation included), and the masks
over the valid documents on the eager index (per schema p50/p99/max).
Figures go to docs/BENCHMARKS.md; nothing here is a unit test.
"""
import argparse
import collections
import concurrent.futures
import copy
import datetime
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import jsonschema

sys.path.insert(0, os.path.dirname(__file__))
from run import DIAGNOSTIC, limit_memory  # noqa: E402

MATCH_TIMEOUT = 20  # seconds for one `cgram match` (counted apart past it)
COLLECTIONS = ("Github_easy", "Github_hard", "Github_medium", "Github_trivial", "Github_ultra", "Glaiveai2K",
               "JsonSchemaStore", "Kubernetes", "Snowplow", "WashingtonPost")


def compact(document):
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


# Debian's python3-jsonschema checks date, email, ipv4/6, uuid, regex… but
# not date-time or time (those need packages Debian does not ship): RFC 3339
# checkers of our own, from the standard library, fill that in.
RFC3339_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))")


def rfc3339_time(text):
    m = RFC3339_TIME.fullmatch(text)
    if not m:
        return False
    hour, minute, second = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if m.group(6) and (int(m.group(6)) > 23 or int(m.group(7)) > 59):
        return False
    return hour <= 23 and minute <= 59 and second <= 60


def rfc3339_date_time(text):
    if len(text) < 11 or text[10] not in "Tt":
        return False
    try:
        datetime.date.fromisoformat(text[:10])
    except ValueError:
        return False
    return re.fullmatch(r"\d{4}-\d{2}-\d{2}", text[:10]) is not None and rfc3339_time(text[11:])


def format_checker(cls):
    checker = copy.deepcopy(cls.FORMAT_CHECKER)
    checker.checks("date-time")(lambda v: not isinstance(v, str) or rfc3339_date_time(v))
    checker.checks("time")(lambda v: not isinstance(v, str) or rfc3339_time(v))
    return checker


def formats_in(schema):
    found = set()
    stack = [schema]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if isinstance(x.get("format"), str):
                found.add(x["format"])
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return found


def reference_verdict(schema, document):
    """python3-jsonschema's verdict (formats checked), or None when it cannot say."""
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        return cls(schema, format_checker=format_checker(cls)).is_valid(document)
    except Exception:  # an unresolvable $ref, a schema it refuses
        return None


def unchecked_formats(schema):
    """The formats the schema uses that the reference does not check."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return formats_in(schema) - set(format_checker(cls).checkers)


def translate(cgram, schema_path, out, property_order, timeout=10.0, memory_mb=4096):
    """'exact', 'loosened' or 'refused' (a time-out or crash counts as refused)."""
    try:
        done = subprocess.run([cgram, "schema", schema_path, "-o", out, "--whitespace", "compact",
                               "--property-order", property_order], capture_output=True, text=True,
                              timeout=timeout, preexec_fn=limit_memory(memory_mb))
    except subprocess.TimeoutExpired:
        return "refused"
    if done.returncode != 0:
        return "refused"
    warnings = [m for m in (DIAGNOSTIC.match(line) for line in done.stderr.splitlines()) if m and m.group(1) == "warning"]
    return "loosened" if warnings else "exact"


def run_one(cgram, path, property_order, workdir):
    """The conversion's outcome and one (expected, cgram_accepts, label) per test document."""
    with open(path, encoding="utf-8") as f:
        case = json.load(f)
    base = os.path.join(workdir, os.path.basename(path))
    schema_path, grammar_path = base + ".schema.json", base + ".cgram"
    with open(schema_path, "w", encoding="utf-8") as f:
        json.dump(case["schema"], f, ensure_ascii=False)
    outcome = translate(cgram, schema_path, grammar_path, property_order)
    results = []
    try:
        unchecked = bool(unchecked_formats(case["schema"]))
    except Exception:
        unchecked = False
    if outcome != "refused":
        for i, test in enumerate(case.get("tests", [])):
            doc_path = f"{base}.{i}.doc"
            with open(doc_path, "w", encoding="utf-8") as f:
                f.write(compact(test["data"]))
            try:
                status = subprocess.run([cgram, "match", grammar_path, "--file", doc_path], capture_output=True,
                                        timeout=MATCH_TIMEOUT).returncode
            except subprocess.TimeoutExpired:
                status = "timeout"
            os.unlink(doc_path)
            expected = reference_verdict(case["schema"], test["data"])
            results.append({"expected": expected, "label": bool(test.get("valid")), "accepted": status == 0,
                            "status": status, "unchecked_format": unchecked})
        os.unlink(grammar_path)
    os.unlink(schema_path)
    return {"path": path, "outcome": outcome, "results": results}


def verdict_table(runs):
    print("| conversion | schemas | valid docs accepted | valid rejected | invalid rejected | invalid accepted | "
          "valid rejected on a format the reference does not check | reference could not say | label ≠ reference | "
          f"match over {MATCH_TIMEOUT} s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for outcome in ("exact", "loosened"):
        rows = [r for r in runs if r["outcome"] == outcome]
        count = collections.Counter()
        for r in rows:
            for t in r["results"]:
                if t["status"] == "timeout":
                    count["timeout"] += 1
                    continue
                if t["expected"] is None:
                    count["unknown"] += 1
                    continue
                if t["expected"] != t["label"]:
                    count["label"] += 1
                key = ("valid_" if t["expected"] else "invalid_") + ("accepted" if t["accepted"] else "rejected")
                if key == "valid_rejected" and t["unchecked_format"]:
                    key = "unchecked"
                count[key] += 1
        print(f"| {outcome} | {len(rows)} | {count['valid_accepted']} | {count['valid_rejected']} | "
              f"{count['invalid_rejected']} | {count['invalid_accepted']} | {count['unchecked']} | {count['unknown']} | "
              f"{count['label']} | {count['timeout']} |")


def list_mismatches(runs, folder, at_most):
    shown = 0
    for r in sorted(runs, key=lambda r: r["path"]):
        if r["outcome"] != "exact":
            continue
        for i, t in enumerate(r["results"]):
            if (t["expected"] is not None and t["expected"] != t["accepted"] and not t["unchecked_format"]
                    and shown < at_most):
                what = "valid, rejected" if t["expected"] else "invalid, accepted"
                print(f"- {os.path.relpath(r['path'], folder)} test {i}: {what} (cgram match exit {t['status']})")
                shown += 1


def timing(cgram, vocab, runs, sample, property_order, seed, keep_suite=None):
    exact = [r for r in runs if r["outcome"] == "exact" and any(t["expected"] and t["accepted"] for t in r["results"])]
    random.Random(seed).shuffle(exact)
    suite = keep_suite or tempfile.mkdtemp(prefix="cgram-schema-suite-")
    try:
        for n, r in enumerate(exact[:sample]):
            with open(r["path"], encoding="utf-8") as f:
                case = json.load(f)
            name = f"s{n:04d}"
            os.makedirs(os.path.join(suite, name, "docs"))
            with open(os.path.join(suite, name, name + ".json"), "w", encoding="utf-8") as f:
                json.dump(case["schema"], f, ensure_ascii=False)
            for i, (test, t) in enumerate(zip(case["tests"], r["results"])):
                if t["expected"] and t["accepted"]:
                    with open(os.path.join(suite, name, "docs", f"{i}.json"), "w", encoding="utf-8") as f:
                        f.write(compact(test["data"]))
        done = subprocess.run([cgram, "bench", "--suite", suite, "--vocab", vocab, "--json", "--whitespace", "compact",
                               "--property-order", property_order], capture_output=True, text=True)
        if done.returncode not in (0, 1) or not done.stdout.strip():
            sys.exit(f"cgram bench --suite failed:\n{done.stderr[-2000:]}")
        rows = json.loads(done.stdout)
    finally:
        if not keep_suite:
            shutil.rmtree(suite)

    def spread(values):
        values = sorted(values)
        pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]
        return f"{pick(0.5):.2f} / {pick(0.99):.2f} / {values[-1]:.2f}"
    print(f"\n{len(rows)} exact schemas with valid documents, {sum(r['steps'] for r in rows)} mask steps, "
          f"vocabulary {os.path.basename(vocab)}:\n")
    print("| measure | p50 / p99 / max |\n|---|---|")
    print(f"| schema → first mask, lazy index (ms) | {spread([r['first_mask_ms'] for r in rows])} |")
    print(f"| schema → eager index (ms) | {spread([r['compile_ms'] for r in rows])} |")
    print(f"| a schema's median mask (µs) | {spread([r['mask_us']['p50'] for r in rows])} |")
    print(f"| a schema's p99 mask (µs) | {spread([r['mask_us']['p99'] for r in rows])} |")
    print(f"| a schema's slowest mask (µs) | {spread([r['mask_us']['max'] for r in rows])} |")
    print(f"\nMedian mask over all schemas, weighted by steps: "
          f"{statistics.median([r['mask_us']['p50'] for r in rows for _ in range(r['steps'])]):.2f} µs")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="JSONSchemaBench's maskbench/data folder")
    parser.add_argument("--cgram", default=os.path.join(os.path.dirname(__file__), "../../build/tools/cgram/cgram"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="at most this many schemas per collection (0: all)")
    parser.add_argument("--property-order", default="any", choices=("schema", "any"))
    parser.add_argument("--mismatches", type=int, default=20, help="list this many exact-conversion mismatches")
    parser.add_argument("--timing-sample", type=int, default=0, help="time this many exact schemas (needs --vocab)")
    parser.add_argument("--vocab", help="the vocabulary for the timing (Llama 3's tokenizer.json)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-suite", help="write the timing suite into this new folder and keep it "
                                             "(for `cgram bench --suite` and profiling)")
    parser.add_argument("--only", help="a file listing the schemas to run, as run.py names them "
                                       "(COLLECTION/NAME.json, one per line)")
    args = parser.parse_args()
    only = {line.replace("/", "---", 1) for line in open(args.only).read().split()} if args.only else None

    by_collection = collections.defaultdict(list)
    for name in sorted(os.listdir(args.data)):
        collection = name.split("---")[0]
        if collection in COLLECTIONS and name.endswith(".json") and (only is None or name in only):
            by_collection[collection].append(os.path.join(args.data, name))
    paths = [p for c in sorted(by_collection) for p in (by_collection[c][:args.limit] if args.limit else by_collection[c])]
    if not paths:
        sys.exit(f"{args.data}: no schemas of JSONSchemaBench's collections")
    workdir = tempfile.mkdtemp(prefix="cgram-documents-")
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(lambda p: run_one(args.cgram, p, args.property_order, workdir), paths))
    finally:
        shutil.rmtree(workdir)
    print(f"{len(runs)} schemas, property order '{args.property_order}', "
          f"{sum(len(r['results']) for r in runs)} documents of converted schemas\n")
    verdict_table(runs)
    print("\nExact conversions that disagree with python3-jsonschema:")
    list_mismatches(runs, args.data, args.mismatches)
    if args.timing_sample:
        if not args.vocab:
            sys.exit("--timing-sample needs --vocab")
        timing(args.cgram, args.vocab, runs, args.timing_sample, args.property_order, args.seed, args.keep_suite)


if __name__ == "__main__":
    main()

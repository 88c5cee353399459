#!/usr/bin/env python3
"""Mask latency percentiles per grammar family, as a picture.

Runs the benchmark suite (`cgram bench --suite bench/suite --json`) twice,
with the memo of masks on (the default) and off (every mask cold, as on a
context met for the first time), keeps each family's regex spelling (the
first grammar of its folder when it has none), and draws p50, p99 and max
per family on a log scale, the two runs side by side. The data goes
beside the picture as JSON, so the figure can be checked and redrawn.

    python3 bench/plot_mask_latency.py --cgram build/tools/cgram/cgram \\
        --vocab ../shared/vocab/llama3-tokenizer.json \\
        --out docs/benchmarks/mask_latency.png

    python3 bench/plot_mask_latency.py --from-json docs/benchmarks/mask_latency.json \\
        --out docs/benchmarks/mask_latency.png     (redraw only)

Needs matplotlib (Debian: apt-get install python3-matplotlib); use the
interpreter that has it (/usr/bin/python3 on Debian).
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

FAMILIES = {  # the suite's formats by the kind of grammar they are (docs/BENCHMARKS.md)
    "data": ["json", "json_llama", "record", "yaml", "graphql", "list", "csv", "tool_calls", "toolcall",
             "reasoning_json"],
    "code": ["c", "python", "sql", "lua", "arithmetic"],
    "text": ["markup", "chess", "cjk", "words"],
}


def run_suite(cgram, suite, vocab, memo):
    command = [cgram, "bench", "--suite", suite, "--json", "--mask-memo", memo]
    if vocab:
        command += ["--vocab", vocab]
    print("running:", " ".join(command), file=sys.stderr)
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: some rows were not measured (said on stderr)
        sys.exit("cgram bench failed: " + done.stderr[-2000:])
    return json.loads(done.stdout), " ".join(command)


def one_row_per_format(rows):
    """The regex spelling of each format, else its first grammar's row."""
    chosen = {}
    for row in rows:
        fmt = row["format"]
        if fmt not in chosen or (row["spelling"] == "regex" and chosen[fmt]["spelling"] != "regex"):
            chosen[fmt] = row
    return chosen


def measure(args):
    data = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "vocabulary": os.path.basename(args.vocab) if args.vocab else "bundled Phi-3", "runs": {}}
    for memo in ("document", "off"):
        rows, command = run_suite(args.cgram, args.suite, args.vocab, memo)
        data["runs"][memo] = {"command": command,
                              "rows": {fmt: {"spelling": r["spelling"], "steps": r["steps"], "mask_us": r["mask_us"]}
                                       for fmt, r in one_row_per_format(rows).items()}}
    return data


def draw(data, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = [f for family in FAMILIES.values() for f in family if f in data["runs"]["off"]["rows"]]
    order += sorted(f for f in data["runs"]["off"]["rows"] if f not in order)
    fig, ax = plt.subplots(figsize=(12, 5.5))
    width = 0.13
    series = [("off", "p50", "#1f77b4"), ("off", "p99", "#ff7f0e"), ("off", "max", "#d62728"),
              ("document", "p50", "#aec7e8"), ("document", "p99", "#ffbb78"), ("document", "max", "#ff9896")]
    for i, (memo, stat, color) in enumerate(series):
        xs = [k + (i - 2.5) * width for k in range(len(order))]
        ys = [data["runs"][memo]["rows"].get(f, {}).get("mask_us", {}).get(stat, float("nan")) for f in order]
        label = f"{stat}, memo {'off (cold)' if memo == 'off' else 'on'}"
        ax.bar(xs, ys, width, color=color, label=label)
    ax.set_yscale("log")
    ax.set_ylabel("mask time (µs, log scale)")
    family_of = {f: name for name, fs in FAMILIES.items() for f in fs}
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([f"{f} ({family_of.get(f, 'other')})" for f in order], rotation=35, ha="right")
    ax.set_title(f"cgram mask latency per grammar family, {data['vocabulary']} "
                 f"(bench/suite, regex spellings; {data['date']}, {data['machine']})")
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out, file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cgram", default="build/tools/cgram/cgram")
    p.add_argument("--suite", default="bench/suite")
    p.add_argument("--vocab", default="", help="vocabulary file (default: the bundled Phi-3)")
    p.add_argument("--out", default="docs/benchmarks/mask_latency.png")
    p.add_argument("--from-json", help="redraw from a saved data file instead of measuring")
    args = p.parse_args()
    if args.from_json:
        data = json.load(open(args.from_json))
    else:
        data = measure(args)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump(data, f, indent=1)
    draw(data, args.out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where a mask's time goes: shares of `perf` samples by kind of work.

Records `cgram bench` under `perf record --call-graph dwarf`, then sorts every
sample taken inside a mask (`compute_text_tokens` on its stack) by the innermost
engine function it names: table lookups (what the compiled tier's kernels
replace), bitset ORs, the memo's keys and lookups, the stack graph, and lexing and
walks. docs/BENCHMARKS.md quotes these shares to say what a faster kernel could
win at most.

  scripts/mask_profile.py GRAMMAR DOCS VOCAB [--repeat N] [--tier table|jit] [--top N]
  scripts/mask_profile.py --script FILE      (the output of `perf script`)

--top N also lists the N functions most often innermost in those samples.

The documents are repeated N times (default 6; each document starts with an empty
memo, `--mask-memo document`) so that misses give enough samples.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Innermost match wins: a sample counts for the first category, in this order,
# whose pattern names a frame, searching from the innermost frame outwards.
CATEGORIES = [
    ("table lookups", re.compile(
        r"TableLookups::|LrTable::(shift|go|reductions|reduction_list_id|terminals_with_actions)"
        r"|Dfa::(next|accepting)|follower_first_bytes|KernelLookups")),
    ("bitset ORs", re.compile(r"or_words|TokenSet::or_into|Engine::or_set|MaskMemo::or_into")),
    ("memo keys and lookups", re.compile(
        r"PathTrie|StackMemo|MaskMemo|Engine::(look_up|extend_key_walk|note_read|note_older_read"
        r"|start_key|key_heads|close_first_level|remembered|end_recording|begin_recording"
        r"|remembered_shiftable|remembered_end|remember_end|note_levels_read|note_set_reads"
        r"|note_shift_reads|note_byte_reads|usable_in|kept_answer_usable|mark_verified"
        r"|made_while_recording|intern_)")),
    ("stack graph", re.compile(
        r"Engine::(new_node|add_edge|push_edge|truncate|reduce_closure|end_lexeme"
        r"|probe_parents_read|next_visit_epoch|charge|shiftable_by_parents|work_out_shiftable"
        r"|fork_depth|is_shiftable|shiftable|merge_equal_heads|remember_in_cache)")),
    ("lexing and walks", re.compile(
        r"Engine::(step_byte|step_byte_after|end_lexemes|start_lexemes|walk_range|lexer_walk"
        r"|walk_deferred|normalize|viable|surely_viable|heads_after_lexeme|cross_into"
        r"|cross_precomputed|cross_from|mask_between|defer_walk|walk_crossings|startable_bytes"
        r"|heads_between_lexemes|compute_text_tokens)|VocabTrie")),
]
MASK_ENTRY = "compute_text_tokens"


def frame_name(text):
    """A perf frame's function, without its address, arguments or template list."""
    text = re.sub(r"\s*\(.*\)$", "", text)
    text = re.sub(r"\+0x[0-9a-f]+$", "", text)
    text = re.sub(r"<.*>", "<>", text)
    return re.sub(r"\(.*", "", text)


def samples(lines):
    """Each sample's frames, innermost first."""
    stack = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if stack:
                yield stack
            stack = []
        elif line.startswith((" ", "\t")):
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                stack.append(frame_name(parts[1]))
    if stack:
        yield stack


def shares(lines):
    counts = collections.Counter()
    innermost = collections.Counter()
    total = 0
    for stack in samples(lines):
        if not any(MASK_ENTRY in f for f in stack):
            continue
        total += 1
        category = next((name for f in stack for name, rx in CATEGORIES if rx.search(f)), "other")
        counts[category] += 1
        innermost[stack[0]] += 1
    return total, counts, innermost


def record(args):
    perf = shutil.which("perf")
    if not perf:
        sys.exit("mask_profile: perf is not installed (apt-get install linux-perf)")
    with tempfile.TemporaryDirectory() as tmp:
        docs = os.path.join(tmp, "docs")
        os.mkdir(docs)
        sources = sorted(os.listdir(args.docs)) if os.path.isdir(args.docs) else [args.docs]
        for r in range(args.repeat):
            for name in sources:
                src = os.path.join(args.docs, name) if os.path.isdir(args.docs) else name
                shutil.copy(src, os.path.join(docs, f"{r:03d}-{os.path.basename(name)}"))
        data = os.path.join(tmp, "perf.data")
        subprocess.run([perf, "record", "-q", "-o", data, "--call-graph", "dwarf,16384", "-F", "3000",
                        args.cgram, "bench", args.grammar, "--docs", docs, "--vocab", args.vocab,
                        "--eager-index", "--mask-memo", "document", "--tier", args.tier],
                       check=True, stdout=subprocess.DEVNULL)
        out = subprocess.run([perf, "script", "-i", data], check=True, capture_output=True, text=True)
        return out.stdout.splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grammar", nargs="?")
    parser.add_argument("docs", nargs="?")
    parser.add_argument("vocab", nargs="?")
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--tier", default="table", choices=["table", "jit"])
    parser.add_argument("--cgram", default="build/tools/cgram/cgram")
    parser.add_argument("--script", help="read this `perf script` output instead of recording")
    parser.add_argument("--top", type=int, default=0, help="list the N functions most often innermost")
    args = parser.parse_args()
    if args.script:
        with open(args.script) as f:
            lines = f.readlines()
    elif args.grammar and args.docs and args.vocab:
        lines = record(args)
    else:
        parser.error("give GRAMMAR DOCS VOCAB, or --script FILE")
    total, counts, innermost = shares(lines)
    if total == 0:
        sys.exit(f"mask_profile: no sample inside {MASK_ENTRY} (a build without symbols?)")
    print(f"{total} samples inside masks")
    for name, _ in CATEGORIES + [("other", None)]:
        print(f"  {name:22s} {100 * counts[name] / total:5.1f} %")
    if args.top:
        print(f"innermost functions (top {args.top})")
        for name, count in innermost.most_common(args.top):
            print(f"  {100 * count / total:5.1f} %  {name[:100]}")


if __name__ == "__main__":
    main()

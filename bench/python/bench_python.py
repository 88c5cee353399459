"""The Python package's costs (docs/BENCHMARKS.md, "Python package"):

  - a batch bitmask applied to logits in place: the CPU kernel against the
    same operation in torch operations, for float32, float16 and bfloat16;
  - a batch of masks: fill_masks (threads, GIL released) against a Python
    loop over Matcher.fill_mask, and the logits processor's whole step;
  - what one call costs from Python (is_allowed, advance + rollback).

    build/python/python bench/python/bench_python.py [--vocab tokenizer.json] [--rows 64] [--runs 21]

Medians (and p90) of --runs repetitions; one warm-up run first.
"""

import argparse
import os
import random
import statistics
import time

import torch

import cgram
from cgram import logits as cl

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def timed(function, runs):
    function()  # warm-up (lazy index entries, caches)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


def row(label, median, p90, unit=1e3, suffix="ms"):
    print(f"| {label} | {median * unit:.3f} {suffix} | {p90 * unit:.3f} {suffix} |")


def bench_apply(rows, vocab_size, runs):
    print(f"\n### apply_token_bitmask_inplace, {rows} x {vocab_size:,} logits, random bitmasks (the worst case)\n")
    print("| what | median | p90 |\n|---|---|---|")
    generator = torch.Generator().manual_seed(0)
    bitmask = torch.randint(-(2**31), 2**31 - 1, (rows, cgram.mask_words(vocab_size)), dtype=torch.int32,
                            generator=generator)
    logits = torch.randn(rows, vocab_size, generator=generator)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = logits.to(dtype)
        native = timed(lambda: cl.apply_token_bitmask_inplace(x, bitmask), runs)
        fallback = timed(lambda: cl._apply_with_torch(x, bitmask, None), runs)
        name = str(dtype).replace("torch.", "")
        row(f"{name}: CPU kernel", *native)
        row(f"{name}: torch operations", *fallback)
        print(f"| {name}: ratio | {fallback[0] / native[0]:.1f}x | |")


def matchers_in_documents(grammar, rows, seed):
    """`rows` matchers, each some way into one of the JSON benchmark documents."""
    vocab = grammar.vocab
    folder = os.path.join(ROOT, "bench", "docs", "json")
    documents = [vocab.encode(open(os.path.join(folder, name)).read(), continuation=True)
                 for name in sorted(os.listdir(folder))]
    rng = random.Random(seed)
    out = []
    for i in range(rows):
        tokens = documents[i % len(documents)]
        matcher = cgram.Matcher(grammar)
        for token in tokens[: rng.randrange(len(tokens))]:
            if matcher.advance(token) == cgram.AdvanceResult.REJECTED:
                raise SystemExit(f"a benchmark document is not in the grammar (token {token})")
        out.append(matcher)
    return out


def bench_batch(grammar, rows, runs):
    print(f"\n### A batch of {rows} masks, JSON ({grammar.vocab_size:,} ids)\n")
    print("| what | median | p90 |\n|---|---|---|")
    matchers = matchers_in_documents(grammar, rows, seed=1)
    bitmask = cl.allocate_token_bitmask(rows, grammar.vocab_size)
    pool = cgram.ThreadPool(os.cpu_count() or 1)
    one = cgram.ThreadPool(1)
    threads = timed(lambda: cgram.fill_masks(matchers, bitmask, pool=pool), runs)
    single = timed(lambda: cgram.fill_masks(matchers, bitmask, pool=one), runs)
    as_numpy = bitmask.numpy()

    def loop():
        for i, matcher in enumerate(matchers):
            matcher.fill_mask(as_numpy, row=i)

    looped = timed(loop, runs)
    row(f"fill_masks, {pool.threads} threads", *threads)
    row("fill_masks, 1 thread", *single)
    row("a Python loop of Matcher.fill_mask", *looped)
    logits = torch.randn(rows, grammar.vocab_size)
    cgram.fill_masks(matchers, bitmask, pool=pool)
    row("apply_token_bitmask_inplace of these masks (float32)",
        *timed(lambda: cl.apply_token_bitmask_inplace(logits, bitmask), runs))

    def step():
        cgram.fill_masks(matchers, bitmask, pool=pool)
        cl.apply_token_bitmask_inplace(logits, bitmask)

    row("fill_masks + apply (one decoding step's masking)", *timed(step, runs))


def bench_calls(grammar, runs):
    print(f"\n### One call from Python, JSON ({grammar.vocab_size:,} ids)\n")
    print("| what | median | p90 |\n|---|---|---|")
    matcher = matchers_in_documents(grammar, 1, seed=2)[0]
    allowed = matcher.allowed_tokens()
    token = allowed[len(allowed) // 2]
    count = 1000

    def is_allowed():
        for _ in range(count):
            matcher.is_allowed(token)

    def advance_rollback():
        for _ in range(count):
            matcher.advance(token)
            matcher.rollback(1)

    def mask():
        for _ in range(count // 10):
            matcher.mask()

    median, p90 = timed(is_allowed, runs)
    row("is_allowed", median / count, p90 / count, 1e6, "µs")
    median, p90 = timed(advance_rollback, runs)
    row("advance + rollback(1)", median / count, p90 / count, 1e6, "µs")
    median, p90 = timed(mask, runs)
    row("mask() (a new array)", median / (count // 10), p90 / (count // 10), 1e6, "µs")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", help="a vocabulary file (default: the bundled one)")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--logits-width", type=int, default=128256, help="vocabulary width of the apply benchmark")
    args = parser.parse_args()
    torch.set_num_threads(1)
    vocab = cgram.Vocabulary.load(args.vocab) if args.vocab else cgram.Vocabulary.bundled()
    grammar = cgram.compile(cgram.Grammar.from_file(os.path.join(ROOT, "examples", "json.cgram")), vocab)
    print(f"cgram {cgram.__version__}, torch {torch.__version__} (1 torch thread), {os.cpu_count()} cores; "
          f"vocabulary {vocab.name} ({len(vocab):,} ids)")
    bench_apply(args.rows, args.logits_width, args.runs)
    bench_batch(grammar, args.rows, args.runs)
    bench_calls(grammar, args.runs)


if __name__ == "__main__":
    main()

"""The server-style driver of tests/api/python/server_driver.py, timed
(docs/BENCHMARKS.md, "Serving driver"): a batch of requests of every kind,
random logits over a padded model vocabulary, with and without speculative
drafts.

    build/python/python bench/python/serving_driver.py [--vocab tokenizer.json] [--steps 64]

Per draft length k: the steps run, tokens accepted per model call (1 + the
accepted draft tokens), the draft acceptance, and the medians of filling a
step's rows (1 + k per request) and of verifying one request's step
(validate_tokens, accept_tokens).
"""

import argparse
import os
import statistics
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "api", "python"))

import cgram  # noqa: E402
from cgram.serving import Backend  # noqa: E402
from server_driver import run  # noqa: E402
from test_serving import requests  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", help="tokenizer.json, tiktoken or GGUF (default: the bundled Phi-3)")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--padding", type=int, default=64, help="model logits past the tokenizer's ids")
    args = parser.parse_args()
    vocab = cgram.Vocabulary.load(args.vocab) if args.vocab else cgram.Vocabulary.bundled()
    print(f"vocabulary {vocab.name} ({vocab.size} ids), model logits {vocab.size + args.padding}, "
          f"{len(requests())} requests, {args.steps} steps at most\n")
    print("| drafts k | steps | model calls | tokens | tokens per call | drafted | accepted | acceptance | "
          "refused by the grammar | finished (valid) | fill rows p50 | verify p50 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in (0, 2, 4):
        backend = Backend(vocab, vocab_size=vocab.size + args.padding, max_rollback_tokens=max(k, 1) * 2)
        for r in requests():
            backend.compile(r.kind, r.spec)  # compiled before timing, as a server's cache would hold them
        s = run(backend, requests(), steps=args.steps, draft_tokens=k, seed=11)
        print(f"| {k} | {s.steps} | {s.model_calls} | {s.tokens} | {s.tokens_per_call():.2f} | {s.drafted} | "
              f"{s.draft_accepted} | {100 * s.acceptance():.1f} % | {s.draft_refused_by_grammar} | "
              f"{s.finished} ({s.valid_texts}) | {1e6 * statistics.median(s.fill_seconds):.0f} µs | "
              f"{1e6 * statistics.median(s.verify_seconds):.1f} µs |")


if __name__ == "__main__":
    main()

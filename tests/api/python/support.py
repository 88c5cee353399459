"""What the Python package's tests share: paths (set by CTest), compiled
grammars, seeded random walks, and the C++ masks through the cgram command."""

import json
import os
import subprocess
import tempfile
import unittest

import numpy as np

import cgram

SOURCE_DIR = os.environ.get("CGRAM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CLI = os.environ.get("CGRAM_CLI", "")
EXAMPLES = os.path.join(SOURCE_DIR, "examples")
TEST_DATA = os.path.join(SOURCE_DIR, "tests", "data")
# The shared data beside the checkout, or $CGRAM_SHARED_DIR (CI runs the
# suite a second time with it pointing nowhere, as a user's clone would).
SHARED_VOCAB = os.path.join(os.environ.get("CGRAM_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared"), "vocab")


def shared_vocab(test, name):
    """The path of ../shared/vocab/NAME, or the test is skipped (CTest reads
    the "cgram-skip:" marker and lists the test as not run)."""
    path = os.path.join(SHARED_VOCAB, name)
    if not os.path.exists(path):
        print(f"cgram-skip: {path} is absent (a clone has no ../shared; set CGRAM_SHARED_DIR to its folder)")
        test.skipTest(f"{path} is absent")
    return path

_cache = {}


def bundled():
    if "bundled" not in _cache:
        _cache["bundled"] = cgram.Vocabulary.bundled()
    return _cache["bundled"]


def compiled(path, vocab=None, **options):
    """A grammar file compiled for `vocab` (default: the bundled one), cached."""
    vocab = vocab or bundled()
    key = (path, id(vocab), tuple(sorted(options.items())))
    if key not in _cache:
        _cache[key] = cgram.compile(cgram.Grammar.from_file(path), vocab, **options)
    return _cache[key]


def mask_bits(words, vocab_size):
    """The allowed ids of an int32 mask, from its bits (NumPy, independent of the matcher)."""
    as_bytes = np.ascontiguousarray(words, dtype=np.int32).view(np.uint8)
    bits = np.unpackbits(as_bytes, bitorder="little")
    return [int(t) for t in np.flatnonzero(bits[:vocab_size])]


def random_walk(matcher, rng, steps, end_bias=0.3):
    """Samples allowed tokens (end of sequence with probability `end_bias`
    when allowed); returns the tokens accepted, end of sequence included."""
    eos = set(matcher.grammar.vocab.eos_ids)
    tokens = []
    for _ in range(steps):
        allowed = matcher.allowed_tokens()
        if not allowed:
            break
        ends = [t for t in allowed if t in eos]
        text = [t for t in allowed if t not in eos]
        token = rng.choice(ends) if ends and (not text or rng.random() < end_bias) else rng.choice(text)
        result = matcher.advance(token)
        assert result != cgram.AdvanceResult.REJECTED, f"an allowed token {token} was rejected"
        tokens.append(token)
        if result == cgram.AdvanceResult.FINISHED:
            break
    return tokens


def cli_allowed(grammar_path, tokens, vocab_path=None, extra=()):
    """The allowed ids after `tokens`, from the C++ command (`cgram mask --json`)."""
    if not CLI:
        raise unittest.SkipTest("CGRAM_CLI is not set (CTest sets it)")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(" ".join(str(t) for t in tokens))
        path = f.name
    try:
        command = [CLI, "mask", "--json", "--tokens", path, grammar_path, *extra]
        if vocab_path:
            command += ["--vocab", vocab_path]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out)["allowed"]

"""cgram.logits: bitmasks applied to torch logits in place (the CPU kernel
and the torch fallback, against a NumPy reference), and the logits processor
driving generation from random logits."""

import json
import os
import unittest

import jsonschema
import numpy as np
import torch

import cgram
from cgram import logits as cl
from support import EXAMPLES, TEST_DATA, compiled, mask_bits

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def random_bitmask(rows, words, seed):
    rng = np.random.default_rng(seed)
    mask = rng.integers(-(2**31), 2**31, size=(rows, words), dtype=np.int64).astype(np.int32)
    mask[:, ::7] = 0  # whole words disallowed
    mask[:, 1::5] = -1  # whole words allowed
    return torch.from_numpy(mask)


def reference(logits, bitmask, indices=None):
    """-inf where the bit is clear (and past 32 * words), computed bit by bit in NumPy."""
    out = logits.clone()
    width = logits.shape[-1]
    rows = range(logits.shape[0]) if indices is None else indices
    for row in rows:
        allowed = np.zeros(width, dtype=bool)
        allowed[mask_bits(bitmask[row].numpy(), min(width, 32 * bitmask.shape[1]))] = True
        out[row, torch.from_numpy(~allowed)] = float("-inf")
    return out


class ApplyBitmask(unittest.TestCase):
    def check_both_paths(self, logits, bitmask, indices=None):
        expected = reference(logits, bitmask, indices)
        native = logits.clone()
        cl.apply_token_bitmask_inplace(native, bitmask, indices)
        self.assertTrue(torch.equal(native, expected))
        fallback = logits.clone()
        cl._apply_with_torch(fallback, bitmask, None if indices is None else list(indices))
        self.assertTrue(torch.equal(fallback, expected))

    def test_every_dtype(self):
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                logits = torch.randn(6, 1000).to(dtype)
                self.check_both_paths(logits, random_bitmask(6, 32, seed=1))

    def test_indices(self):
        logits = torch.randn(8, 500)
        bitmask = random_bitmask(8, 16, seed=2)
        self.check_both_paths(logits, bitmask, [5, 0, 3])
        untouched = logits.clone()
        cl.apply_token_bitmask_inplace(untouched, bitmask, [5, 0, 3])
        for row in (1, 2, 4, 6, 7):
            self.assertTrue(torch.equal(untouched[row], logits[row]))
        empty = logits.clone()
        cl.apply_token_bitmask_inplace(empty, bitmask, [])
        self.assertTrue(torch.equal(empty, logits))

    def test_padding_columns(self):
        # A model's logits wider than the mask: the ids past it are never allowed.
        logits = torch.zeros(2, 32 * 3 + 40)
        bitmask = torch.full((2, 3), -1, dtype=torch.int32)
        self.check_both_paths(logits, bitmask)
        cl.apply_token_bitmask_inplace(logits, bitmask)
        self.assertTrue(torch.isfinite(logits[:, :96]).all())
        self.assertTrue(torch.isneginf(logits[:, 96:]).all())
        # Narrower logits: the bits past them are ignored.
        narrow = torch.zeros(2, 70)
        self.check_both_paths(narrow, random_bitmask(2, 3, seed=3))

    def test_one_row_and_views(self):
        logits = torch.randn(300)
        bitmask = random_bitmask(1, 10, seed=4)[0]
        expected = reference(logits.unsqueeze(0), bitmask.unsqueeze(0))[0]
        cl.apply_token_bitmask_inplace(logits, bitmask)
        self.assertTrue(torch.equal(logits, expected))
        # Strided rows (a slice of a wider batch) through the kernel: the
        # columns past the slice stay as they were.
        wide = torch.randn(4, 400)
        mask = random_bitmask(4, 10, seed=5)
        expected = wide.clone()
        expected[:, :300] = reference(wide[:, :300], mask)
        sliced = wide.clone()
        cl.apply_token_bitmask_inplace(sliced[:, :300], mask)
        self.assertTrue(torch.equal(sliced, expected))
        # A transposed tensor (its rows are not contiguous): the torch path.
        transposed = torch.randn(300, 4).t()
        self.check_both_paths(transposed, random_bitmask(4, 10, seed=6))
        # float64 goes through torch.
        self.check_both_paths(torch.randn(3, 100, dtype=torch.float64), random_bitmask(3, 4, seed=7))

    def test_large_batch(self):
        logits = torch.randn(64, 128256)
        bitmask = random_bitmask(64, 4008, seed=8)
        self.check_both_paths(logits[:4], bitmask[:4])
        native = logits.clone()
        cl.apply_token_bitmask_inplace(native, bitmask)
        fallback = logits.clone()
        cl._apply_with_torch(fallback, bitmask, None)
        self.assertTrue(torch.equal(native, fallback))

    def test_empty_batch(self):
        for logits in (torch.zeros(0, 50), torch.zeros(0, 50, dtype=torch.float64)):
            cl.apply_token_bitmask_inplace(logits, torch.zeros(0, 2, dtype=torch.int32))

    def test_refusals(self):
        # Rows that share memory (an expanded tensor) would be written by several threads.
        with self.assertRaises(ValueError):
            cl.apply_token_bitmask_inplace(torch.zeros(1, 64).expand(3, 64), torch.zeros(3, 2, dtype=torch.int32))
        matcher = cgram.Matcher(compiled(os.path.join(EXAMPLES, "json.cgram")))
        with self.assertRaises(ValueError):
            cgram.fill_masks([matcher], torch.zeros(1, matcher.mask_words, dtype=torch.int32).expand(2, -1))
        with self.assertRaises(TypeError):
            cl.apply_token_bitmask_inplace(torch.zeros(2, 10, dtype=torch.int32), torch.zeros(2, 1, dtype=torch.int32))
        with self.assertRaises(TypeError):
            cl.apply_token_bitmask_inplace(torch.zeros(2, 10), torch.zeros(2, 1, dtype=torch.int64))
        with self.assertRaises(ValueError):
            cl.apply_token_bitmask_inplace(torch.zeros(2, 10), torch.zeros(3, 1, dtype=torch.int32))
        with self.assertRaises(ValueError):
            cl.apply_token_bitmask_inplace(torch.zeros(2, 10), torch.zeros(1, dtype=torch.int32))
        with self.assertRaises(IndexError):
            cl.apply_token_bitmask_inplace(torch.zeros(2, 10), torch.zeros(2, 1, dtype=torch.int32), [2])

    def test_allocate(self):
        bitmask = cl.allocate_token_bitmask(3, 65)
        self.assertEqual(bitmask.dtype, torch.int32)
        self.assertEqual(tuple(bitmask.shape), (3, 3))
        self.assertTrue((bitmask == -1).all())


def sample(scores, generator):
    """A token drawn from softmax(scores) (disallowed tokens have probability 0)."""
    probabilities = torch.softmax(scores.float(), dim=-1)
    return int(torch.multinomial(probabilities, 1, generator=generator))


class Processor(unittest.TestCase):
    def generate(self, grammar, batch, seed, steps=300, extra_columns=0):
        """Random-logits generation through the processor, as a generate loop
        calls it; every step checks the masked scores against a matcher of
        its own. Returns each row's tokens (end of sequence excluded)."""
        processor = cl.GrammarLogitsProcessor(grammar)
        eos = grammar.vocab.eos_ids[0]
        generator = torch.Generator().manual_seed(seed)
        prompt = torch.randint(0, 100, (batch, 3), generator=generator)
        ids = prompt
        shadows = [cgram.Matcher(grammar) for _ in range(batch)]
        finished = [False] * batch
        for _ in range(steps):
            scores = torch.randn(batch, grammar.vocab_size + extra_columns, generator=generator) * 4
            raw = scores.clone()
            out = processor(ids, scores)
            self.assertIs(out, scores)  # masked in place
            next_tokens = []
            for row in range(batch):
                if finished[row]:
                    # Only end of sequence (the generator pads finished rows anyway).
                    self.assertEqual(torch.isfinite(scores[row]).nonzero().flatten().tolist(), grammar.vocab.eos_ids)
                    next_tokens.append(eos)
                    continue
                allowed = torch.isfinite(scores[row]).nonzero().flatten().tolist()
                self.assertEqual(allowed, shadows[row].allowed_tokens())
                kept = torch.isfinite(scores[row])
                self.assertTrue(torch.equal(scores[row][kept], raw[row][kept]))
                token = sample(scores[row], generator)
                shadows[row].advance(token)
                finished[row] = token == eos
                next_tokens.append(token)
            ids = torch.cat([ids, torch.tensor(next_tokens).unsqueeze(1)], dim=1)
            if all(finished):
                break
        # The processor sees the last tokens on its next call.
        processor(ids, torch.zeros(batch, grammar.vocab_size + extra_columns))
        rows = []
        for row in range(batch):
            tokens = ids[row, prompt.shape[1]:].tolist()
            if eos in tokens:
                tokens = tokens[: tokens.index(eos)]
                self.assertTrue(processor.matchers[row].is_finished())
            rows.append((tokens, finished[row]))
        return rows

    def test_json_documents(self):
        grammar = compiled(os.path.join(EXAMPLES, "json.cgram"))
        rows = self.generate(grammar, batch=4, seed=11)
        done = 0
        for tokens, finished in rows:
            if finished:
                json.loads(grammar.vocab.decode(tokens))
                done += 1
        self.assertGreater(done, 0)

    def test_schema_documents_validate(self):
        path = os.path.join(TEST_DATA, "schemas", "tool_call.json")
        with open(path) as f:
            schema = json.load(f)
        grammar = cgram.compile(cgram.Grammar.from_json_schema(schema, whitespace="compact"))
        rows = self.generate(grammar, batch=3, seed=12, steps=400, extra_columns=64)
        done = 0
        for tokens, finished in rows:
            if finished:
                jsonschema.validate(json.loads(grammar.vocab.decode(tokens)), schema)
                done += 1
        self.assertGreater(done, 0)

    def test_rows_must_stay(self):
        grammar = compiled(os.path.join(EXAMPLES, "json.cgram"))
        processor = cl.GrammarLogitsProcessor(grammar)
        width = grammar.vocab_size
        ids = torch.tensor([[1, 2], [3, 4]])
        processor(ids, torch.zeros(2, width))
        brace, bracket = (grammar.vocab.encode(text, continuation=True)[0] for text in ("{", "["))
        ids = torch.cat([ids, torch.tensor([[brace], [bracket]])], 1)
        processor(ids, torch.zeros(2, width))
        quote = grammar.vocab.encode('"', continuation=True)[0]
        refused = [
            torch.cat([ids.flip(0), torch.tensor([[quote], [quote]])], 1),  # beam search reordered the rows
            torch.cat([ids, torch.tensor([[quote, quote], [quote, quote]])], 1),  # two tokens at once
            torch.tensor([[1, 2, brace, quote]]),  # another batch
        ]
        for bad in refused:
            with self.assertRaises(RuntimeError):
                processor(bad, torch.zeros(bad.shape[0], width))
        self.assertEqual([m.tokens_accepted for m in processor.matchers], [1, 1])
        processor.reset()
        processor(torch.tensor([[9]]), torch.zeros(1, width))
        self.assertEqual(len(processor.matchers), 1)

    def test_rejected_token_changes_no_row(self):
        grammar = compiled(os.path.join(EXAMPLES, "json.cgram"))
        processor = cl.GrammarLogitsProcessor(grammar)
        processor(torch.tensor([[1], [1]]), torch.zeros(2, grammar.vocab_size))
        good = grammar.vocab.encode("{", continuation=True)[0]
        bad = grammar.vocab.encode("]", continuation=True)[0]
        with self.assertRaises(RuntimeError) as caught:
            processor(torch.tensor([[1, good], [1, bad]]), torch.zeros(2, grammar.vocab_size))
        self.assertIn(f"row 1: token {bad}", str(caught.exception))
        self.assertEqual([m.tokens_accepted for m in processor.matchers], [0, 0])

    def test_refusals(self):
        with self.assertRaises(TypeError):
            cl.GrammarLogitsProcessor("start ::= 'a' ;")
        grammar = compiled(os.path.join(EXAMPLES, "json.cgram"))
        with self.assertRaises(ValueError):
            cl.GrammarLogitsProcessor(grammar)(torch.tensor([1, 2]), torch.zeros(2, grammar.vocab_size))


if __name__ == "__main__":
    unittest.main()

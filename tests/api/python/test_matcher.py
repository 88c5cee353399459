"""cgram.Matcher and cgram.fill_masks: masks equal the C++ masks (the cgram
command's), every call's contract, and the batch fill without the GIL."""

import copy
import os
import random
import sys
import threading
import unittest

import numpy as np
import torch

import cgram
from support import EXAMPLES, TEST_DATA, cli_allowed, compiled, mask_bits, random_walk

GRAMMARS = [
    os.path.join(EXAMPLES, "json.cgram"),
    os.path.join(EXAMPLES, "record.cgram"),
    os.path.join(TEST_DATA, "gbnf", "json.gbnf"),
    os.path.join(TEST_DATA, "schemas", "tool_call.json"),
]


def walk(grammar, seed, steps=60):
    return random_walk(cgram.Matcher(grammar), random.Random(seed), steps)


class MasksEqualTheCommandLine(unittest.TestCase):
    """Along seeded random walks, the mask from Python is the one `cgram mask`
    (the C++ matcher, in another process) gives after the same tokens; and
    within Python, mask bits, allowed_tokens() and is_allowed() agree."""

    def check(self, path, vocab=None, vocab_path=None, seeds=2, checkpoints=4):
        grammar = compiled(path, vocab)
        eos = set(grammar.vocab.eos_ids)
        compared = 0
        for seed in range(seeds):
            tokens = [t for t in walk(grammar, seed) if t not in eos]
            matcher = cgram.Matcher(grammar)
            chosen = set(random.Random(seed).sample(range(len(tokens) + 1), min(checkpoints, len(tokens) + 1)))
            for step in range(len(tokens) + 1):
                allowed = mask_bits(matcher.mask(), grammar.vocab_size)
                self.assertEqual(allowed, matcher.allowed_tokens())
                for token in random.Random(step).sample(range(grammar.vocab_size), 50) + allowed[:20]:
                    self.assertEqual(matcher.is_allowed(token), token in set(allowed), token)
                if step in chosen:
                    self.assertEqual(allowed, cli_allowed(path, tokens[:step], vocab_path), f"{path} after {tokens[:step]}")
                    compared += 1
                if step < len(tokens):
                    self.assertEqual(matcher.advance(tokens[step]), cgram.AdvanceResult.ONGOING)
        self.assertGreater(compared, 0)

    def test_bundled_vocabulary(self):
        for path in GRAMMARS:
            with self.subTest(grammar=os.path.basename(path)):
                self.check(path)



class Calls(unittest.TestCase):
    def setUp(self):
        self.grammar = compiled(os.path.join(EXAMPLES, "json.cgram"))
        self.vocab = self.grammar.vocab
        self.eos = self.vocab.eos_ids[0]

    def encode(self, text):
        return self.vocab.encode(text, continuation=True)

    def test_advance_to_the_end(self):
        matcher = cgram.Matcher(self.grammar)
        for token in self.encode('{"a": [1, 2]}'):
            self.assertEqual(matcher.advance(token), cgram.AdvanceResult.ONGOING)
        self.assertTrue(matcher.can_end())
        self.assertFalse(matcher.is_finished())
        self.assertEqual(matcher.advance(self.eos), cgram.AdvanceResult.FINISHED)
        self.assertTrue(matcher.is_finished())
        # Nothing after end of sequence; the state stays.
        self.assertEqual(matcher.advance(self.encode("x")[0]), cgram.AdvanceResult.REJECTED)
        self.assertEqual(matcher.tokens_accepted, len(self.encode('{"a": [1, 2]}')) + 1)

    def test_rejected_tokens_leave_the_state(self):
        matcher = cgram.Matcher(self.grammar)
        before = matcher.mask().tolist()
        self.assertEqual(matcher.advance(self.encode("]")[0]), cgram.AdvanceResult.REJECTED)
        self.assertEqual(matcher.advance(10**6), cgram.AdvanceResult.REJECTED)  # outside the vocabulary
        self.assertEqual(matcher.advance(1), cgram.AdvanceResult.REJECTED)  # a special token
        self.assertEqual(matcher.mask().tolist(), before)
        self.assertEqual(matcher.tokens_accepted, 0)
        self.assertFalse(matcher.can_end())
        with self.assertRaises(TypeError):
            matcher.advance(-1)

    def test_rollback_restores_masks(self):
        tokens = walk(self.grammar, 7)
        matcher = cgram.Matcher(self.grammar)
        masks = []
        for token in tokens:
            masks.append(matcher.mask().tolist())
            matcher.advance(token)
        for back in [1, 3, len(tokens)]:
            replay = cgram.Matcher(self.grammar)
            for token in tokens:
                replay.advance(token)
            replay.rollback(back)
            self.assertEqual(replay.tokens_accepted, len(tokens) - back)
            self.assertEqual(replay.mask().tolist(), masks[len(tokens) - back])
        with self.assertRaises(ValueError):
            cgram.Matcher(self.grammar).rollback(1)
        matcher.rollback(0)
        self.assertEqual(matcher.tokens_accepted, len(tokens))

    def test_clone_is_independent(self):
        matcher = cgram.Matcher(self.grammar)
        for token in self.encode('{"k": '):
            matcher.advance(token)
        for twin in (matcher.clone(), copy.copy(matcher), copy.deepcopy(matcher)):
            self.assertEqual(twin.mask().tolist(), matcher.mask().tolist())
            self.assertEqual(twin.tokens_accepted, matcher.tokens_accepted)
            for token in self.encode("true}"):
                self.assertEqual(twin.advance(token), cgram.AdvanceResult.ONGOING)
            self.assertTrue(twin.can_end())
            self.assertFalse(matcher.can_end())

    def test_reset(self):
        matcher = cgram.Matcher(self.grammar)
        start = matcher.mask().tolist()
        for token in self.encode("[1, "):
            matcher.advance(token)
        matcher.reset()
        self.assertEqual(matcher.tokens_accepted, 0)
        self.assertEqual(matcher.mask().tolist(), start)

    def test_forced_text(self):
        letters = cgram.Vocabulary.from_tokens([b"a", b"b", b"c", b"ab", b"<eos>"], eos_ids=[4])
        g = cgram.compile("start ::= 'a' 'c' 'b' ;", letters)
        matcher = cgram.Matcher(g)
        # Bytes, whatever the tokenization; end of sequence is never part of them.
        self.assertEqual(matcher.forced_text(), b"acb")
        self.assertEqual(matcher.forced_text(limit=2), b"ac")
        self.assertEqual(matcher.tokens_accepted, 0)  # a look ahead
        for token in [0, 2, 1]:
            matcher.advance(token)
        self.assertEqual(matcher.allowed_tokens(), [4])
        self.assertEqual(matcher.forced_text(), b"")
        # A plain token list has no encoder to re-encode the forced text with.
        with self.assertRaises(cgram.VocabularyError):
            cgram.Matcher(g).jump_forward()

    def test_jump_forward(self):
        g = cgram.compile("start ::= '{\"name\": \"' #'[a-z]+' '\", \"kind\": \"record\"}' ;", self.vocab)
        matcher = cgram.Matcher(g)
        rollback, tokens = matcher.jump_forward()
        self.assertEqual(rollback, 0)
        text = b"".join(self.vocab.token_bytes(t) for t in tokens)
        self.assertTrue(b'{"name": "'.startswith(text) and text)
        for token in tokens:
            self.assertEqual(matcher.advance(token), cgram.AdvanceResult.ONGOING)
        self.assertEqual(matcher.jump_forward(), (0, []))

    def test_fill_mask_targets(self):
        matcher = cgram.Matcher(self.grammar)
        expected = matcher.mask()
        words = self.grammar.mask_words
        self.assertEqual(expected.dtype, np.int32)
        self.assertEqual(expected.shape, (words,))
        # A wider row (a model's padding ids): the words past the mask are cleared.
        wide = np.full(words + 3, -1, dtype=np.int32)
        matcher.fill_mask(wide)
        self.assertEqual(wide[:words].tolist(), expected.tolist())
        self.assertEqual(wide[words:].tolist(), [0, 0, 0])
        unsigned = np.zeros(words, dtype=np.uint32)
        matcher.fill_mask(unsigned)
        self.assertEqual(unsigned.view(np.int32).tolist(), expected.tolist())
        # A row of a 2-D bitmask, and torch tensors (their memory is shared).
        batch = np.full((3, words), -1, dtype=np.int32)
        matcher.fill_mask(batch, row=1)
        self.assertEqual(batch[1].tolist(), expected.tolist())
        self.assertEqual(batch[0].tolist(), [-1] * words)
        tensor = torch.zeros(2, words, dtype=torch.int32)
        matcher.fill_mask(tensor, row=0)
        matcher.fill_mask(tensor[1])
        self.assertEqual(tensor[0].tolist(), expected.tolist())
        self.assertEqual(tensor[1].tolist(), expected.tolist())

    def test_fill_mask_refusals(self):
        matcher = cgram.Matcher(self.grammar)
        words = self.grammar.mask_words
        with self.assertRaises(TypeError):
            matcher.fill_mask(np.zeros(words, dtype=np.int64))
        with self.assertRaises(TypeError):
            matcher.fill_mask([0] * words)
        with self.assertRaises(ValueError):
            matcher.fill_mask(np.zeros(words - 1, dtype=np.int32))
        readonly = np.zeros(words, dtype=np.int32)
        readonly.flags.writeable = False
        with self.assertRaises(ValueError):
            matcher.fill_mask(readonly)
        with self.assertRaises(ValueError):
            matcher.fill_mask(np.zeros(2 * words, dtype=np.int32)[::2])  # not contiguous
        with self.assertRaises(ValueError):
            matcher.fill_mask(np.zeros((2, words), dtype=np.int32))  # 2-D needs a row
        with self.assertRaises(IndexError):
            matcher.fill_mask(np.zeros((2, words), dtype=np.int32), row=2)
        unaligned = np.zeros(4 * words + 1, dtype=np.uint8)[1:].view(np.int32)
        with self.assertRaises(ValueError):
            matcher.fill_mask(unaligned)

    def test_error_is_none(self):
        self.assertIsNone(cgram.Matcher(self.grammar).error)

    def test_ambiguous_grammar_ends_within_its_work_budget(self):
        grammar = cgram.compile("start ::= s ; s ::= s s | 'a' | '' ;")
        a = grammar.vocab.find(b"a")
        matcher = cgram.Matcher(grammar)
        for _ in range(5000):
            if matcher.advance(a) != cgram.AdvanceResult.ONGOING:
                break
        self.assertIn("max_work_per_byte", matcher.error)
        with self.assertRaises(ValueError):
            cgram.Matcher(grammar, max_work_per_byte=-1)
        unbounded = cgram.Matcher(grammar, max_work_per_byte=0)
        for _ in range(20):
            self.assertEqual(unbounded.advance(a), cgram.AdvanceResult.ONGOING)


class Batch(unittest.TestCase):
    def setUp(self):
        self.grammars = [compiled(path) for path in GRAMMARS]

    def matchers(self, count):
        """Matchers of several grammars, each some random tokens in."""
        out = []
        for i in range(count):
            grammar = self.grammars[i % len(self.grammars)]
            matcher = cgram.Matcher(grammar)
            tokens = [t for t in walk(grammar, 100 + i, steps=5 + i % 7) if t not in grammar.vocab.eos_ids]
            for token in tokens:
                matcher.advance(token)
            out.append(matcher)
        return out

    def test_batch_equals_one_by_one(self):
        matchers = self.matchers(24)
        words = self.grammars[0].mask_words
        out = np.full((24, words + 2), -1, dtype=np.int32)
        cgram.fill_masks(matchers, out)
        for i, matcher in enumerate(matchers):
            self.assertEqual(out[i, :words].tolist(), matcher.mask().tolist())
            self.assertEqual(out[i, words:].tolist(), [0, 0])

    def test_rows_and_pool(self):
        matchers = self.matchers(5)
        rows = [7, 0, 3, 9, 4]
        out = np.full((10, self.grammars[0].mask_words), -1, dtype=np.int32)
        cgram.fill_masks(matchers, out, rows=rows, pool=cgram.ThreadPool(3))
        for matcher, row in zip(matchers, rows):
            self.assertEqual(out[row].tolist(), matcher.mask().tolist())
        for untouched in {1, 2, 5, 6, 8}:
            self.assertTrue((out[untouched] == -1).all())
        tensor = torch.zeros(5, self.grammars[0].mask_words, dtype=torch.int32)
        cgram.fill_masks(matchers, tensor)
        self.assertEqual(tensor[2].tolist(), matchers[2].mask().tolist())
        cgram.fill_masks([], out)  # nothing to do

    def test_refusals(self):
        matchers = self.matchers(3)
        words = self.grammars[0].mask_words
        out = np.zeros((3, words), dtype=np.int32)
        with self.assertRaises(ValueError):
            cgram.fill_masks([matchers[0], matchers[0]], out)
        with self.assertRaises(ValueError):
            cgram.fill_masks(matchers[:2], out, rows=[1, 1])
        with self.assertRaises(ValueError):
            cgram.fill_masks(matchers, out, rows=[0, 1])
        with self.assertRaises(IndexError):
            cgram.fill_masks(matchers[:1], out, rows=[3])
        with self.assertRaises(ValueError):
            cgram.fill_masks(matchers, np.zeros((2, words), dtype=np.int32))
        with self.assertRaises(ValueError):
            cgram.fill_masks(matchers, np.zeros((3, words - 1), dtype=np.int32))
        with self.assertRaises(TypeError):
            cgram.fill_masks([matchers[0], "matcher"], out)
        # A refused batch leaves its matchers usable.
        self.assertEqual(len(matchers[0].mask()), words)

    def test_gil_is_released(self):
        """With a switch interval far longer than the test, a thread that
        holds the GIL keeps it until it blocks: the main thread can run
        Python code while the batch is being filled only if fill_masks
        released the GIL. The main thread checks, from there, that the fill
        is still going and that its matchers are refused meanwhile."""
        rows = 2000
        batch = [cgram.Matcher(self.grammars[i % len(self.grammars)]) for i in range(rows)]
        out = np.zeros((rows, self.grammars[0].mask_words), dtype=np.int32)
        state = {"done": False}

        def fill():
            cgram.fill_masks(batch, out, pool=cgram.ThreadPool(1))
            state["done"] = True

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1000)
        try:
            thread = threading.Thread(target=fill)
            thread.start()
            during = not state["done"]
            refused = None
            if during:
                try:
                    batch[0].advance(0)
                except RuntimeError as error:
                    refused = str(error)
            thread.join()
        finally:
            sys.setswitchinterval(interval)
        self.assertTrue(state["done"])
        self.assertTrue(during, "the main thread did not run while fill_masks ran: the GIL was held")
        self.assertIsNotNone(refused, "a matcher being filled was not refused")
        self.assertIn("fill_masks", refused)
        self.assertEqual(out[rows - 1].tolist(), batch[rows - 1].mask().tolist())


if __name__ == "__main__":
    unittest.main()

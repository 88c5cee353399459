"""cgram.serving: the backend's kinds and cache, the per-request calls, and a
driver that follows a server's call sequence (tests/api/python/server_driver.py):
batch bitmask rows, torch logits, sampling, accepting; speculative drafts
with 1 + k rows, validation and rollback. Model logits are wider than the
tokenizer's ids (padding), and the reference matcher checks every token."""

import json
import os
import re
import unittest

import jsonschema
import numpy as np
import torch

import cgram
from cgram.serving import Backend, GrammarMatcher, grammar_text
from server_driver import Request, run
from support import EXAMPLES, bundled

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def json_valid(schema):
    def valid(text):
        try:
            jsonschema.validate(json.loads(text.decode("utf-8")), schema)
            return True
        except (ValueError, jsonschema.ValidationError):
            return False
    return valid


def read(name):
    with open(os.path.join(EXAMPLES, name), encoding="utf-8") as f:
        return f.read()


def requests():
    return [
        Request("json", SCHEMA, json_valid(SCHEMA)),
        Request("json_object", None, json_valid({"type": "object"})),
        Request("regex", r"[0-9]{3}-[0-9]{4}( ext\.? [0-9]{1,4})?",
                lambda t: re.fullmatch(rb"[0-9]{3}-[0-9]{4}( ext\.? [0-9]{1,4})?", t) is not None),
        Request("choice", ["positive", "negative", "it's neutral"],
                lambda t: t in (b"positive", b"negative", b"it's neutral")),
        Request("gbnf", 'root ::= "yes" | "no" | "maybe " [a-z]{1,8}',
                lambda t: re.fullmatch(rb"yes|no|maybe [a-z]{1,8}", t) is not None),
        Request("grammar", read("tool_calls.cgram")),
        Request("grammar", read("reasoning_json.cgram")),
    ]


class BackendTest(unittest.TestCase):
    def test_kinds_compile_and_are_cached(self):
        backend = Backend(bundled(), cache_size=3)
        first = backend.compile("json", SCHEMA)
        self.assertIs(backend.compile("json", json.loads(json.dumps(SCHEMA))), first)
        self.assertEqual(backend.cache_info()["hits"], 1)
        for r in requests():
            self.assertIsInstance(backend.compile(r.kind, r.spec), cgram.CompiledGrammar)
        info = backend.cache_info()
        self.assertEqual(info["size"], 3)  # least recently used out
        self.assertEqual(info["misses"], len(requests()))  # the schema again was a hit
        with self.assertRaises(ValueError):
            backend.compile("xml", "<a/>")
        with self.assertRaises(cgram.GrammarError):
            backend.compile("regex", "a(b")
        with self.assertRaises(ValueError):
            backend.compile("choice", [])
        with self.assertRaises(TypeError):
            backend.compile("regex", 3)
        with self.assertRaises(ValueError):
            Backend(bundled(), vocab_size=bundled().size - 1)

    def test_compile_tools_is_cached_per_list_and_format(self):
        backend = Backend(bundled())
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
        hermes = backend.compile_tools(tools)
        self.assertIs(backend.compile_tools(json.loads(json.dumps(tools))), hermes)
        self.assertIsNot(backend.compile_tools(tools, format="mistral"), hermes)
        matcher = GrammarMatcher(hermes)
        reply = 'Sure. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
        self.assertTrue(matcher.accept_tokens(hermes.vocab.encode(reply, continuation=True)))
        self.assertTrue(matcher.can_end())

    def test_compile_tools_cut_masks_are_the_whole_grammars(self):
        vocab = bundled()
        backend = Backend(vocab, vocab_size=vocab.size + 7)
        tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}},
                 {"name": "stop", "parameters": {"type": "object", "properties": {}}}]
        whole = backend.compile_tools(tools)
        cut = backend.compile_tools(tools, cut=True)
        self.assertIsInstance(cut, cgram.ToolCallsGrammar)
        self.assertIs(backend.compile_tools(tools, cut=True), cut)
        self.assertEqual(cut.compiled_tools, 0)
        reply = 'Sure. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call> and ' \
                '<tool_call>{"name": "stop", "arguments": {}}</tool_call>'
        a, b = backend.matcher_for(whole), backend.matcher_for(cut)
        bitmask = backend.allocate_token_bitmask(2)
        for token in vocab.encode(reply, continuation=True):
            backend.fill_bitmask([a, b], bitmask)
            self.assertTrue((bitmask[0] == bitmask[1]).all())
            self.assertTrue(a.accept_tokens([token]))
            self.assertTrue(b.accept_tokens([token]))
        self.assertEqual(b.matcher.current_tool, "stop")
        self.assertEqual(cut.compiled_tools, 2)
        self.assertTrue(b.can_end())
        b.rollback(3)
        self.assertFalse(b.can_end())
        with self.assertRaises(cgram.GrammarError):
            backend.compile_tools([{"name": 'a"b'}], cut=True)

    def test_compile_tools_cut_refuses_what_it_does_not_offer(self):
        vocab = bundled()
        tools = [{"name": "stop", "parameters": {"type": "object", "properties": {}}}]
        for options, named in (({"canonical": True}, "canonical=True"), ({"tier": "jit"}, "tier='jit'"),
                               ({"max_rollback_tokens": 8}, "max_rollback_tokens=8")):
            backend = Backend(vocab, **options)
            with self.assertRaises(ValueError) as refused:
                backend.compile_tools(tools, cut=True)
            self.assertIn(named, str(refused.exception))
            self.assertIn("cut=False", str(refused.exception))
        cut = Backend(vocab).compile_tools(tools, cut=True)
        with self.assertRaises(ValueError) as refused:
            GrammarMatcher(cut, max_rollback_tokens=4)
        self.assertIn("max_rollback_tokens=4", str(refused.exception))

    def test_regex_and_choice_texts_keep_quotes(self):
        fmt, source = grammar_text("regex", r"it's|\'x'")
        vocab = bundled()
        m = GrammarMatcher(cgram.compile(cgram.Grammar(source, format=fmt), vocab))
        self.assertTrue(m.accept_tokens(vocab.encode("it's", continuation=True)))
        self.assertTrue(m.can_end())
        fmt, source = grammar_text("choice", ["a'b", "c\\d", "e\nf"])
        compiled = cgram.compile(cgram.Grammar(source, format=fmt), vocab)
        for text in ["a'b", "c\\d", "e\nf"]:
            m = GrammarMatcher(compiled)
            self.assertTrue(m.accept_tokens(vocab.encode(text, continuation=True)), text)
            self.assertTrue(m.can_end(), text)

    def test_json_whitespace_is_bounded(self):
        vocab = bundled()
        for bound, ok in [(20, False), (None, True)]:
            m = Backend(vocab, max_whitespace=bound).matcher("json_object", None)
            self.assertEqual(m.accept_tokens(vocab.encode("{" + " " * 30 + "}")), ok)


class MatcherTest(unittest.TestCase):
    def test_accept_validate_rollback_terminate(self):
        vocab = bundled()
        backend = Backend(vocab, vocab_size=vocab.size + 100, max_rollback_tokens=4)
        m = backend.matcher("choice", ["positive", "negative"])
        tokens = vocab.encode("negative", continuation=True) + [vocab.eos_ids[0]]
        self.assertEqual(m.validate_tokens(tokens + tokens), tokens)
        self.assertEqual(m.num_processed_tokens, 0)
        self.assertFalse(m.accept_tokens(tokens[:1] + [vocab.encode("x")[0]]))  # all or nothing
        self.assertEqual(m.num_processed_tokens, 0)
        self.assertTrue(m.accept_tokens(tokens))
        self.assertTrue(m.is_terminated())
        self.assertEqual(m.validate_tokens(tokens), [])
        self.assertFalse(m.accept_tokens(tokens[:1]))
        bitmask = backend.allocate_token_bitmask(2)
        self.assertEqual(tuple(bitmask.shape), (2, cgram.mask_words(vocab.size + 100)))
        m.fill_bitmask(bitmask, 1)
        self.assertFalse(bitmask[1].any())  # a terminated request allows nothing
        m.rollback(1)
        self.assertFalse(m.is_terminated())
        self.assertTrue(m.can_end())
        with self.assertRaises(ValueError):
            m.rollback(4)  # 3 left within max_rollback_tokens = 4
        m.reset()
        self.assertEqual(m.num_processed_tokens, 0)
        m.fill_bitmask(bitmask, 0)
        allowed = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little").nonzero()[0]
        self.assertTrue(len(allowed) > 0 and allowed.max() < vocab.size)

    def test_jump_forward_string(self):
        vocab = bundled()
        schema = {"type": "object", "properties": {"answer": {"const": "yes"}}, "required": ["answer"]}
        m = Backend(vocab, whitespace="compact").matcher("json", schema)
        self.assertEqual(m.jump_forward_string(), '{"answer":"yes"')  # more properties may follow
        rollback, tokens = m.jump_forward()
        self.assertEqual(rollback, 0)
        self.assertTrue(m.accept_tokens(tokens))
        m2 = Backend(vocab).matcher("choice", ["caf\u00e9 au lait"])
        self.assertEqual(m2.jump_forward_string(), "caf\u00e9 au lait")


class DriverTest(unittest.TestCase):
    """The server's call sequence, with padding logits past the tokenizer's ids."""

    def backend(self, **options):
        vocab = bundled()
        return Backend(vocab, vocab_size=vocab.size + 64, **options)

    def test_batch_steps(self):
        stats = run(self.backend(), requests(), steps=48, seed=1)
        self.assertEqual(stats.model_calls, stats.tokens)
        self.assertGreaterEqual(stats.finished, 4)  # choice, regex, gbnf at least
        self.assertEqual(stats.valid_texts, stats.finished)

    def test_speculative_steps(self):
        for k, seed in [(1, 2), (4, 3), (4, 4)]:
            stats = run(self.backend(max_rollback_tokens=8), requests(), steps=40, draft_tokens=k, seed=seed)
            with self.subTest(k=k, seed=seed):
                self.assertGreater(stats.drafted, 0)
                self.assertGreater(stats.draft_accepted, 0)
                self.assertGreater(stats.draft_refused_by_grammar, 0)  # the draft model's wild tokens
                self.assertGreater(stats.tokens_per_call(), 1.0)
                self.assertEqual(stats.valid_texts, stats.finished)


if __name__ == "__main__":
    unittest.main()

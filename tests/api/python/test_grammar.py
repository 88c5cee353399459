"""cgram.Grammar (.cgram, GBNF, JSON Schema), diagnostics as exceptions, and
compiling: tiers, AOT shared objects, errors."""

import json
import os
import random
import tempfile
import unittest

import cgram
from support import EXAMPLES, TEST_DATA, bundled, compiled, random_walk


def accepts(grammar, text):
    """Whether `text` (tokenized by the vocabulary's encoder) is a complete sentence."""
    vocab = grammar.vocab
    matcher = cgram.Matcher(grammar)
    for token in vocab.encode(text, continuation=True):
        if matcher.advance(token) == cgram.AdvanceResult.REJECTED:
            return False
    return matcher.can_end()


class Parsing(unittest.TestCase):
    def test_cgram_text(self):
        grammar = cgram.Grammar("start ::= 'yes' | 'no' ;")
        self.assertEqual(grammar.format, "cgram")
        self.assertEqual(grammar.filename, "grammar.cgram")
        self.assertIn("'yes'", grammar.source)
        self.assertEqual(grammar.warnings, [])
        compiled_grammar = cgram.compile(grammar)
        self.assertTrue(accepts(compiled_grammar, "yes"))
        self.assertFalse(accepts(compiled_grammar, "maybe"))

    def test_start_rule(self):
        grammar = cgram.Grammar("a ::= 'x' ; b ::= 'y' ;", start="b")
        self.assertTrue(accepts(cgram.compile(grammar), "y"))
        self.assertFalse(accepts(cgram.compile(grammar), "x"))

    def test_formats_by_extension(self):
        for path, fmt in [
            (os.path.join(EXAMPLES, "json.cgram"), "cgram"),
            (os.path.join(TEST_DATA, "gbnf", "json.gbnf"), "gbnf"),
            (os.path.join(TEST_DATA, "schemas", "tool_call.json"), "json-schema"),
        ]:
            grammar = cgram.Grammar.from_file(path)
            self.assertEqual(grammar.format, fmt)
            self.assertEqual(grammar.filename, path)

    def test_gbnf(self):
        gbnf = cgram.Grammar.from_file(os.path.join(TEST_DATA, "gbnf", "json.gbnf"))
        self.assertIn("::=", gbnf.source)  # the .cgram translation
        g = cgram.compile(gbnf)
        self.assertTrue(accepts(g, '{"a": [1, true, null]}'))
        self.assertFalse(accepts(g, '{"a": }'))
        inline = cgram.Grammar.from_gbnf('root ::= "a"+ [0-9]')
        self.assertTrue(accepts(cgram.compile(inline), "aaa7"))

    def test_lark(self):
        lark = cgram.Grammar.from_lark('%import common.INT\n%ignore " "\nstart: "id=" INT ("," "id=" INT)*\n')
        self.assertEqual(lark.format, "lark")
        g = cgram.compile(lark)
        self.assertTrue(accepts(g, "id=1 , id=22 "))
        self.assertFalse(accepts(g, " id=1"))
        self.assertTrue(accepts(cgram.compile(cgram.Grammar('start: /[a-c]+/i\n', format="lark")), "aBc"))
        with self.assertRaises(cgram.GrammarError) as caught:
            cgram.Grammar.from_lark('start: "a" <|tool|>\n')
        self.assertEqual((caught.exception.diagnostics[0].line, caught.exception.diagnostics[0].column), (1, 12))

    def test_tools(self):
        tools = [{"type": "function", "function": {"name": "add", "parameters": {
            "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
            "additionalProperties": False}}}]
        g = cgram.compile(cgram.Grammar.from_tools(tools))
        self.assertTrue(accepts(g, 'ok <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'))
        self.assertFalse(accepts(g, '<tool_call>{"name": "add", "arguments": {"a": "x"}}</tool_call>'))
        llama = cgram.compile(cgram.Grammar(json.dumps(tools), format="tools", tool_format="llama3"))
        self.assertTrue(accepts(llama, '{"name": "add", "parameters": {"a": 2}}'))
        with self.assertRaises(ValueError):
            cgram.Grammar.from_tools(tools, format="gemma")
        with self.assertRaises(cgram.GrammarError):
            cgram.Grammar.from_tools([{"name": "a"}, {"name": "a"}])

    def test_json_schema_from_dict_and_layouts(self):
        schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}, "required": ["n"],
                  "additionalProperties": False}
        flexible = cgram.compile(cgram.Grammar.from_json_schema(schema))
        compact = cgram.compile(cgram.Grammar.from_json_schema(schema, whitespace="compact"))
        pretty = cgram.compile(cgram.Grammar.from_json_schema(schema, whitespace="pretty"))
        self.assertTrue(accepts(flexible, '{ "n" : 12 }'))
        self.assertFalse(accepts(flexible, '{"n": 2}'))
        self.assertTrue(accepts(compact, '{"n":12}'))
        self.assertFalse(accepts(compact, '{"n": 12}'))
        self.assertTrue(accepts(pretty, '{\n  "n": 12\n}'))
        self.assertFalse(accepts(pretty, '{"n":12}'))
        # The same schema as JSON text.
        text = cgram.Grammar.from_json_schema('{"type": "boolean"}', whitespace="compact")
        self.assertTrue(accepts(cgram.compile(text), "false"))

    def test_property_order_any(self):
        schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                  "required": ["a", "b"], "additionalProperties": False}
        in_order = cgram.compile(cgram.Grammar.from_json_schema(schema, whitespace="compact"))
        any_order = cgram.compile(cgram.Grammar.from_json_schema(schema, whitespace="compact", property_order="any"))
        self.assertTrue(accepts(in_order, '{"a":1,"b":"x"}'))
        self.assertFalse(accepts(in_order, '{"b":"x","a":1}'))
        self.assertTrue(accepts(any_order, '{"b":"x","a":1}'))
        self.assertFalse(accepts(any_order, '{"b":"x","a":1,"a":2}'))
        self.assertFalse(accepts(any_order, '{"b":"x"}'))
        with self.assertRaises(ValueError):
            cgram.Grammar.from_json_schema(schema, property_order="sorted")

    def test_schema_warning_and_strict(self):
        schema = {"type": "array", "uniqueItems": True}
        grammar = cgram.Grammar.from_json_schema(schema)
        self.assertEqual(len(grammar.warnings), 1)
        warning = grammar.warnings[0]
        self.assertEqual(warning.severity, "warning")
        self.assertIn("uniqueItems", warning.message)
        self.assertGreater(warning.line, 0)
        with self.assertRaises(cgram.GrammarError) as caught:
            cgram.Grammar.from_json_schema(schema, strict=True)
        self.assertIn("uniqueItems", str(caught.exception))


class Diagnostics(unittest.TestCase):
    def test_errors_carry_diagnostics(self):
        source = "start ::= item ;\nitem ::= 'a' | missing ;\nother ::= ;\n"
        with self.assertRaises(cgram.GrammarError) as caught:
            cgram.Grammar(source, filename="bad.cgram")
        error = caught.exception
        self.assertIsInstance(error, ValueError)
        self.assertIsInstance(error, cgram.Error)
        errors = [d for d in error.diagnostics if d.severity == "error"]
        self.assertTrue(errors)
        undefined = [d for d in errors if "missing" in d.message]
        self.assertEqual(len(undefined), 1)
        d = undefined[0]
        self.assertEqual((d.filename, d.line, d.column), ("bad.cgram", 2, 16))
        self.assertEqual((d.end_line, d.end_column), (2, 23))
        self.assertIn("bad.cgram:2:16: error: undefined rule 'missing'", str(error))
        self.assertIn("^~~~~~~", str(d))  # the caret under the name

    def test_gbnf_error_at_gbnf_position(self):
        with self.assertRaises(cgram.GrammarError) as caught:
            cgram.Grammar.from_gbnf('root ::= item\nitem ::= "a" undefined-rule\n')
        d = caught.exception.diagnostics[0]
        self.assertEqual((d.filename, d.line, d.column), ("grammar.gbnf", 2, 14))
        self.assertIn("undefined-rule", d.message)

    def test_invalid_schema_json(self):
        with self.assertRaises(cgram.GrammarError) as caught:
            cgram.Grammar.from_json_schema('{"type": "object",\n "properties": }')
        d = caught.exception.diagnostics[0]
        self.assertEqual(d.line, 2)
        self.assertEqual(d.severity, "error")

    def test_unreadable_file(self):
        with self.assertRaises(OSError):
            cgram.Grammar.from_file("/nonexistent/grammar.cgram")

    def test_bad_options(self):
        with self.assertRaises(ValueError):
            cgram.Grammar("start ::= 'a' ;", format="yaml")
        with self.assertRaises(ValueError):
            cgram.Grammar.from_json_schema({"type": "null"}, whitespace="tabs")
        with self.assertRaises(ValueError):
            cgram.compile("start ::= 'a' ;", tier="gpu")


class Compiling(unittest.TestCase):
    def walk_masks(self, grammar, seed, steps=40):
        """(tokens, masks) along a seeded random walk."""
        matcher = cgram.Matcher(grammar)
        tokens = random_walk(matcher, random.Random(seed), steps)
        matcher.reset()
        masks = []
        for token in tokens:
            masks.append(matcher.mask().tolist())
            matcher.advance(token)
        return tokens, masks

    def replay_masks(self, grammar, tokens):
        matcher = cgram.Matcher(grammar)
        masks = []
        for token in tokens:
            masks.append(matcher.mask().tolist())
            self.assertNotEqual(matcher.advance(token), cgram.AdvanceResult.REJECTED)
        return masks

    def test_default_vocabulary_is_bundled(self):
        g = cgram.compile("start ::= 'a' ;")
        self.assertEqual(g.vocab_size, 32064)
        self.assertEqual(g.mask_words, 1002)
        self.assertEqual(g.tier, "table")

    def test_jit_tier_gives_the_same_masks(self):
        path = os.path.join(EXAMPLES, "json.cgram")
        table = compiled(path)
        jit = compiled(path, tier="jit")
        self.assertEqual(jit.tier, "jit")
        for seed in range(3):
            tokens, masks = self.walk_masks(table, seed)
            self.assertEqual(self.replay_masks(jit, tokens), masks)

    def test_mask_memo_budget_changes_speed_never_a_mask(self):
        path = os.path.join(EXAMPLES, "c_subset.cgram")
        default = compiled(path)
        for budget in (0, 64 << 10):
            other = compiled(path, mask_memo_bytes=budget)
            for seed in range(2):
                tokens, masks = self.walk_masks(default, seed)
                self.assertEqual(self.replay_masks(other, tokens), masks)
        with self.assertRaises(TypeError):
            cgram.compile("start ::= 'a' ;", mask_memo_bytes=-1)

    def test_aot_save_and_load(self):
        path = os.path.join(EXAMPLES, "record.cgram")
        table = compiled(path)
        with tempfile.TemporaryDirectory() as work:
            so = os.path.join(work, "record.so")
            table.save(so)
            loaded = cgram.load(so, bundled())
            self.assertEqual(loaded.tier, "aot")
            for seed in range(3):
                tokens, masks = self.walk_masks(table, seed)
                self.assertEqual(self.replay_masks(loaded, tokens), masks)
            other = cgram.Vocabulary.from_tokens([b"a", b"b"], eos_ids=[1])
            with self.assertRaises(cgram.LoadError) as caught:
                cgram.load(so, other)
            self.assertIn("vocabulary", str(caught.exception))
            junk = os.path.join(work, "junk.so")
            with open(junk, "wb") as f:
                f.write(b"\x7fELF not really")
            with self.assertRaises(cgram.LoadError):
                cgram.load(junk, bundled())

    def test_empty_language(self):
        # Refused when parsed, before anything is compiled.
        with self.assertRaises(cgram.GrammarError):
            cgram.compile("start ::= start 'a' ;")


class TestCanonical(unittest.TestCase):
    def test_canonical_mode(self):
        vocab = bundled()
        g = cgram.compile("start ::= #'[a-z ]+' ;", vocab, canonical=True)
        own = vocab.encode("hello world", continuation=True)
        matcher = cgram.Matcher(g)
        for token in own:  # the tokenizer's own encoding is accepted
            self.assertEqual(matcher.advance(token), cgram.AdvanceResult.ONGOING)
        h, e = vocab.encode("h", continuation=True)[0], vocab.encode("e", continuation=True)[0]
        letters = cgram.Matcher(g)
        self.assertEqual(letters.advance(h), cgram.AdvanceResult.ONGOING)
        self.assertFalse(letters.is_allowed(e))  # "he" is one token
        plain = cgram.Matcher(cgram.compile("start ::= #'[a-z ]+' ;", vocab))
        plain.advance(h)
        self.assertTrue(plain.is_allowed(e))
        listed = cgram.Vocabulary.from_tokens([b"a", b"b", b"<eos>"], eos_ids=[2])
        with self.assertRaises(cgram.CompileError):
            cgram.compile("start ::= 'ab' ;", listed, canonical=True)


if __name__ == "__main__":
    unittest.main()


class RightNullableRules(unittest.TestCase):
    """A recursive rule with an optional tail (the dangling else), and empty
    rules after a recursive one: texts that once were refused are sentences,
    end of sequence is allowed after them, and the mask is never empty."""

    CASES = [
        ("start ::= 'a' start 'z'? | '' ;", "aaa"),
        ("stmt ::= 'i' stmt [ 'e' stmt ] | 'x' | '{' stmt* '}' ; start ::= stmt ;", "{iix}"),
        ("start ::= s ';' ; s ::= 'i' s n | 'a' ; n ::= '' ;", "iia;"),
        ("start ::= 'cd' start n | 'yzd' ; n ::= '' ;", "cdcdyzd"),
        ("start ::= stmt ; stmt ::= 'if c then ' stmt ( ' else ' stmt )? | 'x' ;", "if c then if c then x"),
    ]

    def test_byte_by_byte(self):
        vocab = bundled()
        for source, text in self.CASES:
            with self.subTest(source=source, text=text):
                matcher = cgram.Matcher(cgram.compile(cgram.Grammar(source), vocab))
                for i in range(len(text)):
                    token = vocab.find(text[i].encode())
                    self.assertEqual(matcher.advance(token), cgram.AdvanceResult.ONGOING, text[:i + 1])
                self.assertTrue(matcher.can_end())
                allowed = matcher.allowed_tokens()
                self.assertTrue(set(vocab.eos_ids) & set(allowed))

    def test_c_program(self):
        program = "int main() {\n  if (a) if (b) x = 1;\n  return 0;\n}\n"
        grammar = compiled(os.path.join(EXAMPLES, "c_subset.cgram"))
        self.assertTrue(accepts(grammar, program))

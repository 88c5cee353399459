"""cgram.Vocabulary: every loader, token bytes, the encoder, and errors as exceptions."""

import base64
import json
import os
import tempfile
import unittest

import cgram
from support import SOURCE_DIR, bundled


class Loaders(unittest.TestCase):
    def test_bundled(self):
        vocab = bundled()
        self.assertEqual(len(vocab), 32064)
        self.assertEqual(vocab.size, 32064)
        self.assertEqual(vocab.kind, "sentencepiece")
        self.assertEqual(vocab.eos_ids, [32000])
        self.assertTrue(vocab.is_eos(32000))
        self.assertTrue(vocab.is_special(32000))
        self.assertFalse(vocab.is_special(1000))
        self.assertIn("32064 ids", repr(vocab))

    def test_gguf_file(self):
        vocab = cgram.Vocabulary.load(os.path.join(SOURCE_DIR, "frontend", "vocab", "bundled", "ggml-vocab-phi-3.gguf"))
        self.assertEqual(len(vocab), len(bundled()))
        self.assertEqual(vocab.fingerprint, bundled().fingerprint)


    def test_tiktoken_from_memory(self):
        tokens = [b"a", b"b", b"ab", b" ", b"\xff"]
        content = b"".join(base64.b64encode(t) + b" " + str(rank).encode() + b"\n" for rank, t in enumerate(tokens))
        vocab = cgram.Vocabulary.from_memory(content, "tiny.tiktoken", eos_ids=[3])
        self.assertEqual(vocab.kind, "tiktoken")
        self.assertEqual([vocab.token_bytes(i) for i in range(len(tokens))], tokens)
        self.assertEqual(vocab.eos_ids, [3])

    def test_json_token_list_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(["a", {"hex": "e282ac"}, {"text": "<eos>", "eos": True}], f)
        try:
            vocab = cgram.Vocabulary.load(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(vocab.kind, "list")
        self.assertEqual(vocab.token_bytes(1), "€".encode())
        self.assertEqual(vocab.eos_ids, [2])

    def test_from_tokens_bytes_and_str(self):
        vocab = cgram.Vocabulary.from_tokens([b"x", "é", b"\x80", "<end>"], eos_ids=[3], special=[])
        self.assertEqual(vocab.token_bytes(1), "é".encode())
        self.assertEqual(vocab.token_bytes(2), b"\x80")
        self.assertEqual(vocab.find(b"x"), 0)
        self.assertIsNone(vocab.find(b"nothing"))
        self.assertEqual(vocab.display(2), "\\x80")
        self.assertEqual(vocab.decode([0, 1, 3]), "xé".encode())
        self.assertEqual(vocab.decode([0, 3], skip_special=False), b"x<end>")

    def test_eos_override(self):
        vocab = cgram.Vocabulary.bundled(eos_ids=[2, 32000])
        self.assertEqual(vocab.eos_ids, [2, 32000])


class Encoding(unittest.TestCase):
    def test_round_trip(self):
        vocab = bundled()
        for text in ['{"key": [1, 2.5, null]}', "héllo wörld", "日本語のテキスト", "a\nb\tc"]:
            ids = vocab.encode(text, continuation=True)
            self.assertEqual(vocab.decode(ids), text.encode())
        # Without continuation, SentencePiece adds its dummy-prefix space.
        self.assertEqual(vocab.decode(vocab.encode("abc")), b" abc")

    def test_bytes_input(self):
        vocab = bundled()
        self.assertEqual(vocab.encode(b"abc", continuation=True), vocab.encode("abc", continuation=True))


class Errors(unittest.TestCase):
    def test_missing_file(self):
        with self.assertRaises(cgram.VocabularyError) as caught:
            cgram.Vocabulary.load("/nonexistent/tokenizer.json")
        self.assertIn("/nonexistent/tokenizer.json", str(caught.exception))
        self.assertIsInstance(caught.exception, ValueError)
        self.assertIsInstance(caught.exception, cgram.Error)

    def test_directory(self):
        with self.assertRaises(cgram.VocabularyError) as caught:
            cgram.Vocabulary.load(SOURCE_DIR)
        self.assertIn("directory", str(caught.exception))

    def test_garbage(self):
        with self.assertRaises(cgram.VocabularyError) as caught:
            cgram.Vocabulary.from_memory(b"\x00\x01 not a vocabulary", "junk.bin")
        self.assertIn("junk.bin", str(caught.exception))

    def test_eos_outside(self):
        with self.assertRaises(cgram.VocabularyError):
            cgram.Vocabulary.from_tokens([b"a"], eos_ids=[5])

    def test_token_id_outside(self):
        with self.assertRaises(IndexError):
            bundled().token_bytes(10**6)
        with self.assertRaises(IndexError):
            bundled().decode([1, 10**6])

    def test_list_has_no_encoder(self):
        vocab = cgram.Vocabulary.from_tokens([b"a", b"b"])
        with self.assertRaises(cgram.VocabularyError):
            vocab.encode("ab")


if __name__ == "__main__":
    unittest.main()

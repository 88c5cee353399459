"""The tests that need the real vocabularies in ../shared/vocab (absent from a
user's clone: then each is skipped, and CTest lists python.shared_vocab as
not run)."""

import os
import unittest

import cgram
from support import EXAMPLES, shared_vocab
import test_matcher  # not its classes: unittest would run them here again


class Llama3(unittest.TestCase):
    def test_tokenizer_json_with_its_config(self):
        vocab = cgram.Vocabulary.load(shared_vocab(self, "llama3-tokenizer.json"))
        self.assertEqual(vocab.kind, "byte-level-bpe")
        self.assertEqual(len(vocab), 128256)
        # The end-of-sequence token comes from llama3-tokenizer_config.json beside it.
        self.assertEqual(vocab.eos_ids, [128001])  # "<|end_of_text|>"
        self.assertEqual(vocab.token_bytes(vocab.encode("hello", continuation=True)[0]), b"hello")

    def test_masks_equal_the_command_line(self):
        path = shared_vocab(self, "llama3-tokenizer.json")
        checker = test_matcher.MasksEqualTheCommandLine("test_bundled_vocabulary")
        checker.check(os.path.join(EXAMPLES, "json.cgram"), cgram.Vocabulary.load(path), path, seeds=1, checkpoints=3)


if __name__ == "__main__":
    unittest.main()

"""The README's Python example: the same code as examples/python/generate_json.py, and it runs."""

import os
import re
import subprocess
import sys
import unittest

from support import SOURCE_DIR

EXAMPLE = os.path.join(SOURCE_DIR, "examples", "python", "generate_json.py")


def example_code():
    """The example's code after its docstring."""
    with open(EXAMPLE) as f:
        text = f.read()
    return text[text.index('"""', 3) + 3 :].lstrip("\n")


class Example(unittest.TestCase):
    def test_readme_shows_the_example(self):
        with open(os.path.join(SOURCE_DIR, "README.md")) as f:
            readme = f.read()
        section = readme[readme.index("## Python") :]
        block = re.search(r"```python\n(.*?)```", section, re.S)
        self.assertIsNotNone(block, "README's Python section has no python code block")
        self.assertEqual(block.group(1), example_code())

    def test_example_runs(self):
        result = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertRegex(lines[0], r"^\d+ of 32064 tokens may start a document \(1002 mask words\)$")
        self.assertEqual(len(lines), 5)  # four documents


if __name__ == "__main__":
    unittest.main()

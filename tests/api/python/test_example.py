"""The README's Python example: the same code as examples/python/generate_json.py, and it runs."""

import os
import re
import subprocess
import sys
import tempfile
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
        self.check_output(result)

    def test_readme_command_runs_whatever_python3_comes_first(self):
        """The README's command line, as written, from the source folder, with
        a python3 first on the PATH that cannot import anything (as a pyenv or
        venv one without torch would)."""
        with open(os.path.join(SOURCE_DIR, "README.md")) as f:
            readme = f.read()
        command = re.search(r"^\$ (build/python/python \S+generate_json\.py)$", readme, re.M)
        self.assertIsNotNone(command, "README shows no `$ build/python/python ... generate_json.py` line")
        launcher = os.environ.get("CGRAM_PYTHON_LAUNCHER", "")
        if not launcher:
            self.skipTest("CGRAM_PYTHON_LAUNCHER is not set (CTest sets it)")
        line = command.group(1)
        if os.path.abspath(os.path.join(SOURCE_DIR, "build", "python", "python")) != os.path.abspath(launcher):
            line = line.replace("build/python/python", launcher, 1)  # a build folder other than build/
        with tempfile.TemporaryDirectory() as bin_dir:
            fake = os.path.join(bin_dir, "python3")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho 'not the python the build used' >&2\nexit 1\n")
            os.chmod(fake, 0o755)
            env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
            env.pop("PYTHONPATH", None)
            result = subprocess.run(line, shell=True, cwd=SOURCE_DIR, env=env, capture_output=True, text=True,
                                    timeout=300)
        self.check_output(result)

    def check_output(self, result):
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertRegex(lines[0], r"^\d+ of 32064 tokens may start a document \(1002 mask words\)$")
        self.assertEqual(len(lines), 5)  # four documents


if __name__ == "__main__":
    unittest.main()

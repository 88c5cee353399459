#!/usr/bin/env python3
"""Extracts the Lark test cases of llguidance and XGrammar as data.

Reads the peers' test files (their grammars, and the strings each test says
are accepted or rejected; never their code) and writes them as one JSON list
that `build/bench/lark_peers` checks: cgram's verdict on every string, and
the masks along the accepted ones against the oracle's.

  peer_cases.py --llguidance-repo DIR --xgrammar-repo DIR -o cases.json

A repository is a git directory (`fetch github:guidance-ai/llguidance` puts
one under /work/.mirror); its HEAD is read. A case whose grammar or strings
are computed by the test (format!, loops, variables) is counted as not
extracted.
"""
import argparse
import ast
import json
import subprocess
import sys


def git_show(repo, path):
    return subprocess.run(["git", "--git-dir", repo, "show", f"HEAD:{path}"], check=True,
                          capture_output=True, text=True).stdout


# --- llguidance: Rust test calls ---------------------------------------------

class RustArgs:
    """The literal arguments of a Rust call: strings, &[strings], or None."""

    def __init__(self, text, pos):
        self.text, self.pos = text, pos

    def skip_space(self):
        t = self.text
        while self.pos < len(t):
            if t[self.pos].isspace():
                self.pos += 1
            elif t.startswith("//", self.pos):
                self.pos = t.find("\n", self.pos)
            else:
                break

    def string(self):
        t, p = self.text, self.pos
        if t.startswith("r", p) and (t.startswith('r#', p) or t.startswith('r"', p)):
            hashes = 0
            p += 1
            while t[p] == "#":
                hashes += 1
                p += 1
            assert t[p] == '"'
            end = t.index('"' + "#" * hashes, p + 1)
            self.pos = end + 1 + hashes
            return t[p + 1:end]
        if t[p] != '"':
            return None
        out, p = [], p + 1
        while t[p] != '"':
            if t[p] == "\\":
                e = t[p + 1]
                if e == "\n":
                    p += 2
                    while t[p].isspace():
                        p += 1
                    continue
                simple = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
                if e in simple:
                    out.append(simple[e])
                    p += 2
                elif e == "u":
                    end = t.index("}", p)
                    out.append(chr(int(t[p + 3:end], 16)))
                    p = end + 1
                elif e == "x":
                    out.append(chr(int(t[p + 2:p + 4], 16)))
                    p += 4
                else:
                    raise ValueError(f"escape \\{e}")
            else:
                out.append(t[p])
                p += 1
        self.pos = p + 1
        return "".join(out)

    def value(self):
        """One argument: a string, a list of strings, or None (anything else)."""
        self.skip_space()
        t = self.text
        start = self.pos
        if t.startswith("&[", self.pos) or t.startswith("&vec![", self.pos):
            self.pos = t.index("[", self.pos) + 1
            items = []
            while True:
                self.skip_space()
                if t[self.pos] == "]":
                    self.pos += 1
                    return items
                s = self.string()
                if s is None:
                    self.pos = start
                    return self.skip_expression()
                items.append(s)
                self.skip_space()
                if t[self.pos] == ",":
                    self.pos += 1
        s = self.string() if t[self.pos] in '"r' else None
        if s is not None:
            self.skip_space()
            if t[self.pos] in ",)":
                return s
        self.pos = start
        return self.skip_expression()

    def skip_expression(self):
        depth, t = 0, self.text
        while True:
            c = t[self.pos]
            if c == '"' or (c == "r" and t[self.pos + 1] in '#"' and not t[self.pos - 1].isalnum()):
                self.string()
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                if depth == 0:
                    return None
                depth -= 1
            elif c == "," and depth == 0:
                return None
            self.pos += 1

    def arguments(self):
        args = []
        while True:
            args.append(self.value())
            self.skip_space()
            c = self.text[self.pos]
            self.pos += 1
            if c == ")":
                return args
            self.skip_space()
            if self.text[self.pos] == ")":
                self.pos += 1
                return args


def llguidance_cases(repo):
    cases, skipped = [], 0
    for path in ["parser/tests/test_lark.rs"]:
        text = git_show(repo, path)
        for fn in ["lark_str_test_many_quiet", "lark_str_test_many", "lark_err_test", "lark_ok"]:
            pos = 0
            while True:
                pos = text.find(fn + "(", pos)
                if pos < 0:
                    break
                if text[pos - 1].isalnum() or text[pos - 1] == "_" or text[pos - 3:pos] == "fn ":
                    pos += 1
                    continue
                line = text.count("\n", 0, pos) + 1
                parser = RustArgs(text, pos + len(fn) + 1)
                args = parser.arguments()
                pos = parser.pos
                where = f"{path}:{line}"
                if any(a is None for a in args):
                    skipped += 1
                    continue
                if fn == "lark_err_test":
                    cases.append({"peer": "llguidance", "where": where, "grammar": args[0], "error": args[1]})
                elif fn == "lark_ok":
                    cases.append({"peer": "llguidance", "where": where, "grammar": args[0], "accepted": [],
                                  "rejected": []})
                else:
                    rejected, prefixes = [], []
                    for s in args[2]:
                        (prefixes if s.startswith("FINAL_REJECT:") else rejected).append(
                            s.removeprefix("FINAL_REJECT:"))
                    cases.append({"peer": "llguidance", "where": where, "grammar": args[0], "accepted": args[1],
                                  "rejected": rejected, "prefixes": prefixes})
    return cases, skipped


# --- XGrammar: pytest parameters and helper calls ------------------------------

def literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def xgrammar_cases(repo):
    path = "tests/python/test_lark.py"
    tree = ast.parse(git_show(repo, path))
    cases, skipped = [], 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        args = [literal(a) for a in node.args]
        where = f"{path}:{node.lineno}"
        if name in ("param", "_assert_language") and len(args) == 3 or name == "_assert_language" and len(args) >= 3:
            g, acc, rej = args[:3]
            if not (isinstance(g, str) and isinstance(acc, (list, tuple)) and isinstance(rej, (list, tuple))):
                skipped += 1
                continue
            if not all(isinstance(s, str) for s in list(acc) + list(rej)):
                skipped += 1  # token ids or bytes
                continue
            if any(k.arg == "tokenizer_info" for k in node.keywords):
                skipped += 1
                continue
            if g.isidentifier() and g.isupper():  # test_lark_common_imports: a common terminal's name
                g = f"%import common.{g}\nstart: {g}"
            elif g.startswith("{"):  # test_lark_inline_json_schemas: a schema
                g = f"start: %json {g}"
            cases.append({"peer": "xgrammar", "where": where, "grammar": g, "accepted": list(acc),
                          "rejected": list(rej), "any_rejection": True})
        elif name in ("param", "_assert_lark_error") and len(args) == 2:
            g, message = args
            if isinstance(g, str) and isinstance(message, str):
                cases.append({"peer": "xgrammar", "where": where, "grammar": g, "error": message})
            elif name == "_assert_lark_error":
                skipped += 1
        elif name in ("_assert_language", "_assert_lark_error"):
            skipped += 1
    return cases, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llguidance-repo")
    ap.add_argument("--xgrammar-repo")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    cases = []
    for repo, extract in ((args.llguidance_repo, llguidance_cases), (args.xgrammar_repo, xgrammar_cases)):
        if not repo:
            continue
        found, skipped = extract(repo)
        print(f"{repo}: {len(found)} cases, {skipped} not extracted (computed by the test)", file=sys.stderr)
        cases += found
    with open(args.output, "w") as out:
        json.dump(cases, out, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()

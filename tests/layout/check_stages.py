#!/usr/bin/env python3
"""The library's folders are stages in pipeline order (CGRAM_STAGES in the
top-level CMakeLists.txt), grouped under the design card's top level
(grammar/ frontend/ ir/ codegen/ jit/ runtime/): a stage may include the
headers of the stages before it, never those after it, so a group uses
only the groups before it; the groups come in the card's order, each
stage in one group, and the top level holds the card's folders and no
stray stage. CMake enforces this through each stage's
include directories; this check says it in words, and also refuses what
include directories cannot see: a relative include reaching into another
folder, and two headers of one name (includes are by file name alone).
The installed headers (include/cgram/: cgram.h, and cgram.hpp over it) come
after every stage and before the C API; they include only <cgram.h> and
standard headers, never an internal one.

    check_stages.py SOURCE_DIR
"""
import os
import re
import sys

source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
cmake = open(os.path.join(source, "CMakeLists.txt"), encoding="utf-8").read()
stages = re.search(r"set\(CGRAM_STAGES ([a-z/ \n]+)\)", cmake).group(1).split()
# The public headers, then the C API, come after every stage.
order = stages + ["include", "runtime/capi"]

problems = []
# The design card's top level: its groups in its order, then the folders around them.
card_groups = ["frontend", "ir", "codegen", "jit", "runtime"]
groups = []
for stage in stages:
    group = stage.split("/")[0]
    if group == "support":
        continue
    if group not in card_groups:
        problems.append(f"stage {stage}: not in one of the card's groups ({' '.join(card_groups)})")
    elif groups and groups[-1] != group and group in groups:
        problems.append(f"stage {stage}: group {group}/ is split by another group in CGRAM_STAGES")
    if not groups or groups[-1] != group:
        groups.append(group)
if [g for g in card_groups if g in groups] != groups:
    problems.append(f"the groups come in the order {' '.join(groups)}, not the card's {' '.join(card_groups)}")
allowed_top = set(card_groups) | {"grammar", "support", "include", "python", "tools", "bench", "docs", "examples",
                                  "tests", "scripts"}
for entry in sorted(os.listdir(source)):
    if os.path.isdir(os.path.join(source, entry)) and not entry.startswith(".") and not entry.startswith("build") \
            and entry not in allowed_top:
        problems.append(f"{entry}/: a top-level folder the card does not name ({' '.join(sorted(allowed_top))})")
if not os.path.isfile(os.path.join(source, "grammar", "CGram.g4")):
    problems.append("grammar/CGram.g4: the ANTLR grammar is not where the card says")

owner = {}  # header name -> stage
files = {}  # stage -> [path]
for stage in order:
    for root, _, names in os.walk(os.path.join(source, stage)):
        for name in sorted(names):
            path = os.path.join(root, name)
            if name.endswith((".h", ".hpp", ".cpp", ".c", ".h.in")):
                files.setdefault(stage, []).append(path)
            if name.endswith(".h") or name.endswith(".h.in"):
                header = name[:-3] if name.endswith(".in") else name
                if header in owner:
                    problems.append(f"{header}: in {owner[header]}/ and {stage}/ (includes name headers by file name alone)")
                owner[header] = stage

include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
for stage in order:
    for path in files.get(stage, []):
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, source)
        for m in include.finditer(text):
            name = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            if "/" in name:
                problems.append(f"{rel}:{line}: includes \"{name}\" by a path: name the header alone")
                continue
            used = owner.get(name)
            if used is None:
                continue  # generated (CGramParser.h) or a system header in quotes
            if order.index(used) > order.index(stage):
                problems.append(f"{rel}:{line}: {stage}/ includes {name} of {used}/, a later stage ({' '.join(order)})")

# The public headers: <cgram.h> and standard headers (C++'s have no
# extension; C's are the C11 ones) only.
c_headers = set("""assert complex ctype errno fenv float inttypes iso646 limits locale math setjmp signal stdalign
    stdarg stdatomic stdbool stddef stdint stdio stdlib stdnoreturn string tgmath threads time uchar wchar
    wctype""".split())
for path in files.get("include", []):
    text = open(path, encoding="utf-8").read()
    for m in re.finditer(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', text, re.M):
        name = m.group(2)
        if m.group(1) == '"' or not (name == "cgram.h" or re.fullmatch(r"[a-z_]+", name) or
                                     (name.endswith(".h") and name[:-2] in c_headers)):
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{os.path.relpath(path, source)}:{line}: a public header includes {name}: "
                            "only <cgram.h> and standard headers")

for p in problems:
    print(f"error: {p}")
print(f"{sum(len(v) for v in files.values())} files in {len(order)} stages of {len(groups)} groups: "
      + ("in order" if not problems else f"{len(problems)} problem(s)"))
sys.exit(1 if problems else 0)

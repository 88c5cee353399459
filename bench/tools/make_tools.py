#!/usr/bin/env python3
"""Tool lists and reply documents for bench_tools, from JSONSchemaBench's
Glaive function-calling schemas.

  make_tools.py GLAIVE_DIR MASKBENCH_DATA OUT_DIR [--sizes 10,50,100,400] [--format hermes] [--cgram BIN] [--max 440]

GLAIVE_DIR is JSONSchemaBench's data/Glaiveai2K (1,707 schemas of 95 function
names: a tool is named by its file, as `calculate_bmi_4ad104b4`, so names
share long prefixes as a large tool list's do). MASKBENCH_DATA holds valid
argument documents for some of them. For each size N: OUT_DIR/tools-N.json
(the first N files in name order, as OpenAI-style tools) and
OUT_DIR/reply-N.txt, a reply in the format's own call syntax: free text, then
calls of three tools spread over the list that have a valid document, free
text between.
"""
import argparse
import glob
import json
import os
import subprocess


def tools_from(glaive_dir, maskbench_dir, cgram, limit):
    tools = {}
    for path in sorted(glob.glob(os.path.join(glaive_dir, "*.json")))[:limit]:
        name = os.path.basename(path)[:-len(".json")]
        # A schema cgram refuses (one that accepts no value) is no tool a server could offer.
        if cgram and subprocess.run([cgram, "schema", path], capture_output=True).returncode != 0:
            continue
        with open(path) as f:
            schema = json.load(f)
        document = None
        test_path = os.path.join(maskbench_dir, "Glaiveai2K---%s.json" % name)
        if os.path.exists(test_path):
            with open(test_path) as f:
                valid = [t["data"] for t in json.load(f).get("tests", []) if t.get("valid")]
            document = valid[0] if valid else None
        tools[name] = (schema, document)
    return tools


def call_text(fmt, name, arguments):
    if fmt == "hermes":
        return '<tool_call>\n{"name": %s, "arguments": %s}\n</tool_call>' % (json.dumps(name), json.dumps(arguments))
    if fmt == "llama3":
        return '{"name": %s, "parameters": %s}' % (json.dumps(name), json.dumps(arguments))
    if fmt == "mistral":
        return '[TOOL_CALLS][{"name": %s, "arguments": %s}]' % (json.dumps(name), json.dumps(arguments))
    if fmt == "qwen":
        params = "".join("<parameter=%s>\n%s\n</parameter>\n" % (k, v if isinstance(v, str) else
                                                                json.dumps(v, separators=(",", ":")))
                         for k, v in arguments.items())
        return "<tool_call>\n<function=%s>\n%s</function>\n</tool_call>" % (name, params)
    raise ValueError(fmt)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("glaive")
    ap.add_argument("maskbench")
    ap.add_argument("out")
    ap.add_argument("--sizes", default="10,50,100,400")
    ap.add_argument("--format", default="hermes")
    ap.add_argument("--cgram", help="the cgram command: schemas it refuses are left out")
    ap.add_argument("--max", type=int, default=400, help="schemas looked at (in name order)")
    args = ap.parse_args()
    available = tools_from(args.glaive, args.maskbench, args.cgram, args.max)
    names = sorted(available)
    os.makedirs(args.out, exist_ok=True)
    for size in (int(s) for s in args.sizes.split(",")):
        chosen = names[:size]
        tools = [{"type": "function", "function": {"name": n, "description": "", "parameters": available[n][0]}}
                 for n in chosen]
        with open(os.path.join(args.out, "tools-%d.json" % size), "w") as f:
            json.dump(tools, f, indent=1)
        documented = [n for n in chosen if available[n][1] is not None]
        picks = [documented[0], documented[len(documented) // 2], documented[-1]]
        parts = ["Let me look that up for you.\n"]
        for i, n in enumerate(picks):
            parts.append(call_text(args.format, n, available[n][1]))
            parts.append("\n" if i + 1 < len(picks) else "\nThose are the calls I need.")
        with open(os.path.join(args.out, "reply-%d.txt" % size), "w") as f:
            f.write("".join(parts))
    print("%d tools available (%d with a document); wrote sizes %s to %s"
          % (len(names), sum(1 for n in names if available[n][1] is not None), args.sizes, args.out))


if __name__ == "__main__":
    main()

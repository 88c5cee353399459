#!/usr/bin/env python3
"""Seeds for the fuzz targets that need no cgram binary (scripts/fuzz.sh).

  --regex-out DIR   the regex bodies (#'...' and #"...") of every .cgram file
                    under --grammars, one file each, with a probe text after a
                    NUL byte (the fuzz_regex input format)
  --vocab-out DIR   small vocabularies in every format cgram loads, cut from
                    the bundled GGUF (--gguf) and, when --shared names a
                    directory that has them, from ../shared/vocab's
                    tokenizer.json, tiktoken and GGUF files

Every vocabulary is cut to its first ids (a few hundred: all the byte tokens
and the first merges), so that each seed is a few KB.
"""
import argparse
import base64
import hashlib
import json
import os
import re
import struct
import sys

KEEP = 400  # ids kept from each vocabulary

# ---------------------------------------------------------------- regexes

REGEX = re.compile(r"""#'((?:[^'\\\n]|\\.)*)'|#"((?:[^"\\\n]|\\.)*)\"""")
PROBES = [b"abc123", b"{\"a\": 1}", b"x_y-z 09", "\u00e9t\u00e9 \u4e2d\u6587".encode(), b"\x00\xff\n\t"]


def regex_seeds(grammar_dirs, out):
    os.makedirs(out, exist_ok=True)
    seen = set()
    for d in grammar_dirs:
        for base, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith(".cgram"):
                    continue
                text = open(os.path.join(base, f), encoding="utf-8", errors="replace").read()
                for m in REGEX.finditer(text):
                    body = (m.group(1) if m.group(1) is not None else m.group(2)).encode()
                    if body in seen:
                        continue
                    seen.add(body)
                    probe = PROBES[len(seen) % len(PROBES)]
                    name = hashlib.sha1(body).hexdigest()[:16]
                    with open(os.path.join(out, name), "wb") as o:
                        o.write(body + b"\0" + probe)
    return len(seen)

# ---------------------------------------------------------------- GGUF

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
          U64: "<Q", I64: "<q", F64: "<d"}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take("<I"), self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALAR[t])


def read_gguf(data):
    r = Reader(data)
    assert r.data[:4] == b"GGUF"
    r.pos = 4
    version, _tensors, nkv = r.take("<I"), r.take("<Q"), r.take("<Q")
    kv = []
    for _ in range(nkv):
        key = r.string()
        t = r.take("<I")
        kv.append((key, t, r.value(t)))
    return version, kv


def write_value(out, t, v):
    if t == STRING:
        out += struct.pack("<Q", len(v)) + v
    elif t == ARRAY:
        et, items = v
        out += struct.pack("<IQ", et, len(items))
        for item in items:
            write_value(out, et, item)
    else:
        out += struct.pack(SCALAR[t], v)


def write_gguf(version, kv):
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, 0, len(kv)))
    for key, t, v in kv:
        out += struct.pack("<Q", len(key)) + key + struct.pack("<I", t)
        write_value(out, t, v)
    return bytes(out)


def cut_gguf(data, keep):
    """The first `keep` ids; merges kept when both halves and the result are."""
    version, kv = read_gguf(data)
    tokens = next(v[1] for k, t, v in kv if k == b"tokenizer.ggml.tokens")[:keep]
    kept = set(tokens)
    out = []
    for key, t, v in kv:
        if t == ARRAY and key in (b"tokenizer.ggml.tokens", b"tokenizer.ggml.scores", b"tokenizer.ggml.token_type"):
            v = (v[0], v[1][:keep])
        elif t == ARRAY and key == b"tokenizer.ggml.merges":
            merges = []
            for m in v[1]:
                a, _, b = m.partition(b" ")
                if a in kept and b in kept and a + b in kept:
                    merges.append(m)
            v = (v[0], merges)
        elif t == ARRAY:
            continue  # other arrays (none in vocabulary files) are not needed
        elif key.endswith(b"_token_id") and isinstance(v, int) and v >= keep:
            v = min(2, keep - 1)
        out.append((key, t, v))
    return write_gguf(version, out), [t.decode("utf-8", "replace") for t in tokens]

# ---------------------------------------------------------------- others


def cut_tokenizer_json(text, keep):
    """A Hugging Face tokenizer.json with its first ids and the merges among them."""
    doc = json.loads(text)
    model = doc["model"]
    vocab = {k: v for k, v in model["vocab"].items() if v < keep}
    merges = []
    for m in model.get("merges", []):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab and len(merges) < KEEP:
            merges.append(m)
    model["vocab"], model["merges"] = vocab, merges
    added = doc.get("added_tokens", [])
    doc["added_tokens"] = [dict(t, id=keep + i) for i, t in enumerate(added[:4])]
    for i, t in enumerate(doc["added_tokens"]):
        model["vocab"].setdefault(t["content"], keep + i)
    return json.dumps(doc, ensure_ascii=False).encode()


def cut_tiktoken(text, keep):
    return b"".join(line + b"\n" for line in text.splitlines()[:keep])


def vocab_seeds(gguf, shared, out):
    os.makedirs(out, exist_ok=True)
    written = []

    def put(name, data):
        with open(os.path.join(out, name), "wb") as o:
            o.write(data)
        written.append(name)

    bundled, pieces = cut_gguf(open(gguf, "rb").read(), KEEP)
    put("phi3-cut.gguf", bundled)
    # The same ids as other formats: a JSON list (strings and hex objects)
    # and a tiktoken file of the pieces' bytes.
    def piece_bytes(p):
        m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", p)
        return bytes([int(m.group(1), 16)]) if m else p.replace("\u2581", " ").encode()
    items = []
    for i, p in enumerate(pieces):
        b = piece_bytes(p)
        try:
            items.append(b.decode("utf-8") if i % 5 else {"text": b.decode("utf-8")})
        except UnicodeDecodeError:
            items.append({"hex": b.hex()})
    put("list.json", json.dumps(items, ensure_ascii=False).encode())
    seen, lines = set(), []
    for p in pieces:
        b = piece_bytes(p)
        if b and b not in seen:
            seen.add(b)
            lines.append(base64.b64encode(b) + b" " + str(len(lines)).encode())
    put("phi3-cut.tiktoken", b"\n".join(lines) + b"\n")

    if shared and os.path.isdir(shared):
        def have(p):
            return os.path.exists(os.path.join(shared, p))
        for name in ("ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-deepseek-llm.gguf"):
            if have("gguf/" + name):
                put(name.replace("ggml-vocab-", "").replace(".gguf", "-cut.gguf"),
                    cut_gguf(open(os.path.join(shared, "gguf", name), "rb").read(), KEEP)[0])
        for name in ("llama3-tokenizer.json", "gemma-tokenizer.json"):
            if have(name):
                put(name.replace(".json", "-cut.json"),
                    cut_tokenizer_json(open(os.path.join(shared, name), "rb").read(), KEEP))
        if have("llama3-tokenizer_config.json") and have("llama3-tokenizer.json"):
            # tokenizer.json, the marker, then its tokenizer_config.json (cut).
            config = json.load(open(os.path.join(shared, "llama3-tokenizer_config.json"), "rb"))
            decoder = config.get("added_tokens_decoder", {})
            config["added_tokens_decoder"] = {k: v for k, v in list(decoder.items())[:4]}
            put("llama3-with-config.json",
                cut_tokenizer_json(open(os.path.join(shared, "llama3-tokenizer.json"), "rb").read(), KEEP)
                + b"#CGRAM-CONFIG#" + json.dumps(config).encode())
        for name in ("cl100k_base.tiktoken", "o200k_base.tiktoken"):
            if have(name):
                put(name.replace(".tiktoken", "-cut.tiktoken"),
                    cut_tiktoken(open(os.path.join(shared, name), "rb").read(), KEEP))
    return written


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grammars", nargs="*", default=[])
    p.add_argument("--regex-out")
    p.add_argument("--vocab-out")
    p.add_argument("--gguf", default="frontend/vocab/bundled/ggml-vocab-phi-3.gguf")
    p.add_argument("--shared", default="../shared/vocab")
    a = p.parse_args()
    if a.regex_out:
        print(f"make_seeds: {regex_seeds(a.grammars, a.regex_out)} regexes in {a.regex_out}")
    if a.vocab_out:
        print(f"make_seeds: {len(vocab_seeds(a.gguf, a.shared, a.vocab_out))} vocabularies in {a.vocab_out}")


if __name__ == "__main__":
    sys.exit(main())

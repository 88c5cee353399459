"""Adapters shaped like the structured-output interfaces of inference servers.

vLLM, SGLang and TensorRT-LLM drive a grammar engine through two objects: a
backend that compiles a request's constraint by kind (with a cache, since
many requests share one schema), and a per-request matcher that the
scheduler calls between forward passes:

    backend = Backend(vocab, vocab_size=model_logits)     # once per server
    matcher = backend.matcher("json", schema)             # per request
    bitmask = backend.allocate_token_bitmask(batch)        # (batch, ceil(V/32)) int32
    matcher.fill_bitmask(bitmask, row)                    # or backend.fill_bitmask(...)
    apply_token_bitmask_inplace(logits, bitmask)           # cgram.logits
    matcher.accept_tokens([token])

Speculative decoding: fill 1 + k rows per request (one before each draft
token, accepting the draft tentatively), then validate_tokens(draft) says
how many the grammar takes, and rollback() undoes the rest.

Kinds: "grammar" (.cgram text), "gbnf", "json" (a JSON Schema: dict, bool or
text), "json_object" (any JSON object), "regex" (the whole output matches
it) and "choice" (one of a list of strings). This module needs only NumPy
arrays or CPU torch tensors; it does not import torch itself.
"""

import collections
import json
import threading
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from . import (AdvanceResult, CompiledGrammar, Grammar, Matcher, ThreadPool, ToolCallsGrammar, ToolCallsMatcher,
               Vocabulary, compile, fill_masks, mask_words)

__all__ = ["Backend", "GrammarMatcher", "KINDS", "grammar_text"]

KINDS = ("grammar", "gbnf", "json", "json_object", "regex", "choice")


def _quote(text: str) -> str:
    """A .cgram literal for `text`: every character as itself but quote, backslash and controls."""
    out = []
    for ch in text:
        if ch in "'\\":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\x%02X" % ord(ch))
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def grammar_text(kind: str, spec) -> Tuple[str, str]:
    """(format, source) of the grammar for a request: "cgram", "gbnf" or "json-schema"."""
    if kind == "grammar":
        return "cgram", _text(spec, kind)
    if kind == "gbnf":
        return "gbnf", _text(spec, kind)
    if kind == "json":
        return "json-schema", spec if isinstance(spec, (str, bytes)) else json.dumps(spec, indent=2)
    if kind == "json_object":
        return "json-schema", '{"type": "object"}'
    if kind == "regex":
        return "cgram", "start ::= #'%s' ;\n" % _single_quoted_regex(_text(spec, kind))
    if kind == "choice":
        choices = list(spec)
        if not choices or not all(isinstance(c, str) for c in choices):
            raise ValueError("a choice needs a non-empty list of strings")
        return "cgram", "start ::= " + " | ".join(_quote(c) for c in choices) + " ;\n"
    raise ValueError("kind must be one of %s, not %r" % (", ".join(KINDS), kind))


def _single_quoted_regex(pattern: str) -> str:
    """The regex with every quote written \\x27, so that it fits in #'...'."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            out.append("\\x27" if pattern[i + 1] == "'" else pattern[i : i + 2])
            i += 2
            continue
        out.append("\\x27" if pattern[i] == "'" else pattern[i])
        i += 1
    return "".join(out)


def _text(spec, kind: str) -> str:
    if isinstance(spec, bytes):
        return spec.decode("utf-8")
    if not isinstance(spec, str):
        raise TypeError("a %s request takes its text as str or bytes, not %s" % (kind, type(spec).__name__))
    return spec


class GrammarMatcher:
    """One request's matcher, with the calls servers make. Token ids are
    the tokenizer's; the bitmask's width follows the model (padding ids past
    the tokenizer's are never allowed)."""

    def __init__(self, compiled: Union[CompiledGrammar, ToolCallsGrammar], *,
                 max_rollback_tokens: Optional[int] = None, vocab_size: Optional[int] = None):
        self.compiled = compiled
        self.vocab_size = compiled.vocab_size if vocab_size is None else vocab_size
        if self.vocab_size < compiled.vocab_size:
            raise ValueError("vocab_size %d is smaller than the tokenizer's %d ids" % (self.vocab_size,
                                                                                       compiled.vocab_size))
        if isinstance(compiled, ToolCallsGrammar):  # a tool list compiled one tool at a time
            if max_rollback_tokens is not None:
                raise ValueError("max_rollback_tokens=%d: a tool list compiled one tool at a time keeps every "
                                 "token's step and does not bound its rollback" % max_rollback_tokens)
            self._matcher = ToolCallsMatcher(compiled)
        else:
            self._matcher = Matcher(compiled, max_rollback_tokens=max_rollback_tokens)
        self._terminated = False

    @property
    def matcher(self) -> Matcher:
        """The underlying cgram.Matcher."""
        return self._matcher

    def accept_tokens(self, tokens: Iterable[int]) -> bool:
        """Accepts every token in turn, or none: False, with nothing
        changed, when the grammar refuses one of them (or after the end)."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            return True
        if self._terminated or self._matcher.validate_tokens(tokens) < len(tokens):
            return False
        for token in tokens:
            if self._matcher.advance(token) == AdvanceResult.FINISHED:
                self._terminated = True
        return True

    def validate_tokens(self, tokens: Sequence[int]) -> List[int]:
        """The longest prefix of `tokens` the grammar accepts from here (its
        length is how many of a draft to keep). Nothing changes."""
        tokens = [int(t) for t in tokens]
        if self._terminated:
            return []
        return tokens[: self._matcher.validate_tokens(tokens)]

    def rollback(self, num_tokens: int) -> None:
        """Undoes the last num_tokens accepted tokens (ValueError when fewer
        were accepted, or past max_rollback_tokens)."""
        self._matcher.rollback(num_tokens)
        self._terminated = self._matcher.is_finished()

    def fill_bitmask(self, bitmask, idx: int) -> None:
        """Writes the allowed tokens into row `idx` of an int32 (batch,
        ceil(vocab_size / 32)) bitmask (NumPy or a CPU torch tensor); the
        row's words past the tokenizer's ids are cleared. A terminated
        request allows nothing: its row is all clear."""
        self._matcher.fill_mask(bitmask, idx)

    def is_terminated(self) -> bool:
        """Whether an end-of-sequence token was accepted."""
        return self._terminated

    def can_end(self) -> bool:
        """Whether the text so far is complete (end of sequence is allowed)."""
        return self._matcher.can_end()

    def reset(self) -> None:
        self._matcher.reset()
        self._terminated = False

    def jump_forward_string(self) -> Optional[str]:
        """The text that must come next whatever the model does (`": "`
        after a key of a fixed-shape object), as str; None when there is
        none. Bytes of a character cut at the end are left out."""
        forced = self._matcher.forced_text()
        for cut in range(min(4, len(forced) + 1)):  # a character cut at the end is left out
            try:
                text = forced[: len(forced) - cut].decode("utf-8")
                return text or None
            except UnicodeDecodeError:
                continue
        return None

    def jump_forward(self) -> Tuple[int, List[int]]:
        """Jump-forward with token healing: (rollback, tokens). Roll back
        `rollback` tokens, then accept `tokens`: the tokenizer's own encoding
        of the forced text. (0, []) when nothing is gained."""
        return self._matcher.jump_forward()

    @property
    def num_processed_tokens(self) -> int:
        return self._matcher.tokens_accepted

    def __repr__(self) -> str:
        return "<cgram.serving.GrammarMatcher %d tokens%s>" % (
            self._matcher.tokens_accepted, ", terminated" if self._terminated else "")


class Backend:
    """Compiles requests by kind for one tokenizer vocabulary, with a cache
    (least recently used first out), and makes their matchers.

    vocab_size: the model's logit count (default: the tokenizer's ids); the
    bitmask rows are that wide. max_rollback_tokens: passed to every matcher
    (a speculative server needs at least its draft length). whitespace and
    max_whitespace: JSON Schema layout (flexible, whitespace runs at most 20
    long by default). property_order: JSON Schema object members in the
    schema's order ("schema") or in any order ("any": each at most once, the
    required ones all there). canonical: only the tokenizer's own
    tokenizations."""

    def __init__(self, vocab: Vocabulary, *, vocab_size: Optional[int] = None, cache_size: int = 128,
                 max_rollback_tokens: Optional[int] = None, whitespace: str = "flexible",
                 max_whitespace: Optional[int] = 20, canonical: bool = False, tier: str = "table",
                 pool: Optional[ThreadPool] = None, property_order: str = "schema"):
        if not isinstance(vocab, Vocabulary):
            raise TypeError("vocab must be a cgram.Vocabulary, not %s" % type(vocab).__name__)
        if cache_size < 1:
            raise ValueError("cache_size must be at least 1, not %d" % cache_size)
        self.vocab = vocab
        self.vocab_size = vocab.size if vocab_size is None else int(vocab_size)
        if self.vocab_size < vocab.size:
            raise ValueError("vocab_size %d is smaller than the tokenizer's %d ids" % (self.vocab_size, vocab.size))
        self.cache_size = cache_size
        self.max_rollback_tokens = max_rollback_tokens
        self.whitespace = whitespace
        self.max_whitespace = max_whitespace
        if property_order not in ("schema", "any"):
            raise ValueError("property_order must be 'schema' or 'any', not %r" % (property_order,))
        self.property_order = property_order
        self.canonical = canonical
        self.tier = tier
        self.pool = pool
        self._cache = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def compile(self, kind: str, spec) -> CompiledGrammar:
        """The compiled grammar of a request (GrammarError, CompileError on bad input)."""
        fmt, source = grammar_text(kind, spec)
        key = (fmt, source)
        found = self._cached(key)
        if found is not None:
            return found
        options = {}
        if fmt == "json-schema":
            options = {"whitespace": self.whitespace, "max_whitespace": self.max_whitespace,
                       "property_order": self.property_order}
        grammar = Grammar(source, format=fmt, **options)
        return self._keep(key, compile(grammar, self.vocab, tier=self.tier, canonical=self.canonical))

    def compile_tools(self, tools, format: str = "hermes", *, cut: bool = False
                      ) -> Union[CompiledGrammar, ToolCallsGrammar]:
        """The compiled grammar of a reply given OpenAI-style tools (a list of
        them, or its JSON text): free text, then calls in the model family's
        format ("hermes", "llama3", "qwen", "mistral" or "json-array"), each
        call's arguments checked against its tool's schema. Cached like
        compile(): a server with one tool list compiles it once. cut=True:
        compiled one tool at a time, each tool's arguments when a call to it
        is written (a ToolCallsGrammar, for lists of hundreds of tools;
        docs/TOOLS.md); matcher_for() and GrammarMatcher take either."""
        source = tools if isinstance(tools, (str, bytes)) else json.dumps(tools, indent=2)
        if isinstance(source, bytes):
            source = source.decode("utf-8")
        key = ("tools", format, cut, source)
        found = self._cached(key)
        if found is not None:
            return found
        if cut:
            self._refuse_for_cut()
            return self._keep(key, ToolCallsGrammar(self.vocab, source, format=format, whitespace=self.whitespace,
                                                    max_whitespace=self.max_whitespace,
                                                    property_order=self.property_order))
        grammar = Grammar(source, format="tools", tool_format=format, whitespace=self.whitespace,
                          max_whitespace=self.max_whitespace, property_order=self.property_order)
        return self._keep(key, compile(grammar, self.vocab, tier=self.tier, canonical=self.canonical))

    def _refuse_for_cut(self) -> None:
        """What a tool list compiled one tool at a time does not offer is
        refused by name, never dropped (the C API refuses the same)."""
        refused = []
        if self.canonical:
            refused.append("canonical=True")
        if self.tier != "table":
            refused.append("tier=%r" % (self.tier,))
        if self.max_rollback_tokens is not None:
            refused.append("max_rollback_tokens=%d" % self.max_rollback_tokens)
        if refused:
            raise ValueError("compile_tools(cut=True) compiles one tool at a time, which does not offer %s; "
                             "use cut=False for the whole grammar" % " or ".join(refused))

    def matcher_for(self, compiled: Union[CompiledGrammar, ToolCallsGrammar]) -> "GrammarMatcher":
        """A new request's matcher of a grammar compiled here."""
        return GrammarMatcher(compiled, max_rollback_tokens=self.max_rollback_tokens, vocab_size=self.vocab_size)

    def _cached(self, key) -> Optional[CompiledGrammar]:
        """The compiled grammar kept for `key`, counted as a hit, or None (a miss)."""
        with self._lock:
            found = self._cache.get(key)
            if found is None:
                self.misses += 1
                return None
            self._cache.move_to_end(key)
            self.hits += 1
            return found

    def _keep(self, key, compiled: CompiledGrammar) -> CompiledGrammar:
        with self._lock:
            self._cache[key] = compiled
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return compiled

    def matcher(self, kind: str, spec) -> GrammarMatcher:
        """A new request's matcher."""
        return GrammarMatcher(self.compile(kind, spec), max_rollback_tokens=self.max_rollback_tokens,
                              vocab_size=self.vocab_size)

    def allocate_token_bitmask(self, batch_size: int):
        """An int32 (batch_size, ceil(vocab_size / 32)) torch tensor, every token allowed."""
        import torch

        return torch.full((batch_size, mask_words(self.vocab_size)), -1, dtype=torch.int32)

    def fill_bitmask(self, matchers: Sequence[GrammarMatcher], bitmask, rows: Optional[Sequence[int]] = None) -> None:
        """Row rows[i] (default i) of `bitmask` gets matchers[i]'s allowed
        tokens, on threads with the GIL released."""
        rows = list(range(len(matchers))) if rows is None else list(rows)
        if len(rows) != len(matchers):
            raise ValueError("%d rows given for %d matchers" % (len(rows), len(matchers)))
        native = [i for i, m in enumerate(matchers) if isinstance(m.matcher, Matcher)]
        fill_masks([matchers[i].matcher for i in native], bitmask, [rows[i] for i in native], self.pool)
        for i, m in enumerate(matchers):  # tool lists compiled one tool at a time
            if not isinstance(m.matcher, Matcher):
                m.matcher.fill_mask(bitmask, rows[i])

    def cache_info(self) -> dict:
        with self._lock:
            return {"size": len(self._cache), "capacity": self.cache_size, "hits": self.hits, "misses": self.misses}

"""cgram: grammars compiled for a tokenizer vocabulary into exact next-token masks.

    import cgram
    vocab = cgram.Vocabulary.load("tokenizer.json")
    grammar = cgram.Grammar.from_json_schema({"type": "object", ...})
    compiled = cgram.compile(grammar, vocab)
    matcher = cgram.Matcher(compiled)
    mask = matcher.mask()            # int32 words, bit t set: token t allowed
    matcher.advance(token)

PyTorch helpers (a batch bitmask applied to logits in place, and a Hugging
Face-style logits processor) are in cgram.logits, which imports torch.
"""

from ._cgram import (
    ABI_VERSION,
    AdvanceResult,
    CompileError,
    CompiledGrammar,
    Diagnostic,
    Error,
    Grammar,
    GrammarError,
    LoadError,
    Matcher,
    ThreadPool,
    ToolCallsGrammar,
    ToolCallsMatcher,
    Vocabulary,
    VocabularyError,
    __version__,
    compile,
    fill_masks,
    load,
)

__all__ = [
    "ABI_VERSION",
    "AdvanceResult",
    "CompileError",
    "CompiledGrammar",
    "Diagnostic",
    "Error",
    "Grammar",
    "GrammarError",
    "LoadError",
    "Matcher",
    "ThreadPool",
    "ToolCallsGrammar",
    "ToolCallsMatcher",
    "Vocabulary",
    "VocabularyError",
    "__version__",
    "compile",
    "fill_masks",
    "load",
    "mask_words",
]


def mask_words(vocab_size: int) -> int:
    """int32 words in one mask row for `vocab_size` ids: ceil(vocab_size / 32)."""
    if vocab_size < 0:
        raise ValueError(f"vocab_size must not be negative, not {vocab_size}")
    return (vocab_size + 31) // 32

"""PyTorch helpers: batch bitmasks applied to logits in place, and a logits
processor with the call shape of Hugging Face's LogitsProcessor.

The bitmask layout is the one vLLM and SGLang use: an int32 tensor of shape
(batch, ceil(vocab_size / 32)); bit t % 32 of word t // 32 of a row is set
when token t is allowed.

    bitmask = allocate_token_bitmask(batch, compiled.vocab_size)
    fill_next_token_bitmask(matchers, bitmask)        # GIL released, threads
    apply_token_bitmask_inplace(logits, bitmask)      # -inf where not allowed
"""

import sys
from typing import List, Optional, Sequence

import torch

from . import AdvanceResult, CompiledGrammar, Matcher, ThreadPool, fill_masks, mask_words
from ._cgram import _apply_token_bitmask

__all__ = [
    "GrammarLogitsProcessor",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "fill_next_token_bitmask",
]


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> torch.Tensor:
    """An int32 (batch_size, ceil(vocab_size / 32)) bitmask on the CPU, every token allowed."""
    return torch.full((batch_size, mask_words(vocab_size)), -1, dtype=torch.int32)


def fill_next_token_bitmask(
    matchers: Sequence[Matcher],
    bitmask: torch.Tensor,
    rows: Optional[Sequence[int]] = None,
    pool: Optional[ThreadPool] = None,
) -> None:
    """Row i of `bitmask` (or row rows[i]) gets matchers[i]'s mask, on a thread
    pool with the GIL released. `bitmask` must be a CPU int32 tensor."""
    fill_masks(matchers, bitmask, rows, pool)


# For each byte value, its 8 bits as booleans, least significant first.
_BYTE_BITS = {}


def _byte_bits(device: torch.device) -> torch.Tensor:
    table = _BYTE_BITS.get(device)
    if table is None:
        values = torch.arange(256, dtype=torch.int32).unsqueeze(1)
        table = ((values >> torch.arange(8, dtype=torch.int32)) & 1).bool().to(device)
        _BYTE_BITS[device] = table
    return table


def unpack_bitmask(bitmask: torch.Tensor, width: int) -> torch.Tensor:
    """The allowed tokens of int32 bitmask rows, as a bool tensor of `width`
    columns (columns past 32 * words are False: never allowed)."""
    rows = bitmask.reshape(-1, bitmask.shape[-1])
    bits = rows.shape[1] * 32  # explicit: reshape cannot infer -1 for an empty batch
    if sys.byteorder == "little":
        # Byte j of a row holds tokens 8j .. 8j + 7, least significant bit first.
        as_bytes = rows.contiguous().view(torch.uint8).long()
        allowed = _byte_bits(rows.device)[as_bytes].reshape(rows.shape[0], bits)
    else:
        shifts = torch.arange(32, dtype=torch.int32, device=rows.device)
        allowed = ((rows.unsqueeze(-1) >> shifts) & 1).bool().reshape(rows.shape[0], bits)
    if allowed.shape[1] >= width:
        return allowed[:, :width]
    padding = torch.zeros((rows.shape[0], width - allowed.shape[1]), dtype=torch.bool, device=rows.device)
    return torch.cat([allowed, padding], dim=1)


def apply_token_bitmask_inplace(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: Optional[Sequence[int]] = None
) -> None:
    """Sets logits[r, t] to -inf wherever bit t of bitmask[r] is clear, in place.

    logits: (batch, vocab) or (vocab,), any floating dtype (float32, float16,
    bfloat16), on any device. bitmask: int32 (batch, words) or (words,).
    indices: the rows to mask (the same row of both tensors); None: every row.
    Columns past 32 * words (a model's padding ids) are set to -inf too."""
    if not torch.is_floating_point(logits):
        raise TypeError(f"logits must be a floating-point tensor, not {logits.dtype}")
    if bitmask.dtype != torch.int32:
        raise TypeError(f"the bitmask must be int32, not {bitmask.dtype}")
    if logits.dim() == 1 and bitmask.dim() == 1:
        if indices is not None:
            raise ValueError("indices need 2-D logits and bitmask")
        apply_token_bitmask_inplace(logits.unsqueeze(0), bitmask.unsqueeze(0))
        return
    if logits.dim() != 2 or bitmask.dim() != 2:
        raise ValueError(f"logits and bitmask must both be 1-D or both 2-D, not {logits.dim()}-D and {bitmask.dim()}-D")
    if logits.shape[0] != bitmask.shape[0]:
        raise ValueError(f"logits have {logits.shape[0]} rows and the bitmask {bitmask.shape[0]}")
    if indices is not None:
        indices = [int(row) for row in indices]
        for row in indices:
            if not 0 <= row < logits.shape[0]:
                raise IndexError(f"index {row} is outside the batch ({logits.shape[0]} rows)")
    native = _native_view(logits)
    if native is not None and bitmask.device.type == "cpu":
        _apply_token_bitmask(native[0], native[1], bitmask, indices)
    else:
        _apply_with_torch(logits, bitmask, indices)


# The CPU kernel's element type for each torch dtype, and the view that
# NumPy can hold (NumPy has no bfloat16: its bits are viewed as int16).
_NATIVE_TYPES = {
    torch.float32: ("float32", None),
    torch.float16: ("float16", None),
    torch.bfloat16: ("bfloat16", torch.int16),
}


def _native_view(logits: torch.Tensor):
    """(a NumPy view, the type's name) for logits the CPU kernel can mask in place, else None."""
    native = _NATIVE_TYPES.get(logits.dtype)
    if native is None or logits.device.type != "cpu" or (logits.shape[1] > 1 and logits.stride(1) != 1):
        return None
    name, view_as = native
    tensor = logits.detach()
    if view_as is not None:
        tensor = tensor.view(view_as)
    return tensor.numpy(), name


def _apply_with_torch(logits: torch.Tensor, bitmask: torch.Tensor, indices: Optional[List[int]]) -> None:
    """The same as the CPU kernel, in torch operations: any device, any floating dtype."""
    if bitmask.device != logits.device:
        bitmask = bitmask.to(logits.device, non_blocking=True)
    if indices is None:
        logits.masked_fill_(~unpack_bitmask(bitmask, logits.shape[1]), float("-inf"))
        return
    if not indices:
        return
    rows = torch.as_tensor(indices, dtype=torch.long, device=logits.device)
    disallowed = ~unpack_bitmask(bitmask.index_select(0, rows), logits.shape[1])
    logits[rows] = logits.index_select(0, rows).masked_fill_(disallowed, float("-inf"))


class GrammarLogitsProcessor:
    """One matcher per row of a batch, called as Hugging Face calls its
    logits processors: processor(input_ids, scores) -> scores (masked in
    place). No `transformers` import is needed; pass it in a
    LogitsProcessorList, or call it from your own sampling loop.

    The first call sees the prompts. Each later call must see exactly one
    new token per row (a generation step), which advances that row's
    matcher; anything else (beam search reordering rows, a new batch, a
    processor reused for the next turn) is refused with RuntimeError, and
    reset() starts a new batch. A row whose matcher accepted end of sequence
    allows only end of sequence from then on (generators pad finished rows
    anyway). A token the grammar rejects, or a matcher stopped by an engine
    limit, raises RuntimeError before any row changes."""

    def __init__(self, grammar: CompiledGrammar, *, pool: Optional[ThreadPool] = None):
        if not isinstance(grammar, CompiledGrammar):
            raise TypeError(f"grammar must be a cgram.CompiledGrammar, not {type(grammar).__name__}")
        self.grammar = grammar
        self.pool = pool
        vocab = grammar.vocab
        self._eos_ids = list(vocab.eos_ids)
        self._eos_only = torch.zeros(grammar.mask_words, dtype=torch.int32)
        for token in self._eos_ids:
            self._eos_only[token // 32] |= _bit(token % 32)
        self.reset()

    def reset(self) -> None:
        """Forgets the batch: the next call starts one."""
        self.matchers: List[Matcher] = []
        self._finished: List[bool] = []
        self._seen: Optional[torch.Tensor] = None
        self._bitmask: Optional[torch.Tensor] = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if input_ids.dim() != 2 or scores.dim() != 2 or input_ids.shape[0] != scores.shape[0]:
            raise ValueError(
                f"expected input_ids (batch, length) and scores (batch, vocab), not {tuple(input_ids.shape)} "
                f"and {tuple(scores.shape)}"
            )
        if self._seen is None:
            self._start(input_ids)
        else:
            self._advance(input_ids)
        active = [row for row, finished in enumerate(self._finished) if not finished]
        for row in active:
            if self.matchers[row].error is not None:
                raise RuntimeError(f"row {row}: the matcher stopped: {self.matchers[row].error}")
        if active:
            fill_masks([self.matchers[row] for row in active], self._bitmask, active, self.pool)
        for row, finished in enumerate(self._finished):
            if finished:
                self._bitmask[row] = self._eos_only
        apply_token_bitmask_inplace(scores, self._bitmask)
        return scores

    def _start(self, input_ids: torch.Tensor) -> None:
        batch = input_ids.shape[0]
        first = Matcher(self.grammar)
        self.matchers = [first] + [first.clone() for _ in range(batch - 1)]
        self._finished = [False] * batch
        self._bitmask = allocate_token_bitmask(batch, self.grammar.vocab_size)
        self._seen = input_ids.detach().to("cpu", copy=True)

    def _advance(self, input_ids: torch.Tensor) -> None:
        seen = self._seen
        ids = input_ids.detach().to("cpu")
        if (
            ids.shape[0] != seen.shape[0]
            or ids.shape[1] != seen.shape[1] + 1
            or not torch.equal(ids[:, : seen.shape[1]], seen)
        ):
            raise RuntimeError(
                "each call after the first must add one token to each row of the previous call's batch (beam "
                "search, a reordered or new batch, several tokens at once are not followed); call reset() for a "
                "new batch"
            )
        tokens = ids[:, -1].tolist()
        # Every row's token is checked before any matcher moves.
        for row, token in enumerate(tokens):
            if not self._finished[row] and not self.matchers[row].is_allowed(token):
                raise RuntimeError(f"row {row}: token {token} is not allowed by the grammar (were these scores masked?)")
        for row, token in enumerate(tokens):
            if not self._finished[row]:
                self._finished[row] = self.matchers[row].advance(token) == AdvanceResult.FINISHED
        self._seen = ids.clone()


def _bit(position: int) -> int:
    """Bit `position` of an int32 word, as a Python int that fits one (bit 31 is negative)."""
    return -(2**31) if position == 31 else 1 << position

"""A driver that calls cgram.serving as an inference server does, step by
step, with random logits standing in for the model (tests/api/python/test_serving.py
checks it; bench/python/serving_driver.py times it).

Each step, for a batch of requests:
  - without speculation: one bitmask row per request is filled (in one
    threaded call), applied to random (batch, model vocabulary) logits with
    PyTorch, one token is sampled per row and accepted;
  - with k draft tokens: a draft model proposes k tokens (it follows the
    grammar, but now and then proposes any token at all); the server fills
    1 + k rows per request, accepting each draft token tentatively to reach
    the next row, then rolls the tentative tokens back; the target model
    samples one token per row under its mask (agreeing with the draft token
    with probability `agreement`); the longest agreeing prefix plus the
    next target token are checked with validate_tokens and accepted.

Every sampled token must be allowed by a plain matcher kept beside the
request (the reference), never a padding id past the tokenizer's; every
finished text is checked by the request's own validator.
"""

import random
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import torch

import cgram
from cgram.logits import apply_token_bitmask_inplace
from cgram.serving import Backend, GrammarMatcher


@dataclass
class Request:
    kind: str
    spec: object
    valid: Optional[Callable[[bytes], bool]] = None  # checks a finished text


@dataclass
class Stats:
    steps: int = 0
    tokens: int = 0  # accepted by the grammar, end of sequence included
    model_calls: int = 0  # (request, step) pairs: one forward pass per request per step
    drafted: int = 0
    draft_accepted: int = 0
    draft_refused_by_grammar: int = 0  # tentative acceptance failed while filling rows
    finished: int = 0
    valid_texts: int = 0
    fill_seconds: List[float] = field(default_factory=list)  # per step, the whole batch's rows
    verify_seconds: List[float] = field(default_factory=list)  # per request-step: validate + rollback + accept

    def tokens_per_call(self) -> float:
        return self.tokens / max(self.model_calls, 1)

    def acceptance(self) -> float:
        return self.draft_accepted / max(self.drafted, 1)


def _draft(matcher: GrammarMatcher, k: int, vocab_size: int, rng: random.Random, wild: float) -> List[int]:
    """k tokens from a draft model that follows the grammar, except that with
    probability `wild` it proposes any token at all."""
    scout = matcher.matcher.clone()
    out = []
    for _ in range(k):
        if scout.is_finished():
            break
        if rng.random() < wild:
            token = rng.randrange(vocab_size)
        else:
            allowed = scout.allowed_tokens()
            if not allowed:
                break
            token = rng.choice(allowed)
        out.append(token)
        if scout.advance(token) == cgram.AdvanceResult.REJECTED:
            break
    return out


def run(backend: Backend, requests: List[Request], *, steps: int, draft_tokens: int = 0, agreement: float = 0.7,
        wild: float = 0.1, eos_bias: float = 3.0, seed: int = 0, check=None) -> Stats:
    """Drives the batch for `steps` steps (or until every request ended).
    `check(condition, message)` reports a broken invariant (default: assert)."""
    if check is None:
        def check(condition, message):
            assert condition, message
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    vocab = backend.vocab
    eos_ids = vocab.eos_ids
    matchers = [backend.matcher(r.kind, r.spec) for r in requests]
    references = [cgram.Matcher(m.compiled) for m in matchers]
    texts: List[List[int]] = [[] for _ in requests]
    rows_per_request = 1 + draft_tokens
    bitmask = backend.allocate_token_bitmask(len(requests) * rows_per_request)
    stats = Stats()
    for _ in range(steps):
        active = [i for i, m in enumerate(matchers) if not m.is_terminated()]
        if not active:
            break
        stats.steps += 1
        stats.model_calls += len(active)
        drafts = {i: _draft(matchers[i], draft_tokens, vocab.size, rng, wild) for i in active}

        # 1 + k rows per request: row j is the mask after the first j draft tokens.
        started = time.perf_counter()
        used_rows = {}
        if draft_tokens == 0:
            backend.fill_bitmask([matchers[i] for i in active], bitmask, active)
            used_rows = {i: 1 for i in active}
        else:
            for i in active:
                m, base, taken, filled = matchers[i], i * rows_per_request, 0, 0
                for j in range(len(drafts[i]) + 1):
                    m.fill_bitmask(bitmask, base + j)
                    filled = j + 1
                    if j == len(drafts[i]):
                        break
                    if not m.accept_tokens([drafts[i][j]]):
                        stats.draft_refused_by_grammar += 1
                        break
                    taken += 1
                    if m.is_terminated():  # a draft that ends: no row after it
                        break
                used_rows[i] = filled
                m.rollback(taken)
        stats.fill_seconds.append(time.perf_counter() - started)

        # The target model: random logits, a little pull towards the end and
        # towards the draft's tokens; the mask; one sample per row.
        logits = torch.randn((bitmask.shape[0], backend.vocab_size), generator=generator)
        logits[:, eos_ids] += eos_bias
        for i in active:
            for j, token in enumerate(drafts[i][: used_rows[i]]):
                if rng.random() < agreement:
                    logits[i * rows_per_request + j, token] += 30.0
        apply_token_bitmask_inplace(logits, bitmask)
        rows = [i * rows_per_request + j for i in active for j in range(used_rows[i])]
        samples = dict(zip(rows, torch.multinomial(torch.softmax(logits[rows], dim=-1), 1, generator=generator)
                           .squeeze(1).tolist()))

        for i in active:
            m, reference = matchers[i], references[i]
            base, draft = i * rows_per_request, drafts[i]
            # The longest prefix where the target agrees with the draft, then the target's own token.
            chosen = []
            for j in range(used_rows[i]):
                token = samples[base + j]
                check(token < vocab.size, f"request {i}: padding id {token} was sampled")
                chosen.append(token)
                if j >= len(draft) or token != draft[j] or token in eos_ids:
                    break
            stats.drafted += len(draft)
            stats.draft_accepted += sum(1 for a, b in zip(chosen, draft) if a == b)
            started = time.perf_counter()
            valid = m.validate_tokens(chosen)
            check(valid == chosen, f"request {i}: the grammar refused sampled tokens {chosen} (kept {valid})")
            check(m.accept_tokens(chosen), f"request {i}: accept_tokens refused {chosen}")
            stats.verify_seconds.append(time.perf_counter() - started)
            for token in chosen:
                check(reference.is_allowed(token), f"request {i}: token {token} is not allowed by the plain matcher")
                reference.advance(token)
            stats.tokens += len(chosen)
            texts[i].extend(chosen)
            check(m.is_terminated() == reference.is_finished(), f"request {i}: terminated differs")
            if m.is_terminated():
                stats.finished += 1
                text = vocab.decode([t for t in texts[i] if t not in eos_ids])
                ok = requests[i].valid is None or requests[i].valid(text)
                check(ok, f"request {i} ({requests[i].kind}): the finished text is not valid: {text!r}")
                stats.valid_texts += ok
    return stats

"""Constrained generation with cgram's Python package, without a model:
random logits stand in for one, and the grammar makes every document valid.

    build/python/python examples/python/generate_json.py [tokenizer.json]

With a Hugging Face model the processor goes into generate() as it is:
    model.generate(..., logits_processor=LogitsProcessorList([processor]))
"""

import json
import sys

import torch

import cgram
from cgram.logits import GrammarLogitsProcessor

# A vocabulary: a tokenizer.json, tiktoken or GGUF file, or the bundled one (Phi-3).
vocab = cgram.Vocabulary.load(sys.argv[1]) if len(sys.argv) > 1 else cgram.Vocabulary.bundled()

# A JSON Schema, as a tool definition would give it (GBNF and .cgram work the same way).
schema = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 10},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "units": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
try:
    grammar = cgram.Grammar.from_json_schema(schema, whitespace="compact")
except cgram.GrammarError as error:
    for diagnostic in error.diagnostics:  # each with its line and column in the schema
        print(diagnostic, file=sys.stderr)
    raise SystemExit(1)
compiled = cgram.compile(grammar, vocab)

# One matcher by hand: the mask is ceil(V / 32) int32 words, bit t set when token t is allowed.
matcher = cgram.Matcher(compiled)
mask = matcher.mask()
print(f"{len(matcher.allowed_tokens())} of {compiled.vocab_size} tokens may start a document "
      f"({mask.size} mask words)")

# A batch through the logits processor, as a generate() loop calls it.
batch, eos = 4, vocab.eos_ids[0]
processor = GrammarLogitsProcessor(compiled)
generator = torch.Generator().manual_seed(0)
input_ids = torch.zeros((batch, 1), dtype=torch.long)  # the prompts
finished = torch.zeros(batch, dtype=torch.bool)
for _ in range(200):
    scores = torch.randn(batch, compiled.vocab_size, generator=generator) * 5  # the "model"
    scores = processor(input_ids, scores)  # -inf wherever the grammar forbids
    next_tokens = torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator).squeeze(1)
    next_tokens = torch.where(finished, torch.full_like(next_tokens, eos), next_tokens)
    finished |= next_tokens == eos
    input_ids = torch.cat([input_ids, next_tokens.unsqueeze(1)], dim=1)
    if finished.all():
        break

for row in input_ids[:, 1:].tolist():
    text = vocab.decode(row[: row.index(eos)] if eos in row else row).decode()
    document = json.loads(text)  # never fails: the grammar allows only valid documents
    assert set(document) >= {"city", "days"} and 1 <= document["days"] <= 14
    print(text)

#pragma once
// An n-gram model of token ids (up to 5 tokens), counted over documents:
// what `cgram generate --corpus` samples with instead of a language model,
// so that the demo's text reads like the documents. Masked by the grammar,
// the text stays in the grammar's language whatever the counts say.
#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace cgram::cli {

class NgramSampler {
 public:
  static constexpr size_t kOrder = 5;  // a token and the four before it
  // Each document's tokens, then `end` (the end-of-sequence id): the model
  // learns where documents stop.
  NgramSampler(const std::vector<std::vector<uint32_t>>& documents, uint32_t end);
  // One of `allowed`, drawn with weights interpolated from the counts after
  // the last tokens of `before`, the longest context seen weighing most.
  // Every allowed token keeps a small weight: the grammar, not the corpus,
  // says what may come.
  uint32_t pick(std::span<const uint32_t> allowed, std::span<const uint32_t> before, std::mt19937_64& rng) const;

 private:
  // Per context length: context hash → (next token → count).
  using Counts = std::unordered_map<uint64_t, std::unordered_map<uint32_t, uint32_t>>;
  static uint64_t context_hash(std::span<const uint32_t> context);
  static constexpr uint32_t kStart = UINT32_MAX;  // before a document's first token
  std::vector<Counts> counts_ = std::vector<Counts>(kOrder);
};

}  // namespace cgram::cli

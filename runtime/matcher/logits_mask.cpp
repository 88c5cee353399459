#include "logits_mask.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace cgram {
namespace {

// -inf as the half types' bits.
constexpr uint16_t kFloat16MinusInfinity = 0xFC00u;
constexpr uint16_t kBFloat16MinusInfinity = 0xFF80u;

template <typename Element>
void apply(Element* logits, Element minus_infinity, size_t vocab, std::span<const uint32_t> mask) {
  const size_t covered = std::min(vocab, mask.size() * 32);
  for (size_t word = 0; word * 32 < covered; ++word) {
    const size_t base = word * 32;
    const size_t count = std::min<size_t>(32, covered - base);
    uint32_t clear = ~mask[word];
    if (count < 32) clear &= (uint32_t{1} << count) - 1;
    if (clear == 0) continue;  // every token allowed: the common case in free text
    if (clear == UINT32_MAX) {
      std::fill_n(logits + base, 32, minus_infinity);
      continue;
    }
    // A mixed word: only the disallowed elements are written.
    for (; clear != 0; clear &= clear - 1) logits[base + static_cast<size_t>(std::countr_zero(clear))] = minus_infinity;
  }
  std::fill(logits + covered, logits + vocab, minus_infinity);
}

}  // namespace

std::optional<LogitsType> parse_logits_type(std::string_view name) {
  if (name == "float32") return LogitsType::Float32;
  if (name == "float16") return LogitsType::Float16;
  if (name == "bfloat16") return LogitsType::BFloat16;
  return std::nullopt;
}

size_t logits_type_bytes(LogitsType type) { return type == LogitsType::Float32 ? 4 : 2; }

void apply_mask_to_logits(void* logits, LogitsType type, size_t vocab, std::span<const uint32_t> mask) {
  switch (type) {
    case LogitsType::Float32:
      return apply(static_cast<float*>(logits), -std::numeric_limits<float>::infinity(), vocab, mask);
    case LogitsType::Float16: return apply(static_cast<uint16_t*>(logits), kFloat16MinusInfinity, vocab, mask);
    case LogitsType::BFloat16: return apply(static_cast<uint16_t*>(logits), kBFloat16MinusInfinity, vocab, mask);
  }
}

}  // namespace cgram

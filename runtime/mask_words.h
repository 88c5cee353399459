#pragma once
// Whole-mask operations on 32-bit mask words, written so that the compiler
// makes vector code of them at -O2 (a scalar loop over 4,000 words, one
// mask of a 128,000-token vocabulary, costs a microsecond and more).
#include <algorithm>
#include <cstdint>
#include <span>

namespace cgram {

// into[i] |= from[i] over the shorter of the two.
inline void or_words(std::span<uint32_t> into, std::span<const uint32_t> from) {
  // 32 bytes at a time, at any alignment of the words.
  typedef uint32_t Block __attribute__((vector_size(32), aligned(4), may_alias));
  const size_t n = std::min(into.size(), from.size());
  uint32_t* out = into.data();
  const uint32_t* in = from.data();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) *reinterpret_cast<Block*>(out + i) |= *reinterpret_cast<const Block*>(in + i);
  for (; i < n; ++i) out[i] |= in[i];
}

}  // namespace cgram

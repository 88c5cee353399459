#pragma once
// Whole-mask operations on 32-bit mask words, written as vector code (GCC
// and Clang vector extensions): at -O2 the compiler leaves a plain loop
// scalar, and a scalar pass over one mask of a 128,000-token vocabulary
// (4,000 words) costs a microsecond and more.
#include <algorithm>
#include <cstdint>
#include <span>

namespace cgram {

// into[i] |= from[i] over the shorter of the two.
inline void or_words(std::span<uint32_t> into, std::span<const uint32_t> from) {
  // 16 bytes at a time (a register on every x86-64 and ARM64 target), at
  // any alignment of the words.
  typedef uint32_t Block __attribute__((vector_size(16), aligned(4), may_alias));
  const size_t n = std::min(into.size(), from.size());
  uint32_t* out = into.data();
  const uint32_t* in = from.data();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) *reinterpret_cast<Block*>(out + i) |= *reinterpret_cast<const Block*>(in + i);
  for (; i < n; ++i) out[i] |= in[i];
}

}  // namespace cgram

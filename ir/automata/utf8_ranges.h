#pragma once
// Code point ranges → sequences of UTF-8 byte ranges. A range of scalar
// values is split so that each piece is exactly the set of byte strings
// [lo0-hi0][lo1-hi1]… (the construction used by RE2 and Rust's regex).
#include <array>
#include <cstdint>
#include <vector>

#include "charset.h"

namespace cgram::ir {

struct ByteRange {
  uint8_t lo;
  uint8_t hi;
};

struct Utf8Sequence {
  std::array<ByteRange, 4> bytes;
  uint8_t length;
};

// Surrogates inside [lo, hi] are skipped.
std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi);
std::vector<Utf8Sequence> utf8_sequences(const CodePointSet& set);

}  // namespace cgram::ir

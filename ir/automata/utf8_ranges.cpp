#include "utf8_ranges.h"

#include <string>

#include "utf8.h"

namespace cgram::ir {
namespace {

uint32_t encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  // Different encoded lengths: cut at the boundary.
  static constexpr uint32_t boundaries[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t b : boundaries) {
    if (lo <= b && hi > b) {
      split(lo, b, out);
      split(b + 1, hi, out);
      return;
    }
  }
  // Same length: cut until every continuation byte position spans a full
  // 0x80..0xBF range below the first position that differs.
  uint32_t length = encoded_length(lo);
  for (uint32_t i = 1; i < length; ++i) {
    uint32_t mask = (1u << (6 * i)) - 1;
    if ((lo & ~mask) != (hi & ~mask)) {
      if ((lo & mask) != 0) {
        split(lo, lo | mask, out);
        split((lo | mask) + 1, hi, out);
        return;
      }
      if ((hi & mask) != mask) {
        split(lo, (hi & ~mask) - 1, out);
        split(hi & ~mask, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  Utf8Sequence seq{};
  seq.length = static_cast<uint8_t>(length);
  for (uint32_t i = 0; i < length; ++i)
    seq.bytes[i] = {static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])};
  out.push_back(seq);
}

}  // namespace

std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<Utf8Sequence> out;
  if (hi > 0x10FFFF) hi = 0x10FFFF;
  if (lo > hi) return out;
  if (lo < 0xD800 && hi > 0xDFFF) {
    split(lo, 0xD7FF, out);
    split(0xE000, hi, out);
  } else if (hi < 0xD800 || lo > 0xDFFF) {
    split(lo, hi, out);
  } else if (lo < 0xD800) {
    split(lo, 0xD7FF, out);
  } else if (hi > 0xDFFF) {
    split(0xE000, hi, out);
  }
  return out;
}

std::vector<Utf8Sequence> utf8_sequences(const CodePointSet& set) {
  std::vector<Utf8Sequence> out;
  for (auto [lo, hi] : set.ranges()) {
    auto part = utf8_sequences(lo, hi);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

}  // namespace cgram::ir

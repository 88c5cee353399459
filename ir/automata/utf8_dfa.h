#pragma once
// The UTF-8 validity automaton: where the text stands inside a character.
//
// The language is over UTF-8 text. Literals and regexes only ever match whole
// characters, but except! text and any! tokens are read byte by byte, so the
// matcher tracks the state of the character in progress there: a state is
// how many continuation bytes are still needed, with the narrowed ranges that
// rule out overlong forms, surrogates and values above U+10FFFF.
#include <cstdint>

namespace cgram::ir::utf8 {

using State = uint8_t;
inline constexpr State kBoundary = 0;     // between characters
inline constexpr State kInvalid = 0xFF;   // no continuation repairs the text
inline constexpr State kStateCount = 8;

// 1..3: that many continuation bytes (80–BF) still needed; 4: after E0 (A0–BF,
// then one); 5: after ED (80–9F, then one); 6: after F0 (90–BF, then two);
// 7: after F4 (80–8F, then two).
constexpr State step(State s, uint8_t b) {
  switch (s) {
    case kBoundary:
      if (b < 0x80) return kBoundary;
      if (b >= 0xC2 && b <= 0xDF) return 1;
      if (b == 0xE0) return 4;
      if (b == 0xED) return 5;
      if (b >= 0xE1 && b <= 0xEF) return 2;
      if (b == 0xF0) return 6;
      if (b >= 0xF1 && b <= 0xF3) return 3;
      if (b == 0xF4) return 7;
      return kInvalid;
    case 1: return b >= 0x80 && b <= 0xBF ? kBoundary : kInvalid;
    case 2: return b >= 0x80 && b <= 0xBF ? 1 : kInvalid;
    case 3: return b >= 0x80 && b <= 0xBF ? 2 : kInvalid;
    case 4: return b >= 0xA0 && b <= 0xBF ? 1 : kInvalid;
    case 5: return b >= 0x80 && b <= 0x9F ? 1 : kInvalid;
    case 6: return b >= 0x90 && b <= 0xBF ? 2 : kInvalid;
    case 7: return b >= 0x80 && b <= 0x8F ? 2 : kInvalid;
    default: return kInvalid;
  }
}

// The bytes that continue state s validly (s is not the boundary).
constexpr bool continues(State s, uint8_t b) { return s != kBoundary && step(s, b) != kInvalid; }

template <typename Bytes>
constexpr State run(State s, const Bytes& bytes) {
  for (char c : bytes) {
    if (s == kInvalid) return s;
    s = step(s, static_cast<uint8_t>(c));
  }
  return s;
}

}  // namespace cgram::ir::utf8

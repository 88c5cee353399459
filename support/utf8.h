#pragma once
// UTF-8 encoding and decoding of Unicode scalar values.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cgram {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes one scalar value at `text[pos]`, advancing `pos`. Returns nullopt
// (and advances by one byte) on an invalid, overlong or surrogate sequence.
inline std::optional<uint32_t> decode_utf8(std::string_view text, size_t& pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char b0 = byte(pos);
  size_t length = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || pos + length > text.size()) {
    ++pos;
    return std::nullopt;
  }
  uint32_t cp = length == 1 ? b0 : length == 2 ? (b0 & 0x1F) : length == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) {
      ++pos;
      return std::nullopt;
    }
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  static constexpr uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_length[length] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++pos;
    return std::nullopt;
  }
  pos += length;
  return cp;
}

inline std::optional<size_t> first_invalid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    size_t at = pos;
    if (!decode_utf8(text, pos)) return at;
  }
  return std::nullopt;
}

}  // namespace cgram

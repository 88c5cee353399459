#pragma once
// Writing .cgram text (the translators of import/ emit it): characters of
// a literal and of a regex class, escaped so that the text stays readable
// and means exactly the code point.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "utf8.h"

namespace cgram {

// Controls (C0, DEL, C1) are written as escapes; other characters as themselves.
inline bool needs_code_point_escape(uint32_t cp) { return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0); }

// One character inside a quoted literal ('…').
inline std::string literal_char(uint32_t cp) {
  switch (cp) {
    case '\'': return "\\'";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (needs_code_point_escape(cp)) return fmt::format("\\u{{{:X}}}", cp);
  std::string out;
  append_utf8(out, cp);
  return out;
}

// A quoted literal of valid UTF-8 text.
inline std::string quote_literal(std::string_view text) {
  std::string out = "'";
  for (size_t pos = 0; pos < text.size();) {
    auto cp = decode_utf8(text, pos);
    out += literal_char(cp ? *cp : 0xFFFD);
  }
  return out + "'";
}

// One character inside a regex class ([…]) of a regex terminal (#'…').
inline std::string class_char(uint32_t cp) {
  if (cp == '\'' || cp == '\\' || cp == ']' || cp == '[' || cp == '^' || cp == '-')
    return fmt::format("\\{}", static_cast<char>(cp));
  if (cp == '\n') return "\\n";
  if (cp == '\t') return "\\t";
  if (cp == '\r') return "\\r";
  if (needs_code_point_escape(cp)) return fmt::format("\\u{{{:X}}}", cp);
  std::string out;
  append_utf8(out, cp);
  return out;
}

}  // namespace cgram

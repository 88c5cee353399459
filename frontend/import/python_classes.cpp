#include "python_classes.h"

#include <fmt/format.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>

#include <array>
#include <mutex>

namespace cgram {

namespace {

icu::UnicodeSet python_set(char c) {
  UErrorCode status = U_ZERO_ERROR;
  const char* pattern = nullptr;
  switch (c) {
    case 'w': case 'W': pattern = "[\\p{L}\\p{Numeric_Type=Decimal}\\p{Numeric_Type=Digit}\\p{Numeric_Type=Numeric}_]"; break;
    case 'd': case 'D': pattern = "[\\p{Nd}]"; break;
    default: pattern = "[\\t\\n\\u000b\\f\\r\\u001c-\\u001f\\p{Zs}\\p{Bidi_Class=WS}\\p{Bidi_Class=B}\\p{Bidi_Class=S}]";
  }
  icu::UnicodeSet set(icu::UnicodeString::fromUTF8(pattern), status);
  if (U_FAILURE(status)) set.clear();  // ICU without its data: nothing rather than a crash
  if (c == 'W' || c == 'D' || c == 'S') set.complement();
  set.remove(0xD800, 0xDFFF);  // scalar values only
  return set;
}

std::string body_of(const icu::UnicodeSet& set) {
  std::string out;
  for (int32_t i = 0; i < set.getRangeCount(); ++i) {
    const auto lo = static_cast<uint32_t>(set.getRangeStart(i)), hi = static_cast<uint32_t>(set.getRangeEnd(i));
    out += lo == hi ? fmt::format("\\u{{{:x}}}", lo) : fmt::format("\\u{{{:x}}}-\\u{{{:x}}}", lo, hi);
  }
  return out;
}

constexpr std::string_view kEscapes = "wWdDsS";

}  // namespace

const std::string& python_class_body(char c) {
  static std::array<std::string, kEscapes.size()> bodies;
  static std::once_flag once;
  std::call_once(once, [] {
    for (size_t i = 0; i < kEscapes.size(); ++i) bodies[i] = body_of(python_set(kEscapes[i]));
  });
  const size_t at = kEscapes.find(c);
  return bodies[at == std::string_view::npos ? 0 : at];
}

std::string with_python_classes(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (kEscapes.find(e) == std::string_view::npos) {
        out += c;
        out += e;
      } else if (in_class) {
        out += python_class_body(e);
      } else {
        // Outside a class the negated ones are the complement of the plain ones' class.
        const bool negated = e == 'W' || e == 'D' || e == 'S';
        out += (negated ? "[^" : "[") + python_class_body(static_cast<char>(negated ? e + ('a' - 'A') : e)) + "]";
      }
      continue;
    }
    out += c;
    if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
      // A ']' first in the class (after an optional '^') is a member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    }
  }
  return out;
}

}  // namespace cgram

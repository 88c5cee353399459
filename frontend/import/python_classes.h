#pragma once
// Python's `re` reads \w, \d and \s over Unicode (a str pattern without
// the ASCII flag): a Lark grammar's regexes mean that, so the Lark
// translator writes them as explicit classes of code points. (.cgram's own
// \w, \d and \s are ASCII, as docs/LANGUAGE.md says.)
//
//   \w  letters (L*), characters with a numeric value (Numeric_Type
//       Decimal, Digit or Numeric) and '_': str.isalnum() or '_'
//   \d  decimal digits (Nd): str.isdecimal()
//   \s  str.isspace(): \t \n \v \f \r, \x1c-\x1f, and the Zs, WS, B and S
//       characters
#include <string>
#include <string_view>

namespace cgram {

// The body of a character class (no brackets) holding what the escape
// `\c` matches, for c one of w W d D s S: ranges as \u{…}-\u{…}.
const std::string& python_class_body(char c);

// `pattern` (a Lark regex body) with every \w \W \d \D \s \S written as
// Python reads it, inside classes and out; everything else as it was.
std::string with_python_classes(std::string_view pattern);

}  // namespace cgram

#pragma once
// Regexes over JSON text, for the JSON Schema translator (json_schema.h):
// numbers within exact decimal bounds, string characters as JSON writes them,
// object keys outside a set of names, ECMAScript patterns and string
// formats. Every result is the body of a .cgram regex terminal (#'…').
//
// A string character has exactly one spelling here, the one JSON
// serialisers write by default: `\"`, `\\`, `\b \f \n \r \t`, `\u00xx`
// (lower-case hex) for the other controls, and every other character as
// itself (UTF-8). With one spelling per character, lengths, patterns, formats
// and excluded keys are exact on the decoded text; `\/` and `\u0041` for
// other characters are not produced (docs/JSON_SCHEMA.md).
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "charset.h"
#include "error.h"
#include "regex.h"

namespace cgram::json {

// A decimal number, exactly: sign, integer digits without leading zeros
// ("0" for none), fraction digits without trailing zeros.
struct Decimal {
  bool negative = false;
  std::string integer = "0";
  std::string fraction;

  bool is_zero() const { return integer == "0" && fraction.empty(); }
  bool is_integer() const { return fraction.empty(); }
};

// Parses JSON number text ("-1.5e3"); nullopt when it is not one or its
// exponent is beyond ±kMaxDecimalExponent.
inline constexpr int kMaxDecimalExponent = 400;
std::optional<Decimal> parse_decimal(std::string_view text);
// Compares values (−0 equals 0).
int compare(const Decimal& a, const Decimal& b);
// Fixed-point text ("-12.5", "0.001"), as the grammar of bounded numbers writes them.
std::string to_string(const Decimal& d);

struct NumberBound {
  Decimal value;
  bool inclusive = true;
};

// JSON numbers between the bounds (either may be absent), as a regex; nullopt
// when no number is. Unbounded numbers have JSON's whole syntax (exponents
// included); bounded ones are written in fixed point (no exponent), which
// makes the bounds exact digit automata. `integer`: no fraction either.
std::optional<std::string> number_regex(const std::optional<NumberBound>& lower,
                                        const std::optional<NumberBound>& upper, bool integer);

// The spellings of the characters of `set` inside a JSON string; nullopt
// when the set is empty.
std::optional<std::string> string_char_regex(const ir::CodePointSet& set);
// Any character of a JSON string.
std::string any_string_char_regex();
// The JSON text of a string (quotes included), with the one spelling above.
std::string json_string_text(std::string_view utf8);
// A regex matching exactly `text` (any bytes of valid UTF-8).
std::string regex_literal(std::string_view text);

// A regex over the text inside a JSON string's quotes for a regex over the
// decoded characters; nullopt when it matches nothing.
std::optional<std::string> encode_regex(const ir::RegexNode& node);

// A JSON string (quotes included) whose value is none of `names`
// (nullopt when the names' trie has more than `max_nodes` nodes: the regex is
// built recursively, a level per character, and grows with the trie.)
std::optional<std::string> key_not_in_regex(const std::vector<std::string>& names, size_t max_nodes = SIZE_MAX);

// An ECMAScript `pattern` of JSON Schema (unanchored: it may match anywhere
// in the string unless it starts with ^ or ends with $), as a regex over the
// decoded characters in cgram's syntax. `.` and `\s` get their ECMAScript
// meaning. An error says what is not supported.
Result<std::string> ecma_pattern_to_regex(std::string_view pattern);

// A pattern that starts with look-aheads, `^(?=A)(?!B)R`, as patterns of
// their own: the strings R matches from the start (`rest`, `^R`), that A
// matches from the start (`within`, `^(?:A)`) and that B does not
// (`outside`, `^(?:B)`). nullopt when the pattern has no such start
// (look-aheads elsewhere stay unsupported).
struct LookaheadParts {
  std::string rest;
  std::vector<std::string> within, outside;
};
std::optional<LookaheadParts> leading_lookaheads(std::string_view pattern);

// A string `format`, as a regex over the decoded characters; nullopt when
// the format is unknown. `note` names what the regex does not enforce (the
// 253-character limit of hostnames), empty when it is exact.
struct FormatRegex {
  std::string regex;
  std::string not_enforced;
};
std::optional<FormatRegex> format_regex(std::string_view format);

}  // namespace cgram::json

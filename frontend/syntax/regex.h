#pragma once
// The regex sub-language of .cgram: regular languages over Unicode code
// points. Everything that is not regular (backreferences, lookaround,
// anchors) or not supported (lazy quantifiers, the x flag) is an error
// with its position inside the regex.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "charset.h"

namespace cgram::ir {

inline constexpr uint32_t kRegexUnbounded = UINT32_MAX;
// Repetitions are copied up to this bound; one repetition of a regex may
// go up to kMaxCountedRepeat, kept as a counter (automata/counted.h).
inline constexpr uint32_t kMaxRegexRepeat = 1000;
inline constexpr uint32_t kMaxCountedRepeat = 1u << 24;

struct RegexNode {
  enum class Kind { Empty, Set, Concat, Alternation, Repeat };
  Kind kind = Kind::Empty;
  CodePointSet set;                 // Set
  std::vector<RegexNode> children;  // Concat, Alternation, Repeat (one child)
  uint32_t min = 0, max = 0;        // Repeat
};

struct RegexError {
  size_t offset = 0;  // byte offset inside the regex body
  size_t length = 1;
  std::string message;
};

// Groups inside one another: the default limit, and the most any option
// can ask for (the parser and every walk of the tree recurse per group).
inline constexpr uint32_t kMaxRegexNesting = 256;
inline constexpr uint32_t kMaxRegexNestingCeiling = 1000;

// Either the parsed regex or the first error.
using RegexParseResult = std::variant<RegexNode, RegexError>;
RegexParseResult parse_regex(std::string_view pattern, uint32_t max_nesting = kMaxRegexNesting);

// The regex as .cgram regex text (what goes between #' and '), which
// parses back to the same language: classes written with escapes where
// needed, groups as (?:…).
std::string regex_text(const RegexNode& node);

// Sets used by escapes and '.', shared with tests.
CodePointSet regex_digit();
CodePointSet regex_word();
CodePointSet regex_space();
CodePointSet regex_dot();

}  // namespace cgram::ir

#pragma once
// The abstract syntax tree of a .cgram grammar. Every node carries the source
// range it was written at, so every later stage can point at the user's text.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "source.h"

namespace cgram::ast {

inline constexpr uint32_t kUnbounded = UINT32_MAX;

enum class ExprKind {
  Literal,      // text: the decoded bytes
  Regex,        // text: the regex source between the quotes
  RuleRef,      // text: the rule name
  Sequence,     // children in order
  Alternation,  // children are the alternatives
  Repeat,       // children[0] repeated min..max times (max may be kUnbounded)
  AnyToken,     // any!
  Except,       // children[0]: the set S; except_count: optional n
};

struct Expr {
  ExprKind kind = ExprKind::Sequence;
  SourceRange range;
  std::string text;
  // For Regex: byte offset in the source file of the first character of the
  // regex body, so regex errors can point inside it.
  uint32_t body_offset = 0;
  std::vector<Expr> children;
  uint32_t min = 0;
  uint32_t max = 0;
  std::optional<uint64_t> except_count;
  SourceRange count_range;
  // True when the front end already reported an error for this node (for
  // example an unterminated literal) and later checks should stay quiet.
  bool poisoned = false;
};

// One `name ::= expr ;` definition. A name defined twice adds alternatives.
struct RuleDef {
  std::string name;
  SourceRange name_range;
  Expr body;
};

struct Grammar {
  std::vector<RuleDef> rules;
};

const char* kind_name(ExprKind kind);

}  // namespace cgram::ast

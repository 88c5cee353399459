#include "ast.h"

namespace cgram::ast {

const char* kind_name(ExprKind kind) {
  switch (kind) {
    case ExprKind::Literal: return "literal";
    case ExprKind::Regex: return "regex";
    case ExprKind::RuleRef: return "rule reference";
    case ExprKind::Sequence: return "sequence";
    case ExprKind::Alternation: return "alternation";
    case ExprKind::Repeat: return "repetition";
    case ExprKind::AnyToken: return "any!";
    case ExprKind::Except: return "except!";
  }
  return "expression";
}

}  // namespace cgram::ast

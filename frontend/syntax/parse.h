#pragma once
// Text → AST. Syntax errors are reported in the grammar author's terms.
#include "ast.h"
#include "diagnostics.h"

namespace cgram {

// Limits that keep hostile grammars bounded (docs/LIMITS.md): the defaults.
inline constexpr uint64_t kMaxRepeatBound = 10000;
inline constexpr uint64_t kMaxExceptCount = 1000000;
inline constexpr size_t kMaxSourceBytes = 16u << 20;
inline constexpr uint32_t kMaxNesting = 256;
// Nesting is walked recursively (the parser, the AST, lowering, regexes):
// no option can raise it past this, which stays far from the stack's end
// even under AddressSanitizer.
inline constexpr uint32_t kMaxNestingCeiling = 1000;

struct SyntaxLimits {
  size_t max_source_bytes = kMaxSourceBytes;
  // Groups, brackets, braces, except! and stacked repetition suffixes
  // (`'a'???` is three levels), inside one another; regexes count their
  // groups and suffixes the same way. Clamped to kMaxNestingCeiling.
  uint32_t max_nesting = kMaxNesting;
  uint64_t max_repeat_bound = kMaxRepeatBound;
  uint64_t max_except_count = kMaxExceptCount;
  // Diagnostics kept and shown (the rest are counted): a file of stray
  // characters would otherwise give millions.
  size_t max_errors = 100;
  bool operator==(const SyntaxLimits&) const = default;
};

// Parses `file`. The returned AST holds whatever could be parsed; check
// `diags.has_errors()` before trusting it.
ast::Grammar parse_grammar(const SourceFile& file, Diagnostics& diags, const SyntaxLimits& limits = {});

// Decodes a quoted literal token (quotes included) into bytes, reporting bad
// escapes at their position. Returns false when an error was reported.
bool decode_literal(const SourceFile& file, uint32_t token_offset, std::string_view token,
                    std::string& out, Diagnostics& diags);

}  // namespace cgram

#pragma once
// Text → AST. Syntax errors are reported in the grammar author's terms.
#include "ast.h"
#include "diagnostics.h"

namespace cgram {

// Limits that keep hostile grammars bounded (documented in docs/LANGUAGE.md).
inline constexpr uint64_t kMaxRepeatBound = 10000;
inline constexpr uint64_t kMaxExceptCount = 1000000;
inline constexpr size_t kMaxSourceBytes = 16u << 20;

// Parses `file`. The returned AST holds whatever could be parsed; check
// `diags.has_errors()` before trusting it.
ast::Grammar parse_grammar(const SourceFile& file, Diagnostics& diags);

// Decodes a quoted literal token (quotes included) into bytes, reporting bad
// escapes at their position. Returns false when an error was reported.
bool decode_literal(const SourceFile& file, uint32_t token_offset, std::string_view token,
                    std::string& out, Diagnostics& diags);

}  // namespace cgram

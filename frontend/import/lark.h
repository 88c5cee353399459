#pragma once
// Lark grammars → .cgram text, in the dialect constrained-decoding engines
// read (llguidance's, which XGrammar follows): rules (lowercase) and
// terminals (UPPERCASE), `?rule` and `!rule`, aliases, priorities,
// templates, `"text"i`, `"a".."z"`, `/regex/flags`, `~ n..m` and `{m,n}`,
// `%import common`, `%ignore`, and llguidance's `%json { schema }`,
// `%regex { "substring_…" }`, `%llguidance { … }` and rule attributes
// (`lazy`, `stop=`, `suffix=`, `max_tokens=`, `max_chars=`, captures and
// temperatures, which change no text).
//
// The language is the one of the context-free grammar, as in XGrammar and
// Lark's Earley parser with its dynamic lexer: every way of reading the
// text counts, and a priority never changes which texts match. `%ignore`
// text may follow every lexeme of a rule (a terminal, a literal, a regex),
// never inside a terminal, and not before the first lexeme unless
// `%grammar_options {"allow_initial_skip": true}`. docs/LARK.md has the
// whole mapping and what is refused (special tokens, `@name`, `%lark`,
// imports other than `common`), each refusal a diagnostic at its Lark
// position.
//
// `cgram convert g.lark` writes the translation with the Lark comments kept
// as (* … *), one definition per rule, alternatives on the lines Lark had.
#include <optional>
#include <string>
#include <string_view>

#include "diagnostics.h"
#include "json_schema.h"
#include "parse.h"
#include "source.h"
#include "translation.h"

namespace cgram {

// Translates `lark`; errors (with Lark positions) go to `diags`, which must
// be bound to `lark`. Nothing is returned when there was an error.
// `entry` is the Lark start rule; `json` the layout of `%json` values.
std::optional<Translation> translate_lark(const SourceFile& lark, Diagnostics& diags,
                                          const SyntaxLimits& limits = {}, const std::string& entry = "start",
                                          const JsonSchemaOptions& json = {});

// Whether a path names a Lark file (by its extension: .lark).
bool is_lark_path(std::string_view path);

}  // namespace cgram

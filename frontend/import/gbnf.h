#pragma once
// GBNF (llama.cpp's grammar format) → .cgram text, with llama.cpp's meaning:
// the start rule is `root`; a rule ends at a newline unless inside
// parentheses or right after `::=` or `|`; `[...]`, `[^...]` and `.` range
// over every code point, newline included; repetition `* + ? {m} {m,}
// {m,n}`; escapes `\xHH \uHHHH \UHHHHHHHH \n \r \t \\ \" \[ \]`; `#`
// comments; rule names `[A-Za-z0-9-]`; a rule defined twice keeps its last
// definition (cgram warns); left recursion is refused. docs/LANGUAGE.md
// lists where cgram differs (token terminals, characters UTF-8 cannot hold).
//
// The translation keeps the layout and the comments (as `(* … *)`), so that
// `cgram convert` writes a readable file, and keeps a map from its offsets to
// the GBNF text's, so that diagnostics found later point into the GBNF file.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "diagnostics.h"
#include "parse.h"
#include "source.h"
#include "translation.h"

namespace cgram {


// Translates `gbnf`; errors (with GBNF positions) go to `diags`, which must
// be bound to `gbnf`. Nothing is returned when there was an error.
// `entry` is the GBNF start rule.
std::optional<Translation> translate_gbnf(const SourceFile& gbnf, Diagnostics& diags,
                                              const SyntaxLimits& limits = {}, const std::string& entry = "root");

// Whether a path names a GBNF file (by its extension).
bool is_gbnf_path(std::string_view path);

}  // namespace cgram

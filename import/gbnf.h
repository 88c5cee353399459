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

namespace cgram {

struct GbnfTranslation {
  std::string cgram;  // the equivalent .cgram text
  // GBNF rule name → .cgram rule name ('-' is not allowed in .cgram names).
  std::map<std::string, std::string> names;
  // The .cgram name of the entry rule the translation adds (`start ::= root`).
  std::string start;
  // The bytes of that added first line, and where the GBNF start rule is
  // defined (what diagnostics of the added line point at).
  uint32_t header_bytes = 0;
  uint32_t entry_offset = 0;
  // (offset in `cgram`, offset in the GBNF text) at the start of every
  // translated token, ascending in both.
  OffsetMap offsets;

  // The GBNF offset of the token that holds .cgram offset `offset`.
  uint32_t gbnf_offset(uint32_t offset) const;
};

// Translates `gbnf`; errors (with GBNF positions) go to `diags`, which must
// be bound to `gbnf`. Nothing is returned when there was an error.
// `entry` is the GBNF start rule.
std::optional<GbnfTranslation> translate_gbnf(const SourceFile& gbnf, Diagnostics& diags,
                                              const SyntaxLimits& limits = {}, const std::string& entry = "root");

// Whether a path names a GBNF file (by its extension).
bool is_gbnf_path(std::string_view path);

}  // namespace cgram

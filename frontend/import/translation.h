#pragma once
// A grammar written in another notation (GBNF, Lark) and translated to
// .cgram text: the text, the names its rules got, and the way back from
// each piece of the text to the notation's, so that diagnostics found
// later point into the file the author wrote.
#include <cstdint>
#include <map>
#include <string>

#include "source.h"

namespace cgram {

struct Translation {
  std::string cgram;  // the equivalent .cgram text
  // Rule name in the source notation → .cgram rule name.
  std::map<std::string, std::string> names;
  // The .cgram name of the start rule.
  std::string start;
  // The bytes of a first line the translation adds (GBNF's `start ::= root`),
  // and where the source's start rule is defined (what diagnostics of that
  // line point at); 0 when nothing is added.
  uint32_t header_bytes = 0;
  uint32_t entry_offset = 0;
  // (offset in `cgram`, offset in the source) at the start of every
  // translated token, ascending in both.
  OffsetMap offsets;

  // The source offset of the token that holds .cgram offset `offset`.
  uint32_t source_offset(uint32_t offset) const { return original_offset(offsets, offset); }
};

}  // namespace cgram

#pragma once
// A whole text against a grammar, without a vocabulary: what `cgram match`
// answers. The text is complete (a sentence), a viable prefix, or rejected at
// the first byte that no sentence continues.
//
// any! spans any non-empty text here and except!(S, n) token counts are not
// checked: with no vocabulary there are no tokens. The matcher's own engine
// runs over a vocabulary of the 256 single bytes, one byte a step.
#include <cstddef>
#include <string>
#include <string_view>

#include "grammar.h"

namespace cgram {

enum class TextVerdict { Complete, Prefix, Rejected };
const char* text_verdict_name(TextVerdict v);

struct TextMatch {
  TextVerdict verdict = TextVerdict::Rejected;
  size_t viable_bytes = 0;  // the longest viable prefix (all of the text unless rejected)
  std::string error;        // the text could not be matched at all (a limit, see below)
};

// The engine's work for one byte of text (EngineLimits::max_work_per_call,
// one call a byte). The grammars of bench/suite need under 512;
// `s ::= s s | 'a' | ''` grows with the text and passes 65,536 at byte 180.
// (16,384 refused 145 of 32,898 texts of the random differential, seeds
// 0-1999; 65,536 refuses 63, no slower: docs/BENCHMARKS.md.)
inline constexpr size_t kDefaultMatchWorkPerByte = 65536;

TextMatch match_text(const Grammar& grammar, std::string_view text,
                     size_t max_work_per_byte = kDefaultMatchWorkPerByte);

}  // namespace cgram

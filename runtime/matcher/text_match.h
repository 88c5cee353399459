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

// The engine's work over a text, amortised: kMatchSlackBytes times
// max_work_per_byte for the whole text, and max_work_per_byte more for
// every byte read (the end-of-text check gets the whole text's again). The
// grammars of bench/suite need under 512 units a byte. On an ambiguous
// grammar a byte's work grows with the text before it (with the square of
// its length, as an Earley parser's does), so a bound per byte would refuse
// texts whose whole reading takes a fraction of a second; by default the
// slack is about a second of work (`start ::= value "c" ; a = #"."* | b2 ;
// b2 ::= a a a ; value ::= a ;` reads 340 bytes within it in 0.7 s; the
// reference recognizer takes 0.7-0.8 s on 300).
inline constexpr size_t kDefaultMatchWorkPerByte = 65536;
inline constexpr size_t kMatchSlackBytes = 2048;

TextMatch match_text(const Grammar& grammar, std::string_view text,
                     size_t max_work_per_byte = kDefaultMatchWorkPerByte);

}  // namespace cgram

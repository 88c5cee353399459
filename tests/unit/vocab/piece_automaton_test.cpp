// The pre-tokenizer as an automaton (vocab/tokenizer/piece_automaton.h):
// where the first piece of a text ends, and whether more text could move
// it, equal ICU's matcher on the real tokenizers' patterns; what it cannot
// model it refuses, and the finder keeps ICU there.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "encoder.h"
#include "helpers.h"
#include "piece_automaton.h"
#include "utf8.h"
#include "vocabulary.h"

using namespace cgram;

namespace {

// The patterns of GPT-2, Llama 3 and cl100k, and o200k.
const char* const kPatterns[] = {
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

// Characters each pattern tells apart: letters of each case (and the
// contractions' letters), digits of several scripts, every kind of white
// space, line breaks, punctuation, marks, CJK, an emoji, and characters
// whose case folding is special (ſ folds to s, K to k, ß to ss).
const std::vector<std::string>& alphabet() {
  static const std::vector<std::string> chars = [] {
    std::vector<std::string> out;
    for (uint32_t cp : {'a', 'b', 'z', 'A', 'S', 's', 't', 'T', 'r', 'e', 'v', 'm', 'l', 'L', 'd', 'D', '\'', '0', '7',
                        ' ', '\t', '\n', '\r', '\v', '\f', '.', ',', '!', '/', '-', '"', '(', '<', '_'})
      append_utf8(out.emplace_back(), cp);
    for (uint32_t cp : {0xA0u, 0x85u, 0x3000u, 0x2009u, 0x2028u, 0x1680u, 0x202Fu, 0xE9u, 0xC9u, 0xDFu, 0x17Fu,
                        0x212Au, 0x130u, 0x301u, 0x0663u, 0x2167u, 0xBDu, 0x4E2Du, 0x3002u, 0xFF0Cu, 0x1F600u,
                        0x2019u, 0x01C5u, 0x02B0u, 0xFB06u})
      append_utf8(out.emplace_back(), cp);
    return out;
  }();
  return chars;
}

struct Compared {
  size_t texts = 0, answered = 0;
};

// The automaton's answers against ICU's on `texts`; nullopt answers go to
// ICU and are counted apart.
void compare(Encoder::PieceFinder& finder, const std::vector<std::string>& texts, Compared& counts) {
  const PieceAutomaton& automaton = *finder.automaton();
  for (const std::string& text : texts) {
    ++counts.texts;
    const auto mine = automaton.first(text);
    if (!mine) continue;
    ++counts.answered;
    const auto icu = finder.icu_first(text);
    INFO("text '" << text << "' (" << text.size() << " bytes)");
    REQUIRE(icu);
    CHECK(mine->length == icu->length);
    CHECK(mine->open == icu->open);
  }
}

std::vector<std::string> random_texts(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto& chars = alphabet();
  std::vector<std::string> texts;
  for (size_t i = 0; i < count; ++i) {
    std::string text;
    // Runs of one character make the repetitions' edges ({1,3}, \s+(?!\S)).
    const size_t length = 1 + rng() % 10;
    while (text.size() < length * 2) {
      const std::string& c = chars[rng() % chars.size()];
      for (size_t run = rng() % 4 == 0 ? 1 + rng() % 4 : 1; run > 0; --run) text += c;
    }
    texts.push_back(std::move(text));
  }
  return texts;
}

}  // namespace

TEST_CASE("piece automaton: the tokenizers' patterns cut as ICU does", "[vocab][pieces]") {
  for (const char* pattern : kPatterns) {
    INFO("pattern " << pattern);
    auto finder = Encoder::piece_finder_for(pattern);
    REQUIRE(finder);
    REQUIRE((*finder)->automaton());
    Compared counts;
    compare(**finder, random_texts(20000, 7), counts);
    // Every pair and triple of the alphabet's characters.
    std::vector<std::string> short_texts;
    for (const auto& a : alphabet())
      for (const auto& b : alphabet()) {
        short_texts.push_back(a + b);
        for (const char* c : {"a", " ", "7", ".", "\n", "s"}) short_texts.push_back(a + b + c);
      }
    compare(**finder, short_texts, counts);
    // ß, İ, ﬆ (foldings of several characters) included: none of these
    // patterns has a literal run those foldings could match.
    CHECK(counts.answered == counts.texts);
    WARN("piece automaton: " << counts.answered << " of " << counts.texts << " texts answered, all as ICU");
  }
}

TEST_CASE("piece automaton: its classes of \\s, \\d and \\w are ICU's on every code point", "[vocab][pieces]") {
  for (const char* escape : {"\\s", "\\d", "\\w", "\\S"}) {
    // One character of the class, then an 'x': two characters; else one.
    const std::string pattern = std::string(escape) + "x|[^x]";
    auto finder = Encoder::piece_finder_for(pattern);
    REQUIRE(finder);
    REQUIRE((*finder)->automaton());
    size_t differ = 0;
    for (uint32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
      if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 'x') continue;
      std::string text;
      append_utf8(text, cp);
      text += 'x';
      const auto mine = (*finder)->automaton()->first(text);
      REQUIRE(mine);
      const auto icu = (*finder)->icu_first(text);
      if (!icu || icu->length != mine->length) {
        if (++differ < 5) WARN(escape << " differs at U+" << std::hex << cp);
      }
    }
    CHECK(differ == 0);
  }
}

TEST_CASE("piece automaton: what it does not model is refused, and ICU answers", "[vocab][pieces]") {
  for (const char* pattern : {"a$", "^a", "(a)\\1", "a+?", "a++", "[[a]b]", "(?<=a)b", "(a*)*", "\\bfoo", "."}) {
    INFO(pattern);
    auto automaton = PieceAutomaton::compile(pattern);
    REQUIRE(!automaton);
    CHECK(automaton.error().code == ErrorCode::Unsupported);
  }
  // A character whose case folding is several characters matches a run of
  // literals ignoring case (ß is `ss` to ICU): texts with it are ICU's.
  auto folding = Encoder::piece_finder_for(R"((?i:ssx)|[\s\S])");
  REQUIRE(folding);
  REQUIRE((*folding)->automaton());
  CHECK(!(*folding)->automaton()->first("\xC3\x9Fx"));
  const auto sharp = (*folding)->first("\xC3\x9Fx");
  const auto sharp_icu = (*folding)->icu_first("\xC3\x9Fx");
  REQUIRE(sharp);
  REQUIRE(sharp_icu);
  CHECK(sharp->length == sharp_icu->length);
  CHECK((*folding)->automaton()->first("ssx")->length == 3);
  // A first match that does not start the text is ICU's to find.
  auto finder = Encoder::piece_finder_for("b+");
  REQUIRE(finder);
  CHECK(!(*finder)->automaton()->first("aab"));
  const auto piece = (*finder)->first("aab");
  REQUIRE(piece);
  CHECK(piece->length == 2);
}

TEST_CASE("piece automaton: every token of the real vocabularies, alone and in pairs", "[vocab][pieces]") {
  for (const char* name : {"llama3-tokenizer.json", "o200k_base.tiktoken", "cl100k_base.tiktoken"}) {
    if (!test::shared_vocab(name)) return test::skip_without_shared(name);
    auto vocab = *Vocabulary::load(*test::shared_vocab(name));
    auto encoder = Encoder::create(vocab);
    REQUIRE(encoder);
    auto finder = (*encoder)->piece_finder();
    REQUIRE(finder);
    REQUIRE(finder->automaton());
    std::vector<std::string> texts;
    std::vector<uint32_t> whole;
    for (uint32_t t = 0; t < vocab->size(); ++t) {
      const std::string_view bytes = vocab->bytes(t);
      if (vocab->is_special(t) || bytes.empty() || first_invalid_utf8(bytes)) continue;
      whole.push_back(t);
      texts.emplace_back(bytes);
    }
    std::mt19937 rng(11);
    for (size_t i = 0; i < 200000; ++i) {
      const uint32_t a = whole[rng() % whole.size()], b = whole[rng() % whole.size()];
      texts.push_back(std::string(vocab->bytes(a)) + std::string(vocab->bytes(b)));
    }
    Compared counts;
    compare(*finder, texts, counts);
    CHECK(counts.answered == counts.texts);
    WARN(name << ": the piece automaton answered " << counts.answered << " of " << counts.texts
              << " texts (tokens and pairs), all as ICU, with " << finder->automaton()->states() << " states");
  }
}

// The language is over UTF-8 text: except! text is valid UTF-8, any! tokens
// may hold part of a character only where something can finish it, and end
// of sequence never comes inside a character. The oracle and the matcher
// are checked apart, then against each other.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>

#include "differential.h"
#include "encoder.h"
#include "helpers.h"
#include "matcher.h"
#include "utf8.h"

using namespace cgram;
using namespace cgram::test;
using oracle::Verdict;

namespace {

std::shared_ptr<const CompiledGrammar> compile(std::string_view source, std::shared_ptr<const Vocabulary> vocab) {
  auto result = CompiledGrammar::compile(grammar(source), std::move(vocab));
  REQUIRE(result.ok());
  return (*result);
}

uint32_t byte_token(const Vocabulary& vocab, uint8_t byte) {
  auto id = vocab.find(std::string(1, static_cast<char>(byte)));
  REQUIRE(id);
  return *id;
}

bool valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();)
    if (!decode_utf8(text, i)) return false;
  return true;
}

// Every way a byte string can fail to be UTF-8, each with a valid lead-in.
const std::vector<std::pair<const char*, std::string>>& invalid_shapes() {
  static const std::vector<std::pair<const char*, std::string>> shapes = {
      {"stray continuation byte", "a\x80"},
      {"C0 lead (overlong 2-byte)", "a\xC0\x80"},
      {"C1 lead (overlong 2-byte)", "a\xC1\xBF"},
      {"F5 lead", "a\xF5\x80\x80\x80"},
      {"FE", "a\xFE"},
      {"FF", "a\xFF"},
      {"overlong 3-byte", "a\xE0\x80\x80"},
      {"overlong 4-byte", "a\xF0\x8F\xBF\xBF"},
      {"surrogate U+D800", "a\xED\xA0\x80"},
      {"surrogate U+DFFF", "a\xED\xBF\xBF"},
      {"above U+10FFFF", "a\xF4\x90\x80\x80"},
      {"lead byte where a continuation is due", "a\xE3\x81\xE3"},
      {"ASCII where a continuation is due", "a\xC3z"},
  };
  return shapes;
}

}  // namespace

TEST_CASE("oracle: except! text is UTF-8 text", "[utf8][oracle]") {
  const char* g = "start ::= except!('b') ;";
  CHECK(verdict_of(g, "\xF1") == Verdict::Prefix);  // an unfinished 4-byte character
  CHECK(verdict_of(g, "\xFF") == Verdict::Rejected);
  CHECK(verdict_of(g, "a\xC0\x80") == Verdict::Rejected);
  CHECK(verdict_of(g, "\xC3\xA9") == Verdict::Complete);
  CHECK(verdict_of(g, "\xF0\x9F\x98\x80") == Verdict::Complete);
  CHECK(verdict_of(g, "\xF0\x9F\x98") == Verdict::Prefix);
  for (const auto& [what, text] : invalid_shapes()) {
    INFO(what);
    CHECK(verdict_of(g, text) == Verdict::Rejected);
  }
  // Truncated before a delimiter, and at the end.
  CHECK(verdict_of("start ::= except!('b') 'b' ;", "x\xE3\x81" "b") == Verdict::Rejected);
  CHECK(verdict_of("start ::= except!('b') 'b' ;", "x\xE3\x81\x82" "b") == Verdict::Complete);
  CHECK(verdict_of("start ::= except!('b') 'b' ;", "x\xE3\x81") == Verdict::Prefix);
}

TEST_CASE("oracle: any! tokens may split a character that later text finishes", "[utf8][oracle]") {
  CHECK(verdict_tokens("start ::= any! any! any! ;", {"\xE3", "\x81", "\x82"}) == Verdict::Complete);
  CHECK(verdict_tokens("start ::= any! any! any! ;", {"\xE3", "\x81"}) == Verdict::Prefix);
  CHECK(verdict_tokens("start ::= any! any! ;", {"\xE3", "\x81"}) == Verdict::Rejected);
  CHECK(verdict_tokens("start ::= any! 'a' ;", {"\xE3"}) == Verdict::Rejected);
  CHECK(verdict_tokens("start ::= any! except!('x') ;", {"\xE3", "\x81\x82yz"}) == Verdict::Complete);
  CHECK(verdict_tokens("start ::= any! except!('x') ;", {"\xE3"}) == Verdict::Prefix);
  CHECK(verdict_tokens("start ::= any!{0,3} ;", {"\xFF"}) == Verdict::Rejected);
  CHECK(verdict_tokens("start ::= any!{0,3} ;", {"\xED\xA0"}) == Verdict::Rejected);
  for (const auto& [what, text] : invalid_shapes()) {
    INFO(what);
    CHECK(verdict_tokens("start ::= any!{0,9} ;", {text}) == Verdict::Rejected);
    CHECK(verdict_tokens("start ::= any! except!('q') ;", {"a", text.substr(1)}) == Verdict::Rejected);
  }
}

TEST_CASE("literals: \\xHH is the code point U+00HH, as in regexes", "[utf8][frontend]") {
  for (int b = 0x80; b <= 0xFF; ++b) {
    std::string escape = fmt::format("\\x{:02X}", b);
    std::string utf8;
    append_utf8(utf8, static_cast<uint32_t>(b));
    INFO(escape);
    CHECK(verdict_of(fmt::format("start ::= '{}' ;", escape), utf8) == Verdict::Complete);
    CHECK(verdict_of(fmt::format("start ::= #'{}' ;", escape), utf8) == Verdict::Complete);
    CHECK(verdict_of(fmt::format("start ::= '{}' ;", escape), std::string(1, static_cast<char>(b))) != Verdict::Complete);
    // In except!: the character is what may not occur.
    const std::string ex = fmt::format("start ::= except!('{}') ;", escape);
    CHECK(verdict_of(ex, "a" + utf8) == Verdict::Rejected);
    CHECK(verdict_of(ex, "ab") == Verdict::Complete);
  }
}

TEST_CASE("matcher: except! allows no token that begins invalid UTF-8", "[utf8][matcher]") {
  auto vocab = bundled_vocabulary();
  auto compiled = compile("start ::= except!('b') ;", vocab);
  Matcher m(compiled);
  for (int b : {0x80, 0xBF, 0xC0, 0xC1, 0xF5, 0xFF}) {
    INFO(b);
    CHECK_FALSE(m.is_allowed(byte_token(*vocab, static_cast<uint8_t>(b))));
  }
  REQUIRE(m.is_allowed(byte_token(*vocab, 0xF1)));
  REQUIRE(m.advance(byte_token(*vocab, 0xF1)) == AdvanceResult::Ongoing);
  CHECK_FALSE(m.can_end());  // never inside a character
  for (uint32_t eos : vocab->eos_ids()) CHECK_FALSE(m.is_allowed(eos));
  CHECK_FALSE(m.is_allowed(byte_token(*vocab, 'a')));
  CHECK_FALSE(m.is_allowed(byte_token(*vocab, 0x7F)));
  CHECK(m.is_allowed(byte_token(*vocab, 0x80)));
  CHECK(m.advance(byte_token(*vocab, 'a')) == AdvanceResult::Rejected);
}

TEST_CASE("matcher: any! splits a character only where something finishes it", "[utf8][matcher]") {
  auto vocab = bundled_vocabulary();
  const uint32_t e3 = byte_token(*vocab, 0xE3), x81 = byte_token(*vocab, 0x81), x82 = byte_token(*vocab, 0x82);
  {
    Matcher m(compile("start ::= any! any! any! ;", vocab));
    CHECK(m.advance(e3) == AdvanceResult::Ongoing);
    CHECK(m.advance(x81) == AdvanceResult::Ongoing);
    CHECK_FALSE(m.can_end());
    CHECK_FALSE(m.is_allowed(byte_token(*vocab, 'a')));
    CHECK(m.advance(x82) == AdvanceResult::Ongoing);
    CHECK(m.can_end());
  }
  {
    // One any! is left: it can finish a 2-byte character, but not a 3-byte
    // one (the continuation is searched as one-byte tokens).
    Matcher m(compile("start ::= any! any! ;", vocab));
    CHECK_FALSE(m.is_allowed(e3));
    CHECK(m.advance(byte_token(*vocab, 0xC3)) == AdvanceResult::Ongoing);
    CHECK(m.is_allowed(byte_token(*vocab, 0xA9)));
    CHECK_FALSE(m.is_allowed(byte_token(*vocab, 'a')));
    CHECK_FALSE(m.can_end());
  }
  {
    Matcher m(compile("start ::= any! 'a' ;", vocab));
    CHECK_FALSE(m.is_allowed(e3));
    CHECK(m.is_allowed(byte_token(*vocab, 'z')));
  }
  {
    Matcher m(compile("start ::= any! except!('x') ;", vocab));
    CHECK(m.advance(e3) == AdvanceResult::Ongoing);
    CHECK_FALSE(m.can_end());
    CHECK(m.advance(x81) == AdvanceResult::Ongoing);
    CHECK(m.advance(x82) == AdvanceResult::Ongoing);
    CHECK(m.can_end());
  }
}

TEST_CASE("differential: every invalid UTF-8 shape, token by token, under except! and any!", "[utf8][differential]") {
  auto vocab = bundled_vocabulary();
  const char* grammars[] = {
      "start ::= except!('b') ;",
      "start ::= any!{0,6} ;",
      "start ::= except!('</t>') '</t>' any!{0,4} ;",
      "start ::= any!{0,3} except!('\\n\\n', 4) '\\n\\n' ;",
  };
  for (const char* source : grammars) {
    auto compiled = compile(source, vocab);
    auto g = grammar(source);
    OracleMasker oracle(oracle_grammar(*g), vocab);
    for (const auto& [what, text] : invalid_shapes()) {
      std::vector<uint32_t> tokens;
      for (char c : text) tokens.push_back(byte_token(*vocab, static_cast<uint8_t>(c)));
      WalkStats s = walk_document(compiled, oracle, tokens);
      INFO(source << " " << what << ": " << s.first_mismatch);
      CHECK(s.mismatches == 0);
      CHECK(s.steps <= tokens.size());  // the oracle refused a byte: the walk stopped early
    }
  }
}

TEST_CASE("differential: random walks through partial characters stay UTF-8", "[utf8][differential]") {
  std::vector<std::shared_ptr<const Vocabulary>> vocabs{bundled_vocabulary()};
  if (auto gpt2 = test::shared_vocab("gguf/ggml-vocab-gpt-2.gguf"))
    vocabs.push_back((*(Vocabulary::load(*gpt2))));
  else
    WARN("without " << test::shared_dir() << "/vocab: the bundled vocabulary only");
  const char* grammars[] = {
      "start ::= except!('b') ;",
      "start ::= any!{0,8} ;",
      "start ::= any!{1,3} 'x' ;",
      "start ::= '<t>' except!('</t>', 6) '</t>' any!{0,4} ;",
      "start ::= (any! | except!(('\\u00e9' | 'q'), 3) ',')* ;",
  };
  size_t pairs = 0, finished = 0;
  for (const auto& vocab : vocabs)
    for (const char* source : grammars) {
      auto compiled = compile(source, vocab);
      auto g = grammar(source);
      OracleMasker oracle(oracle_grammar(*g), vocab);
      for (uint64_t seed : {1, 2, 3, 4}) {
        WalkStats s = walk_random(compiled, oracle, seed, 12, /*favour_partial_characters=*/true);
        INFO(source << " seed " << seed << ": " << s.first_mismatch);
        CHECK(s.mismatches == 0);
        pairs += s.pairs;
        if (!s.finished) continue;
        ++finished;
        CHECK(valid_utf8(s.text));  // end of sequence never came inside a character
      }
    }
  CHECK(finished > 0);
  CHECK(pairs > 500'000);
}

TEST_CASE("a prefix is bytes: encoders keep cut and invalid characters as byte tokens", "[utf8][encoder]") {
  std::vector<std::shared_ptr<const Vocabulary>> vocabs{bundled_vocabulary()};
  for (const char* name : {"gguf/ggml-vocab-gpt-2.gguf", "cl100k_base.tiktoken", "llama3-tokenizer.json"}) {
    if (auto path = test::shared_vocab(name)) vocabs.push_back((*(Vocabulary::load(*path))));
  }
  const std::string texts[] = {"\"ab\xE7", "\"ab\xE7\x94", "x\xFFy", "a\xC0\x80" "b \xED\xA0\x80", "\xF0\x9F\x98"};
  for (const auto& vocab : vocabs) {
    auto created = Encoder::create(vocab);
    REQUIRE(created.ok());
    const Encoder& enc = *(*created);
    for (const std::string& text : texts) {
      std::string bytes;
      for (uint32_t id : enc.encode_continuation(text)) bytes += vocab->bytes(id);
      INFO(vocab->name() << ": " << text);
      CHECK(bytes == text);
    }
    // After '"ab' and the first byte of a 3-byte character, only what
    // continues that character is allowed.
    Matcher m(compile("start ::= #'\"[^\"]*\"' ;", vocab));
    for (uint32_t id : enc.encode_continuation("\"ab\xE7")) REQUIRE(m.advance(id) == AdvanceResult::Ongoing);
    for (uint32_t id : m.current_possible_tokens()) {
      INFO(vocab->name() << ": token " << id);
      const uint8_t first = static_cast<uint8_t>(vocab->bytes(id)[0]);
      CHECK((first >= 0x80 && first <= 0xBF));
    }
    CHECK_FALSE(m.can_end());
  }
}

// Counted lexemes (automata/counted.h) against the regex's automaton with
// its repetition copied: the same strings accepted, the same prefixes alive,
// on random texts near and past the bound; and the window (what the token
// index reads) against the counter for every text a token could be.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "automata.h"
#include "counted.h"
#include "regex.h"

using namespace cgram;
using namespace cgram::ir;

namespace {

RegexNode parsed(std::string_view pattern) {
  RegexParseResult r = parse_regex(pattern);
  if (auto* e = std::get_if<RegexError>(&r)) FAIL(e->message);
  return std::get<RegexNode>(std::move(r));
}

CountedDfa counted(std::string_view pattern) {
  auto r = compile_counted_regex(parsed(pattern));
  INFO(pattern << ": " << (r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  REQUIRE(r->has_value());
  return std::move(**r);
}

// Texts built from the pieces, of random lengths up to `max_pieces`, with
// a random byte now and then: most stay in the language for a long stretch.
std::string random_text(std::mt19937_64& rng, const std::vector<std::string>& pieces, size_t max_pieces) {
  std::string text;
  const size_t n = rng() % (max_pieces + 1);
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 50 == 0) text.push_back(static_cast<char>(rng() % 256));
    else text += pieces[rng() % pieces.size()];
  }
  return text;
}

struct Shape {
  const char* counted;   // with a bound above kCountRepeatsAbove
  const char* copied;    // the same language, its bound within the copies' reach
  std::vector<std::string> pieces;
};

// Each shape twice: the counted regex, and its twin with the same bound
// that compile_regex builds by copies (the counted form is chosen only
// above kCountRepeatsAbove, so the twin writes the bound as two halves).
const Shape kShapes[] = {
    {"a{0,100}", "(?:a{0,50}){0,2}", {"a", "b"}},
    {R"("(?:[a-z]|\\[nt"]|\\u[0-9a-f]{4}){0,80}")", R"("(?:(?:[a-z]|\\[nt"]|\\u[0-9a-f]{4}){0,40}){0,2}")",
     {"\"", "a", "q", "\\n", "\\\"", "\\u00e9", "\\u", "0"}},
    {"x(?:ab|c){3,89}y", "x(?:ab|c){3}(?:(?:ab|c){0,43}){0,2}y", {"x", "ab", "c", "y", "a"}},
    {"(?:é|[a-b]){1,71}!", "(?:é|[a-b])(?:(?:é|[a-b]){0,35}){0,2}!", {"é", "a", "b", "!", "\xC3"}},
    {"(?:a{0,70}b)|c", "(?:(?:a{0,35}){0,2}b)|c", {"a", "b", "c"}},
    {"[0-9]{0,66}[a-z]+", "(?:[0-9]{0,33}){0,2}[a-z]+", {"1", "a", "z", "9"}},
};

}  // namespace

TEST_CASE("a counted regex accepts what its copies accept, and dies where they die", "[automata][counted]") {
  std::mt19937_64 rng(7);
  for (const Shape& shape : kShapes) {
    INFO(shape.counted);
    const CountedDfa automaton = counted(shape.counted);
    // The window's width does not matter to the lexer's own states.
    const CountedLexeme lexeme = CountedLexeme::make(automaton, 4);
    auto copies = compile_regex(parsed(shape.copied));
    REQUIRE(copies.ok());
    for (int i = 0; i < 3000; ++i) {
      const std::string text = random_text(rng, shape.pieces, 120);
      uint32_t mine = lexeme.automaton.loop.start(), want = copies->start();
      for (size_t j = 0; j < text.size() && mine != Dfa::kDead; ++j) {
        mine = lexeme.next(mine, static_cast<uint8_t>(text[j]));
        want = copies->next(want, static_cast<uint8_t>(text[j]));
        INFO("'" << text.substr(0, j + 1) << "'");
        REQUIRE((mine == Dfa::kDead) == (want == Dfa::kDead));
        REQUIRE(lexeme.accepting(mine) == copies->accepting(want));
      }
    }
  }
}

TEST_CASE("a counted lexeme's window answers as its counter for every text of a token", "[automata][counted]") {
  std::mt19937_64 rng(11);
  for (const Shape& shape : kShapes) {
    INFO(shape.counted);
    for (uint32_t longest : {1u, 3u, 7u, 500u}) {
      const CountedLexeme lexeme = CountedLexeme::make(counted(shape.counted), longest);
      const Dfa window = lexeme.window_dfa();
      // Level 0 is the loop, state for state (a lexeme starts at the same
      // state in both); each later level has the states inside the repetition.
      REQUIRE(lexeme.counting <= lexeme.automaton.loop.size());
      REQUIRE(window.size() == lexeme.automaton.loop.size() + lexeme.window * lexeme.counting);
      REQUIRE(window.start() == lexeme.automaton.loop.start());
      // From states of every count: a long text leads there, then a token's
      // text (at most `longest` bytes) is read by both.
      for (int i = 0; i < 2000; ++i) {
        uint32_t state = lexeme.automaton.loop.start();
        const std::string lead = random_text(rng, shape.pieces, 100);
        for (char c : lead) {
          const uint32_t next = lexeme.next(state, static_cast<uint8_t>(c));
          if (next == Dfa::kDead) break;
          state = next;
        }
        const std::string token = random_text(rng, shape.pieces, longest).substr(0, longest);
        uint32_t mine = state, seen = lexeme.window_state(state);
        REQUIRE(seen < window.size());
        REQUIRE(window.accepting(seen) == lexeme.accepting(mine));
        for (char c : token) {
          mine = lexeme.next(mine, static_cast<uint8_t>(c));
          seen = window.next(seen, static_cast<uint8_t>(c));
          INFO("after '" << lead << "', '" << token << "'");
          REQUIRE((mine == Dfa::kDead) == (seen == Dfa::kDead));
          if (mine == Dfa::kDead) break;
          REQUIRE(window.accepting(seen) == lexeme.accepting(mine));
        }
      }
    }
  }
}

TEST_CASE("a repetition is counted only where the count is exact", "[automata][counted]") {
  // No more than 64 optional iterations (a{128} has none), or a repetition
  // inside another repetition: copied as before.
  for (const char* pattern : {"a{0,64}", "(?:a{0,100})*", "(?:ab{0,100}c){2}", "[0-9a-f]{128}", "a{100,130}"}) {
    INFO(pattern);
    auto r = compile_counted_regex(parsed(pattern));
    REQUIRE(r.ok());
    CHECK_FALSE(r->has_value());
  }
  // An iteration that a digit may either go on or start: not countable,
  // copied within kMaxRegexRepeat, an error past it.
  auto ambiguous = compile_counted_regex(parsed("(?:[0-9]{1,3}){0,100}"));
  REQUIRE(ambiguous.ok());
  CHECK_FALSE(ambiguous->has_value());
  auto too_many = compile_counted_regex(parsed("(?:[0-9]{1,3}){0,5000}"));
  REQUIRE_FALSE(too_many.ok());
  CHECK_THAT(too_many.error().message, Catch::Contains("needs a repetition the lexer can count"));
  // The same byte may end the repetition or start an iteration.
  auto overlap = compile_counted_regex(parsed("a{0,5000}a"));
  REQUIRE_FALSE(overlap.ok());
  // Two repetitions past the copies' limit.
  auto two = compile_counted_regex(parsed("a{0,5000}b{0,5000}"));
  REQUIRE_FALSE(two.ok());
  CHECK_THAT(two.error().message, Catch::Contains("only allowed on one repetition"));
  // The repetition that must be counted is the one counted, whatever comes first.
  auto second = compile_counted_regex(parsed("[a-z]{0,100}:[0-9]{0,5000}"));
  REQUIRE(second.ok());
  REQUIRE(second->has_value());
  CHECK((*second)->bound == 5000);
  // The largest bound, and a lower bound past the copies' limit.
  CHECK(compile_counted_regex(parsed("\"[a-z]{0,16777216}\"")).ok());
  CHECK(std::holds_alternative<RegexError>(parse_regex("a{0,16777217}")));
  CHECK(std::holds_alternative<RegexError>(parse_regex("a{1001,2000}")));
}

TEST_CASE("a counted regex's automaton does not grow with its bound", "[automata][counted]") {
  const char* string = R"("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){0,BOUND}")";
  size_t states = 0;
  for (const char* bound : {"65", "1000", "32767", "1000000"}) {
    std::string pattern = string;
    pattern.replace(pattern.find("BOUND"), 5, bound);
    const CountedDfa automaton = counted(pattern);
    if (states == 0) states = automaton.loop.size();
    CHECK(automaton.loop.size() == states);
    CHECK(std::to_string(automaton.bound) == bound);
  }
  CHECK(states < 20);
}

// GBNF in: llama.cpp's grammar format, translated to .cgram (import/gbnf.h).
// Each GBNF grammar of tests/data/gbnf has a hand-written .cgram twin; their
// languages are compared by the oracle on sentences of both and on mutations
// of them. Every error has its test, at its GBNF position.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <random>

#include "gbnf.h"
#include "helpers.h"
#include "sentence_generator.h"

using namespace cgram;
using namespace cgram::test;

namespace {

Grammar::Outcome parse_gbnf(std::string_view source, std::string start = "start") {
  ParseOptions options;
  options.format = GrammarFormat::Gbnf;
  options.start = std::move(start);
  return Grammar::parse(source, "test.gbnf", options);
}

std::shared_ptr<const Grammar> gbnf_grammar(std::string_view source) {
  Grammar::Outcome outcome = parse_gbnf(source);
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  return outcome.grammar;
}

// The one error of a GBNF source, rendered (file:line:col: error: message).
std::string gbnf_error(std::string_view source) {
  Grammar::Outcome outcome = parse_gbnf(source);
  REQUIRE_FALSE(outcome.ok());
  REQUIRE(outcome.diagnostics.error_count() == 1);
  return outcome.diagnostics.render();
}

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  return verdict(oracle_grammar(*g), text) == oracle::Verdict::Complete;
}

// A byte inserted, deleted or replaced, from bytes that matter to grammars.
std::string mutate(std::string text, std::mt19937_64& rng) {
  static constexpr std::string_view kBytes = "a0_-,.!?'\"\\[]{}<> \t\n\r\xC3\xA9\xFF";
  const size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
  const char byte = kBytes[rng() % kBytes.size()];
  switch (rng() % 3) {
    case 0: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), byte); break;
    case 1:
      if (at < text.size()) text.erase(at, 1);
      break;
    default:
      if (at < text.size()) text[at] = byte;
      break;
  }
  return text;
}

void expect_same_language(const std::string& name) {
  const std::string gbnf = read_file(fmt::format("{}/tests/data/gbnf/{}.gbnf", CGRAM_SOURCE_DIR, name));
  const std::string twin = read_file(fmt::format("{}/tests/data/gbnf/{}.cgram", CGRAM_SOURCE_DIR, name));
  auto from_gbnf = gbnf_grammar(gbnf);
  auto by_hand = grammar(twin);
  auto oracle_gbnf = oracle_grammar(*from_gbnf);
  auto oracle_twin = oracle_grammar(*by_hand);
  std::mt19937_64 rng(7);
  size_t rejected_mutants = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    for (const Grammar* g : {from_gbnf.get(), by_hand.get()}) {
      SentenceGenerator generator(g->ir(), seed);
      std::string text = generator.generate();
      INFO(name << ": sentence '" << text << "'");
      CHECK(verdict(oracle_gbnf, text) == oracle::Verdict::Complete);
      CHECK(verdict(oracle_twin, text) == oracle::Verdict::Complete);
      for (int m = 0; m < 4; ++m) {
        text = mutate(text, rng);
        INFO("mutant '" << text << "'");
        const oracle::Verdict expected = verdict(oracle_twin, text);
        CHECK(verdict(oracle_gbnf, text) == expected);
        rejected_mutants += expected == oracle::Verdict::Rejected;
      }
    }
  }
  CHECK(rejected_mutants > 100);  // the mutants reach outside the language
}

}  // namespace

TEST_CASE("GBNF: every construct has the language of its hand-written twin", "[gbnf]") {
  expect_same_language("constructs");
}

TEST_CASE("GBNF: a JSON grammar in llama.cpp's style has the language of its twin", "[gbnf]") {
  expect_same_language("json");
}

TEST_CASE("GBNF: llama.cpp's meaning of newlines, classes, dot and root", "[gbnf]") {
  // A rule ends at a newline, but goes on after ::= and |, and inside ( ).
  CHECK(accepts(gbnf_grammar("root ::=\n  \"a\" |\n  \"b\"\n"), "b"));
  CHECK(accepts(gbnf_grammar("root ::= ( \"a\"\n \"b\" )\n"), "ab"));
  CHECK_THAT(gbnf_error("root ::= \"a\"\n  \"b\"\n"), Catch::Contains("test.gbnf:2:3: error: expecting a rule name"));
  // Classes, negated classes and . take every code point, newline included.
  auto dot = gbnf_grammar("root ::= . [^a] [\\x00-\\U0010FFFF]\n");
  CHECK(accepts(dot, "\n\n\n"));
  CHECK(accepts(dot, "\xF4\x8F\xBF\xBF" "b" "\xC3\xA9"));
  CHECK_FALSE(accepts(dot, "xa\n"));
  // The start is root; a rule named start is just a rule.
  auto start = gbnf_grammar("root ::= \"r\"\nstart ::= \"s\"\n");
  CHECK(accepts(start, "r"));
  CHECK_FALSE(accepts(start, "s"));
  // --start names a GBNF rule.
  Grammar::Outcome by_name = parse_gbnf("root ::= \"r\" | other-rule\nother-rule ::= \"s\"\n", "other-rule");
  REQUIRE(by_name.ok());
  CHECK(verdict(oracle_grammar(*by_name.grammar), "s") == oracle::Verdict::Complete);
  CHECK(verdict(oracle_grammar(*by_name.grammar), "r") == oracle::Verdict::Rejected);
  // Names with '-' and leading digits; empty alternatives; repetitions.
  auto names = gbnf_grammar("root ::= my-rule 2x\nmy-rule ::= | \"m\"\n2x ::= \"x\"{2} \"y\"{1,} \"z\"{0,2}\n");
  CHECK(accepts(names, "mxxyyyzz"));
  CHECK(accepts(names, "xxy"));
  CHECK_FALSE(accepts(names, "xxyzzz"));
}

TEST_CASE("GBNF: llama.cpp's edges: empty items, clipped classes, line ends, comments, no false left recursion", "[gbnf]") {
  // [] and [^] add nothing (the empty string); {0} too.
  CHECK(accepts(gbnf_grammar("root ::= \"a\" [] \"b\" [^] \"c\"{0}\n"), "ab"));
  // Reversed ranges and code points UTF-8 cannot hold never match; what is
  // left of the class stays.
  auto clipped = gbnf_grammar("root ::= [z-ab] [^\\uD800-\\uDFFF] [\\U0010FFFF-\\U00110005]\n");
  CHECK(accepts(clipped, "b\n\xF4\x8F\xBF\xBF"));
  CHECK_FALSE(accepts(clipped, "z\n\xF4\x8F\xBF\xBF"));
  // CR and CRLF end rules; comments inside ( ) and { }.
  CHECK(accepts(gbnf_grammar("root ::= x\r\nx ::= \"a\"\ry ::= \"b\"\n"), "a"));
  // (Inside braces newlines are spaces only within parentheses, as in llama.cpp.)
  CHECK(accepts(gbnf_grammar("root ::= ( ( # a comment\n \"a\" # another\n ){ 2 # two\n } )\n"), "aa"));
  CHECK_THAT(gbnf_error("root ::= \"a\"{ 2\n }\n"), Catch::Contains("expecting '}'"));
  // Possibly empty, but not left-recursive: llama.cpp accepts these.
  CHECK(accepts(gbnf_grammar("root ::= (\"a\"?)* \"b\"\n"), "aab"));
  CHECK(accepts(gbnf_grammar("root ::= (\"a\" | \"\"){0,3} \"b\"\n"), "ab"));
  CHECK(accepts(gbnf_grammar("root ::= \"a\" root | \"b\"\n"), "aab"));
  // A message with an apostrophe keeps it; names still map to GBNF.
  Grammar::Outcome empty = parse_gbnf("root ::= root-x\nroot-x ::= root-x \"a\" \"b\" | \"c\" root-x\n");
  REQUIRE_FALSE(empty.ok());
  INFO(empty.diagnostics.render());
  CHECK(empty.diagnostics.render().find("'root_x'") == std::string::npos);
}

TEST_CASE("GBNF: a rule defined twice keeps its last definition, with a warning", "[gbnf]") {
  Grammar::Outcome outcome = parse_gbnf("root ::= x\nx ::= \"a\"\nx ::= \"b\"\n");
  REQUIRE(outcome.ok());
  CHECK_THAT(outcome.diagnostics.render(),
             Catch::Contains("test.gbnf:3:1: warning: rule 'x' is defined again; the last definition replaces the "
                             "earlier one, as in llama.cpp"));
  CHECK(verdict(oracle_grammar(*outcome.grammar), "b") == oracle::Verdict::Complete);
  CHECK(verdict(oracle_grammar(*outcome.grammar), "a") == oracle::Verdict::Rejected);
}

TEST_CASE("GBNF: every error, at its GBNF position", "[gbnf][diagnostics]") {
  CHECK_THAT(gbnf_error("root ::= \"a\" foo\n"), Catch::Contains("test.gbnf:1:14: error: undefined rule 'foo'"));
  CHECK_THAT(gbnf_error("rot ::= \"a\"\n"),
             Catch::Contains("test.gbnf: error: the grammar has no rule 'root' (a GBNF grammar starts there)"));
  CHECK_THAT(gbnf_error(""), Catch::Contains("no rule 'root'"));
  CHECK_THAT(gbnf_error("root := \"a\"\n"), Catch::Contains("test.gbnf:1:6: error: expecting ::="));
  CHECK_THAT(gbnf_error("::= \"a\"\n"), Catch::Contains("test.gbnf:1:1: error: expecting a rule name"));
  CHECK_THAT(gbnf_error("root ::= \"a\" )\n"),
             Catch::Contains("test.gbnf:1:14: error: expecting a newline or the end of the grammar"));
  CHECK_THAT(gbnf_error("root ::= ( \"a\"\n"), Catch::Contains("test.gbnf:2:1: error: expecting ')'"));
  CHECK_THAT(gbnf_error("root ::= \"abc\n"), Catch::Contains("test.gbnf:1:10: error: unterminated literal"));
  CHECK_THAT(gbnf_error("root ::= [abc\n"), Catch::Contains("test.gbnf:1:10: error: unterminated character class"));
  CHECK_THAT(gbnf_error("root ::= [\\uD800-\\uDFFF]\n"),
             Catch::Contains("test.gbnf:1:10: error: this class holds no character that UTF-8 text can have"));
  CHECK_THAT(gbnf_error("root ::= \"\\q\"\n"), Catch::Contains("test.gbnf:1:11: error: unknown escape '\\q'"));
  CHECK_THAT(gbnf_error("root ::= \"\\x4\"\n"),
             Catch::Contains("test.gbnf:1:11: error: expecting 2 hex digits after '\\x'"));
  CHECK_THAT(gbnf_error("root ::= \"\\U00110000\"\n"),
             Catch::Contains("test.gbnf:1:11: error: U+110000 is not a character"));
  CHECK_THAT(gbnf_error("root ::= \"\\uD800\"\n"), Catch::Contains("U+D800 is not a character"));
  CHECK_THAT(gbnf_error("root ::= \"\xFF\"\n"), Catch::Contains("test.gbnf:1:11: error: invalid UTF-8"));
  CHECK_THAT(gbnf_error("root ::= * \"a\"\n"), Catch::Contains("test.gbnf:1:10: error: expecting an item before '*'"));
  // Items that add no element to llama.cpp's rule cannot be repeated.
  CHECK_THAT(gbnf_error("root ::= \"a\" \"\"*\n"), Catch::Contains("test.gbnf:1:16: error: expecting an item before '*'"));
  CHECK_THAT(gbnf_error("root ::= \"a\" []+\n"), Catch::Contains("test.gbnf:1:16: error: expecting an item before '+'"));
  CHECK_THAT(gbnf_error("root ::= \"a\"{0}?\n"), Catch::Contains("test.gbnf:1:16: error: expecting an item before '?'"));
  // Token terminals are llama.cpp's own.
  CHECK_THAT(gbnf_error("root ::= <think> \"a\"\n"),
             Catch::Contains("test.gbnf:1:10: error: llama.cpp's token terminals (<[id]>, <text>, !<...>) are not supported"));
  CHECK_THAT(gbnf_error("root ::= !<[5]>\n"), Catch::Contains("token terminals"));
  // Left recursion, refused as llama.cpp refuses it.
  CHECK_THAT(gbnf_error("root ::= root \"a\" | \"b\"\n"),
             Catch::Contains("test.gbnf:1:1: error: rule 'root' is left-recursive"));
  CHECK_THAT(gbnf_error("root ::= ws root \"a\" | \"b\"\nws ::= | \" \"\n"), Catch::Contains("left-recursive"));
  CHECK_THAT(gbnf_error("root ::= (\"a\" | \"\")*\n"), Catch::Contains("rule 'root' is left-recursive"));
  CHECK_THAT(gbnf_error("root ::= \"a\"?*\n"), Catch::Contains("left-recursive"));
  CHECK_THAT(gbnf_error("root ::= \"x\"\nunused ::= unused \"a\"\n"), Catch::Contains("rule 'unused' is left-recursive"));
  CHECK_THAT(gbnf_error("root ::= {2}\n"), Catch::Contains("test.gbnf:1:10: error: expecting an item before '{'"));
  CHECK_THAT(gbnf_error("root ::= \"a\"{x}\n"), Catch::Contains("test.gbnf:1:14: error: expecting a number"));
  CHECK_THAT(gbnf_error("root ::= \"a\"{1,2\n"), Catch::Contains("test.gbnf:1:17: error: expecting '}'"));
  CHECK_THAT(gbnf_error("root ::= \"a\"{3,1}\n"), Catch::Contains("test.gbnf:1:13: error: bad repetition bounds {3,1}"));
  CHECK_THAT(gbnf_error("root ::= \"a\"{4294967296}\n"),
             Catch::Contains("a repetition bound of 4294967296 is too large (the limit is 10000)"));
  // Nesting is bounded as in .cgram (no stack overflow on 100,000 levels).
  CHECK_THAT(gbnf_error("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')') + "\n"),
             Catch::Contains("nests deeper than 256 levels"));
  // An error found in the translated grammar points at the GBNF token, with
  // the GBNF rule names.
  CHECK_THAT(gbnf_error("root ::= \"a\"\nmy-rule ::= [^\\x00-\\U0010FFFF]\n"),
             Catch::Contains("test.gbnf:2:13: error: this regex matches no text at all"));
  Grammar::Outcome unused = parse_gbnf("root ::= \"a\"\nmy-rule ::= \"b\"\n");
  REQUIRE(unused.ok());
  CHECK_THAT(unused.diagnostics.render(),
             Catch::Contains("test.gbnf:2:1: warning: rule 'my-rule' is never used: it is not reachable from the start "
                             "rule 'root'"));
}

TEST_CASE("GBNF: the translation is readable .cgram, comments and layout kept", "[gbnf]") {
  const std::string gbnf = "# a comment *) with a closer\nroot ::= my-rule # trailing\nmy-rule ::= \"a\" | [b-c]\n";
  SourceFile file("test.gbnf", gbnf);
  Diagnostics diags(&file);
  auto translation = translate_gbnf(file, diags);
  REQUIRE(translation);
  CHECK(translation->cgram ==
        "start ::= root ; (* a GBNF grammar starts at root *)\n"
        "(* a comment * ) with a closer *)\n"
        "root ::= my_rule (* trailing *) ;\n"
        "my_rule ::= 'a' | #'[b-c]' ;\n");
  // The translation parses as .cgram on its own.
  CHECK(parse(translation->cgram).ok());
}

// Exactness on the grammar shapes where a GLR parser most easily loses a
// derivation: rules whose tail can be empty after a recursive nonterminal
// (the dangling else), nullable parts beside except!, and regexes that match
// only the empty text. Each case's answer was worked out by hand; the
// oracle, `cgram match` (match_text) and the matcher's masks must all give
// it. (The random differential, tests/differential/random, searches for more.)
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <random>

#include "differential.h"
#include "helpers.h"
#include "matcher.h"
#include "oracle_mask.h"
#include "text_match.h"

using namespace cgram;
using namespace cgram::test;
using oracle::Verdict;

namespace {

struct ExactnessCase {
  const char* grammar;
  const char* text;
  Verdict answer;
  size_t rejected_at = 0;  // for Rejected: the longest viable prefix
};

// The table ("Exact again"), with the answers checked by hand.
const ExactnessCase kCases[] = {
    {"start ::= 'a' start 'z'? | '' ;", "aa", Verdict::Complete},
    {"start ::= 'a' start 'z'? | '' ;", "aaa", Verdict::Complete},
    {"start ::= 'a' start 'z'? | '' ;", "aazz", Verdict::Complete},
    {"start ::= 'a' start 'z'? | '' ;", "azz", Verdict::Rejected, 2},
    {"s ::= 'a' s opt | '' ; opt ::= 'z' | '' ; start ::= s ;", "aa", Verdict::Complete},
    {"stmt ::= 'i' stmt [ 'e' stmt ] | 'x' | '{' stmt* '}' ; start ::= stmt ;", "iix", Verdict::Complete},
    {"stmt ::= 'i' stmt [ 'e' stmt ] | 'x' | '{' stmt* '}' ; start ::= stmt ;", "{iix}", Verdict::Complete},
    {"stmt ::= 'i' stmt [ 'e' stmt ] | 'x' | '{' stmt* '}' ; start ::= stmt ;", "{iixex}", Verdict::Complete},
    {"stmt ::= 'i' stmt [ 'e' stmt ] | 'x' | '{' stmt* '}' ; start ::= stmt ;", "{iix", Verdict::Prefix},
    {"start ::= stmt ; stmt ::= 'if c then ' stmt ( ' else ' stmt )? | 'x' ;", "if c then if c then x",
     Verdict::Complete},
    {"start ::= 'x' start 'y'? | 'x' ;", "xxx", Verdict::Complete},
    {"start ::= s ';' ; s ::= 'i' s n | 'a' ; n ::= '' ;", "iia;", Verdict::Complete},
    {"start ::= 'cd' start n | 'yzd' ; n ::= '' ;", "cdcdyzd", Verdict::Complete},
    {"start ::= 'cd' start n | 'yzd' ; n ::= '' ;", "cdcdyz", Verdict::Prefix},
    {"start ::= g g '1' ; g ::= 'y' except!('A') | n n ; n ::= '' ;", "1", Verdict::Complete},
    {"start ::= g g '1' ; g ::= 'y' except!('A') | n n ; n ::= '' ;", "yb1", Verdict::Complete},
    // except!('y') takes the first '-': q = "--", then '/'.
    {"q ::= ( except!('y') ''* ) '-' ; start ::= q q | q '/' ;", "--/", Verdict::Complete},
    {"q ::= ( except!('y') ''* ) '-' ; start ::= q q | q '/' ;", "y", Verdict::Rejected, 0},
    {"q ::= ( except!('y') ''* ) '-' ; start ::= q q | q '/' ;", "--", Verdict::Complete},
    {"q ::= ( except!('y') ''* ) '-' ; start ::= q q | q '/' ;", "-/", Verdict::Complete},
    {"q ::= ( except!('y') ''* ) '-' ; start ::= q q | q '/' ;", "a-b/-", Verdict::Complete},
    {"start ::= except!('a'){2,3} start 'zb' | except!('b') start 'x' | #'[^z]'+ ;", "aaazb", Verdict::Complete},
    // A regex that matches only the empty text, next to ''{0}.
    {"start ::= (\"y\" except!('Ā') | #\"λ{0}\" ''{0}){2,} except!('λ') '1' ;", "1", Verdict::Complete},
    {"start ::= (\"y\" except!('Ā') | #\"λ{0}\" ''{0}){2,} except!('λ') '1' ;", "d", Verdict::Prefix},
    // "y" + except!('Ā') matching nothing, then the empty copy: complete.
    {"start ::= (\"y\" except!('Ā') | #\"λ{0}\" ''{0}){2,} except!('λ') '1' ;", "y1", Verdict::Complete},
    {"start ::= (\"y\" except!('Ā') | #\"λ{0}\" ''{0}){2,} except!('λ') '1' ;", "yλ", Verdict::Prefix},
    // Hidden left recursion, unit cycles, nullable rules at both ends.
    {"start ::= a ; a ::= n a 'c' | 'b' ; n ::= '' | 'x' ;", "bcc", Verdict::Complete},
    {"start ::= a ; a ::= n a 'c' | 'b' ; n ::= '' | 'x' ;", "xbxc", Verdict::Rejected, 2},
    {"start ::= a ; a ::= b | 'x' ; b ::= a | a 'y' ;", "xyy", Verdict::Complete},
    {"start ::= n s n ; s ::= n 'a' n | n s n 'b' ; n ::= '' | 'c' ;", "cacbcbc", Verdict::Complete},
};

std::shared_ptr<const CompiledGrammar> compile_for(const std::shared_ptr<const Grammar>& g,
                                                   std::shared_ptr<const Vocabulary> vocab) {
  auto result = CompiledGrammar::compile(g, std::move(vocab));
  REQUIRE(result.ok());
  return (*result);
}

// The text as the bundled vocabulary's tokens, one byte each (every byte has
// a token there), through a matcher: the text is accepted while viable, end
// of sequence is allowed exactly when complete, and the mask equals the
// oracle's at the end.
void check_matcher(const ExactnessCase& c) {
  auto vocab = bundled_vocabulary();
  auto g = grammar(c.grammar);
  auto compiled = compile_for(g, vocab);
  OracleMasker oracle(oracle_grammar(*g), vocab);
  Matcher m(compiled);
  std::vector<uint32_t> history;
  const std::string_view text = c.text;
  const size_t viable = c.answer == Verdict::Rejected ? c.rejected_at : text.size();
  for (size_t i = 0; i < text.size(); ++i) {
    auto id = vocab->find(text.substr(i, 1));
    REQUIRE(id);
    const AdvanceResult r = m.advance(*id);
    INFO("byte " << i);
    REQUIRE(r == (i < viable ? AdvanceResult::Ongoing : AdvanceResult::Rejected));
    if (r != AdvanceResult::Ongoing) break;
    history.push_back(*id);
  }
  // After a refused byte the matcher stands where the text was last viable.
  const Verdict here = c.answer == Verdict::Rejected
                           ? oracle::match_text(oracle_grammar(*g), text.substr(0, viable)).verdict
                           : c.answer;
  CHECK(m.can_end() == (here == Verdict::Complete));
  std::vector<uint32_t> mine(m.mask_words());
  REQUIRE(m.fill_mask(mine));
  CHECK(mine == oracle.mask(history));
  // A mask is never empty while the text can go on or end.
  CHECK(std::any_of(mine.begin(), mine.end(), [](uint32_t w) { return w != 0; }));
}

}  // namespace

TEST_CASE("right-nullable rules: the oracle's answers are the hand-checked ones", "[exactness][oracle]") {
  for (const ExactnessCase& c : kCases) {
    INFO(c.grammar << " on '" << c.text << "'");
    const oracle::MatchResult r = oracle::match_text(oracle_grammar(*grammar(c.grammar)), c.text);
    CHECK(r.verdict == c.answer);
    if (c.answer == Verdict::Rejected) CHECK(r.viable_bytes == c.rejected_at);
  }
}

TEST_CASE("right-nullable rules: cgram match gives the hand-checked answers", "[exactness]") {
  for (const ExactnessCase& c : kCases) {
    INFO(c.grammar << " on '" << c.text << "'");
    const TextMatch r = match_text(*grammar(c.grammar), c.text);
    REQUIRE(r.error.empty());
    CHECK(static_cast<int>(r.verdict) == static_cast<int>(c.answer));
    if (c.answer == Verdict::Rejected) CHECK(r.viable_bytes == c.rejected_at);
  }
}

TEST_CASE("right-nullable rules: the matcher's tokens, end of sequence and masks", "[exactness][matcher]") {
  for (const ExactnessCase& c : kCases) {
    INFO(c.grammar << " on '" << c.text << "'");
    check_matcher(c);
  }
}

TEST_CASE("a nested if without else, then more statements, in every C grammar", "[exactness][examples]") {
  const std::string program = "int main() {\n  if (a) if (b) x = 1;\n  return 0;\n}\n";
  const std::string variants[] = {
      program,
      "int main() {\n  if (a) if (b) x = 1; else y = 2;\n  return 0;\n}\n",
      "int main() {\n  if (a) { if (b) x = 1; }\n  return 0;\n}\n",
      "int main() {\n  if (a) if (b) if (c) x = 1;\n  while (x) if (y) x = 0;\n  return 0;\n}\n",
  };
  std::vector<std::pair<std::string, std::string>> grammars = {{"examples/c_subset", read_example("c_subset.cgram")}};
  for (const SuiteGrammar& s : suite_grammars())
    if (s.label.rfind("c/", 0) == 0) grammars.emplace_back(s.label, s.source);
  REQUIRE(grammars.size() >= 3);
  for (const auto& [label, source] : grammars) {
    auto g = grammar(source);
    for (const std::string& text : variants) {
      INFO(label << " on\n" << text);
      const TextMatch r = match_text(*g, text);
      REQUIRE(r.error.empty());
      CHECK(r.verdict == TextVerdict::Complete);
    }
  }
}

TEST_CASE("after a nested if without else, the mask is the oracle's", "[exactness][examples]") {
  auto vocab = bundled_vocabulary();
  auto g = grammar(read_example("c_subset.cgram"));
  auto compiled = compile_for(g, vocab);
  OracleMasker oracle(oracle_grammar(*g), vocab);
  Matcher m(compiled);
  std::vector<uint32_t> history;
  for (char c : std::string("int main() {if(c)if(c)x=1;")) {
    auto id = vocab->find(std::string_view(&c, 1));
    REQUIRE(id);
    REQUIRE(m.advance(*id) == AdvanceResult::Ongoing);
    history.push_back(*id);
  }
  std::vector<uint32_t> mine(m.mask_words());
  REQUIRE(m.fill_mask(mine));
  CHECK(mine == oracle.mask(history));
  // The block may close, and another statement may start.
  for (const char* next : {"}", "return", "x"}) {
    auto id = vocab->find(next);
    REQUIRE(id);
    CHECK(m.is_allowed(*id));
  }
}

TEST_CASE("a repetition of except! without a count is read as one except!: the same sentences", "[exactness][except]") {
  // The front end reads except!(S){n,m} as except!(S) (grammar_ir.cpp); the
  // same repetition written with rules is not rewritten, so the oracle on
  // the rules checks the rewrite.
  struct Pair {
    const char* repeated;
    const char* with_rules;
  };
  const Pair pairs[] = {
      {"start ::= except!(('ab' | 'c')){2,3} 'x' ;",
       "start ::= e e o 'x' ; e ::= except!(('ab' | 'c')) ; o ::= e | '' ;"},
      {"start ::= except!('ab')* 'b' ;", "start ::= r 'b' ; r ::= '' | r e ; e ::= except!('ab') ;"},
      {"start ::= 'x' except!('ba')+ except!('a') ;", "start ::= 'x' r e2 ; r ::= e | r e ; e ::= except!('ba') ; e2 ::= except!('a') ;"},
      {"start ::= except!('aa'){3} ;", "start ::= e e e ; e ::= except!('aa') ;"},
  };
  const std::string letters = "abcx";
  std::mt19937_64 rng(7);
  for (const Pair& p : pairs) {
    auto repeated = grammar(p.repeated), with_rules = grammar(p.with_rules);
    auto oracle_rules = oracle_grammar(*with_rules), oracle_repeated = oracle_grammar(*repeated);
    for (int i = 0; i < 400; ++i) {
      std::string text;
      for (size_t n = rng() % 9; n > 0; --n) text += letters[rng() % letters.size()];
      INFO(p.repeated << " on '" << text << "'");
      const oracle::MatchResult want = oracle::match_text(oracle_rules, text);
      const oracle::MatchResult got = oracle::match_text(oracle_repeated, text);
      CHECK(got.verdict == want.verdict);
      CHECK(got.viable_bytes == want.viable_bytes);
      const TextMatch mine = match_text(*repeated, text);
      CHECK(static_cast<int>(mine.verdict) == static_cast<int>(want.verdict));
      CHECK(mine.viable_bytes == want.viable_bytes);
    }
  }
}

namespace {
// `text` as the longest tokens of `vocab` that spell it, left to right.
std::vector<uint32_t> greedy_tokens(const Vocabulary& vocab, std::string_view text) {
  std::vector<uint32_t> out;
  while (!text.empty()) {
    std::optional<uint32_t> best;
    size_t best_length = 0;
    for (size_t n = 1; n <= text.size(); ++n)
      if (auto id = vocab.find(text.substr(0, n))) best = id, best_length = n;
    REQUIRE(best);
    out.push_back(*best);
    text.remove_prefix(best_length);
  }
  return out;
}
}  // namespace

TEST_CASE("a counted lexeme masks as the oracle up to its bound and past it", "[exactness][counted]") {
  // Tokens of at most 3 bytes: the window is 3 counts wide, and most of a
  // string's 70 characters are counted in its lumped first level.
  std::vector<std::string> tokens = {"[", "]", ",", "\"", "a", "b", " ", "aa", "ab", "aaa", "\\", "n",
                                     "\\n", "\"]", "a\"", "b\",", "\xC3\xA9", "<eos>"};
  auto vocab = Vocabulary::from_tokens(tokens, {static_cast<uint32_t>(tokens.size() - 1)});
  REQUIRE(vocab.ok());
  for (const char* bounds : {"{0,70}", "{5,70}", "{0,66}"}) {
    const std::string source = fmt::format(
        "start ::= '[' ( s ( ',' s )* )? ']' ; s ::= #'\"(?:[a-b ]|\\\\n|é){}\"' ;", bounds);
    INFO(source);
    auto g = grammar(source);
    auto compiled = compile_for(g, *vocab);
    bool counted = false;
    for (const ir::LexTerminal& t : compiled->lexical().terminals)
      if (t.counted) {
        counted = true;
        CHECK(t.counted->window == 3);
        CHECK(t.dfa.size() == 3 * t.counted->counting + t.counted->automaton.loop.size());
      }
    REQUIRE(counted);
    OracleMasker oracle(oracle_grammar(*g), *vocab);
    std::mt19937_64 rng(5);
    const std::vector<std::string> pieces = {"a", "b", " ", "a", "b", "\\n", "\xC3\xA9"};
    size_t steps = 0;
    for (int i = 0; i < 12; ++i) {
      // Strings of 60 to 75 characters, around the bound.
      std::string text = "[\"abbab\",\"";
      const size_t length = 60 + rng() % 16;
      for (size_t n = 0; n < length; ++n) text += pieces[rng() % pieces.size()];
      text += "\"]";
      const WalkStats stats = walk_document(compiled, oracle, greedy_tokens(**vocab, text));
      INFO(text << ": " << stats.first_mismatch);
      CHECK(stats.mismatches == 0);
      steps += stats.steps;
    }
    CHECK(steps > 500);
    // Saved and loaded back for the same vocabulary: the same lexeme. For
    // a vocabulary whose longest token is longer, its window is too narrow:
    // refused.
    auto loaded = CompiledGrammar::load_tables(compiled->save_tables(), *vocab);
    REQUIRE(loaded.ok());
    for (size_t t = 0; t < compiled->lexical().terminals.size(); ++t)
      if (const auto& c = compiled->lexical().terminals[t].counted) {
        const auto& back = (*loaded)->lexical().terminals[t];
        REQUIRE(back.counted);
        CHECK(back.counted->automaton.starts == c->automaton.starts);
        CHECK(back.counted->automaton.bound == c->automaton.bound);
        for (uint32_t q = 0; q < c->automaton.loop.size(); ++q) {
          const auto row = c->automaton.loop.row(q), back_row = back.counted->automaton.loop.row(q);
          CHECK(std::equal(row.begin(), row.end(), back_row.begin(), back_row.end()));
        }
        CHECK(back.counted->window == c->window);
        CHECK(back.dfa.size() == compiled->lexical().terminals[t].dfa.size());
      }
    std::vector<std::string> longer = tokens;
    longer.insert(longer.end() - 1, "aaaa");
    auto wider = Vocabulary::from_tokens(longer, {static_cast<uint32_t>(longer.size() - 1)});
    REQUIRE(wider.ok());
    auto refused = CompiledGrammar::load_tables(compiled->save_tables(), *wider);
    REQUIRE_FALSE(refused.ok());
  }
}

// The compile pipeline (compiled/pipeline.h): its passes in order, each
// pass's part of the compiled grammar and its dump.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <bit>
#include <numeric>
#include <sstream>

#include "compiled_grammar.h"
#include "helpers.h"
#include "pipeline.h"

using namespace cgram;

namespace {

std::shared_ptr<const Vocabulary> tiny_vocabulary() {
  auto vocab = Vocabulary::from_tokens({"(", ")", "ab", "a", "b", "((", "ab)", "n", "+", "x"}, {});
  REQUIRE(vocab.ok());
  return *vocab;
}

std::shared_ptr<const CompiledGrammar> compiled(std::string_view source, bool eager = false) {
  CompileOptions options;
  options.eager_index = eager;
  auto result = CompiledGrammar::compile(test::grammar(source), tiny_vocabulary(), options);
  INFO((result.ok() ? "" : result.error().message));
  REQUIRE(result.ok());
  return *result;
}

// The lexical terminal whose DFA accepts exactly `text` from its start.
uint32_t terminal_for(const ir::LexicalGrammar& lexical, std::string_view text) {
  for (uint32_t t = 0; t < lexical.terminals.size(); ++t) {
    const ir::Dfa& dfa = lexical.terminals[t].dfa;
    uint32_t q = dfa.start();
    for (char c : text) q = q == ir::Dfa::kDead ? q : dfa.next(q, static_cast<uint8_t>(c));
    if (q != ir::Dfa::kDead && dfa.accepting(q)) return t;
  }
  FAIL("no terminal accepts '" << text << "'");
  return 0;
}

size_t lines_with(const std::string& text, std::string_view needle) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

constexpr std::string_view kParens = "start ::= '(' start ')' | 'ab' ;";

}  // namespace

TEST_CASE("pipeline: the passes are listed once, in order, by unique names", "[pipeline]") {
  REQUIRE(kPassCount == 5);
  for (size_t i = 0; i < kPassCount; ++i) {
    CHECK(static_cast<size_t>(kPasses[i].pass) == i);
    CHECK(pass_named(kPasses[i].name) == kPasses[i].pass);
    CHECK(std::string_view(kPasses[i].job).size() > 0);
  }
  CHECK_FALSE(pass_named("parse"));
  CHECK_FALSE(pass_named(""));
}

TEST_CASE("pipeline: every pass is timed, and the stage timings add them up", "[pipeline]") {
  auto g = compiled(kParens, true);
  const CompileTimings& t = g->timings();
  for (double ms : t.pass_ms) CHECK(ms >= 0);
  CHECK(t.lower_ms == Approx(t.pass_ms[size_t(Pass::Collapse)] + t.pass_ms[size_t(Pass::Lr)]));
  CHECK(t.index_ms == Approx(t.pass_ms[size_t(Pass::Followers)] + t.pass_ms[size_t(Pass::TokenIndex)] +
                             t.pass_ms[size_t(Pass::AnyTokens)]));
}

TEST_CASE("pass collapse: a regular rule becomes one lexeme, a recursive one stays a rule", "[pipeline]") {
  auto regular = compiled("start ::= 'a'+ 'b' ;");
  CHECK(regular->lexical().terminals.size() == 1);
  const std::string flat = regular->dump(Pass::Collapse);
  CHECK(lines_with(flat, "->") == regular->lexical().productions.size());

  auto nested = compiled(kParens);
  const ir::LexicalGrammar& lexical = nested->lexical();
  CHECK(lexical.terminals.size() == 3);  // '(' ')' 'ab'
  const std::string dump = nested->dump(Pass::Collapse);
  CHECK(lines_with(dump, "->") == lexical.productions.size());
  // The recursive alternative keeps its three symbols, named as the terminals are.
  const std::string open = lexical.terminals[terminal_for(lexical, "(")].name;
  const std::string close = lexical.terminals[terminal_for(lexical, ")")].name;
  CHECK(lines_with(dump, "start -> " + open + " start " + close) == 1);
}

TEST_CASE("pass lr: the table's states, actions and conflicts, as dumped", "[pipeline]") {
  auto parens = compiled(kParens);
  const ir::LrTable& table = parens->table();
  const std::string dump = parens->dump(Pass::Lr);
  CHECK(dump.rfind(fmt::format("{} states,", table.state_count()), 0) == 0);
  size_t shifts = 0, gotos = 0;
  for (uint32_t s = 0; s < table.state_count(); ++s) shifts += table.shifts(s).size(), gotos += table.gotos(s).size();
  CHECK(lines_with(dump, "  shift ") == shifts);
  CHECK(lines_with(dump, "  goto ") == gotos);
  CHECK(lines_with(dump, ": accept ") == 1);
  CHECK(table.conflict_count() == 0);
  CHECK(lines_with(dump, "(conflict)") == 0);

  // An ambiguous grammar: LALR(1) conflicts, kept for GLR and marked.
  auto sums = compiled("start ::= start '+' start | 'n' ;");
  CHECK(sums->table().conflict_count() > 0);
  CHECK(lines_with(sums->dump(Pass::Lr), "(conflict)") > 0);
}

TEST_CASE("pass followers: the terminals that may come right after each", "[pipeline]") {
  auto g = compiled(kParens);
  const ir::LexicalGrammar& lexical = g->lexical();
  const uint32_t open = terminal_for(lexical, "("), close = terminal_for(lexical, ")"), ab = terminal_for(lexical, "ab");
  auto sorted = [](std::vector<uint32_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  CHECK(g->index().followers(open) == sorted({open, ab}));
  CHECK(g->index().followers(ab) == std::vector<uint32_t>{close});  // the end of text is not a terminal
  CHECK(g->index().followers(close) == std::vector<uint32_t>{close});
  const std::string dump = g->dump(Pass::Followers);
  CHECK(lines_with(dump, lexical.terminals[ab].name + ": " + lexical.terminals[close].name) == 1);
}

TEST_CASE("pass token-index: entries per lexer state, tokens inside and crossing", "[pipeline]") {
  auto g = compiled(kParens, /*eager=*/true);
  const ir::LexicalGrammar& lexical = g->lexical();
  const uint32_t open = terminal_for(lexical, "("), ab = terminal_for(lexical, "ab");
  const Vocabulary& vocab = g->vocabulary();
  auto id_of = [&](std::string_view bytes) {
    for (uint32_t id = 0; id < vocab.size(); ++id)
      if (vocab.bytes(id) == bytes) return id;
    FAIL("no token " << bytes);
    return 0u;
  };
  auto inside = [&](const StateIndex& e, std::string_view token) {
    const uint32_t id = id_of(token);
    return e.inside.contains(id);
  };
  // From the start of 'ab': "a" stays inside the lexeme; "((" and ")" do not.
  const StateIndex& at_ab = g->index().get(ab, lexical.terminals[ab].dfa.start());
  CHECK(inside(at_ab, "a"));
  CHECK_FALSE(inside(at_ab, "(("));
  CHECK_FALSE(inside(at_ab, ")"));
  // From the start of '(': "((" ends the lexeme mid-token, so it crosses.
  const StateIndex& at_open = g->index().get(open, lexical.terminals[open].dfa.start());
  CHECK(at_open.crosses());
  CHECK_FALSE(inside(at_open, "(("));
  const std::string dump = g->dump(Pass::TokenIndex);
  CHECK(lines_with(dump, " states") == lexical.terminals.size());
  CHECK(dump.find(fmt::format("{} bytes", g->index().memory_bytes())) != std::string::npos);
}

TEST_CASE("pass any-tokens: the text tokens any! allows, and none without any!", "[pipeline]") {
  CHECK(compiled(kParens)->dump(Pass::AnyTokens).rfind("no any!", 0) == 0);
  auto g = compiled("start ::= any!* ;");
  const std::vector<uint32_t> all(g->any_tokens().begin(), g->any_tokens().end());
  const size_t count = std::accumulate(all.begin(), all.end(), size_t{0},
                                       [](size_t n, uint32_t w) { return n + static_cast<size_t>(std::popcount(w)); });
  CHECK(count == g->vocabulary().size());  // every token of this vocabulary is text, and valid UTF-8
  CHECK(g->dump(Pass::AnyTokens).rfind(fmt::format("{} text tokens in all", count), 0) == 0);
}

TEST_CASE("pipeline: a pass that fails stops the ones after it, with its message", "[pipeline]") {
  CompileOptions options;
  options.lr.max_states = 1;
  auto result = CompiledGrammar::compile(test::grammar(kParens), tiny_vocabulary(), options);
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(result.error().message, Catch::Contains("LR automaton needs more than 1 states"));
  CHECK(result.error().code == ErrorCode::Limit);
}

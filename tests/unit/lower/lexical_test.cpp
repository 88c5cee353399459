// The lexical lowering (lower/lexical.h) on its own: which rules collapse
// into lexemes, what each terminal's DFA accepts, the split of terminals
// that match the empty string, the skeleton's dump, the collapse budget,
// and saving and loading.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "binary_io.h"
#include "compiled_grammar.h"
#include "helpers.h"
#include "lexical.h"

using namespace cgram;
using namespace cgram::test;

namespace {

// A grammar and its lowering, kept together (the lowering reads the IR).
struct Lowered {
  std::shared_ptr<const Grammar> g;
  ir::LexicalGrammar lex;
  const ir::GrammarIR& ir() const { return g->ir(); }
  uint32_t rule(std::string_view name) const {
    auto id = g->ir().find(name);
    REQUIRE(id);
    return *id;
  }
  const std::string& reason(std::string_view name) const { return lex.context_free_reasons[rule(name)]; }
  // The skeleton's terminal of this name (fails the test when there is none).
  const ir::LexTerminal& terminal(std::string_view name) const {
    auto it = std::find_if(lex.terminals.begin(), lex.terminals.end(), [&](const auto& t) { return t.name == name; });
    REQUIRE(it != lex.terminals.end());
    return *it;
  }
  bool has_terminal(std::string_view name) const {
    return std::any_of(lex.terminals.begin(), lex.terminals.end(), [&](const auto& t) { return t.name == name; });
  }
  // Skeleton productions whose left-hand side is this nonterminal name.
  size_t productions_of(std::string_view name) const {
    return static_cast<size_t>(std::count_if(lex.productions.begin(), lex.productions.end(),
                                             [&](const auto& p) { return lex.nonterminal_names[p.lhs] == name; }));
  }
};

Lowered lower(std::string_view source, const ir::CollapseLimits& limits = {}) {
  auto g = grammar(source);
  ir::LexicalGrammar lex = ir::lower_lexical(g->ir(), limits);
  return {g, std::move(lex)};
}

std::vector<std::string> terminal_names(const ir::LexicalGrammar& lex) {
  std::vector<std::string> names;
  for (const auto& t : lex.terminals) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("lexical: regular rules collapse into lexemes, self-embedding ones stay rules", "[lexical-unit]") {
  Lowered l = lower(
      "start ::= '(' list ')' ;"
      "list ::= item | list ',' item ;"
      "item ::= start | word ;"
      "word ::= #'[a-z]'+ ;");
  INFO(l.lex.dump());
  // word (and the helper of its '+') is regular: one terminal, no rule left.
  CHECK(l.reason("word").empty());
  CHECK(l.productions_of("word") == 0);
  size_t helpers = 0;
  for (uint32_t n = 0; n < l.ir().nonterminals.size(); ++n)
    if (l.ir().nonterminals[n].name.starts_with("word#")) {
      ++helpers;
      CHECK(l.lex.context_free_reasons[n].empty());
      CHECK(l.productions_of(l.ir().nonterminals[n].name) == 0);
    }
  CHECK(helpers > 0);
  // start, list and item embed one another in the middle of a sequence.
  for (const char* name : {"start", "list", "item"}) {
    INFO(name);
    CHECK_THAT(l.reason(name), Catch::Contains("self-embedding"));
  }
  CHECK(l.productions_of("start") == 1);
  CHECK(l.productions_of("list") == 2);
  CHECK(l.productions_of("item") == 2);
  CHECK(l.productions_of("start'") == 1);
  CHECK(terminal_names(l.lex) == std::vector<std::string>{"'('", "')'", "','", "word"});
  CHECK(l.terminal("word").kind == ir::LexTerminal::Kind::Bytes);
  // The augmented start: production 0 is start' -> start.
  REQUIRE(!l.lex.productions.empty());
  CHECK(l.lex.nonterminal_names[l.lex.start] == "start'");
  CHECK(l.lex.productions[0].lhs == l.lex.start);
  CHECK(l.lex.productions[0].rhs == std::vector<ir::SkeletonSymbol>{{false, l.rule("start")}});
  // A rule that uses a context-free one is context-free, and says so.
  Lowered uses = lower("start ::= w p ; w ::= 'x' ; p ::= '(' p ')' | 'y' ;");
  CHECK(uses.reason("start") == "it uses 'p', which is context-free");
  CHECK(uses.reason("p") == "it recurses through 'p' in the middle of a sequence (self-embedding)");
  CHECK(uses.reason("w").empty());
}

TEST_CASE("lexical: a collapsed rule's DFA accepts exactly its language", "[lexical-unit]") {
  Lowered l = lower(
      "start ::= '(' start ')' | kw num ;"
      "kw ::= 'if' | 'iff' ;"
      "num ::= '-'? #'[0-9]+' ('.' #'[0-9]+')? ;");
  INFO(l.lex.dump());
  CHECK(terminal_names(l.lex) == std::vector<std::string>{"'('", "')'", "kw", "num"});
  const ir::Dfa& kw = l.terminal("kw").dfa;
  for (const char* yes : {"if", "iff"}) CHECK(kw.matches(yes));
  for (const char* no : {"", "i", "ifff", "fi", "if "}) CHECK_FALSE(kw.matches(no));
  const ir::Dfa& num = l.terminal("num").dfa;
  for (const char* yes : {"0", "42", "-7", "3.14", "-0.50"}) {
    INFO(yes);
    CHECK(num.matches(yes));
  }
  for (const char* no : {"", "-", "1.", ".5", "1.2.3", "+1", "--1", "1-"}) {
    INFO(no);
    CHECK_FALSE(num.matches(no));
  }
  // A literal terminal accepts its bytes alone.
  const ir::Dfa& open = l.terminal("'('").dfa;
  CHECK(open.matches("("));
  CHECK_FALSE(open.matches("(("));
  CHECK_FALSE(open.matches(""));
  // Trimmed: a live state can always reach acceptance ("-" is a prefix of
  // "-1", "-x" of nothing).
  CHECK(num.run(num.start(), "-") != ir::Dfa::kDead);
  CHECK(num.run(num.start(), "-x") == ir::Dfa::kDead);
  CHECK(num.run(num.start(), "1.") != ir::Dfa::kDead);
}

TEST_CASE("lexical: a regular start rule is one terminal, by right- or left-linear recursion", "[lexical-unit]") {
  Lowered right = lower("start ::= 'a' start | 'b' ;");
  CHECK(right.lex.dump() == "start' -> start\n");
  REQUIRE(right.lex.terminals.size() == 1);
  CHECK(right.reason("start").empty());
  const ir::Dfa& r = right.lex.terminals[0].dfa;
  for (const char* yes : {"b", "ab", "aaab"}) CHECK(r.matches(yes));
  for (const char* no : {"", "a", "ba", "abb"}) CHECK_FALSE(r.matches(no));
  // The skeleton's only production reads the terminal.
  CHECK(right.lex.productions[0].rhs == std::vector<ir::SkeletonSymbol>{{true, 0}});

  Lowered left = lower("start ::= '(' start ')' | l ; l ::= l 'x' | 'y' ;");
  CHECK(left.reason("l").empty());
  const ir::Dfa& d = left.terminal("l").dfa;
  for (const char* yes : {"y", "yx", "yxxx"}) CHECK(d.matches(yes));
  for (const char* no : {"", "x", "xy", "yy"}) CHECK_FALSE(d.matches(no));
  // Recursion on both sides is not regular by structure: it stays a rule.
  Lowered mixed = lower("start ::= m ; m ::= 'a' m | m 'b' | 'c' ;");
  CHECK(mixed.reason("m") == "its recursion is on the left in one place and on the right in another");
  CHECK(mixed.productions_of("m") == 3);
}

TEST_CASE("lexical: terminals that match the empty string are split into t+ and an optional rule", "[lexical-unit]") {
  SECTION("a collapsed rule") {
    Lowered l = lower("start ::= '(' start ')' | ws 'x' ; ws ::= #'[ ]*' ;");
    CHECK(l.lex.dump() ==
          "start' -> start\n"
          "start -> '(' start ')'\n"
          "ws? -> ε\n"
          "ws? -> ws+\n"
          "start -> ws? 'x'\n");
    const ir::Dfa& ws = l.terminal("ws+").dfa;
    CHECK_FALSE(ws.accepts_empty());
    CHECK(ws.matches(" "));
    CHECK(ws.matches("   "));
    CHECK_FALSE(ws.matches(" x"));
    CHECK_FALSE(l.has_terminal("ws"));
  }
  SECTION("a regex terminal") {
    Lowered l = lower("start ::= '(' start ')' | #'a*' 'x' ;");
    INFO(l.lex.dump());
    const ir::Dfa& a = l.terminal("#'a*'+").dfa;
    CHECK_FALSE(a.matches(""));
    CHECK(a.matches("aa"));
    CHECK(l.productions_of("#'a*'?") == 2);
  }
  SECTION("a rule whose only string is the empty one: the optional rule alone") {
    Lowered l = lower("start ::= '(' start ')' | e 'x' ; e ::= '' ;");
    INFO(l.lex.dump());
    CHECK_FALSE(l.has_terminal("e+"));
    CHECK_FALSE(l.has_terminal("e"));
    CHECK(l.productions_of("e?") == 1);
    CHECK_THAT(l.lex.dump(), Catch::Contains("e? -> ε\nstart -> e? 'x'\n"));
  }
  SECTION("except!") {
    Lowered l = lower("start ::= '(' start ')' | except!('ab', 3) 'ab' ;");
    INFO(l.lex.dump());
    REQUIRE(l.lex.excepts.size() == 1);
    CHECK(l.lex.excepts[0].max_tokens == std::optional<uint64_t>(3));
    const ir::LexTerminal& t = l.terminal("except!('ab', 3)+");
    CHECK(t.kind == ir::LexTerminal::Kind::Except);
    CHECK(t.except_index == 0);
    CHECK_FALSE(t.dfa.accepts_empty());
    CHECK(t.dfa.matches("xyz"));
    CHECK_FALSE(t.dfa.matches("xaby"));
    CHECK_FALSE(t.dfa.matches("ab"));
    // Not minimised: the automaton's own states come first, the split-off start last.
    CHECK(t.dfa.size() == l.lex.excepts[0].automaton->dfa().size() + 1);
    CHECK(t.dfa.start() == t.dfa.size() - 1);
    CHECK(l.productions_of("except!('ab', 3)?") == 2);
  }
}

TEST_CASE("lexical: without_empty_string removes exactly the empty string", "[lexical-unit]") {
  // a*: one accepting state with a loop.
  ir::Dfa star;
  const uint32_t q = star.add_state(true);
  star.set(q, 'a', q);
  star.set_start(q);
  REQUIRE(star.accepts_empty());
  for (bool minimal : {true, false}) {
    INFO("minimal " << minimal);
    ir::Dfa plus = ir::without_empty_string(star, minimal);
    CHECK_FALSE(plus.accepts_empty());
    CHECK(plus.matches("a"));
    CHECK(plus.matches("aaaa"));
    CHECK_FALSE(plus.matches("b"));
    CHECK_FALSE(plus.matches("ab"));
    CHECK(plus.size() == 2);
  }
  // Not minimised: the old states keep their numbers, the new start is last.
  ir::Dfa kept = ir::without_empty_string(star, false);
  CHECK(kept.start() == 1);
  CHECK(kept.accepting(0));
  CHECK(kept.next(0, 'a') == 0);
  CHECK(kept.next(1, 'a') == 0);
  // A DFA that does not accept "" comes back as it was.
  ir::Dfa lit = ir::literal_dfa("ab");
  ir::Dfa same = ir::without_empty_string(lit);
  CHECK(same.size() == lit.size());
  CHECK(same.start() == lit.start());
  CHECK(same.matches("ab"));
  // {""} alone: nothing is left.
  ir::Dfa empty_only;
  empty_only.set_start(empty_only.add_state(true));
  CHECK(ir::without_empty_string(empty_only).empty_language());
}

TEST_CASE("lexical: dump() of a tiny grammar", "[lexical-unit]") {
  Lowered l = lower("start ::= '(' start ')' | 'x' ;");
  CHECK(l.lex.dump() ==
        "start' -> start\n"
        "start -> '(' start ')'\n"
        "start -> 'x'\n");
  // Terminals in the order the skeleton first uses them; start' after the IR's rules.
  CHECK(l.lex.terminals.size() == 3);
  CHECK(l.lex.terminals[0].name == "'('");
  CHECK(l.lex.terminals[1].name == "')'");
  CHECK(l.lex.terminals[2].name == "'x'");
  CHECK(l.lex.nonterminal_names == std::vector<std::string>{"start", "start'"});
  CHECK(l.lex.start == 1);
  CHECK(l.lex.context_free_reasons.size() == 1);
}

TEST_CASE("lexical: a rule over the collapse budget stays with the parser, with the reason", "[lexical-unit]") {
  // w's minimal DFA needs 8 states: the last three bytes.
  const char* source = "start ::= '(' start ')' | w ; w ::= #'[ab]*a[ab][ab]' ;";
  Lowered fits = lower(source);
  CHECK(fits.reason("w").empty());
  CHECK(fits.productions_of("w") == 0);
  CHECK(fits.terminal("w").dfa.size() == 8);

  ir::CollapseLimits small;
  small.max_rule_states = 4;
  Lowered over = lower(source, small);
  CHECK(over.reason("w") == "as a DFA it would need more than 4 states");
  // Honoured, not an error: w is a rule over the regex terminal, whose
  // language is the same.
  CHECK(over.productions_of("w") == 1);
  CHECK_FALSE(over.has_terminal("w"));
  const ir::Dfa& regex = over.terminal("#'[ab]*a[ab][ab]'").dfa;
  for (const char* yes : {"aaa", "abb", "babb"}) CHECK(regex.matches(yes));
  for (const char* no : {"bab", "ab", ""}) CHECK_FALSE(regex.matches(no));

  ir::CollapseLimits spent;
  spent.max_total_states = 0;
  CHECK_THAT(lower(source, spent).reason("w"),
             Catch::StartsWith("the grammar's budget for collapsing rules into lexemes (0 DFA states"));
  ir::CollapseLimits nfa;
  nfa.max_nfa_states = 2;
  CHECK(lower(source, nfa).reason("w") == "its automaton would need more than 2 NFA states");

  // Compiling with that budget succeeds too (CompileOptions::collapse).
  auto vocab = Vocabulary::from_tokens({"a", "b", "(", ")"}, {});
  REQUIRE(vocab.ok());
  CompileOptions options;
  options.collapse = small;
  auto compiled = CompiledGrammar::compile(grammar(source), *vocab, options);
  REQUIRE(compiled.ok());
  CHECK((*compiled)->lexical().context_free_reasons[fits.rule("w")] == "as a DFA it would need more than 4 states");
}

TEST_CASE("lexical: any! and except! keep their rule in the skeleton; any! is one terminal", "[lexical-unit]") {
  Lowered l = lower("start ::= 'a' any! 'b' any! ;");
  CHECK(l.reason("start") == "it holds any! or except!, which depend on token boundaries");
  const auto anys = std::count_if(l.lex.terminals.begin(), l.lex.terminals.end(),
                                  [](const auto& t) { return t.kind == ir::LexTerminal::Kind::AnyToken; });
  CHECK(anys == 1);
  CHECK(l.terminal("any!").kind == ir::LexTerminal::Kind::AnyToken);
  CHECK(l.lex.dump() == "start' -> start\nstart -> 'a' any! 'b' any!\n");
  Lowered e = lower("start ::= except!('*/') '*/' ;");
  CHECK(e.reason("start") == "it holds any! or except!, which depend on token boundaries");
  CHECK(e.lex.excepts.size() == 1);
  CHECK_FALSE(e.lex.excepts[0].max_tokens);
}

TEST_CASE("lexical: save and load give the same grammar; damaged bytes are refused", "[lexical-unit]") {
  Lowered l = lower(
      "start ::= '(' start ')' | ws num | except!('ab', 2) 'ab' | any! ;"
      "ws ::= #'[ ]*' ; num ::= #'[0-9]+' ;");
  ir::BinaryWriter out;
  l.lex.save(out);
  const std::string bytes = out.take();
  ir::LexicalGrammar loaded;
  ir::BinaryReader in(bytes);
  REQUIRE(ir::LexicalGrammar::load(in, loaded, ir::kDefaultLongestToken));
  CHECK(in.ok());
  CHECK(in.at_end());
  CHECK(loaded.dump() == l.lex.dump());
  CHECK(loaded.start == l.lex.start);
  CHECK(loaded.nonterminal_names == l.lex.nonterminal_names);
  CHECK(loaded.context_free_reasons == l.lex.context_free_reasons);
  REQUIRE(loaded.terminals.size() == l.lex.terminals.size());
  for (size_t t = 0; t < loaded.terminals.size(); ++t) {
    INFO(l.lex.terminals[t].name);
    CHECK(loaded.terminals[t].kind == l.lex.terminals[t].kind);
    CHECK(loaded.terminals[t].except_index == l.lex.terminals[t].except_index);
    CHECK(loaded.terminals[t].dfa.size() == l.lex.terminals[t].dfa.size());
    for (const char* s : {"1", "12", "  ", "x", "xa", "ab", "("})
      CHECK(loaded.terminals[t].dfa.matches(s) == l.lex.terminals[t].dfa.matches(s));
  }
  REQUIRE(loaded.excepts.size() == 1);
  CHECK(loaded.excepts[0].max_tokens == std::optional<uint64_t>(2));
  CHECK(loaded.excepts[0].automaton->strings() == l.lex.excepts[0].automaton->strings());
  // Cut short: refused with a message, never read past the end.
  for (size_t cut : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 1}) {
    INFO("cut at " << cut);
    ir::LexicalGrammar partial;
    ir::BinaryReader short_in(std::string_view(bytes).substr(0, cut));
    CHECK_FALSE(ir::LexicalGrammar::load(short_in, partial, ir::kDefaultLongestToken));
    CHECK_FALSE(short_in.error().empty());
  }
}

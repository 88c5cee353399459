// The engine's lookups by tier on their own (engine/tier_lookups.h): the
// tables until the grammar has compiled code, then the kernels, which must
// answer every lookup the walks make as the tables do (a counted lexeme's
// states from its window, which the kernels do not code).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string_view>
#include <type_traits>
#include <vector>

#include "compiled_grammar.h"
#include "helpers.h"
#include "kernel_jit.h"
#include "tier_lookups.h"

using namespace cgram;

namespace {
void every_lookup_alike(const CompiledGrammar& g, const TierLookups::Tables& tables,
                        const TierLookups::Compiled& compiled) {
  const ir::LexicalGrammar& lex = g.lexical();
  for (uint32_t t = 0; t < lex.terminals.size(); ++t) {
    // Every state the lexer can reach, from the start (a counted lexeme's
    // are its own numbers, not its window's).
    std::vector<uint32_t> todo{lex.terminals[t].dfa.start()};
    std::set<uint32_t> seen(todo.begin(), todo.end());
    while (!todo.empty()) {
      const uint32_t q = todo.back();
      todo.pop_back();
      REQUIRE(tables.dfa_accepting(t, q) == compiled.dfa_accepting(t, q));
      for (int b = 0; b < 256; ++b) {
        const uint32_t next = tables.dfa_next(t, q, static_cast<uint8_t>(b));
        REQUIRE(next == compiled.dfa_next(t, q, static_cast<uint8_t>(b)));
        if (next != ir::Dfa::kDead && seen.insert(next).second) todo.push_back(next);
      }
    }
    for (int b = 0; b < 256; ++b)
      REQUIRE(tables.can_follow(t, static_cast<uint8_t>(b)) == compiled.can_follow(t, static_cast<uint8_t>(b)));
  }
  const ir::LrTable& table = g.table();
  for (uint32_t s = 0; s < table.state_count(); ++s) {
    for (uint32_t t = 0; t <= table.terminal_count(); ++t) {
      if (t < table.terminal_count()) REQUIRE(tables.lr_shift(s, t) == compiled.lr_shift(s, t));
      REQUIRE(&tables.reductions(s, t) == &compiled.reductions(s, t));
    }
    for (uint32_t n = 0; n < table.nonterminal_count(); ++n) REQUIRE(tables.lr_go(s, n) == compiled.lr_go(s, n));
  }
}
}  // namespace

TEST_CASE("tier lookups: the tables until kernels are installed, then kernels that answer as they do",
          "[tiers][jit]") {
  const char* const grammars[] = {
      "start ::= '[' [ item { ',' item } ] ']' ; item ::= #'[a-z]+' | #'[0-9]{1,3}' | start ;",
      // A counted lexeme: its window's states are the tables', in both tiers.
      "start ::= '\"' #'[a-z]{0,300}' '\"' ;",
  };
  for (const char* source : grammars) {
    INFO(source);
    auto compiled = CompiledGrammar::compile(test::grammar(source), test::bundled_vocabulary());
    REQUIRE(compiled.ok());
    const CompiledGrammar& g = **compiled;
    const bool counted = std::any_of(g.lexical().terminals.begin(), g.lexical().terminals.end(),
                                     [](const ir::LexTerminal& t) { return t.counted != nullptr; });
    CHECK(counted == (std::string_view(source).find("{0,300}") != std::string_view::npos));
    TierLookups tier(g);
    tier.refresh();
    CHECK_FALSE(tier.compiled());
    const bool on_tables =
        tier.with([](const auto& look) { return std::is_same_v<std::decay_t<decltype(look)>, TierLookups::Tables>; });
    CHECK(on_tables);
    const std::optional<Error> failed = jit::tier_up_now(g);
    INFO((failed ? failed->message : ""));
    REQUIRE_FALSE(failed);
    CHECK_FALSE(tier.compiled());  // picked up at the next refresh, not in the middle of a walk
    tier.refresh();
    REQUIRE(tier.compiled());
    const TierLookups::Tables tables{g.lexical(), g.table(), g.index()};
    tier.with([&](const auto& look) {
      if constexpr (std::is_same_v<std::decay_t<decltype(look)>, TierLookups::Compiled>) every_lookup_alike(g, tables, look);
      else FAIL("the tables answered after the kernels were installed");
    });
  }
}

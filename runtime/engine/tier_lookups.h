#pragma once
// The lookups the hot walks make (compiled/kernels.h lists them), as a
// policy the walks are templates on: the tables, or the grammar's compiled
// code once it has some (tier-up, picked up at each public call by
// refresh). The tier is chosen once per walk by with(), not at every
// lookup. One of the engine's parts (engine.h).
#include <cstdint>
#include <utility>
#include <vector>

#include "compiled_grammar.h"

namespace cgram {

class TierLookups {
 public:
  struct Tables {
    const ir::LexicalGrammar& lex;
    const ir::LrTable& table;
    const TokenIndex& index;
    uint32_t dfa_next(uint32_t terminal, uint32_t state, uint8_t byte) const {
      return lex.terminals[terminal].next(state, byte);
    }
    bool dfa_accepting(uint32_t terminal, uint32_t state) const { return lex.terminals[terminal].accepting(state); }
    uint32_t lr_shift(uint32_t state, uint32_t terminal) const { return table.shift(state, terminal); }
    uint32_t lr_go(uint32_t state, uint32_t nonterminal) const { return table.go(state, nonterminal); }
    bool can_follow(uint32_t terminal, uint8_t byte) const { return index.follower_first_bytes(terminal)[byte]; }
    const std::vector<ir::LrReduction>& reductions(uint32_t state, uint32_t terminal) const {
      return table.reductions(state, terminal);
    }
  };
  struct Compiled {
    const KernelFunctions& k;
    const uint32_t* const* dfa_tables;
    const ir::LrTable& table;  // the reduction lists the kernels' ids name
    // The lexical grammar when it has counted lexemes, whose states the
    // kernels (which code the window DFAs) do not know; else null.
    const ir::LexicalGrammar* counted;
    uint32_t dfa_next(uint32_t terminal, uint32_t state, uint8_t byte) const {
      if (const ir::CountedLexeme* c = counted_lexeme(terminal)) return c->next(state, byte);
      return k.dfa_next(dfa_tables, terminal, state, byte);
    }
    bool dfa_accepting(uint32_t terminal, uint32_t state) const {
      if (const ir::CountedLexeme* c = counted_lexeme(terminal)) return c->accepting(state);
      return k.dfa_accepting(terminal, state) != 0;
    }
    const ir::CountedLexeme* counted_lexeme(uint32_t terminal) const {
      return counted ? counted->terminals[terminal].counted.get() : nullptr;
    }
    uint32_t lr_shift(uint32_t state, uint32_t terminal) const { return k.lr_shift(state, terminal); }
    uint32_t lr_go(uint32_t state, uint32_t nonterminal) const { return k.lr_goto(state, nonterminal); }
    bool can_follow(uint32_t terminal, uint8_t byte) const { return k.can_follow(terminal, byte) != 0; }
    const std::vector<ir::LrReduction>& reductions(uint32_t state, uint32_t terminal) const {
      return table.reduction_list(k.lr_reduce(state, terminal));
    }
  };

  explicit TierLookups(const CompiledGrammar& grammar);
  // The grammar's compiled code, once it has some (a JIT or AOT tier
  // installed since the last call).
  void refresh() {
    const Kernels* k = g_.kernels();
    k_ = k ? &k->functions : nullptr;
    k_tables_ = k ? k->dfa_tables.data() : nullptr;
  }
  bool compiled() const { return k_ != nullptr; }
  // Calls f with the lookups of the current tier.
  template <class F>
  decltype(auto) with(F&& f) const {
    if (k_) return f(Compiled{*k_, k_tables_, g_.table(), has_counted_ ? &g_.lexical() : nullptr});
    return f(Tables{g_.lexical(), g_.table(), g_.index()});
  }
  // Single lookups, for the paths that make one or two per call.
  bool dfa_accepting(uint32_t terminal, uint32_t state) const {
    return with([&](const auto& look) { return look.dfa_accepting(terminal, state); });
  }
  bool can_follow(uint32_t terminal, uint8_t byte) const {
    return with([&](const auto& look) { return look.can_follow(terminal, byte); });
  }

 private:
  const CompiledGrammar& g_;
  const KernelFunctions* k_ = nullptr;
  const uint32_t* const* k_tables_ = nullptr;
  bool has_counted_ = false;  // some terminal is a counted lexeme (its states are not the kernels')
};

}  // namespace cgram

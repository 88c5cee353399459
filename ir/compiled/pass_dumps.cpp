// What each pass of the pipeline (pipeline.h) made, as text a person can
// read: `cgram check --dump PASS` and the pipeline's unit tests.
#include <fmt/format.h>

#include <bit>

#include "compiled_grammar.h"

namespace cgram {
namespace {

size_t count_bits(std::span<const uint32_t> words) {
  size_t n = 0;
  for (uint32_t w : words) n += static_cast<size_t>(std::popcount(w));
  return n;
}

std::string symbol_name(const ir::LexicalGrammar& lexical, ir::SkeletonSymbol symbol) {
  if (symbol.terminal) return lexical.terminals[symbol.index].name;
  return lexical.nonterminal_names[symbol.index];
}

std::string terminal_name(const ir::LexicalGrammar& lexical, uint32_t terminal) {
  return terminal < lexical.terminals.size() ? lexical.terminals[terminal].name : std::string("$end");
}

// Every state: its shifts, gotos, and reductions by lookahead; a cell with
// more than one action is a conflict, which GLR follows both ways.
std::string dump_lr(const ir::LexicalGrammar& lexical, const ir::LrTable& table) {
  std::string out = fmt::format("{} states, {} terminals, {} nonterminals, {} conflicting cells\n",
                                table.state_count(), table.terminal_count(), table.nonterminal_count(),
                                table.conflict_count());
  for (uint32_t s = 0; s < table.state_count(); ++s) {
    out += fmt::format("state {}\n", s);
    for (auto [t, target] : table.shifts(s))
      out += fmt::format("  shift {} -> {}\n", terminal_name(lexical, t), target);
    for (auto [n, target] : table.gotos(s))
      out += fmt::format("  goto {} -> {}\n", lexical.nonterminal_names[n], target);
    for (uint32_t t = 0; t <= table.end_marker(); ++t) {
      const auto& reductions = table.reductions(s, t);
      for (const ir::LrReduction& r : reductions) {
        const ir::SkeletonProduction& p = table.production(r.production);
        std::string rhs;
        for (ir::SkeletonSymbol symbol : p.rhs) rhs += " " + symbol_name(lexical, symbol);
        const bool shifts_too = t < table.terminal_count() && table.shift(s, t) != ir::LrTable::kNone;
        const bool conflict = reductions.size() > 1 || shifts_too;
        out += fmt::format("  on {}: {} {} ->{}{}\n", terminal_name(lexical, t), r.production == 0 ? "accept" : "reduce",
                           lexical.nonterminal_names[p.lhs], rhs.empty() ? " ε" : rhs, conflict ? "  (conflict)" : "");
      }
    }
  }
  return out;
}

std::string dump_followers(const ir::LexicalGrammar& lexical, const TokenIndex& index) {
  std::string out;
  for (uint32_t t = 0; t < lexical.terminals.size(); ++t) {
    out += fmt::format("{}:", lexical.terminals[t].name);
    for (uint32_t u : index.followers(t)) out += " " + lexical.terminals[u].name;
    out += "\n";
  }
  return out;
}

// Per terminal and DFA state: the tokens that stay inside the lexeme and
// the trie nodes where the lexeme can end mid-token. Builds every entry.
std::string dump_token_index(const ir::LexicalGrammar& lexical, const TokenIndex& index) {
  std::string out;
  for (uint32_t t = 0; t < lexical.terminals.size(); ++t) {
    const ir::LexTerminal& terminal = lexical.terminals[t];
    if (terminal.kind == ir::LexTerminal::Kind::AnyToken) {
      out += fmt::format("{}: any! (no entries: every text token)\n", terminal.name);
      continue;
    }
    out += fmt::format("{}: {} states\n", terminal.name, terminal.dfa.size());
    for (uint32_t q = 0; q < terminal.dfa.size(); ++q) {
      const StateIndex& entry = index.get(t, q);
      out += fmt::format("  state {}: {} tokens inside, {}\n", q, entry.inside.count(),
                         !entry.crosses()                ? std::string("no crossing")
                         : entry.cross_nodes.empty()     ? fmt::format("crossings by next terminal ({})", entry.into.size())
                                                         : fmt::format("{} crossing", entry.cross_nodes.size()));
    }
  }
  out += fmt::format("{} bytes\n", index.memory_bytes());
  return out;
}

}  // namespace

std::string CompiledGrammar::dump(Pass pass) const {
  switch (pass) {
    case Pass::Collapse: return lexical_.dump();
    case Pass::Lr: return dump_lr(lexical_, *table_);
    case Pass::Followers: return dump_followers(lexical_, *index_);
    case Pass::TokenIndex: return dump_token_index(lexical_, *index_);
    case Pass::AnyTokens: {
      if (any_tokens_.empty()) return "no any! in the grammar (or no token it allows)\n";
      std::string out = fmt::format("{} text tokens in all\n", count_bits(any_tokens_));
      for (size_t c = 0; c < any_tokens_by_char_state_.size(); ++c)
        if (!any_tokens_by_char_state_[c].empty())
          out += fmt::format("ending in UTF-8 state {}: {} tokens\n", c, count_bits(any_tokens_by_char_state_[c]));
      return out;
    }
  }
  return {};
}

}  // namespace cgram

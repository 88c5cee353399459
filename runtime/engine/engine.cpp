// The engine itself: construction, the tier picked up at
// each public call, the first heads. The rest of Engine is split by job:
// stack_graph.h (the GSS), reductions.cpp (the reductions over it), lexing.cpp (heads over bytes), mask_walks.cpp
// (the mask), queries.cpp (forced text, context keys).
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "engine.h"
#include "mask_words.h"
#include "utf8_dfa.h"

namespace cgram {

Engine::Engine(const CompiledGrammar& grammar, const EngineLimits& limits)
    : g_(grammar),
      limits_(limits),
      budget_({limits.max_work_per_call, limits.max_work_per_byte, limits.sequence_work_slack}),
      tier_(grammar),
      lex_(grammar.lexical()),
      table_(grammar.table()),
      cross_work_by_state_(table_.state_count(), 0),
      start_crosses_(lex_.terminals.size(), -1) {
  for (uint32_t t = 0; t < lex_.terminals.size(); ++t) {
    const ir::LexTerminal& term = lex_.terminals[t];
    if (term.kind == ir::LexTerminal::Kind::AnyToken) any_terminal_ = t;
    std::bitset<256> first;
    for (int b = 0; b < 256; ++b)
      first[b] = term.kind == ir::LexTerminal::Kind::AnyToken ||
                 term.dfa.next(term.dfa.start(), static_cast<uint8_t>(b)) != ir::Dfa::kDead;
    first_bytes_.push_back(first);
    counts_tokens_.push_back(term.kind == ir::LexTerminal::Kind::Except &&
                             lex_.excepts[term.except_index].max_tokens.has_value());
  }
  for (uint8_t c = 0; c < ir::utf8::kStateCount; ++c)
    if (!grammar.any_tokens_ending_in(c).empty()) any_states_ |= uint8_t(1u << c);
  for (const ir::LexExcept& e : lex_.excepts)
    for (const std::string& s : e.automaton->strings())
      for (char c : s) except_bytes_.set(static_cast<uint8_t>(c));
  size_t longest = 0;
  for (const ir::LexExcept& e : lex_.excepts)
    for (const std::string& str : e.automaton->strings()) longest = std::max(longest, str.size());
  viable_search_depth_ = static_cast<int>(2 * longest + 1);
  if (grammar.mask_memo().enabled()) {
    MaskMemo::WorkAverages learned = grammar.mask_memo().work_averages();
    mask_work_average_ = learned.mask;
    walk_work_average_ = learned.walk;
    if (learned.cross_by_state.size() == cross_work_by_state_.size())
      cross_work_by_state_ = std::move(learned.cross_by_state);
  }
}

Engine::~Engine() {
  if (g_.mask_memo().enabled())
    g_.mask_memo().keep_work_averages({mask_work_average_, walk_work_average_, cross_work_by_state_});
}

void Engine::begin_call() {
  budget_.begin_call();
  tier_.refresh();
}

std::vector<Head> Engine::initial_heads() {
  begin_call();
  graph_.clear();
  shiftable_index_.clear();
  nodes_below_.clear();
  return {Head{new_node(0), Head::kBetween, 0, 0, 0}};
}

}  // namespace cgram

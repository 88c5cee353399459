#pragma once
// The LALR(1) automaton of the skeleton grammar (LR(0) states, lookaheads by
// spontaneous generation and propagation, as in Aho, Lam, Sethi and Ullman,
// §4.7.5). Conflicts are kept, not resolved: the runtime runs the table
// generalised (GLR), so every context-free grammar works.
//
// The reductions are right-nulled (Scott and Johnstone, "Right Nulled GLR
// Parsers", TOPLAS 2006): an item A -> α•β whose rest β can derive the empty
// string reduces A by |α| symbols on the item's lookaheads, as if β had
// been matched empty, besides the usual reduction of the complete item.
// The GLR engine relies on it (engine/engine.cpp explains why).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lexical.h"

namespace cgram::ir {

// Bounds on building the table (docs/LIMITS.md). Over them, the table is
// refused with a message (see LrTable::error).
struct LrLimits {
  size_t max_states = 1u << 17;
  size_t max_kernel_items = 1u << 22;  // LR(0) kernel items over all states
  // Bytes of LR(1) lookahead sets, each a bitset over the terminals: one per
  // nonterminal (FIRST), per production (the largest closure) and per kernel
  // item. A grammar with thousands of terminals and of rules multiplies the
  // two (30,000 recursive alternatives asked for 1.7 GB).
  size_t max_lookahead_bytes = size_t{1} << 27;
  // A lookup table (shift, goto, reduce) is dense, states × symbols, only
  // when it has at most this many cells; otherwise rows are searched.
  size_t max_dense_cells = 1u << 22;
  bool operator==(const LrLimits&) const = default;
};

// One reduction: the production's left-hand side replaces the top `length`
// symbols of the stack (less than the right-hand side's length when the
// rest is nullable: a right-nulled reduction).
struct LrReduction {
  uint32_t production = 0;
  uint32_t length = 0;
  auto operator<=>(const LrReduction&) const = default;
};

class LrTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  explicit LrTable(const LexicalGrammar& grammar, const LrLimits& limits = {});
  // Why the table could not be built within its limits (empty when it was).
  const std::string& error() const { return error_; }
  // Saving and loading (table_io.cpp): the rows, checked against `grammar`
  // on load; null with a message in `in` when invalid.
  void save(BinaryWriter& out) const;
  static std::unique_ptr<LrTable> load(BinaryReader& in, const LexicalGrammar& grammar);

  size_t state_count() const { return shifts_.size(); }
  // The end-of-input lookahead is terminal number terminal_count().
  uint32_t end_marker() const { return terminal_count_; }
  size_t terminal_count() const { return terminal_count_; }

  uint32_t shift(uint32_t state, uint32_t terminal) const {
    if (!shift_dense_.empty()) return shift_dense_[size_t(state) * terminal_count_ + terminal];
    return find_in_row(shifts_[state], terminal, kNone);
  }
  uint32_t go(uint32_t state, uint32_t nonterminal) const {
    if (!go_dense_.empty()) return go_dense_[size_t(state) * nonterminal_count_ + nonterminal];
    return find_in_row(gotos_[state], nonterminal, kNone);
  }
  // Reductions in `state` when the lookahead is `terminal` (or
  // end_marker()). Production 0 (S' -> start) on the end marker is accept.
  const std::vector<LrReduction>& reductions(uint32_t state, uint32_t terminal) const {
    return reduce_lists_[reduction_list_id(state, terminal)];
  }
  // The same as an id of a distinct list (0: none), for generated code.
  uint32_t reduction_list_id(uint32_t state, uint32_t terminal) const {
    if (!reduce_dense_.empty()) return reduce_dense_[size_t(state) * (terminal_count_ + 1) + terminal];
    return find_in_row(reduce_ids_[state], terminal, 0);
  }
  const std::vector<LrReduction>& reduction_list(uint32_t id) const { return reduce_lists_[id]; }
  size_t reduction_list_count() const { return reduce_lists_.size(); }
  size_t nonterminal_count() const { return nonterminal_count_; }
  const std::vector<std::pair<uint32_t, uint32_t>>& shifts(uint32_t state) const { return shifts_[state]; }
  const std::vector<std::pair<uint32_t, uint32_t>>& gotos(uint32_t state) const { return gotos_[state]; }
  // Terminals with any action in `state` (a superset of those that can be
  // shifted after the reductions, which depends on the stack).
  const std::vector<uint32_t>& terminals_with_actions(uint32_t state) const { return active_[state]; }
  // Cells where a shift and a complete item's reduction, or two of those,
  // meet (right-nulled reductions are not counted: they repeat work the
  // table does anyway, and a grammar without conflicts has none).
  size_t conflict_count() const { return conflicts_; }
  size_t memory_bytes() const;
  // The bytes of lookahead sets the construction needed (checked against
  // LrLimits::max_lookahead_bytes; 0 for loaded tables).
  size_t lookahead_bytes() const { return lookahead_bytes_; }

  const SkeletonProduction& production(uint32_t p) const { return grammar_->productions[p]; }

 private:
  LrTable() = default;
  void build_dense(size_t max_dense_cells);
  // Binary search in a row sorted by symbol.
  static uint32_t find_in_row(const std::vector<std::pair<uint32_t, uint32_t>>& row, uint32_t symbol,
                              uint32_t none) {
    auto it = std::lower_bound(row.begin(), row.end(), std::pair<uint32_t, uint32_t>(symbol, 0));
    return it != row.end() && it->first == symbol ? it->second : none;
  }

  const LexicalGrammar* grammar_ = nullptr;
  size_t terminal_count_ = 0;
  size_t nonterminal_count_ = 0;
  std::string error_;
  // Dense copies of the rows, for the runtime's lookups (empty when too big).
  std::vector<uint32_t> shift_dense_;   // state * terminals + t
  std::vector<uint32_t> go_dense_;      // state * nonterminals + A
  std::vector<uint32_t> reduce_dense_;  // state * (terminals + 1) + t → index into reduce_lists_
  std::vector<std::vector<LrReduction>> reduce_lists_;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> reduce_ids_;  // per state: sorted (terminal, list id)
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> shifts_;  // sorted (terminal, target)
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> gotos_;   // sorted (nonterminal, target)
  std::vector<std::vector<std::pair<uint32_t, std::vector<LrReduction>>>> reduces_;  // sorted by terminal
  std::vector<std::vector<uint32_t>> active_;
  size_t conflicts_ = 0;
  size_t lookahead_bytes_ = 0;
};

}  // namespace cgram::ir

#pragma once
// The LALR(1) automaton of the skeleton grammar (LR(0) states, lookaheads by
// spontaneous generation and propagation, as in Aho, Lam, Sethi and Ullman,
// §4.7.5). Conflicts are kept, not resolved: the runtime runs the table
// generalised (GLR), so every context-free grammar works.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lexical.h"

namespace cgram::ir {

class LrTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  explicit LrTable(const LexicalGrammar& grammar);
  // Saving and loading (table_io.cpp): the rows, checked against `grammar`
  // on load; null with a message in `in` when invalid.
  void save(BinaryWriter& out) const;
  static std::unique_ptr<LrTable> load(BinaryReader& in, const LexicalGrammar& grammar);

  size_t state_count() const { return shifts_.size(); }
  // The end-of-input lookahead is terminal number terminal_count().
  uint32_t end_marker() const { return terminal_count_; }
  size_t terminal_count() const { return terminal_count_; }

  uint32_t shift(uint32_t state, uint32_t terminal) const {
    return shift_dense_[size_t(state) * terminal_count_ + terminal];
  }
  uint32_t go(uint32_t state, uint32_t nonterminal) const {
    return go_dense_[size_t(state) * nonterminal_count_ + nonterminal];
  }
  // Productions to reduce in `state` when the lookahead is `terminal` (or
  // end_marker()). Production 0 (S' -> start) on the end marker is accept.
  const std::vector<uint32_t>& reductions(uint32_t state, uint32_t terminal) const {
    return reduce_lists_[reduce_dense_[size_t(state) * (terminal_count_ + 1) + terminal]];
  }
  // The same as an id of a distinct list (0: none), for generated code.
  uint32_t reduction_list_id(uint32_t state, uint32_t terminal) const {
    return reduce_dense_[size_t(state) * (terminal_count_ + 1) + terminal];
  }
  const std::vector<uint32_t>& reduction_list(uint32_t id) const { return reduce_lists_[id]; }
  size_t reduction_list_count() const { return reduce_lists_.size(); }
  size_t nonterminal_count() const { return nonterminal_count_; }
  const std::vector<std::pair<uint32_t, uint32_t>>& shifts(uint32_t state) const { return shifts_[state]; }
  const std::vector<std::pair<uint32_t, uint32_t>>& gotos(uint32_t state) const { return gotos_[state]; }
  // Terminals with any action in `state` (a superset of those that can be
  // shifted after the reductions, which depends on the stack).
  const std::vector<uint32_t>& terminals_with_actions(uint32_t state) const { return active_[state]; }
  size_t conflict_count() const { return conflicts_; }
  size_t memory_bytes() const;

  const SkeletonProduction& production(uint32_t p) const { return grammar_->productions[p]; }

 private:
  LrTable() = default;
  void build_dense();

  const LexicalGrammar* grammar_ = nullptr;
  size_t terminal_count_ = 0;
  size_t nonterminal_count_ = 0;
  // Dense copies of the rows, for the runtime's lookups.
  std::vector<uint32_t> shift_dense_;   // state * terminals + t
  std::vector<uint32_t> go_dense_;      // state * nonterminals + A
  std::vector<uint32_t> reduce_dense_;  // state * (terminals + 1) + t → index into reduce_lists_
  std::vector<std::vector<uint32_t>> reduce_lists_;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> shifts_;  // sorted (terminal, target)
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> gotos_;   // sorted (nonterminal, target)
  std::vector<std::vector<std::pair<uint32_t, std::vector<uint32_t>>>> reduces_;  // sorted by terminal
  std::vector<std::vector<uint32_t>> active_;
  size_t conflicts_ = 0;
};

}  // namespace cgram::ir

#pragma once
// Answers that depend only on the top of the parse stack, remembered by the
// LR states they read.
//
// Which terminals a stack node can shift after its reductions depends on the
// node's state and on the states below it, as deep as the reductions pop,
// and on nothing else. A mask builds the same fresh nodes again and again
// (the stack after a lexeme that a token crosses), and each used to have its
// set worked out anew: a third of a code grammar's mask. The memo keeps the
// answer under the path of states the computation read, top first: a trie.
// A lookup follows the stack down from the top, one state per level, until
// it meets an answer (a hit) or a state the trie does not have (a miss).
// Two stacks that agree on the states an answer read get the same answer,
// since the reductions read nothing else; an answer is therefore never kept
// under a path that is a prefix of another's, and the first answer on the
// way down is the one.
//
// Only linear stacks are kept (one parent per node down to the depth read):
// with several parents the answer would depend on the graph's shape, which
// the path does not say. The bottom of the stack is the state kBottom.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace cgram {

class StackMemo {
 public:
  static constexpr uint32_t kBottom = UINT32_MAX;  // the state below the bottom node
  static constexpr uint32_t kRoot = UINT32_MAX;    // the parent of the top level
  static constexpr uint32_t kNone = UINT32_MAX;    // no such entry / no answer here

  explicit StackMemo(size_t max_entries = size_t{1} << 15) : max_entries_(max_entries) {}

  // The entry below `parent` (kRoot: the top) for `state`, or kNone.
  uint32_t child(uint32_t parent, uint32_t state) const {
    auto it = children_.find(key(parent, state));
    return it == children_.end() ? kNone : it->second;
  }
  // The answer kept at an entry, or kNone when the answer lies deeper.
  uint32_t answer(uint32_t entry) const { return answers_[entry]; }

  // Keeps `value` under the path `states` (top first). Past the bound on
  // entries the memo starts again empty: it is a cache, never a source.
  void insert(std::span<const uint32_t> states, uint32_t value) {
    if (answers_.size() + states.size() > max_entries_) clear();
    uint32_t parent = kRoot;
    for (uint32_t state : states) {
      auto [it, added] = children_.try_emplace(key(parent, state), static_cast<uint32_t>(answers_.size()));
      if (added) answers_.push_back(kNone);
      parent = it->second;
    }
    answers_[parent] = value;
  }
  void clear() {
    children_.clear();
    answers_.clear();
  }
  size_t entries() const { return answers_.size(); }

 private:
  static uint64_t key(uint32_t parent, uint32_t state) { return uint64_t{parent} << 32 | state; }
  std::unordered_map<uint64_t, uint32_t> children_;
  std::vector<uint32_t> answers_;
  size_t max_entries_;
};

}  // namespace cgram

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

#include "path_trie.h"

namespace cgram {

class StackMemo {
 public:
  static constexpr uint32_t kBottom = UINT32_MAX;  // the state below the bottom node
  static constexpr uint32_t kRoot = PathTrie::kRoot;  // the parent of the top level
  static constexpr uint32_t kNone = PathTrie::kNone;  // no such entry / no answer here

  // The table starts at a page and grows without stopping a token
  // (support/path_trie.h): masks insert on the per-token path.
  explicit StackMemo(size_t max_entries = size_t{1} << 15) : trie_(max_entries) {}

  // The entry below `parent` (kRoot: the top) for `state`, or kNone.
  uint32_t child(uint32_t parent, uint32_t state) const { return trie_.child(parent, state); }
  // The answer kept at an entry, or kNone when the answer lies deeper.
  uint32_t answer(uint32_t entry) const { return trie_.answer(entry); }

  // Keeps `value` under the path `states` (top first). Past the bound on
  // entries the memo starts again empty: it is a cache, never a source.
  void insert(std::span<const uint32_t> states, uint32_t value) {
    if (!trie_.fits(states.size())) trie_.clear();
    trie_.set_answer(trie_.make_path(states), value);
  }
  void clear() { trie_.clear(); }
  size_t entries() const { return trie_.entries(); }

 private:
  PathTrie trie_;
};

}  // namespace cgram

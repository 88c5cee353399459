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
#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
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
    if (slots_.empty()) return kNone;
    const uint64_t k = key(parent, state);
    for (size_t i = slot_of(k);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].entry == kNone) return kNone;
      if (slots_[i].key == k) return slots_[i].entry;
    }
  }
  // The answer kept at an entry, or kNone when the answer lies deeper.
  uint32_t answer(uint32_t entry) const { return answers_[entry]; }

  // Keeps `value` under the path `states` (top first). Past the bound on
  // entries the memo starts again empty: it is a cache, never a source.
  // The table is allocated once, at the first insert, and never again:
  // masks insert on the per-token path.
  void insert(std::span<const uint32_t> states, uint32_t value) {
    if (slots_.empty()) {
      slots_.assign(std::bit_ceil(2 * max_entries_), Slot{});
      answers_.reserve(max_entries_);
    }
    if (answers_.size() + states.size() > max_entries_) clear();
    uint32_t parent = kRoot;
    for (uint32_t state : states) {
      const uint64_t k = key(parent, state);
      size_t i = slot_of(k);
      while (slots_[i].entry != kNone && slots_[i].key != k) i = (i + 1) & (slots_.size() - 1);
      if (slots_[i].entry == kNone) {
        slots_[i] = {k, static_cast<uint32_t>(answers_.size())};
        answers_.push_back(kNone);
      }
      parent = slots_[i].entry;
    }
    answers_[parent] = value;
  }
  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    answers_.clear();
  }
  size_t entries() const { return answers_.size(); }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t entry = kNone;  // kNone: empty
  };
  static uint64_t key(uint32_t parent, uint32_t state) { return uint64_t{parent} << 32 | state; }
  size_t slot_of(uint64_t k) const { return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) & (slots_.size() - 1); }
  std::vector<Slot> slots_;  // open addressing, at most half full
  std::vector<uint32_t> answers_;
  size_t max_entries_;
};

}  // namespace cgram

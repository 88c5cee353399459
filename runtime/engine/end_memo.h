#pragma once
// Lexeme ends remembered by the stack states they read. On a linear stack,
// ending a lexeme of terminal t pops some levels and pushes a few states,
// whatever lies below what its reductions read; a mask ends the same
// lexemes on fresh nodes of the same stacks mask after mask. So the end is
// kept as a delta (levels popped, states pushed) under the terminal and the
// states read, top first (stack_memo.h), and replayed on any stack that
// agrees on them. Equal deltas are kept once. One of the engine's parts
// (engine.h); the engine walks its stacks and builds the nodes.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "stack_memo.h"

namespace cgram {

class EndMemo {
 public:
  struct Delta {
    uint32_t pops = 0;
    std::vector<uint32_t> pushed;  // bottom first; the last is the node after the shift
    auto operator<=>(const Delta&) const = default;
  };
  // Distinct deltas kept; past it the memo starts again (a cache).
  static constexpr size_t kMaxDeltas = size_t{1} << 12;

  // A lookup: from StackMemo::kRoot, the terminal, then one state per level
  // (StackMemo::kBottom below the bottom node).
  uint32_t child(uint32_t parent, uint32_t symbol) const { return memo_.child(parent, symbol); }
  // The delta's id kept at an entry, or StackMemo::kNone.
  uint32_t answer(uint32_t entry) const { return memo_.answer(entry); }
  const Delta& delta(uint32_t id) const { return deltas_[id]; }
  // Keeps `delta` under `path`: the terminal, then the states read.
  void insert(std::span<const uint32_t> path, const Delta& delta);
  size_t entries() const { return memo_.entries(); }
  size_t delta_count() const { return deltas_.size(); }

 private:
  struct DeltaHash {
    size_t operator()(const Delta& d) const {
      uint64_t h = d.pops * 0x9E3779B97F4A7C15ull;
      for (uint32_t state : d.pushed) h = (h ^ state) * 0x100000001B3ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  StackMemo memo_{kMaxDeltas};
  std::vector<Delta> deltas_;
  std::unordered_map<Delta, uint32_t, DeltaHash> ids_;  // hashed: looked up at every end kept
};

}  // namespace cgram

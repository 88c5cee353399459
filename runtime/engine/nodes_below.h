#pragma once
// The stack nodes exactly d levels below a node with several parents,
// remembered. On an ambiguous grammar a node of the graph-structured stack
// stands on many parents, each on many of its own (a part that could have
// ended at any of n earlier bytes): the reductions of a long production
// walk through it from every new edge above it, and a walk level by level
// would visit the n² paths below it each time. The set it reaches is
// fixed once the node's edges are (they are, once the call that made the
// node is over), so it is worked out once and kept: the set of nodes
// below a fork at a depth is what an Earley parser keeps as its packed
// items, and with it a reduction costs the size of the set, not of the
// paths. One of the engine's parts (engine.h): the engine walks the
// graph; this keeps the answers.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace cgram {

class NodesBelow {
 public:
  // Node indices kept in all, at least: past it and past the caller's
  // bound the memo starts again (a cache: a text whose stack forks
  // everywhere cannot make it grow without end).
  static constexpr size_t kMinKept = size_t{1} << 20;

  // Where a kept set lies in nodes() (valid until the next keep or clear).
  struct Range {
    uint32_t begin = 0, size = 0;
  };
  // The set kept for the node of this serial number at this depth.
  std::optional<Range> find(uint32_t serial, uint32_t depth) const;
  // Keeps `nodes` (no repeats) for the node and depth; first starts again
  // if the node indices kept would pass max(kMinKept, bound).
  Range keep(uint32_t serial, uint32_t depth, std::span<const uint32_t> nodes, size_t bound = 0);
  std::span<const uint32_t> nodes(Range r) const { return {pool_.data() + r.begin, r.size}; }
  // Node indices changed (the stack was compacted): nothing kept holds.
  void clear();
  size_t entries() const { return entries_; }
  size_t kept() const { return pool_.size(); }

 private:
  // Never 0 (serials start at 1): 0 marks an empty slot.
  static uint64_t key(uint32_t serial, uint32_t depth) { return uint64_t{serial} << 8 | (depth & 0xFF); }
  // Open addressing with linear probing, as KeySet: a fork met on the
  // per-token path of an ambiguous grammar costs no allocation (a node of
  // std::unordered_map per entry did), only the table's doubling now and then.
  struct Slot {
    uint64_t key = 0;
    Range range;
  };
  size_t slot_of(uint64_t key) const;  // where the key is, or the empty slot it would go to
  void grow();
  std::vector<Slot> slots_;
  size_t entries_ = 0;
  unsigned shift_ = 64;
  std::vector<uint32_t> pool_;
};

}  // namespace cgram

#pragma once
// Marks on stack nodes that a new pass clears at no cost: a mark holds the
// pass that set it, and a pass is a new number. The walks of the stack ask
// "reached already in this walk?" of every node they meet (each level of a
// walk is a set), many times per byte; clearing a vector each time would
// cost the whole stack. One of the engine's parts (engine.h).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cgram {

// Mark: uint32_t (the pass), or a wider word whose high half is the pass
// and whose low half the caller's own bits (reduce_closure's scope slots).
template <class Mark = uint32_t>
class NodeMarks {
 public:
  // The counter starts after `last_pass` (a test starts it near the wrap).
  explicit NodeMarks(uint32_t last_pass = 0) : pass_(last_pass) {}
  // A new pass, in which no node is marked yet. On a wrap of the counter
  // every mark is cleared, so that no stale mark equals a new pass.
  uint32_t next_pass() {
    if (++pass_ == 0) {
      std::fill(marks_.begin(), marks_.end(), Mark{0});
      pass_ = 1;
    }
    return pass_;
  }
  // Room for `nodes` nodes (new ones unmarked).
  void cover(size_t nodes) {
    if (marks_.size() < nodes) marks_.resize(nodes, Mark{0});
  }
  Mark& operator[](uint32_t node) { return marks_[node]; }
  // Marks the node in `pass`; false when it was already.
  bool mark(uint32_t node, uint32_t pass) {
    if (marks_[node] == pass) return false;
    marks_[node] = pass;
    return true;
  }

 private:
  std::vector<Mark> marks_;
  uint32_t pass_;
};

}  // namespace cgram

#include "end_memo.h"

namespace cgram {

void EndMemo::insert(std::span<const uint32_t> path, const Delta& delta) {
  if (deltas_.size() >= kMaxDeltas) {  // a cache: start again
    memo_.clear();
    deltas_.clear();
    ids_.clear();
  }
  auto it = ids_.find(delta);
  if (it == ids_.end()) {
    it = ids_.emplace(delta, static_cast<uint32_t>(deltas_.size())).first;
    deltas_.push_back(delta);
  }
  memo_.insert(path, it->second);
}

}  // namespace cgram

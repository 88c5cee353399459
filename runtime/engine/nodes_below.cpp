#include "nodes_below.h"

#include <algorithm>

namespace cgram {

std::optional<NodesBelow::Range> NodesBelow::find(uint32_t serial, uint32_t depth) const {
  const auto it = at_.find(key(serial, depth));
  if (it == at_.end()) return std::nullopt;
  return it->second;
}

NodesBelow::Range NodesBelow::keep(uint32_t serial, uint32_t depth, std::span<const uint32_t> nodes, size_t bound) {
  if (pool_.size() + nodes.size() > std::max(kMinKept, bound)) clear();
  const Range r{static_cast<uint32_t>(pool_.size()), static_cast<uint32_t>(nodes.size())};
  pool_.insert(pool_.end(), nodes.begin(), nodes.end());
  at_[key(serial, depth)] = r;
  return r;
}

void NodesBelow::clear() {
  at_.clear();
  pool_.clear();
}

}  // namespace cgram

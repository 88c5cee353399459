#include "nodes_below.h"

#include <algorithm>

namespace cgram {

size_t NodesBelow::slot_of(uint64_t key) const {
  const size_t mask = slots_.size() - 1;
  // Fibonacci hashing: the product's top bits (serials differ in the high bits of the key).
  size_t i = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
  return i;
}

std::optional<NodesBelow::Range> NodesBelow::find(uint32_t serial, uint32_t depth) const {
  if (entries_ == 0) return std::nullopt;
  const Slot& s = slots_[slot_of(key(serial, depth))];
  if (s.key == 0) return std::nullopt;
  return s.range;
}

NodesBelow::Range NodesBelow::keep(uint32_t serial, uint32_t depth, std::span<const uint32_t> nodes, size_t bound) {
  if (pool_.size() + nodes.size() > std::max(kMinKept, bound)) clear();
  const Range r{static_cast<uint32_t>(pool_.size()), static_cast<uint32_t>(nodes.size())};
  pool_.insert(pool_.end(), nodes.begin(), nodes.end());
  if ((entries_ + 1) * 2 > slots_.size()) grow();
  Slot& s = slots_[slot_of(key(serial, depth))];
  if (s.key == 0) ++entries_;
  s = {key(serial, depth), r};
  return r;
}

void NodesBelow::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
  shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(slots_.size()));
  for (const Slot& s : old)
    if (s.key != 0) slots_[slot_of(s.key)] = s;
}

void NodesBelow::clear() {
  if (entries_ != 0) std::fill(slots_.begin(), slots_.end(), Slot{});
  entries_ = 0;
  pool_.clear();
}

}  // namespace cgram

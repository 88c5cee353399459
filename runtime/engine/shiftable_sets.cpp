#include "shiftable_sets.h"

#include <algorithm>

namespace cgram {

uint32_t ShiftableSets::intern_set(const std::vector<uint32_t>& set, std::span<const std::bitset<256>> first_bytes) {
  // Looked up before inserted: most are met before, and a key copy allocates.
  if (const auto known = set_ids_.find(set); known != set_ids_.end()) return known->second;
  const auto id = static_cast<uint32_t>(sets_.size());
  set_ids_.emplace(set, id);
  std::bitset<256> bytes;
  for (uint32_t t : set) bytes |= first_bytes[t];
  set_first_bytes_.push_back(bytes);
  sets_.push_back(set);
  return id;
}

void ShiftableSets::make_depth_key(uint32_t state, const std::vector<uint8_t>& depths) {
  // The state first: depths are aligned with its terminals, and what is
  // kept per depths id (deepest_for_byte) is read through them.
  depth_key_.assign(reinterpret_cast<const char*>(&state), sizeof state);
  depth_key_.append(depths.begin(), depths.end());
}

bool ShiftableSets::depths_fit(uint32_t state, const std::vector<uint8_t>& depths) {
  if (depths_.size() < kMaxDepths) return true;
  make_depth_key(state, depths);
  return depth_ids_.contains(depth_key_);
}

uint32_t ShiftableSets::intern_reading(uint32_t set, uint32_t state, const std::vector<uint8_t>* depths) {
  // Looked up before inserted: most are met before, and a key copy allocates.
  int32_t depths_id = kUnknownDepths;
  if (depths) {
    make_depth_key(state, *depths);
    if (const auto known = depth_ids_.find(depth_key_); known != depth_ids_.end()) {
      depths_id = known->second;
    } else {
      depths_id = static_cast<int32_t>(depths_.size());
      depth_ids_.emplace(depth_key_, depths_id);
      depths_.push_back(*depths);
      deepest_.push_back(depths->empty() ? 0 : *std::max_element(depths->begin(), depths->end()));
    }
  }
  const uint64_t key = uint64_t{set} << 32 | static_cast<uint32_t>(depths_id + 1);
  if (const auto known = reading_ids_.find(key); known != reading_ids_.end()) return known->second;
  reading_ids_.emplace(key, static_cast<uint32_t>(readings_.size()));
  readings_.push_back({set, depths_id});
  return static_cast<uint32_t>(readings_.size() - 1);
}

uint8_t ShiftableSets::deepest_for_byte(int32_t depths_id, uint8_t byte, std::span<const uint32_t> active,
                                        std::span<const std::bitset<256>> first_bytes) {
  const auto id = static_cast<size_t>(depths_id);
  if (byte_depths_.size() <= id) byte_depths_.resize(id + 1);
  std::vector<uint8_t>& by_byte = byte_depths_[id];
  constexpr uint8_t kNotYet = 0xFF;  // depths stay below it (a depth of 255 is never kept)
  if (by_byte.empty()) by_byte.assign(256, kNotYet);
  if (by_byte[byte] == kNotYet) {
    const std::vector<uint8_t>& d = depths_[id];
    uint8_t deepest = 0;
    for (size_t i = 0; i < active.size() && i < d.size(); ++i)
      if (first_bytes[active[i]][byte]) deepest = std::max(deepest, d[i]);
    by_byte[byte] = deepest;
  }
  return by_byte[byte];
}

}  // namespace cgram

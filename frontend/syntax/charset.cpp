#include "charset.h"

#include <algorithm>

namespace cgram::ir {

CodePointSet CodePointSet::range(uint32_t lo, uint32_t hi) {
  CodePointSet s;
  s.add(lo, hi);
  return s;
}

CodePointSet CodePointSet::all() {
  CodePointSet s;
  s.ranges_ = {{0, 0xD7FF}, {0xE000, 0x10FFFF}};
  return s;
}

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, hi);
  normalize();
}

void CodePointSet::add(const CodePointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CodePointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<Range> merged;
  for (const Range& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  ranges_ = std::move(merged);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const Range& r : ranges_) {
    if (r.first > next) out.ranges_.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= 0x10FFFF) out.ranges_.emplace_back(next, 0x10FFFF);
  // Surrogates are not scalar values: never part of a set.
  std::vector<Range> clipped;
  for (const Range& r : out.ranges_) {
    if (r.second < 0xD800 || r.first > 0xDFFF) {
      clipped.push_back(r);
      continue;
    }
    if (r.first < 0xD800) clipped.emplace_back(r.first, 0xD7FF);
    if (r.second > 0xDFFF) clipped.emplace_back(0xE000, r.second);
  }
  out.ranges_ = std::move(clipped);
  return out;
}

bool CodePointSet::contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), Range{cp, UINT32_MAX});
  return it != ranges_.begin() && std::prev(it)->second >= cp;
}

}  // namespace cgram::ir

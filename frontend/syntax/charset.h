#pragma once
// Sets of Unicode scalar values as sorted, disjoint, non-adjacent ranges.
#include <cstdint>
#include <utility>
#include <vector>

namespace cgram::ir {

class CodePointSet {
 public:
  using Range = std::pair<uint32_t, uint32_t>;  // inclusive

  CodePointSet() = default;
  static CodePointSet single(uint32_t cp) { return range(cp, cp); }
  static CodePointSet range(uint32_t lo, uint32_t hi);
  // Every scalar value: U+0000..U+10FFFF without the surrogates.
  static CodePointSet all();

  void add(uint32_t lo, uint32_t hi);
  void add(const CodePointSet& other);
  CodePointSet complement() const;  // relative to all()
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  void normalize();
  std::vector<Range> ranges_;
};

}  // namespace cgram::ir

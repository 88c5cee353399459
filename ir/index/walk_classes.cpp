#include "walk_classes.h"

#include <algorithm>
#include <numeric>
#include <string_view>

namespace cgram {

std::vector<uint32_t> walk_classes(const ir::Dfa& dfa, uint32_t depth) {
  const size_t n = dfa.size();
  std::vector<uint32_t> first(n);
  std::iota(first.begin(), first.end(), 0u);
  if (n < 2 || depth == 0) return first;
  // Successors by distinct column, read every round (dead as UINT32_MAX).
  const std::vector<uint8_t> bytes = ir::distinct_columns(dfa);
  const size_t width = bytes.size();
  std::vector<uint32_t> successor(n * width);
  for (size_t s = 0; s < n; ++s)
    for (size_t i = 0; i < width; ++i) successor[s * width + i] = dfa.next(static_cast<uint32_t>(s), bytes[i]);
  // Round 0: an accepting state alone (its crossings record it), every other
  // live state together.
  std::vector<uint32_t> cls(n), size(n + 1, 0);
  uint32_t count = 1;
  for (size_t s = 0; s < n; ++s) cls[s] = dfa.accepting(static_cast<uint32_t>(s)) ? count++ : 0;
  for (size_t s = 0; s < n; ++s) ++size[cls[s]];
  // Only states of classes with two or more members can split; a class
  // that splits keeps its id for one part, so the others' ids stay valid.
  std::vector<uint32_t> active;
  for (uint32_t s = 0; s < n; ++s)
    if (size[cls[s]] > 1) active.push_back(s);
  const size_t row_width = 1 + width;
  std::vector<uint32_t> rows, next;
  std::vector<uint32_t> table;  // open addressing: an index into `active`, or UINT32_MAX
  std::vector<uint8_t> claimed;
  for (uint32_t round = 1; round <= depth && !active.empty(); ++round) {
    rows.resize(active.size() * row_width);
    for (size_t k = 0; k < active.size(); ++k) {
      uint32_t* row = &rows[k * row_width];
      const uint32_t* succ = &successor[size_t(active[k]) * width];
      row[0] = cls[active[k]];
      for (size_t i = 0; i < width; ++i) row[1 + i] = succ[i] == ir::Dfa::kDead ? UINT32_MAX : cls[succ[i]];
    }
    size_t slots = 1;
    while (slots < 2 * active.size()) slots *= 2;
    table.assign(slots, UINT32_MAX);
    claimed.assign(count, 0);
    next.resize(active.size());
    const uint32_t before = count;
    for (size_t k = 0; k < active.size(); ++k) {
      const uint32_t* row = &rows[k * row_width];
      const std::string_view key(reinterpret_cast<const char*>(row), row_width * sizeof(uint32_t));
      size_t h = std::hash<std::string_view>{}(key) & (slots - 1);
      while (table[h] != UINT32_MAX &&
             !std::equal(row, row + row_width, &rows[size_t(table[h]) * row_width]))
        h = (h + 1) & (slots - 1);
      if (table[h] != UINT32_MAX) {
        next[k] = next[table[h]];
        continue;
      }
      table[h] = static_cast<uint32_t>(k);
      next[k] = claimed[row[0]] ? count++ : row[0];  // the first part of a class keeps its id
      claimed[row[0]] = 1;
    }
    if (count == before) break;  // nothing split: stable from here on
    size.assign(count, 0);
    for (size_t k = 0; k < active.size(); ++k) cls[active[k]] = next[k];
    for (uint32_t s : active) ++size[cls[s]];
    std::erase_if(active, [&](uint32_t s) { return size[cls[s]] < 2; });
  }
  std::vector<uint32_t> smallest(count, UINT32_MAX);
  for (size_t s = 0; s < n; ++s) {
    if (smallest[cls[s]] == UINT32_MAX) smallest[cls[s]] = static_cast<uint32_t>(s);
    first[s] = smallest[cls[s]];
  }
  return first;
}

}  // namespace cgram

#pragma once
// A trie of paths of symbols with an answer at some entries, for the memos
// that keep an answer under what its computation read (engine/stack_memo.h:
// shiftable sets by stack states; compiled/mask_memo.h: masks by heads and
// stack graph). A lookup follows a path symbol by symbol from kRoot and
// takes the first answer on its way; callers never keep an answer under a
// path that is a prefix of another's.
//
// The trie is an open-addressing table (parent entry, symbol) -> entry,
// kept at most half full. Bounded: a caller asks fits() and clears (a
// memo is a cache, never a source). The table starts at `initial_slots`
// and doubles as entries come: a memo on the per-token path gives the
// whole bound at once, so that it allocates once.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

namespace cgram {

class PathTrie {
 public:
  static constexpr uint32_t kRoot = UINT32_MAX;  // the parent of a path's first symbol
  static constexpr uint32_t kNone = UINT32_MAX;  // no such entry / no answer here

  explicit PathTrie(size_t max_entries, size_t initial_slots = 0)
      : max_entries_(max_entries),
        initial_slots_(std::bit_ceil(std::max<size_t>(initial_slots ? initial_slots : 2 * max_entries, 2))) {}

  // The entry below `parent` for `symbol`, or kNone.
  uint32_t child(uint32_t parent, uint32_t symbol) const {
    if (slots_.empty()) return kNone;
    const uint64_t k = key(parent, symbol);
    for (size_t i = slot_of(k);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].entry == kNone) return kNone;
      if (slots_[i].key == k) return slots_[i].entry;
    }
  }
  // The answer at an entry, or kNone.
  uint32_t answer(uint32_t entry) const { return answers_[entry]; }

  // Whether a path of this many symbols surely fits under the bound.
  bool fits(size_t path_length) const { return answers_.size() + path_length <= max_entries_; }
  // The entry at the end of `path`, made where missing (fits() first).
  uint32_t make_path(std::span<const uint32_t> path) {
    grow_for(answers_.size() + path.size());
    uint32_t parent = kRoot;
    for (uint32_t symbol : path) {
      const uint64_t k = key(parent, symbol);
      size_t i = slot_of(k);
      while (slots_[i].entry != kNone && slots_[i].key != k) i = (i + 1) & (slots_.size() - 1);
      if (slots_[i].entry == kNone) {
        slots_[i] = {k, static_cast<uint32_t>(answers_.size())};
        answers_.push_back(kNone);
      }
      parent = slots_[i].entry;
    }
    return parent;
  }
  void set_answer(uint32_t entry, uint32_t value) { answers_[entry] = value; }

  // Empty again; the table keeps its size.
  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    answers_.clear();
  }
  size_t entries() const { return answers_.size(); }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t entry = kNone;  // kNone: empty
  };
  static uint64_t key(uint32_t parent, uint32_t symbol) { return uint64_t{parent} << 32 | symbol; }
  size_t slot_of(uint64_t k) const {
    return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) & (slots_.size() - 1);
  }
  void grow_for(size_t entries) {
    size_t want = std::max(slots_.size(), initial_slots_);
    while (want < 2 * entries) want *= 2;
    if (want == slots_.size()) return;
    if (slots_.empty()) answers_.reserve(std::min(max_entries_, want / 2));
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(want, Slot{});
    for (const Slot& s : old) {
      if (s.entry == kNone) continue;
      size_t i = slot_of(s.key);
      while (slots_[i].entry != kNone) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = s;
    }
  }

  size_t max_entries_;
  size_t initial_slots_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> answers_;
};

}  // namespace cgram

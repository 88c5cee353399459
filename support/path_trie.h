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
// whole bound at once, so that it allocates once and never stops a token
// to rehash. A zeroed table is an empty one (a slot's entry is kept plus
// one): it comes from calloc, so a large table's pages are the system's
// zero pages until a slot on them is written.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

namespace cgram {

class PathTrie {
 public:
  static constexpr uint32_t kRoot = UINT32_MAX;  // the parent of a path's first symbol
  static constexpr uint32_t kNone = UINT32_MAX;  // no such entry / no answer here

  explicit PathTrie(size_t max_entries, size_t initial_slots = 0)
      : max_entries_(max_entries),
        initial_slots_(std::bit_ceil(std::max<size_t>(initial_slots ? initial_slots : 2 * max_entries, 2))) {}
  PathTrie(const PathTrie& other)
      : max_entries_(other.max_entries_),
        initial_slots_(other.initial_slots_),
        slots_(zeroed(other.slot_count_)),
        slot_count_(other.slot_count_),
        answers_(other.answers_) {
    if (slot_count_ > 0) std::memcpy(slots_.get(), other.slots_.get(), slot_count_ * sizeof(Slot));
  }
  PathTrie& operator=(const PathTrie& other) {
    if (this != &other) *this = PathTrie(other);
    return *this;
  }
  PathTrie(PathTrie&&) noexcept = default;
  PathTrie& operator=(PathTrie&&) noexcept = default;

  // The entry below `parent` for `symbol`, or kNone.
  uint32_t child(uint32_t parent, uint32_t symbol) const {
    if (slot_count_ == 0) return kNone;
    const uint64_t k = key(parent, symbol);
    for (size_t i = slot_of(k);; i = (i + 1) & (slot_count_ - 1)) {
      if (slots_[i].entry_plus_one == 0) return kNone;
      if (slots_[i].key == k) return slots_[i].entry_plus_one - 1;
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
      while (slots_[i].entry_plus_one != 0 && slots_[i].key != k) i = (i + 1) & (slot_count_ - 1);
      if (slots_[i].entry_plus_one == 0) {
        slots_[i] = {k, static_cast<uint32_t>(answers_.size()) + 1};
        answers_.push_back(kNone);
      }
      parent = slots_[i].entry_plus_one - 1;
    }
    return parent;
  }
  void set_answer(uint32_t entry, uint32_t value) { answers_[entry] = value; }

  // Empty again; the table keeps its size (and its pages: a memo that
  // starts again is as warm as it was).
  void clear() {
    if (slot_count_ > 0) std::memset(slots_.get(), 0, slot_count_ * sizeof(Slot));
    answers_.clear();
  }
  size_t entries() const { return answers_.size(); }

 private:
  struct Slot {
    uint64_t key;
    uint32_t entry_plus_one;  // 0: empty
  };
  struct Free {
    void operator()(Slot* p) const { std::free(p); }
  };
  using Table = std::unique_ptr<Slot[], Free>;
  static Table zeroed(size_t slots) {
    if (slots == 0) return nullptr;
    auto* p = static_cast<Slot*>(std::calloc(slots, sizeof(Slot)));
    if (!p) throw std::bad_alloc();
    return Table(p);
  }
  static uint64_t key(uint32_t parent, uint32_t symbol) { return uint64_t{parent} << 32 | symbol; }
  size_t slot_of(uint64_t k) const {
    return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) & (slot_count_ - 1);
  }
  void grow_for(size_t entries) {
    size_t want = std::max(slot_count_, initial_slots_);
    while (want < 2 * entries) want *= 2;
    if (want == slot_count_) return;
    if (slot_count_ == 0) answers_.reserve(std::min(max_entries_, want / 2));
    Table old = std::exchange(slots_, zeroed(want));
    const size_t old_count = std::exchange(slot_count_, want);
    for (size_t j = 0; j < old_count; ++j) {
      const Slot& s = old[j];
      if (s.entry_plus_one == 0) continue;
      size_t i = slot_of(s.key);
      while (slots_[i].entry_plus_one != 0) i = (i + 1) & (slot_count_ - 1);
      slots_[i] = s;
    }
  }

  size_t max_entries_;
  size_t initial_slots_;
  Table slots_;
  size_t slot_count_ = 0;
  std::vector<uint32_t> answers_;
};

}  // namespace cgram

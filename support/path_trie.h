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
// memo is a cache, never a source). Memos sit on the per-token path, so no
// call may stop for the whole table, and a table's fresh pages cost a fault
// each (a table of the whole bound from the start, zero pages until
// written, scattered its first entries over a page each: a JSON schema's
// masks spent most of their first visits in page faults). So the table
// starts small and doubles, and each doubling is spread over the calls
// that fill it:
//   - at 3/8 full, the next table is allocated, and each make_path writes
//     its next page (prefault) while entries still go to the current one;
//   - at 1/2 full, entries go to the next table, and each make_path moves
//     a few slots of the old one over (kMovesPerEntry per entry it makes);
//     lookups read the next table, then the old one, until it is drained.
// The next table is ready before the current one is half full, and the old
// one drained before the next is 3/8 full (see grow_for). A zeroed table
// is an empty one (a slot's entry is kept plus one).
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
  static constexpr size_t kInitialSlots = 256;    // 4 KB

  explicit PathTrie(size_t max_entries) : max_entries_(max_entries) {}
  PathTrie(const PathTrie& other) : max_entries_(other.max_entries_), answers_(other.answers_) {
    // The copy is one settled table: the other's entries, moved over whole.
    if (other.entries() == 0) return;
    resize_to(std::max(kInitialSlots, std::min(std::bit_ceil(4 * other.entries()), std::bit_ceil(2 * max_entries_))));
    other.each_slot([&](const Slot& s) { put(table_, s); });
  }
  PathTrie& operator=(const PathTrie& other) {
    if (this != &other) *this = PathTrie(other);
    return *this;
  }
  PathTrie(PathTrie&&) noexcept = default;
  PathTrie& operator=(PathTrie&&) noexcept = default;

  // The entry below `parent` for `symbol`, or kNone.
  uint32_t child(uint32_t parent, uint32_t symbol) const {
    const uint64_t k = key(parent, symbol);
    const uint32_t found = find(table_, k);
    return found != kNone || old_.count == 0 ? found : find(old_, k);
  }
  // The answer at an entry, or kNone.
  uint32_t answer(uint32_t entry) const { return answers_[entry]; }

  // Whether a path of this many symbols surely fits under the bound.
  bool fits(size_t path_length) const { return answers_.size() + path_length <= max_entries_; }
  // The entry at the end of `path`, made where missing (fits() first).
  uint32_t make_path(std::span<const uint32_t> path) {
    grow_for(answers_.size() + path.size());
    const size_t before = answers_.size();
    uint32_t parent = kRoot;
    for (uint32_t symbol : path) {
      const uint64_t k = key(parent, symbol);
      uint32_t entry = child(parent, symbol);
      if (entry == kNone) {
        entry = static_cast<uint32_t>(answers_.size());
        put(table_, {k, entry + 1});
        answers_.push_back(kNone);
      }
      parent = entry;
    }
    move_old_slots(kMovesPerEntry * (answers_.size() - before) + kMovesPerCall);
    prefault_next(1 + (answers_.size() - before) / kEntriesPerPrefault);
    return parent;
  }
  void set_answer(uint32_t entry, uint32_t value) { answers_[entry] = value; }

  // Empty again; the table keeps its size (and its pages: a memo that
  // starts again is as warm as it was).
  void clear() {
    if (table_.count > 0) std::memset(table_.slots.get(), 0, table_.count * sizeof(Slot));
    old_ = {};
    next_ = {};
    prefaulted_ = 0;
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
  struct Table {
    std::unique_ptr<Slot[], Free> slots;
    size_t count = 0;  // a power of two, or 0
  };
  // Entries moved from the old table per entry made, and per call: the old
  // table (n slots, n/2 entries) is drained before n/4 more entries come.
  static constexpr size_t kMovesPerEntry = 8, kMovesPerCall = 16;
  // Pages of the next table written per call, and one more per this many
  // entries: its 2n slots are n/128 pages, all written before the n/8
  // entries between 3/8 and 1/2 full have come (a page per 8 at least).
  static constexpr size_t kEntriesPerPrefault = 8;
  static constexpr size_t kSlotsPerPage = 4096 / sizeof(Slot);

  static Table zeroed(size_t slots) {
    auto* p = static_cast<Slot*>(std::calloc(slots, sizeof(Slot)));
    if (!p) throw std::bad_alloc();
    return {std::unique_ptr<Slot[], Free>(p), slots};
  }
  static uint64_t key(uint32_t parent, uint32_t symbol) { return uint64_t{parent} << 32 | symbol; }
  static size_t slot_of(const Table& t, uint64_t k) {
    return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) & (t.count - 1);
  }
  static uint32_t find(const Table& t, uint64_t k) {
    if (t.count == 0) return kNone;
    for (size_t i = slot_of(t, k);; i = (i + 1) & (t.count - 1)) {
      if (t.slots[i].entry_plus_one == 0) return kNone;
      if (t.slots[i].key == k) return t.slots[i].entry_plus_one - 1;
    }
  }
  static void put(Table& t, const Slot& s) {
    size_t i = slot_of(t, s.key);
    while (t.slots[i].entry_plus_one != 0) i = (i + 1) & (t.count - 1);
    t.slots[i] = s;
  }
  template <class F>
  void each_slot(F f) const {
    for (const Table* t : {&old_, &table_})
      for (size_t i = 0; i < t->count; ++i)
        if (t->slots[i].entry_plus_one != 0 && (t == &table_ || find(table_, t->slots[i].key) == kNone)) f(t->slots[i]);
  }
  // The first table, or one that replaces everything at once (copies).
  void resize_to(size_t slots) {
    table_ = zeroed(slots);
    answers_.reserve(std::min(max_entries_, slots / 2));
  }
  void grow_for(size_t entries) {
    if (table_.count == 0) {
      resize_to(std::max(kInitialSlots, std::bit_ceil(2 * entries)));
      return;
    }
    // A table of twice the bound is never more than half full (fits()).
    if (table_.count >= 2 * max_entries_) return;
    if (8 * entries > 3 * table_.count && next_.count == 0 && old_.count == 0) {
      next_ = zeroed(2 * table_.count);  // written page by page from now on (prefault_next)
      prefaulted_ = 0;
    }
    if (2 * entries <= table_.count) return;
    // Half full: the next table takes over. Whatever of the bounds a path
    // longer than the schedule broke is finished here at once.
    move_old_slots(SIZE_MAX);
    if (next_.count == 0) next_ = zeroed(2 * table_.count);
    prefault_next(SIZE_MAX);
    old_ = std::exchange(table_, std::exchange(next_, Table{}));
    moved_ = 0;
    if (2 * entries > table_.count) {  // one path past the doubling: settle now
      move_old_slots(SIZE_MAX);
      grow_for(entries);
    }
  }
  void move_old_slots(size_t n) {
    for (; old_.count > 0 && n > 0; --n, ++moved_) {
      if (moved_ == old_.count) {
        old_ = {};
        return;
      }
      const Slot& s = old_.slots[moved_];
      if (s.entry_plus_one != 0) put(table_, s);
    }
  }
  void prefault_next(size_t pages) {
    for (; next_.count > 0 && pages > 0 && prefaulted_ < next_.count; --pages, prefaulted_ += kSlotsPerPage)
      *reinterpret_cast<volatile uint64_t*>(&next_.slots[prefaulted_].key) = 0;
  }

  size_t max_entries_;
  Table table_;  // where entries go
  Table old_;    // being drained into table_ (moved_ slots so far)
  Table next_;   // allocated at 3/8 full, its pages written one by one (prefaulted_ slots so far)
  size_t moved_ = 0, prefaulted_ = 0;
  std::vector<uint32_t> answers_;
};

}  // namespace cgram

#pragma once
// Lexeme ends remembered per stack node: ending a lexeme of terminal t on
// node v gives the same nodes wherever in the text it happens, so a small
// direct-mapped cache keeps those results, validated by serial numbers
// (node slots are reused, serials never are): no allocation on a hit,
// nothing to undo when the stack is truncated. One of the engine's parts
// (engine.h); the engine writes and checks the entries.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

namespace cgram {

class EndCache {
 public:
  // A zeroed entry is an empty one (serials start at 1).
  struct Entry {
    uint32_t node = 0, serial = 0, terminal = 0, count = 0;
    std::array<uint32_t, 4> results{}, serials{};  // the nodes after the end, and their serials
  };
  // 1024 entries (48 KB), allocated on first use (a server holds thousands
  // of matchers) with calloc: fresh pages are the system's zero pages until
  // an entry on them is written, instead of 12 page faults at a matcher's
  // first mask.
  static constexpr size_t kEntries = 1024;

  EndCache() = default;
  EndCache(const EndCache& other) {
    if (other.entries_) std::memcpy(allocate(), other.entries_.get(), kEntries * sizeof(Entry));
  }
  EndCache& operator=(const EndCache& other) {
    if (this != &other) *this = EndCache(other);
    return *this;
  }
  EndCache(EndCache&&) noexcept = default;
  EndCache& operator=(EndCache&&) noexcept = default;

  // The one entry a node's end of a terminal may be kept in (shared with
  // the other keys that map there: the entry says whose it is).
  Entry& slot(uint32_t node_serial, uint32_t terminal) {
    return at((uint64_t(node_serial) * 0x9E3779B1u ^ terminal * 0x85EBCA77u) % kEntries);
  }
  bool allocated() const { return entries_ != nullptr; }

 private:
  Entry& at(size_t i) { return (entries_ ? entries_.get() : allocate())[i]; }
  static_assert(std::is_trivially_copyable_v<Entry>);
  struct Free {
    void operator()(Entry* p) const { std::free(p); }
  };
  Entry* allocate() {
    entries_.reset(static_cast<Entry*>(std::calloc(kEntries, sizeof(Entry))));
    if (!entries_) throw std::bad_alloc();
    return entries_.get();
  }
  std::unique_ptr<Entry[], Free> entries_;
};

}  // namespace cgram

#pragma once
// The masks of free text (except!) kept per stack node and DFA state. Free
// text runs for thousands of tokens on one stack node, nearly always in one
// DFA state, and its mask (every token inside the text, and those in which
// it may end) is the same each time: kept, it costs one pass over the words.
// Two entries per engine (16 KB each with 128,000 tokens): a server holds
// thousands of matchers. One of the engine's parts (engine.h).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace cgram {

class ExceptMasks {
 public:
  static constexpr size_t kEntries = 2;
  struct Key {
    uint32_t node, serial, terminal, state;  // the node's serial: node slots are reused
    bool operator==(const Key&) const = default;
  };
  // The mask kept under `key`, of n_words words, or null.
  const std::vector<uint32_t>* find(const Key& key, size_t n_words) {
    for (Entry& e : entries_)
      if (e.kept && e.key == key && e.words.size() == n_words) {
        e.used = ++clock_;
        return &e.words;
      }
    return nullptr;
  }
  // Puts `words` in the entry used least recently (the caller gets that
  // entry's old buffer back: no allocation once warm), under `key`, or
  // under none (a mask a limit cut short is not to be found again).
  const std::vector<uint32_t>& keep(const std::optional<Key>& key, std::vector<uint32_t>& words) {
    if (entries_.size() < kEntries) entries_.emplace_back();
    Entry& slot = *std::min_element(entries_.begin(), entries_.end(),
                                    [](const Entry& a, const Entry& b) { return a.used < b.used; });
    slot.used = ++clock_;
    slot.words.swap(words);
    slot.kept = key.has_value();
    slot.key = key.value_or(Key{kNoNode, 0, 0, 0});
    return slot.words;
  }
  // The stack was compacted: node_to[v] is node v's new index, or a value
  // past the stack for a node gone.
  void renumber(std::span<const uint32_t> node_to, uint32_t gone) {
    for (Entry& e : entries_) {
      e.kept = e.kept && e.key.node < node_to.size() && node_to[e.key.node] != gone;
      if (e.kept) e.key.node = node_to[e.key.node];
    }
  }

 private:
  static constexpr uint32_t kNoNode = UINT32_MAX;
  struct Entry {
    Key key{kNoNode, 0, 0, 0};
    bool kept = false;  // found again by its key
    uint64_t used = 0;
    std::vector<uint32_t> words;
  };
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace cgram

#pragma once
// The except! occurrences a reading of the text still has pending
// (Head::pending): after `except!(S)` text that ends with the start of one
// of S's strings, the bytes after it must not finish that string. Each such
// set of (except! rule, rest of the string) is interned, so that a head
// carries one id (0: nothing pending), and its steps over a byte and its
// growth by an except! lexeme's end are remembered: free text steps the same
// few sets byte after byte. One of the engine's parts (engine.h).
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <map>
#include <vector>

namespace cgram {

namespace ir {
class ExceptAutomaton;
}

class PendingExcepts {
 public:
  // One occurrence: the except! rule's index, and the bytes that would
  // complete its string.
  using Occurrence = std::pair<uint32_t, std::string>;
  using Set = std::vector<Occurrence>;
  static constexpr uint32_t kNothing = 0;             // the id of the empty set
  static constexpr uint32_t kViolated = UINT32_MAX;   // a byte completed a string
  static constexpr uint32_t kFull = UINT32_MAX - 1;   // past max_sets: the caller's limit error

  explicit PendingExcepts(size_t max_sets);

  // The id of `set` (sorted and without duplicates first), or kFull.
  uint32_t intern(Set set);
  // The set after `byte` (or `bytes`): its id, kViolated, or kFull.
  uint32_t step(uint32_t pending, uint8_t byte);
  uint32_t step(uint32_t pending, std::string_view bytes);
  // The set once an except! lexeme of rule `except_index` ends in state
  // `ac_state` of its automaton: `pending` and what that state leaves
  // pending; its id or kFull.
  uint32_t add(uint32_t pending, uint32_t except_index, uint32_t ac_state, const ir::ExceptAutomaton& automaton);

  const Set& set(uint32_t id) const { return sets_[id]; }
  size_t size() const { return sets_.size(); }
  size_t max_sets() const { return max_sets_; }

 private:
  size_t max_sets_;
  std::vector<Set> sets_;
  std::map<Set, uint32_t> ids_;
  std::unordered_map<uint64_t, uint32_t> steps_;         // (pending, byte) → id or kViolated
  std::unordered_map<uint64_t, uint32_t> except_steps_;  // (pending, except, automaton state) → id
};

}  // namespace cgram

#pragma once
// except!(S): an Aho–Corasick automaton over the strings of S.
//
// Semantics (DESIGN §2): the matched text w is valid UTF-8 and must not
// contain the start of
// any occurrence of a string of S, including an occurrence completed by the
// bytes that follow w. The automaton gives both halves:
//  - `dfa` accepts exactly the valid UTF-8 texts that contain no whole
//    occurrence (a live state accepts between characters; completing a
//    string of S, or a byte that breaks UTF-8, is dead);
//  - `pending(state)` lists what the bytes after w must not start with, given
//    that w ended in `state` (the remainders of strings of S whose beginning
//    is a suffix of w).
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "automata.h"

namespace cgram::ir {

class ExceptAutomaton {
 public:
  explicit ExceptAutomaton(std::span<const std::string> strings);
  // Saving and loading (table_io.cpp); null with a message in `in` when invalid.
  void save(BinaryWriter& out) const;
  static std::shared_ptr<const ExceptAutomaton> load(BinaryReader& in);

  const Dfa& dfa() const { return dfa_; }
  const std::vector<std::string>& strings() const { return strings_; }
  // Strings the continuation after w must not start with, when w ended in
  // `state` (sorted). Empty at the root: nothing is pending.
  std::vector<std::string> pending(uint32_t state) const;
  bool has_pending(uint32_t state) const { return state < node_of_.size() && node_of_[state] != 0; }
  // Where the character stands in `state` (utf8::kBoundary when whole).
  uint8_t utf8_state(uint32_t state) const { return utf8_state_[state]; }
  // The state for a text that starts inside a character, in character
  // state c (after an any! token that ended mid-character); kDead if none.
  uint32_t start_in_char(uint8_t c) const { return start_in_char_[c]; }

 private:
  ExceptAutomaton() = default;
  // A node of the trie of S: its failure link, its depth, and the strings
  // through it (a range of the sorted strings).
  struct TrieNode {
    uint32_t fail, depth, first, last;
  };
  std::vector<std::string> strings_;
  Dfa dfa_;
  std::vector<TrieNode> trie_;
  std::vector<uint32_t> node_of_;  // per DFA state: its trie node
  std::vector<uint8_t> utf8_state_;
  std::array<uint32_t, 8> start_in_char_{Dfa::kDead, Dfa::kDead, Dfa::kDead, Dfa::kDead,
                                        Dfa::kDead, Dfa::kDead, Dfa::kDead, Dfa::kDead};
};

}  // namespace cgram::ir

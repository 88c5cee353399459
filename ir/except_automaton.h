#pragma once
// except!(S): an Aho–Corasick automaton over the strings of S.
//
// Semantics (DESIGN §2): the matched text w must not contain the start of
// any occurrence of a string of S, including an occurrence completed by the
// bytes that follow w. The automaton gives both halves:
//  - `dfa` accepts exactly the texts that contain no whole occurrence (every
//    live state accepts; completing a string of S is dead);
//  - `pending(state)` lists what the bytes after w must not start with, given
//    that w ended in `state` (the remainders of strings of S whose beginning
//    is a suffix of w).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "automata.h"

namespace cgram::ir {

class ExceptAutomaton {
 public:
  explicit ExceptAutomaton(std::span<const std::string> strings);

  const Dfa& dfa() const { return dfa_; }
  const std::vector<std::string>& strings() const { return strings_; }
  // Strings the continuation after w must not start with, when w ended in
  // `state`. Empty at the root: nothing is pending.
  const std::vector<std::string>& pending(uint32_t state) const { return pending_[state]; }

 private:
  std::vector<std::string> strings_;
  Dfa dfa_;
  std::vector<std::vector<std::string>> pending_;
};

}  // namespace cgram::ir

#pragma once
// Counted lexemes: a bounded repetition with a large bound kept as a counter
// on one lexeme instead of copies of its automaton. A JSON string of at most
// 32,767 characters, `"(?:c){0,32767}"`, is the automaton of `"(?:c)*"` (a
// dozen states) whose moves that start a character count, and a lexeme dies
// at the 32,768th start; copying `c` would take 400,000 states.
//
// The lexer's state of such a lexeme is `count << shift | state`. The token
// index needs a plain DFA: the *window* (`CountedLexeme::window_dfa`) keeps
// the count exactly over its last `window` values and lumps the values
// before them together (their tokens cannot reach the bound: a token of n
// bytes starts at most n iterations, and the window is the vocabulary's
// longest token). `window_state` maps a lexer state to the window's.
#include <bit>
#include <cstdint>
#include <optional>
#include <vector>

#include "automata.h"
#include "error.h"

namespace cgram::ir {

// Bounded repetitions with more optional iterations than this are counted
// when they can be (below it they are copied, which lets a lexeme collapse
// with others).
inline constexpr uint32_t kCountRepeatsAbove = 64;
// The widest window a counted lexeme may need: the longest token a
// vocabulary may hold (VocabularyOptions::max_token_bytes).
inline constexpr uint32_t kMaxWindow = 1024;

// A regex's automaton with its counted repetition unbounded (`loop`), the
// moves that start an iteration of it, and how many may start.
struct CountedDfa {
  Dfa loop;
  std::vector<uint64_t> starts;  // 4 words per state of `loop`: a bit per byte
  uint32_t bound = 0;
  bool starts_iteration(uint32_t state, uint8_t byte) const {
    return (starts[size_t(state) * 4 + byte / 64] >> (byte % 64)) & 1;
  }
};

// The regex's counted form, when it has a bounded repetition whose upper
// bound passes kCountRepeatsAbove (the first such, outside any other
// repetition) and counting it is exact: every move of the automaton either
// starts an iteration or does not, whatever way the text is read, and every
// state can end the lexeme without starting another. std::nullopt: no such
// repetition, or one that cannot be counted but can be copied (then
// compile_regex builds the regex). An error: a repetition above
// kMaxRegexRepeat that cannot be counted, or automata past the limits.
Result<std::optional<CountedDfa>> compile_counted_regex(const RegexNode& regex, const AutomatonLimits& limits = {});

// What the matcher keeps of a counted lexeme: its automaton, and the window
// that the token index reads.
struct CountedLexeme {
  CountedDfa automaton;  // its states inside the repetition first
  uint32_t counting = 0;  // how many: the others (before or after it) have one window state each
  uint32_t window = 0;    // counts told apart at the end: min(bound, longest token in bytes)
  uint32_t shift = 0;     // bits of a loop state in a lexer state

  // `automaton` with the window for tokens of at most `longest_token` bytes.
  // Its lexer states fit in 32 bits (compile_counted_regex checks it, and
  // a start split off adds at most one bit below kMaxCountedRepeat's).
  static CountedLexeme make(CountedDfa automaton, uint32_t longest_token);

  uint32_t next(uint32_t state, uint8_t byte) const {
    const uint32_t q = state & mask(), count = state >> shift;
    const uint32_t to = automaton.loop.next(q, byte);
    if (to == Dfa::kDead) return Dfa::kDead;
    if (!automaton.starts_iteration(q, byte)) return (count << shift) | to;
    if (count == automaton.bound) return Dfa::kDead;
    return ((count + 1) << shift) | to;
  }
  bool accepting(uint32_t state) const { return state != Dfa::kDead && automaton.loop.accepting(state & mask()); }
  // The window's state for a lexer state.
  uint32_t window_state(uint32_t state) const {
    const uint32_t q = state & mask(), count = state >> shift, lumped = automaton.bound - window;
    return q >= counting || count <= lumped ? q : window_state_at(count - lumped, q);
  }
  // The window as a DFA: level 0 (every count up to bound - window) is the
  // loop itself, state for state, so that a lexeme starts at the same state
  // in both; then one level per count for the states inside the
  // repetition. The states before it (where the count is 0) and after it
  // (where it no longer matters) are at level 0 only: copies of them would
  // cost states and keep the index from sharing the levels' entries.
  Dfa window_dfa() const;
  size_t window_states() const { return automaton.loop.size() + size_t(window) * counting; }
  uint32_t window_state_at(uint32_t level, uint32_t q) const {
    return level == 0 || q >= counting ? q : static_cast<uint32_t>(automaton.loop.size()) + (level - 1) * counting + q;
  }
  uint32_t mask() const { return (uint32_t{1} << shift) - 1; }
};

// Bits of a loop state in a counted lexeme's lexer state.
inline uint32_t counted_state_bits(size_t loop_states) {
  return loop_states <= 1 ? 0 : static_cast<uint32_t>(std::bit_width(loop_states - 1));
}

}  // namespace cgram::ir

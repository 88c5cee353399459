#pragma once
// The pre-tokenizer's regex as an automaton: where the first piece of a text
// ends, the same answer as ICU's matcher (Encoder::PieceFinder), without
// backtracking and with a state that can be kept between texts.
//
// Why. Canonical mode asks where the first piece of (previous token + next
// token) ends for every next token of the vocabulary; ICU costs 150 ns a
// run and cannot start from where the previous token left it. Here the
// state after a text is a number, and a step is one table lookup.
//
// How. The pattern is parsed (the subset tokenizers use: alternation,
// groups, (?i:…), classes with \p{…}, \s \d \w, counted repetition, one
// character look-ahead), its character sets split Unicode into a few
// classes, and a Pike machine (threads in priority order, a match cutting
// the threads after it) gives ICU's leftmost-first match, including greedy
// backtracking and `\s+(?!\S)`. Its thread lists are made into DFA states,
// all of them when the pattern is compiled (30 to 60 for the tokenizers'
// patterns). Anything outside the subset (anchors, back-references, nested
// classes, lazy or possessive quantifiers, a loop whose body may match
// nothing) makes compile() refuse, and the caller keeps ICU. Texts with a
// character whose full case folding is several characters, where a run of
// literals the pattern matches ignoring case holds that folding (ß against
// `(?i:ss)`), are left to ICU too (first() says nullopt).
//
// tests/unit/vocab/piece_automaton_test.cpp compares every answer with ICU's
// on the real tokenizers' patterns.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "error.h"

namespace cgram {

class PieceProgram;  // the compiled pattern (piece_automaton.cpp)

// Built whole when compiled (every state reachable from the start, in
// breadth-first order, so the same pattern always numbers its states the
// same way); immutable after, and safe to share between threads.
class PieceAutomaton {
 public:
  // The automaton for `pattern` (ICU syntax, UTF-8), or why it cannot
  // model it.
  static Result<std::shared_ptr<const PieceAutomaton>> compile(std::string_view pattern);
  ~PieceAutomaton();

  using State = uint32_t;
  static constexpr State kDead = 0;  // no thread left: the first piece has ended
  static constexpr State kStart = 1;
  // A code point's class, or kUnsafe for those left to ICU.
  static constexpr uint8_t kUnsafe = 255;
  uint8_t class_of(uint32_t code_point) const;
  size_t classes() const { return classes_; }
  size_t states() const { return end_match_.size(); }
  // A hash of the classes and the transitions: saved tables keyed by this
  // automaton's states check it (CanonicalPairs::load).
  uint64_t fingerprint() const;
  struct Step {
    State next;
    bool match_before;  // a match of the pattern ends just before the character
  };
  Step step(State state, uint8_t cls) const {
    const uint32_t s = steps_[state * classes_ + cls];
    return Step{s >> 1, (s & 1) != 0};
  }
  bool match_at_end(State state) const { return end_match_[state] != 0; }
  // Whether no text after the text could change where the first piece ends.
  bool settled(State state) const { return settled_[state] != 0; }

  struct FirstPiece {
    size_t length;  // bytes
    bool open;      // more text could change where it ends
  };
  // Where the first piece of `text` ends, as the pre-tokenizer cuts it;
  // nullopt where ICU must answer (the first match does not start at the
  // text's start or is empty, an unsafe character, invalid UTF-8).
  std::optional<FirstPiece> first(std::string_view text) const;

  // A pattern whose automaton would have more states is refused.
  static constexpr size_t kMaxStates = 1 << 12;

  struct Key {
    explicit Key() = default;
  };
  explicit PieceAutomaton(Key) {}

 private:
  std::shared_ptr<const PieceProgram> program_;
  size_t classes_ = 0;
  std::vector<uint32_t> steps_;  // [state * classes + class]: next state << 1 | match before
  std::vector<uint8_t> end_match_, settled_;
};

}  // namespace cgram

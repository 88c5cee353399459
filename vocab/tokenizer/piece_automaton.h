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
// backtracking and `\s+(?!\S)`. Its states are made into DFA states as they
// are met. Anything outside the subset (anchors, back-references, nested
// classes, lazy or possessive quantifiers, a loop whose body may match
// nothing) makes compile() refuse, and the caller keeps ICU. Texts with a
// character whose full case folding is several characters, where the
// pattern ignores case, are left to ICU too (first() says nullopt).
//
// tests/unit/vocab/piece_automaton_test.cpp compares every answer with ICU's
// on the real tokenizers' patterns.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "error.h"

namespace cgram {

class PieceProgram;  // the compiled pattern (piece_automaton.cpp), shared and immutable

class PieceAutomaton {
 public:
  // The program for `pattern` (ICU syntax, UTF-8), or why the automaton
  // cannot model it.
  static Result<std::shared_ptr<const PieceProgram>> compile(std::string_view pattern);
  explicit PieceAutomaton(std::shared_ptr<const PieceProgram> program);
  ~PieceAutomaton();
  PieceAutomaton(PieceAutomaton&&) noexcept;

  using State = uint32_t;
  static constexpr State kDead = 0;  // no thread left: the first piece has ended
  State start() const { return 1; }
  // A code point's class, or kUnsafe for those left to ICU.
  static constexpr uint8_t kUnsafe = 255;
  uint8_t class_of(uint32_t code_point) const;
  size_t classes() const;
  struct Step {
    State next;
    bool match_before;  // a match of the pattern ends just before the character
  };
  Step step(State state, uint8_t cls);
  bool match_at_end(State state);
  // Whether no text after the text could change where the first piece ends.
  bool settled(State state);
  size_t states() const { return lists_.size(); }

  struct FirstPiece {
    size_t length;  // bytes
    bool open;      // more text could change where it ends
  };
  // Where the first piece of `text` ends, as the pre-tokenizer cuts it;
  // nullopt where ICU must answer (the first match does not start at the
  // text's start or is empty, an unsafe character, invalid UTF-8, too many
  // states).
  std::optional<FirstPiece> first(std::string_view text);

  // States are made as met, up to this many; past it first() says nullopt.
  static constexpr size_t kMaxStates = 1 << 14;

 private:
  struct ListHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };
  State intern(std::vector<uint32_t> list);

  std::shared_ptr<const PieceProgram> program_;
  std::vector<std::vector<uint32_t>> lists_;  // per state: its threads' program counters, in priority order
  std::unordered_map<std::vector<uint32_t>, State, ListHash> ids_;
  std::vector<int32_t> steps_;        // [state * classes + class]: next state << 1 | match; -1 not made
  std::vector<int8_t> end_match_;     // per state: -1 not made
  std::vector<int8_t> settled_;       // per state: -1 not made
  std::vector<uint32_t> scratch_, marks_;
  uint32_t mark_ = 0;
};

}  // namespace cgram

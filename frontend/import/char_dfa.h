#pragma once
// Regular languages over code points as small DFAs over classes of code
// points, with the set operations a regex does not have: intersection and
// difference, emptiness, membership, and the way back to a regex.
//
// The JSON Schema converter splits an object's keys with them: the names it
// lists, the keys each patternProperties pattern matches (and those several
// match), and the keys left to additionalProperties are disjoint languages,
// each written as one key regex with its own value. The lexer's byte DFAs
// (automata.h) cannot serve: a key regex is written over characters, and a
// byte DFA has states inside a character that no regex can name.
//
// Work is bounded (CharDfaLimits): a result over a limit is nullopt, and the
// caller refuses the schema with a message.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "regex.h"

namespace cgram::json {

struct CharDfaLimits {
  size_t max_nfa_states = size_t{1} << 16;
  size_t max_states = size_t{1} << 12;        // of one DFA, before minimising too
  size_t max_regex_nodes = size_t{1} << 15;   // of the regex to_regex writes
  size_t max_regex_depth = 200;               // its nodes inside one another (groups nest below kMaxRegexNesting)
  size_t max_regex_work = size_t{1} << 19;    // nodes written while eliminating states, in all
};

class CharDfa {
 public:
  // The strings a regex over code points matches (as a whole).
  static std::optional<CharDfa> of_regex(const ir::RegexNode& regex, const CharDfaLimits& limits = {});
  // A finite set of strings (UTF-8; an invalid byte reads as U+FFFD).
  static std::optional<CharDfa> of_strings(std::span<const std::string> strings, const CharDfaLimits& limits = {});
  // Every string of scalar values.
  static CharDfa everything();
  // Numbers in fixed point (`-?(0|[1-9][0-9]*)(\.[0-9]{1,e})?`) whose value
  // times 10^e is a multiple of m: the multiples of m·10^-e, by the
  // remainder of the digits read so far (3 + m·(e+2) states).
  static CharDfa multiples(uint64_t m, uint32_t e);

  std::optional<CharDfa> intersect(const CharDfa& other, const CharDfaLimits& limits = {}) const;
  std::optional<CharDfa> minus(const CharDfa& other, const CharDfaLimits& limits = {}) const;
  std::optional<CharDfa> unite(const CharDfa& other, const CharDfaLimits& limits = {}) const;

  // The strings of the language that have no proper prefix in it: what a
  // lazy rule matches when it must end at the first place it can (Lark's
  // `lazy`, `stop=`).
  CharDfa shortest() const;

  bool empty() const { return accepting_.empty(); }
  bool matches(std::string_view utf8) const;
  // States of the minimal DFA (0 for the empty language).
  size_t size() const { return accepting_.size(); }

  // A regex for the language (state elimination); nullopt when the language
  // is empty or the regex would pass max_regex_nodes or max_regex_depth.
  std::optional<ir::RegexNode> to_regex(const CharDfaLimits& limits = {}) const;

 private:
  static constexpr uint32_t kDead = UINT32_MAX;
  enum class Op { Intersect, Minus, Unite };
  enum class Order { Cheapest, FromStart };  // which state state elimination takes next
  std::optional<ir::RegexNode> eliminate(Order order, const CharDfaLimits& limits) const;
  std::optional<CharDfa> combine(const CharDfa& other, Op op, const CharDfaLimits& limits) const;
  size_t classes() const { return bounds_.size() - 1; }
  uint32_t class_of(uint32_t code_point) const;
  uint32_t next(uint32_t state, uint32_t cls) const { return state == kDead ? kDead : next_[state * classes() + cls]; }
  // Drops states that reach no accepting state, then merges equivalent ones.
  void minimize();

  // Class i holds the code points [bounds_[i], bounds_[i + 1]).
  std::vector<uint32_t> bounds_{0, 0x110000};
  std::vector<uint32_t> next_;  // state * classes() + class → state or kDead
  std::vector<uint8_t> accepting_;
  uint32_t start_ = kDead;
};

}  // namespace cgram::json

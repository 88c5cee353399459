#pragma once
// Lowering for the matcher: the grammar IR split into a lexical layer
// (terminals: byte DFAs, any!, except!) and a context-free skeleton over
// those terminals.
//
// Terminals never match the empty string, so that the parser never sees an
// empty lexeme: a terminal whose language holds "" (a regex like `[ ]*`, or
// except!, which may match nothing) is split into a non-empty terminal and an
// optional wrapper rule in the skeleton.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "automata.h"
#include "counted.h"
#include "except_automaton.h"
#include "grammar_ir.h"

namespace cgram::ir {

struct LexTerminal {
  enum class Kind : uint8_t { Bytes, AnyToken, Except };
  Kind kind = Kind::Bytes;
  Dfa dfa;                    // Bytes and Except: the non-empty language
  uint32_t except_index = 0;  // Except: into LexicalGrammar::excepts
  std::string name;           // for dumps and diagnostics
  // A counted lexeme (automata/counted.h): the lexer's states are its own,
  // and `dfa` is its window, which the token index reads.
  std::shared_ptr<const CountedLexeme> counted;
  // The lexer's moves and ends, whatever the kind of lexeme.
  uint32_t next(uint32_t state, uint8_t byte) const { return counted ? counted->next(state, byte) : dfa.next(state, byte); }
  bool accepting(uint32_t state) const { return counted ? counted->accepting(state) : dfa.accepting(state); }
  // The state of `dfa` for a lexer state (the same but in a counted lexeme).
  uint32_t index_state(uint32_t state) const { return counted ? counted->window_state(state) : state; }
};

struct LexExcept {
  std::shared_ptr<const ExceptAutomaton> automaton;
  std::optional<uint64_t> max_tokens;
};

struct SkeletonSymbol {
  bool terminal = false;
  uint32_t index = 0;
  bool operator==(const SkeletonSymbol&) const = default;
};

struct SkeletonProduction {
  uint32_t lhs = 0;
  std::vector<SkeletonSymbol> rhs;
};

// The longest token assumed where there is no vocabulary (`cgram check --dump`).
inline constexpr uint32_t kDefaultLongestToken = 256;

struct LexicalGrammar {
  std::vector<LexTerminal> terminals;
  std::vector<LexExcept> excepts;
  std::vector<std::string> nonterminal_names;
  std::vector<SkeletonProduction> productions;  // production 0 is S' -> start
  uint32_t start = 0;                           // the augmented start S'
  // Per rule of the grammar IR: why it stays in the skeleton rather than
  // being collapsed into a DFA (empty for collapsed rules).
  std::vector<std::string> context_free_reasons;

  std::string dump() const;
  // Saving and loading (table_io.cpp): load checks every index.
  void save(BinaryWriter& out) const;
  // `longest_token`: the vocabulary's (lower_lexical), which a counted
  // lexeme's window must have been made for.
  static bool load(BinaryReader& in, LexicalGrammar& grammar, uint32_t longest_token);
};

// How much work collapsing regular rules into lexemes may take. A rule
// over a budget is not an error: it stays with the parser (`check --ir`
// says why).
struct CollapseLimits {
  size_t max_rule_states = 4096;        // DFA states of one collapsed rule
  size_t max_total_states = 1u << 16;   // DFA states built for all collapsed rules together
  size_t max_nfa_states = 1u << 18;     // NFA states of one group of rules before its DFA is built
  size_t max_total_nfa_states = 1u << 21;  // NFA states built for all groups together
  size_t max_total_subset_elements = 1u << 24;  // work of every determinisation together (see AutomatonLimits)
  bool operator==(const CollapseLimits&) const = default;
};

// `longest_token`: the vocabulary's longest token in bytes, the most
// iterations of a counted lexeme one token can start (its window).
LexicalGrammar lower_lexical(const GrammarIR& ir, const CollapseLimits& limits = {},
                             uint32_t longest_token = kDefaultLongestToken);

// A DFA for L \ {""}: the start state is split off when it accepts. With
// `minimal` false the old states keep their numbers (the new start is last).
Dfa without_empty_string(const Dfa& dfa, bool minimal = true);

}  // namespace cgram::ir

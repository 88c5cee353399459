#pragma once
// The desugared grammar IR: rules → alternatives (productions) → sequences of
// symbols, with every literal and regex compiled to a minimal byte DFA, every
// except! set compiled to an Aho–Corasick automaton, and the classic analyses.
#include <bitset>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ast.h"
#include "automata.h"
#include "counted.h"
#include "diagnostics.h"
#include "except_automaton.h"
#include "regex.h"

namespace cgram::ir {

struct Symbol {
  enum class Kind : uint8_t { Nonterminal, Terminal, AnyToken, Except };
  Kind kind = Kind::Nonterminal;
  uint32_t index = 0;  // into nonterminals, terminals or excepts

  bool operator==(const Symbol&) const = default;
};

struct Terminal {
  enum class Kind : uint8_t { Literal, Regex };
  Kind kind = Kind::Literal;
  std::string text;  // the literal's bytes, or the regex source
  RegexNode regex;   // Regex only
  // The language; for a counted regex, with its counted repetition
  // unbounded (what the count leaves out is in `counted`).
  Dfa dfa;
  std::shared_ptr<const CountedDfa> counted;  // a regex with a counted repetition (automata/counted.h)
  SourceRange range;  // first place it was written
};

struct ExceptSpec {
  std::vector<std::string> strings;  // sorted, unique, non-empty
  std::optional<uint64_t> max_tokens;
  std::shared_ptr<const ExceptAutomaton> automaton;
  SourceRange range;
};

struct Production {
  uint32_t lhs = 0;
  std::vector<Symbol> rhs;
};

struct Nonterminal {
  std::string name;          // user rules keep theirs; helpers are named "rule#n"
  bool user_defined = false;
  SourceRange range;         // the name at its first definition
  std::vector<uint32_t> productions;
};

struct GrammarIR {
  std::vector<Nonterminal> nonterminals;
  std::vector<Production> productions;
  std::vector<Terminal> terminals;
  std::vector<ExceptSpec> excepts;
  uint32_t start = 0;

  // Analyses, indexed by nonterminal.
  std::vector<bool> nullable;
  std::vector<bool> productive;
  std::vector<bool> reachable;
  std::vector<bool> nonempty;  // derives at least one non-empty string
  std::vector<std::bitset<256>> first_bytes;

  std::optional<uint32_t> find(std::string_view name) const;
  size_t user_rule_count() const;
  size_t total_dfa_states() const;
  // Bytes held by the rules, productions, terminals and their automata.
  size_t memory_bytes() const;
  bool uses_any_token() const;
  bool uses_token_counts() const;
  std::string symbol_name(Symbol s) const;
  // Readable dump, one production per line (for `cgram check --ir` and tests).
  std::string dump() const;
};

struct LowerOptions {
  std::string start = "start";
  AutomatonLimits limits;
  uint32_t max_regex_nesting = kMaxRegexNesting;
};

// AST → IR with every semantic check of the language. Returns nullopt when
// an error was reported; warnings do not stop lowering.
std::optional<GrammarIR> lower(const ast::Grammar& grammar, const SourceFile& file,
                               const LowerOptions& options, Diagnostics& diags);

// The analyses above, (re)computed in place.
void analyze(GrammarIR& ir);

// A .cgram literal for these bytes: '…', with escapes for quotes,
// backslashes and control characters.
std::string quoted_bytes(std::string_view bytes);

// Edit distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace cgram::ir

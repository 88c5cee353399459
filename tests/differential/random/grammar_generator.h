#pragma once
// Random .cgram grammars of every shape the language allows, for the random
// differential (random_differential.cpp). A grammar is kept as a small tree,
// not only as text, so that a disagreement can be shrunk part by part
// (simplifications()) before it is reported.
//
// Every grammar is productive by construction: the first alternative of rule
// i refers only to rules after i, so each rule has a finite derivation. The
// rest is drawn freely: recursion at either end or in the middle, through
// nullable prefixes (hidden left recursion), mutual recursion and unit
// cycles; ε-alternatives, nullable rules and optional or starred tails;
// ambiguity of every kind; literals, regexes and classes with non-ASCII
// ranges; except! (with literals, alternations or a rule, with and without a
// token count), any!, and bounded repetition. The letters of one grammar are
// few, so that its terminals overlap and its except! strings meet its
// literals.
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace cgram::test::random {

struct Expr {
  enum class Kind : uint8_t {
    Literal,     // text: the bytes ('' when empty)
    Regex,       // text: the regex source
    Ref,         // rule
    Sequence,    // items in order ('' when there are none)
    Choice,      // items as alternatives
    Group,       // ( items[0] )
    Optional,    // [ items[0] ]
    Repeat,      // { items[0] }
    Quantified,  // items[0] then text: ?, *, +, {n}, {n,}, {n,m}, {,m}
    Any,         // any!
    Except,      // except!(strings or rule, count)
  };
  Kind kind = Kind::Sequence;
  std::string text;
  uint32_t rule = 0;
  bool except_names_rule = false;    // Except: S is `rule` (a rule of literals)
  std::vector<std::string> strings;  // Except: S otherwise
  uint32_t count = 0;                // Except: n (0: none)
  std::vector<Expr> items;
};

struct Rule {
  std::string name;
  std::vector<Expr> alternatives;  // each a Sequence
  bool literal_set = false;        // an except! argument: alternatives of one non-empty literal each
};

struct RandomGrammar {
  std::string shape;        // the family it was drawn from
  std::vector<Rule> rules;  // rules[0] is `start`
  std::string source() const;
  size_t size() const;  // nodes of the tree (a minimised grammar is smaller)
};

// The families of shapes; each seed draws one (seed % count), so that a run
// of consecutive seeds covers them all evenly.
std::vector<std::string_view> shape_names();

RandomGrammar generate_grammar(uint64_t seed);

// Every grammar one step smaller than g: a rule, an alternative or an item
// removed, a composite replaced by one of its parts, a quantifier, regex or
// literal simplified. Each stays a valid grammar (references to a removed
// rule become '').
std::vector<RandomGrammar> simplifications(const RandomGrammar& g);

}  // namespace cgram::test::random

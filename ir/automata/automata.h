#pragma once
// Byte automata: Thompson NFAs built from regexes and literals, DFAs by
// subset construction, and minimal DFAs by partition refinement.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "error.h"
#include "regex.h"

namespace cgram::ir {
class BinaryWriter;
class BinaryReader;
}  // namespace cgram::ir

namespace cgram::ir {

// The defaults of the limits on except! sets (also what a loaded table may hold).
inline constexpr size_t kMaxExceptStrings = 10000;       // strings in one set
inline constexpr size_t kMaxExceptStringBytes = 256;     // bytes of one string
inline constexpr size_t kMaxExceptBytes = 1u << 16;      // bytes of every set's strings in one grammar

struct AutomatonLimits {
  size_t max_nfa_states = 1u << 20;
  size_t max_dfa_states = 1u << 15;               // of one minimal DFA (and bytes of one literal)
  size_t max_intermediate_dfa_states = 1u << 16;  // before minimisation, when built part by part
  size_t max_total_dfa_states = 1u << 18;         // of every terminal of a grammar together
  size_t max_subset_elements = 1u << 25;          // NFA states over all subsets of one determinisation
  size_t max_except_strings = kMaxExceptStrings;
  size_t max_except_string_bytes = kMaxExceptStringBytes;
  size_t max_except_bytes = kMaxExceptBytes;
  bool operator==(const AutomatonLimits&) const = default;
};

class Nfa {
 public:
  struct Edge {
    uint8_t lo, hi;
    uint32_t target;
  };
  struct State {
    std::vector<Edge> edges;
    std::vector<uint32_t> epsilon;
  };

  uint32_t add_state();
  void add_edge(uint32_t from, uint8_t lo, uint8_t hi, uint32_t to) { states_[from].edges.push_back({lo, hi, to}); }
  void add_epsilon(uint32_t from, uint32_t to) { states_[from].epsilon.push_back(to); }

  uint32_t start = 0;
  uint32_t accept = 0;
  const std::vector<State>& states() const { return states_; }
  size_t size() const { return states_.size(); }

 private:
  std::vector<State> states_;
};

// A complete DFA over bytes. Missing transitions go to kDead. States from
// which no accepting state is reachable are removed (they become kDead), so
// "not dead" always means "some continuation is accepted".
class Dfa {
 public:
  static constexpr uint32_t kDead = UINT32_MAX;

  uint32_t start() const { return start_; }
  size_t size() const { return accepting_.size(); }
  // What one state costs: a row of 256 targets and its accepting flag.
  static constexpr size_t kStateBytes = 256 * sizeof(uint32_t) + 1;
  size_t memory_bytes() const { return size() * kStateBytes; }
  bool empty_language() const { return start_ == kDead; }
  uint32_t next(uint32_t state, uint8_t byte) const {
    return state == kDead ? kDead : table_[size_t(state) * 256 + byte];
  }
  bool accepting(uint32_t state) const { return state != kDead && accepting_[state]; }
  // Runs the whole text from `state`.
  uint32_t run(uint32_t state, std::string_view text) const;
  bool matches(std::string_view text) const { return accepting(run(start_, text)); }
  // True when the DFA accepts at least one non-empty string / the empty string.
  bool accepts_nonempty() const;
  bool accepts_empty() const { return accepting(start_); }
  // Bytes that can start an accepted non-empty string.
  std::vector<bool> first_bytes() const;

  // Building.
  uint32_t add_state(bool accepting);
  void reserve(size_t states) {
    table_.reserve(states * 256);
    accepting_.reserve(states);
  }
  void set(uint32_t state, uint8_t byte, uint32_t target) { table_[size_t(state) * 256 + byte] = target; }
  void set_start(uint32_t s) { start_ = s; }
  void set_accepting(uint32_t s, bool a) { accepting_[s] = a; }

  // The transitions of `state`, by byte (code generation reads them).
  std::span<const uint32_t> row(uint32_t state) const { return {table_.data() + size_t(state) * 256, 256}; }
  // The whole table (state * 256 + byte), which large generated DFAs read.
  const uint32_t* table_data() const { return table_.data(); }
  // Accepting flags by state (no kDead check: for loops over live states).
  const uint8_t* accepting_data() const { return accepting_.data(); }
  // Saving and loading (table_io.cpp): load checks every target.
  void save(BinaryWriter& out) const;
  static bool load(BinaryReader& in, Dfa& dfa);

 private:
  uint32_t start_ = kDead;
  std::vector<uint32_t> table_;
  std::vector<uint8_t> accepting_;
};

using NfaResult = Result<Nfa>;
using DfaResult = Result<Dfa>;

NfaResult regex_to_nfa(const RegexNode& regex, const AutomatonLimits& limits = {});
// A bounded repetition of a regex built as a loop (automata/counted.h): its
// lower bound's copies, then iterations that enter through `entry` and end
// through `reset`, as many as the text has.
struct CountedLoop {
  const RegexNode* node = nullptr;  // a Repeat of the regex
  uint32_t entry = 0, reset = 0;    // NFA states, set by the builder
};
// regex_to_nfa with `counted->node` built as that loop (none: as regex_to_nfa).
NfaResult regex_to_counted_nfa(const RegexNode& regex, CountedLoop* counted, const AutomatonLimits& limits = {});
// `subset_elements`, when given, gets the NFA states kept over all subsets
// (the work done), whether or not it succeeded.
DfaResult nfa_to_dfa(const Nfa& nfa, const AutomatonLimits& limits = {}, size_t* subset_elements = nullptr);
// Removes states that cannot reach acceptance, then merges equivalent states.
Dfa minimize(const Dfa& dfa);
// minimize, never merging states of different classes of `initial` (one
// per state; states of one class accept alike): for what a state holds that
// its language does not show, such as the moves that start a counted
// iteration (automata/counted.h). The states come out in breadth-first
// order from the start, over bytes in order.
Dfa minimize_apart(const Dfa& dfa, std::span<const uint32_t> initial);
// minimize(nfa_to_dfa(nfa)), without the full rows in between: the subsets
// and their refinement work on the classes of bytes the NFA's edges tell
// apart. `subset_states`, when given, gets the DFA's states before
// minimisation (what a budget on DFAs built counts).
DfaResult nfa_to_minimal_dfa(const Nfa& nfa, const AutomatonLimits& limits = {}, size_t* subset_elements = nullptr,
                             size_t* subset_states = nullptr);
// One byte of each group whose column of the transition table is the same
// in every state (in order): what tells states apart needs only those.
std::vector<uint8_t> distinct_columns(const Dfa& dfa);
// Copies `dfa` into `nfa`; returns the copy's start, and links every
// accepting state to `accept` with an epsilon move.
uint32_t embed_dfa(const Dfa& dfa, Nfa& nfa, uint32_t accept);
// The whole pipeline: regex → NFA → DFA → minimal DFA; where the subset
// construction outgrows the limit, the DFA is built part by part, each part
// minimised, and the limit applies to the minimal DFA.
DfaResult compile_regex(const RegexNode& regex, const AutomatonLimits& limits = {});
Dfa literal_dfa(std::string_view bytes);
// The DFA of a union of literals (a finite language).
Dfa literals_dfa(std::span<const std::string> literals);

}  // namespace cgram::ir

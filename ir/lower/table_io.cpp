// Saving and loading the lowered tables (DFAs, except! automata, the
// skeleton grammar, the LR table) for AOT shared objects. Loading trusts
// nothing: every state, symbol and production index is checked, so that a
// hostile file cannot make the matcher read out of bounds.
#include <algorithm>

#include "binary_io.h"
#include "except_automaton.h"
#include "lexical.h"
#include "lr.h"
#include "utf8_dfa.h"

namespace cgram::ir {

namespace {
// Bounds on what a loaded table may ask for: far above what the compiler
// makes, far below what would exhaust memory (LR tables are checked against
// LrLimits, whose dense parts are bounded).
constexpr uint64_t kMaxProductionLength = 1u << 16;

bool is_state_or_dead(uint32_t q, size_t states) { return q == Dfa::kDead || q < states; }

void put_strings(BinaryWriter& out, const std::vector<std::string>& strings) {
  out.put<uint64_t>(strings.size());
  for (const std::string& s : strings) out.put_bytes(s);
}

std::vector<std::string> get_strings(BinaryReader& in) {
  const uint64_t n = in.get_count(8);
  std::vector<std::string> strings;
  for (uint64_t i = 0; i < n && in.ok(); ++i) strings.emplace_back(in.get_bytes());
  return strings;
}

using PairRow = std::vector<std::pair<uint32_t, uint32_t>>;

void put_pair_rows(BinaryWriter& out, const std::vector<PairRow>& rows) {
  out.put<uint64_t>(rows.size());
  for (const PairRow& row : rows) {
    out.put<uint64_t>(row.size());
    for (auto [a, b] : row) out.put<uint32_t>(a), out.put<uint32_t>(b);
  }
}

void put_rows(BinaryWriter& out, const std::vector<std::vector<uint32_t>>& rows) {
  out.put<uint64_t>(rows.size());
  for (const auto& row : rows) out.put_vector(row);
}

bool get_rows(BinaryReader& in, uint64_t n, std::vector<PairRow>& rows) {
  if (in.get<uint64_t>() != n) return in.fail("LR table rows disagree in number");
  rows.resize(n);
  for (PairRow& row : rows) {
    const uint64_t k = in.get_count(8);
    for (uint64_t i = 0; i < k && in.ok(); ++i) {
      const uint32_t a = in.get<uint32_t>();
      row.emplace_back(a, in.get<uint32_t>());
    }
  }
  return in.ok();
}

bool get_rows(BinaryReader& in, uint64_t n, std::vector<std::vector<uint32_t>>& rows) {
  if (in.get<uint64_t>() != n) return in.fail("LR table rows disagree in number");
  rows.resize(n);
  for (auto& row : rows) row = in.get_vector<uint32_t>();
  return in.ok();
}
}  // namespace

void Dfa::save(BinaryWriter& out) const {
  out.put<uint32_t>(start_);
  out.put_vector(accepting_);
  out.put_vector(table_);
}

bool Dfa::load(BinaryReader& in, Dfa& dfa) {
  dfa.start_ = in.get<uint32_t>();
  dfa.accepting_ = in.get_vector<uint8_t>();
  dfa.table_ = in.get_vector<uint32_t>();
  if (!in.ok()) return false;
  const size_t n = dfa.accepting_.size();
  if (dfa.table_.size() != n * 256) return in.fail("a DFA whose table does not match its states");
  if (!is_state_or_dead(dfa.start_, n)) return in.fail("a DFA whose start state is out of range");
  for (uint32_t q : dfa.table_)
    if (!is_state_or_dead(q, n)) return in.fail("a DFA transition out of range");
  return true;
}

// An except! automaton is saved as its strings and built again on load: it
// is cheap to build, and what is built is consistent by construction.
void ExceptAutomaton::save(BinaryWriter& out) const { put_strings(out, strings_); }

std::shared_ptr<const ExceptAutomaton> ExceptAutomaton::load(BinaryReader& in) {
  const std::vector<std::string> strings = get_strings(in);
  if (!in.ok()) return nullptr;
  size_t bytes = 0;
  for (const std::string& s : strings) {
    if (s.empty()) {
      in.fail("an except! set with an empty string");
      return nullptr;
    }
    bytes += s.size();
  }
  if (strings.empty() || strings.size() > kMaxExceptStrings || bytes > kMaxExceptBytes) {
    in.fail("an except! set larger than the compiler makes");
    return nullptr;
  }
  return std::make_shared<const ExceptAutomaton>(strings);
}

namespace {
// A counted lexeme's automaton, checked as compile_counted_regex and
// CountedLexeme::make leave it, and its window made from it.
bool load_counted(BinaryReader& in, LexTerminal& t, uint32_t longest_token) {
  CountedDfa automaton;
  if (!Dfa::load(in, automaton.loop)) return false;
  automaton.starts = in.get_vector<uint64_t>();
  automaton.bound = in.get<uint32_t>();
  const uint32_t window = in.get<uint32_t>();
  if (!in.ok()) return false;
  const size_t states = automaton.loop.size();
  if (t.kind != LexTerminal::Kind::Bytes || t.dfa.size() != 0 || states == 0 || automaton.loop.start() >= states ||
      automaton.starts.size() != states * 4)
    return in.fail("a counted lexeme whose automaton does not match its terminal");
  if (automaton.bound == 0 || automaton.bound > kMaxCountedRepeat ||
      ((uint64_t{automaton.bound} + 1) << counted_state_bits(states)) >= Dfa::kDead)
    return in.fail("a counted lexeme whose bounds the compiler does not make");
  CountedLexeme lexeme = CountedLexeme::make(std::move(automaton), longest_token);
  if (window != lexeme.window) return in.fail("a counted lexeme made for another vocabulary");
  // Checked before the window is made: bytes that ask for a huge one are refused, not allocated.
  if (lexeme.window_states() > AutomatonLimits{}.max_total_dfa_states)
    return in.fail("a counted lexeme whose window is larger than the compiler makes");
  t.dfa = lexeme.window_dfa();
  t.counted = std::make_shared<const CountedLexeme>(std::move(lexeme));
  return true;
}
}  // namespace

void LexicalGrammar::save(BinaryWriter& out) const {
  out.put<uint64_t>(terminals.size());
  for (const LexTerminal& t : terminals) {
    out.put<uint8_t>(static_cast<uint8_t>(t.kind));
    // A counted lexeme's window is made again on load, from its automaton.
    (t.counted ? Dfa{} : t.dfa).save(out);
    out.put<uint32_t>(t.except_index);
    out.put_bytes(t.name);
    out.put<uint8_t>(t.counted != nullptr);
    if (!t.counted) continue;
    t.counted->automaton.loop.save(out);
    out.put_vector(t.counted->automaton.starts);
    out.put<uint32_t>(t.counted->automaton.bound);
    out.put<uint32_t>(t.counted->window);
  }
  out.put<uint64_t>(excepts.size());
  for (const LexExcept& e : excepts) {
    e.automaton->save(out);
    out.put<uint8_t>(e.max_tokens.has_value());
    out.put<uint64_t>(e.max_tokens.value_or(0));
  }
  put_strings(out, nonterminal_names);
  out.put<uint64_t>(productions.size());
  for (const SkeletonProduction& p : productions) {
    out.put<uint32_t>(p.lhs);
    out.put<uint64_t>(p.rhs.size());
    for (SkeletonSymbol s : p.rhs) {
      out.put<uint8_t>(s.terminal);
      out.put<uint32_t>(s.index);
    }
  }
  out.put<uint32_t>(start);
  put_strings(out, context_free_reasons);
}

bool LexicalGrammar::load(BinaryReader& in, LexicalGrammar& g, uint32_t longest_token) {
  g = {};
  const uint64_t terminal_count = in.get_count(16);
  for (uint64_t i = 0; i < terminal_count && in.ok(); ++i) {
    LexTerminal t;
    const uint8_t kind = in.get<uint8_t>();
    if (kind > static_cast<uint8_t>(LexTerminal::Kind::Except)) return in.fail("a terminal of an unknown kind");
    t.kind = static_cast<LexTerminal::Kind>(kind);
    if (!Dfa::load(in, t.dfa)) return false;
    t.except_index = in.get<uint32_t>();
    t.name = std::string(in.get_bytes());
    if (in.get<uint8_t>() != 0 && !load_counted(in, t, longest_token)) return false;
    g.terminals.push_back(std::move(t));
  }
  const uint64_t except_count = in.get_count(16);
  for (uint64_t i = 0; i < except_count && in.ok(); ++i) {
    LexExcept e;
    e.automaton = ExceptAutomaton::load(in);
    if (!e.automaton) return false;
    const bool limited = in.get<uint8_t>() != 0;
    const uint64_t max = in.get<uint64_t>();
    if (limited) e.max_tokens = max;
    g.excepts.push_back(std::move(e));
  }
  g.nonterminal_names = get_strings(in);
  const uint64_t production_count = in.get_count(12);
  for (uint64_t i = 0; i < production_count && in.ok(); ++i) {
    SkeletonProduction p;
    p.lhs = in.get<uint32_t>();
    const uint64_t length = in.get_count(5);
    if (length > kMaxProductionLength) return in.fail("a production longer than any grammar makes");
    for (uint64_t k = 0; k < length && in.ok(); ++k) {
      SkeletonSymbol s;
      s.terminal = in.get<uint8_t>() != 0;
      s.index = in.get<uint32_t>();
      p.rhs.push_back(s);
    }
    g.productions.push_back(std::move(p));
  }
  g.start = in.get<uint32_t>();
  g.context_free_reasons = get_strings(in);
  if (!in.ok()) return false;
  for (const LexTerminal& t : g.terminals) {
    // The matcher starts every byte lexeme at its DFA's start state.
    if (t.kind != LexTerminal::Kind::AnyToken && (t.dfa.size() == 0 || t.dfa.start() >= t.dfa.size()))
      return in.fail("a terminal whose DFA has no start state");
    if (t.kind != LexTerminal::Kind::Except) continue;
    if (t.except_index >= g.excepts.size()) return in.fail("a terminal names an except! automaton that does not exist");
    // Its DFA is the automaton's, or that with the start split off (lower_except):
    // the automaton's states (pending strings, character states) are its first ones.
    const size_t automaton_states = g.excepts[t.except_index].automaton->dfa().size();
    if (t.dfa.size() != automaton_states && t.dfa.size() != automaton_states + 1)
      return in.fail("an except! terminal that does not match its automaton");
  }
  const size_t nonterminals = g.nonterminal_names.size();
  if (g.productions.empty() || g.start >= nonterminals) return in.fail("a skeleton grammar without its start");
  for (const SkeletonProduction& p : g.productions) {
    if (p.lhs >= nonterminals) return in.fail("a production of a nonterminal that does not exist");
    for (SkeletonSymbol s : p.rhs)
      if (s.index >= (s.terminal ? g.terminals.size() : nonterminals))
        return in.fail("a production uses a symbol that does not exist");
  }
  return true;
}

void LrTable::save(BinaryWriter& out) const {
  out.put<uint64_t>(shifts_.size());
  put_pair_rows(out, shifts_);
  put_pair_rows(out, gotos_);
  for (const auto& row : reduces_) {
    out.put<uint64_t>(row.size());
    for (const auto& [t, reductions] : row) {
      out.put<uint32_t>(t);
      std::vector<uint32_t> flat;  // production, length, production, length, …
      for (const LrReduction& r : reductions) flat.insert(flat.end(), {r.production, r.length});
      out.put_vector(flat);
    }
  }
  put_rows(out, active_);
  out.put<uint64_t>(conflicts_);
}

std::unique_ptr<LrTable> LrTable::load(BinaryReader& in, const LexicalGrammar& grammar) {
  std::unique_ptr<LrTable> table(new LrTable());
  table->grammar_ = &grammar;
  table->terminal_count_ = grammar.terminals.size();
  table->nonterminal_count_ = grammar.nonterminal_names.size();
  const uint64_t n = in.get_count(24);
  if (!get_rows(in, n, table->shifts_) || !get_rows(in, n, table->gotos_)) return nullptr;
  table->reduces_.resize(n);
  for (auto& row : table->reduces_) {
    const uint64_t k = in.get_count(12);
    for (uint64_t i = 0; i < k && in.ok(); ++i) {
      const uint32_t t = in.get<uint32_t>();
      const std::vector<uint32_t> flat = in.get_vector<uint32_t>();
      if (flat.size() % 2 != 0) {
        in.fail("an LR reduction without its length");
        return nullptr;
      }
      std::vector<LrReduction> reductions;
      for (size_t j = 0; j < flat.size(); j += 2) reductions.push_back({flat[j], flat[j + 1]});
      row.emplace_back(t, std::move(reductions));
    }
  }
  if (!get_rows(in, n, table->active_)) return nullptr;
  table->conflicts_ = in.get<uint64_t>();
  if (!in.ok()) return nullptr;
  auto bad = [&](const char* message) {
    in.fail(message);
    return nullptr;
  };
  if (n == 0) return bad("an LR table without states");
  const size_t T = table->terminal_count_, N = table->nonterminal_count_;
  const LrLimits limits;
  if (n > limits.max_states) return bad("an LR table with more states than the compiler makes");
  // Rows are searched by binary search where the tables are not dense.
  auto strictly_sorted = [](const auto& row) {
    return std::adjacent_find(row.begin(), row.end(), [](const auto& a, const auto& b) {
             return a.first >= b.first;
           }) == row.end();
  };
  for (size_t s = 0; s < n; ++s) {
    if (!strictly_sorted(table->shifts_[s]) || !strictly_sorted(table->gotos_[s]) ||
        !strictly_sorted(table->reduces_[s]))
      return bad("an LR state whose rows are not sorted");
    for (auto [t, target] : table->shifts_[s])
      if (t >= T || target >= n) return bad("an LR shift out of range");
    for (auto [a, target] : table->gotos_[s])
      if (a >= N || target >= n) return bad("an LR goto out of range");
    for (const auto& [t, reductions] : table->reduces_[s]) {
      if (t > T) return bad("an LR reduction on a terminal that does not exist");
      for (const LrReduction& r : reductions) {
        if (r.production >= grammar.productions.size()) return bad("an LR reduction by a production that does not exist");
        if (r.length > grammar.productions[r.production].rhs.size())
          return bad("an LR reduction longer than its production");
      }
    }
    const auto& active = table->active_[s];
    if (!std::is_sorted(active.begin(), active.end()) || (!active.empty() && active.back() >= T))
      return bad("an LR state with invalid active terminals");
  }
  table->build_dense(limits.max_dense_cells);
  return table;
}

}  // namespace cgram::ir

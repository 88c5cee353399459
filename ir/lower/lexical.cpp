#include "lexical.h"

#include <fmt/format.h>

#include <bitset>
#include <map>

namespace cgram::ir {

Dfa without_empty_string(const Dfa& dfa, bool minimal) {
  if (!dfa.accepts_empty()) return dfa;
  // Copy every state (same numbers), then add a fresh non-accepting start
  // with the old start's transitions.
  Dfa out;
  for (uint32_t s = 0; s < dfa.size(); ++s) out.add_state(dfa.accepting(s));
  for (uint32_t s = 0; s < dfa.size(); ++s)
    for (int b = 0; b < 256; ++b) out.set(s, static_cast<uint8_t>(b), dfa.next(s, static_cast<uint8_t>(b)));
  uint32_t start = out.add_state(false);
  for (int b = 0; b < 256; ++b) out.set(start, static_cast<uint8_t>(b), dfa.next(dfa.start(), static_cast<uint8_t>(b)));
  out.set_start(start);
  return minimal ? minimize(out) : out;
}

namespace {

// Rules whose language is regular by structure are collapsed into one DFA
// each (within a size budget): in JSON, `string`, `number` and `ws` become
// single terminals, so a token inside a string is classified by one DFA and
// only the closing quote ends the lexeme. That holds whatever the notation:
// EBNF repetition (its helpers recurse on one side), left- or right-linear
// recursion through a group of rules, and nesting through other rules. A
// strongly connected group of rules is regular when every production refers
// to the group at most once, always at its end (right-linear) or always at
// its start (left-linear), and otherwise only to regular rules and
// terminals: it then cannot embed itself.
class RegularRules {
 public:
  RegularRules(const GrammarIR& ir, const CollapseLimits& limits)
      : ir_(ir), limits_(limits), dfa_(ir.nonterminals.size()), why_(ir.nonterminals.size()) {
    compute_users();
    compute_follow();
    compute_leading_optional();
    for (const Production& p : ir.productions)
      for (Symbol s : p.rhs)
        if (s.kind == Symbol::Kind::Nonterminal) ++uses_[s.index];
    for (const std::vector<uint32_t>& group : strongly_connected_groups()) collapse(group);
    settle();
  }
  // Whether the rule is collapsed (inside a lexeme, or one itself).
  bool collapsed(uint32_t n) const { return regular_[n]; }
  // The DFA of a collapsed rule that the skeleton uses as a terminal.
  const Dfa* dfa(uint32_t n) const { return regular_[n] && dfa_[n] ? &*dfa_[n] : nullptr; }
  // Why a rule stays in the skeleton (empty when it was collapsed).
  const std::string& why_context_free(uint32_t n) const { return why_[n]; }

 private:
  // Which productions use each rule (for the worklists below: fixpoints by
  // passes over every production were quadratic on long chains of rules).
  void compute_users() {
    users_.resize(ir_.nonterminals.size());
    for (uint32_t i = 0; i < ir_.productions.size(); ++i)
      for (Symbol s : ir_.productions[i].rhs)
        if (s.kind == Symbol::Kind::Nonterminal && (users_[s.index].empty() || users_[s.index].back() != i))
          users_[s.index].push_back(i);
  }

  // Rules with an alternative that begins with something that may be empty.
  void compute_leading_optional() {
    std::vector<uint32_t> work;
    auto visit = [&](uint32_t i) {
      const Production& p = ir_.productions[i];
      if (leading_optional_[p.lhs] || p.rhs.empty() || !begins_with_optional(p.rhs.front())) return;
      leading_optional_[p.lhs] = true;
      work.push_back(p.lhs);
    };
    for (uint32_t i = 0; i < ir_.productions.size(); ++i) visit(i);
    while (!work.empty()) {
      const uint32_t a = work.back();
      work.pop_back();
      for (uint32_t i : users_[a]) visit(i);
    }
  }

  // Tarjan's algorithm, iteratively (deep grammars must not exhaust the
  // stack); groups come out callees first.
  std::vector<std::vector<uint32_t>> strongly_connected_groups() const {
    const size_t n = ir_.nonterminals.size();
    std::vector<std::vector<uint32_t>> groups;
    std::vector<uint32_t> index(n, UINT32_MAX), low(n, 0), stack;
    std::vector<bool> on_stack(n, false);
    uint32_t counter = 0;
    struct Frame {
      uint32_t node;
      size_t next;  // position in successors
    };
    std::vector<std::vector<uint32_t>> successors(n);
    for (uint32_t a = 0; a < n; ++a)
      for (uint32_t p : ir_.nonterminals[a].productions)
        for (Symbol s : ir_.productions[p].rhs)
          if (s.kind == Symbol::Kind::Nonterminal) successors[a].push_back(s.index);
    for (uint32_t root = 0; root < n; ++root) {
      if (index[root] != UINT32_MAX) continue;
      std::vector<Frame> frames{{root, 0}};
      index[root] = low[root] = counter++;
      stack.push_back(root), on_stack[root] = true;
      while (!frames.empty()) {
        Frame& f = frames.back();
        if (f.next < successors[f.node].size()) {
          const uint32_t w = successors[f.node][f.next++];
          if (index[w] == UINT32_MAX) {
            index[w] = low[w] = counter++;
            stack.push_back(w), on_stack[w] = true;
            frames.push_back({w, 0});
          } else if (on_stack[w]) {
            low[f.node] = std::min(low[f.node], index[w]);
          }
          continue;
        }
        const uint32_t v = f.node;
        frames.pop_back();
        if (!frames.empty()) low[frames.back().node] = std::min(low[frames.back().node], low[v]);
        if (low[v] != index[v]) continue;
        std::vector<uint32_t> group;
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back(), on_stack[w] = false;
          group.push_back(w);
        } while (w != v);
        groups.push_back(std::move(group));
      }
    }
    return groups;
  }

  enum class Side : uint8_t { None, Left, Right };

  std::bitset<256> first_of(Symbol s) const {
    std::bitset<256> out;
    switch (s.kind) {
      case Symbol::Kind::Nonterminal: return ir_.first_bytes[s.index];
      case Symbol::Kind::Terminal: {
        const Dfa& dfa = ir_.terminals[s.index].dfa;
        for (int b = 0; b < 256; ++b) out[b] = dfa.next(dfa.start(), static_cast<uint8_t>(b)) != Dfa::kDead;
        return out;
      }
      default: return out.set();
    }
  }
  bool begins_with_optional(Symbol s) const {
    return nullable(s) || (s.kind == Symbol::Kind::Nonterminal && leading_optional_[s.index]);
  }
  bool nullable(Symbol s) const {
    switch (s.kind) {
      case Symbol::Kind::Nonterminal: return ir_.nullable[s.index];
      case Symbol::Kind::Terminal: return ir_.terminals[s.index].dfa.accepts_empty();
      case Symbol::Kind::Except: return true;
      case Symbol::Kind::AnyToken: return false;
    }
    return false;
  }
  // The bytes that can follow the rest of `rhs` from position i, and whether
  // all of it can be empty.
  std::pair<std::bitset<256>, bool> first_of_rest(const std::vector<Symbol>& rhs, size_t i) const {
    std::bitset<256> out;
    for (; i < rhs.size(); ++i) {
      out |= first_of(rhs[i]);
      if (!nullable(rhs[i])) return {out, false};
    }
    return {out, true};
  }

  // FOLLOW at the byte level: what the next byte can be after each rule.
  // A worklist: when FOLLOW(a) grows, only a's own productions pass it on.
  void compute_follow() {
    follow_.assign(ir_.nonterminals.size(), {});
    std::vector<uint32_t> work;
    std::vector<bool> queued(ir_.nonterminals.size(), false);
    auto add = [&](uint32_t a, const std::bitset<256>& bytes) {
      std::bitset<256>& f = follow_[a];
      if ((f | bytes) == f) return;
      f |= bytes;
      if (!queued[a]) queued[a] = true, work.push_back(a);
    };
    // What follows inside each production, and which rules end it.
    std::vector<std::vector<uint32_t>> ends_of(ir_.nonterminals.size());  // rules that can end a's productions
    for (const Production& p : ir_.productions)
      for (size_t i = 0; i < p.rhs.size(); ++i) {
        if (p.rhs[i].kind != Symbol::Kind::Nonterminal) continue;
        auto [bytes, rest_nullable] = first_of_rest(p.rhs, i + 1);
        add(p.rhs[i].index, bytes);
        if (rest_nullable) ends_of[p.lhs].push_back(p.rhs[i].index);
      }
    while (!work.empty()) {
      const uint32_t a = work.back();
      work.pop_back();
      queued[a] = false;
      const std::bitset<256> bytes = follow_[a];
      for (uint32_t b : ends_of[a]) add(b, bytes);
    }
  }

  // A rule collapsed into a terminal of the skeleton may end where it could
  // also go on, at a byte that can follow it there: the matcher would then
  // carry two readings of every such byte (the lexeme going on, and the
  // lexeme ended and the next begun) where the parser shares one, as in
  // `type ::= base { ws '*' }` before `sp`. Repetitions whose unit starts
  // with something that may be empty (a separator list), and the rules that
  // embed them, are put back into the skeleton then. A plain repetition
  // (`blank*`, `digit+`) stays a lexeme, as its regex spelling would be.
  void settle() {
    const size_t n = ir_.nonterminals.size();
    for (bool changed = true; changed;) {
      changed = false;
      std::vector<std::bitset<256>> after(n);
      std::vector<bool> in_skeleton(n, false);
      in_skeleton[ir_.start] = true;
      for (const Production& p : ir_.productions) {
        if (regular_[p.lhs]) continue;  // collapsed: its parts are inside its DFA
        for (size_t i = 0; i < p.rhs.size(); ++i) {
          if (p.rhs[i].kind != Symbol::Kind::Nonterminal) continue;
          const uint32_t a = p.rhs[i].index;
          in_skeleton[a] = true;
          auto [bytes, rest_nullable] = first_of_rest(p.rhs, i + 1);
          after[a] |= bytes;
          if (rest_nullable) after[a] |= follow_[p.lhs];
        }
      }
      for (uint32_t a = 0; a < n; ++a) {
        if (!regular_[a] || !in_skeleton[a]) continue;
        if (!dfa_[a]) {
          // Inlined into a rule that stays with the parser after all: the
          // skeleton needs its own DFA now.
          if (std::string why = build_inlined(a); !why.empty()) {
            regular_[a] = false;
            why_[a] = why;
            changed = true;
            continue;
          }
        }
        if (!separator_unit_[a]) continue;
        if (auto byte = end_that_goes_on(*dfa_[a], after[a])) {
          regular_[a] = false;  // its DFA stays: collapsed rules that use it embed it
          why_[a] = fmt::format("where it may end it may also go on with byte 0x{:02X}, which can also follow it: "
                                "the parser shares that reading, a lexeme would split it in two",
                                *byte);
          changed = true;
        }
      }
    }
  }

  static std::optional<uint8_t> end_that_goes_on(const Dfa& dfa, const std::bitset<256>& after) {
    for (uint32_t q = 0; q < dfa.size(); ++q) {
      if (!dfa.accepting(q)) continue;
      for (int b = 0; b < 256; ++b)
        if (after[b] && dfa.next(q, static_cast<uint8_t>(b)) != Dfa::kDead) return static_cast<uint8_t>(b);
    }
    return std::nullopt;
  }

  void collapse(const std::vector<uint32_t>& group) {
    std::vector<bool> in_group(ir_.nonterminals.size(), false);
    for (uint32_t a : group) in_group[a] = true;
    Side side = Side::None;
    // Reasons by precedence: self-embedding says the most, then what the
    // group uses, then mixed sides.
    std::string embedding, uses, sides;
    bool recurses = false;  // some production refers to the group (a unit self-loop sets no side)
    for (uint32_t a : group)
      for (uint32_t p : ir_.nonterminals[a].productions) {
        const std::vector<Symbol>& rhs = ir_.productions[p].rhs;
        size_t inside = 0;
        for (size_t i = 0; i < rhs.size(); ++i) {
          const Symbol s = rhs[i];
          if (s.kind == Symbol::Kind::AnyToken || s.kind == Symbol::Kind::Except) {
            uses = "it holds any! or except!, which depend on token boundaries";
          } else if (s.kind == Symbol::Kind::Terminal && ir_.terminals[s.index].counted) {
            uses = "it holds a regex with a counted repetition, which stays a lexeme of its own";
          } else if (s.kind == Symbol::Kind::Nonterminal && in_group[s.index]) {
            ++inside;
            recurses = true;
            const Side here = rhs.size() == 1 ? side : i == 0 ? Side::Left : i + 1 == rhs.size() ? Side::Right : Side::None;
            if (here == Side::None && rhs.size() > 1)
              embedding = fmt::format("it recurses through '{}' in the middle of a sequence (self-embedding)",
                                      ir_.nonterminals[s.index].name);
            else if (here != Side::None && side != Side::None && here != side)
              sides = "its recursion is on the left in one place and on the right in another";
            else if (here != Side::None)
              side = here;
          } else if (s.kind == Symbol::Kind::Nonterminal && !regular_[s.index] && uses.empty()) {
            uses = fmt::format("it uses '{}', which is context-free", ir_.nonterminals[s.index].name);
          }
        }
        if (inside > 1 && sides.empty()) sides = "it refers to its own recursion twice in one alternative";
      }
    std::string why = !embedding.empty() ? embedding : !uses.empty() ? uses : sides;
    // A helper used once, outside any recursion (a level of a bounded
    // repetition, a group in parentheses), is copied into its user's NFA
    // rather than given a DFA of its own: x{0,256} then costs one subset
    // construction, not 256.
    const uint32_t first = group[0];
    const bool inline_it = why.empty() && group.size() == 1 && !recurses && uses_[first] == 1 &&
                           first != ir_.start && ir_.nonterminals[first].name.find('#') != std::string::npos;
    if (why.empty() && !inline_it) why = build(group, in_group, side == Side::None ? Side::Right : side);
    if (why.empty()) {
      for (uint32_t a : group) regular_[a] = true;
      // Collapsed because of recursion (its own or a part's): see settle.
      bool recursive = recurses;
      for (uint32_t a : group)
        for (uint32_t p : ir_.nonterminals[a].productions)
          for (Symbol s : ir_.productions[p].rhs)
            if (s.kind == Symbol::Kind::Nonterminal && (in_group[s.index] || through_recursion_[s.index])) recursive = true;
      for (uint32_t a : group) through_recursion_[a] = recursive;
      // A repetition whose unit starts with something that may be empty,
      // as in `{ ws '*' }` or `{ ws ',' ws param }`: see settle.
      bool separator = false;
      for (uint32_t a : group)
        for (uint32_t p : ir_.nonterminals[a].productions) {
          const std::vector<Symbol>& rhs = ir_.productions[p].rhs;
          for (Symbol sym : rhs)  // inherited from the parts it embeds
            if (sym.kind == Symbol::Kind::Nonterminal && !in_group[sym.index] && separator_unit_[sym.index]) separator = true;
          if (rhs.size() < 2) continue;
          const bool left = rhs.front().kind == Symbol::Kind::Nonterminal && in_group[rhs.front().index];
          const bool right = rhs.back().kind == Symbol::Kind::Nonterminal && in_group[rhs.back().index];
          if (left || right) separator = separator || begins_with_optional(rhs[left ? 1 : 0]);
        }
      for (uint32_t a : group) separator_unit_[a] = separator;
      return;
    }
    if (why.empty()) return;
    for (uint32_t a : group) {
      dfa_[a].reset();
      why_[a] = why;
    }
  }

  // A symbol of a collapsed rule as an NFA fragment ending in `accept`.
  uint32_t embed_symbol(Symbol s, Nfa& nfa, uint32_t accept) const {
    if (s.kind == Symbol::Kind::Terminal) return embed_dfa(ir_.terminals[s.index].dfa, nfa, accept);
    if (dfa_[s.index]) return embed_dfa(*dfa_[s.index], nfa, accept);
    // An inlined helper: its productions, copied.
    const uint32_t start = nfa.add_state();
    for (uint32_t p : ir_.nonterminals[s.index].productions) {
      uint32_t at = start;
      for (Symbol part : ir_.productions[p].rhs) {
        const uint32_t next = nfa.add_state();
        nfa.add_epsilon(at, embed_symbol(part, nfa, next));
        at = next;
      }
      nfa.add_epsilon(at, accept);
    }
    return start;
  }

  std::string build_inlined(uint32_t a) {
    std::vector<bool> in_group(ir_.nonterminals.size(), false);
    in_group[a] = true;
    return build({a}, in_group, Side::Right);
  }

  // One NFA for the whole group; each rule's DFA reads it from its own
  // start (right-linear) or to its own end (left-linear).
  std::string build(const std::vector<uint32_t>& group, const std::vector<bool>& in_group, Side side) {
    // Once the budget is spent, no more automata are built (not even the
    // NFA: settle() may ask for thousands of helpers, each embedding the
    // next, which is quadratic).
    if (states_built_ >= limits_.max_total_states || nfa_states_built_ >= limits_.max_total_nfa_states ||
        subset_elements_ >= limits_.max_total_subset_elements)
      return spent();
    Nfa nfa;
    const uint32_t outer = nfa.add_state();  // right-linear: the end; left-linear: the start
    std::map<uint32_t, uint32_t> state_of;
    for (uint32_t a : group) state_of[a] = nfa.add_state();
    for (uint32_t a : group) {
      for (uint32_t p : ir_.nonterminals[a].productions) {
        const std::vector<Symbol>& rhs = ir_.productions[p].rhs;
        // The production reads `from` → its regular symbols → `to`.
        uint32_t from = side == Side::Left ? outer : state_of[a];
        uint32_t to = side == Side::Left ? state_of[a] : outer;
        size_t first = 0, end = rhs.size();
        if (!rhs.empty() && rhs.front().kind == Symbol::Kind::Nonterminal && in_group[rhs.front().index] &&
            side != Side::Right)
          from = state_of[rhs.front().index], first = 1;
        else if (!rhs.empty() && rhs.back().kind == Symbol::Kind::Nonterminal && in_group[rhs.back().index])
          to = state_of[rhs.back().index], end = rhs.size() - 1;
        uint32_t at = from;
        for (size_t i = first; i < end; ++i) {
          const Symbol s = rhs[i];
          const uint32_t next = nfa.add_state();
          nfa.add_epsilon(at, embed_symbol(s, nfa, next));
          at = next;
        }
        nfa.add_epsilon(at, to);
      }
    }
    nfa_states_built_ += nfa.size();
    if (nfa.size() > limits_.max_nfa_states)
      return fmt::format("its automaton would need more than {} NFA states", limits_.max_nfa_states);
    for (uint32_t a : group) {
      nfa.start = side == Side::Left ? outer : state_of[a];
      nfa.accept = side == Side::Left ? state_of[a] : outer;
      // Every DFA built counts against the grammar's budget, kept or not.
      const size_t left = limits_.max_total_states - std::min(states_built_, limits_.max_total_states);
      AutomatonLimits limits;
      limits.max_dfa_states = std::min(limits_.max_rule_states, left);
      limits.max_intermediate_dfa_states = limits.max_dfa_states;
      limits.max_subset_elements =
          limits_.max_total_subset_elements - std::min(subset_elements_, limits_.max_total_subset_elements);
      size_t work = 0, built = 0;
      DfaResult result = nfa_to_minimal_dfa(nfa, limits, &work, &built);
      subset_elements_ += work;
      Dfa* d = result.if_value();
      if (!d) {
        if (subset_elements_ >= limits_.max_total_subset_elements) return spent();
        states_built_ += limits.max_dfa_states;
        if (limits.max_dfa_states < limits_.max_rule_states) return spent();
        return fmt::format("as a DFA it would need more than {} states", limits_.max_rule_states);
      }
      states_built_ += built;
      dfa_[a] = std::move(*d);
    }
    return "";
  }

  std::string spent() const {
    return fmt::format("the grammar's budget for collapsing rules into lexemes ({} DFA states, {} NFA states, {} "
                       "subset elements in all) is spent",
                       limits_.max_total_states, limits_.max_total_nfa_states, limits_.max_total_subset_elements);
  }

  const GrammarIR& ir_;
  const CollapseLimits& limits_;
  size_t states_built_ = 0;
  size_t nfa_states_built_ = 0;
  size_t subset_elements_ = 0;
  std::vector<std::vector<uint32_t>> users_;
  std::vector<std::optional<Dfa>> dfa_;
  std::vector<std::string> why_;
  std::vector<std::bitset<256>> follow_;
  std::vector<bool> through_recursion_ = std::vector<bool>(ir_.nonterminals.size(), false);
  std::vector<bool> regular_ = std::vector<bool>(ir_.nonterminals.size(), false);
  std::vector<bool> separator_unit_ = std::vector<bool>(ir_.nonterminals.size(), false);
  std::vector<bool> leading_optional_ = std::vector<bool>(ir_.nonterminals.size(), false);
  std::vector<uint32_t> uses_ = std::vector<uint32_t>(ir_.nonterminals.size(), 0);
};

class LexicalLowering {
 public:
  LexicalLowering(const GrammarIR& ir, const CollapseLimits& limits, uint32_t longest_token)
      : ir_(ir), regular_(ir, limits), longest_token_(longest_token) {}

  LexicalGrammar run() {
    // Skeleton nonterminals: the IR's, then S', then optional wrappers.
    for (const Nonterminal& n : ir_.nonterminals) out_.nonterminal_names.push_back(n.name);
    for (uint32_t n = 0; n < ir_.nonterminals.size(); ++n) out_.context_free_reasons.push_back(regular_.why_context_free(n));
    out_.start = add_nonterminal("start'");
    out_.productions.push_back({out_.start, {{false, ir_.start}}});
    terminal_symbol_.resize(ir_.terminals.size());
    except_symbol_.resize(ir_.excepts.size());
    rule_symbol_.resize(ir_.nonterminals.size());
    // S' -> start is production 0; when start itself is regular it is one terminal.
    if (auto lowered = symbol({Symbol::Kind::Nonterminal, ir_.start})) out_.productions[0].rhs = {*lowered};
    else out_.productions[0].rhs.clear();
    for (const Production& p : ir_.productions) {
      if (regular_.collapsed(p.lhs)) continue;  // collapsed: no skeleton production
      SkeletonProduction sp{p.lhs, {}};
      for (Symbol s : p.rhs)
        if (auto lowered = symbol(s)) sp.rhs.push_back(*lowered);
      out_.productions.push_back(std::move(sp));
    }
    return std::move(out_);
  }

 private:
  uint32_t add_nonterminal(std::string name) {
    out_.nonterminal_names.push_back(std::move(name));
    return static_cast<uint32_t>(out_.nonterminal_names.size() - 1);
  }

  uint32_t add_terminal(LexTerminal t) {
    out_.terminals.push_back(std::move(t));
    return static_cast<uint32_t>(out_.terminals.size() - 1);
  }

  // A terminal that may match "": opt -> ε | t+ (or nothing when L = {""}).
  std::optional<SkeletonSymbol> maybe_optional(std::optional<uint32_t> nonempty_terminal, const std::string& name) {
    uint32_t opt = add_nonterminal(name + "?");
    out_.productions.push_back({opt, {}});
    if (nonempty_terminal) out_.productions.push_back({opt, {{true, *nonempty_terminal}}});
    return SkeletonSymbol{false, opt};
  }

  std::optional<SkeletonSymbol> symbol(Symbol s) {
    switch (s.kind) {
      case Symbol::Kind::Nonterminal: {
        const Dfa* dfa = regular_.dfa(s.index);
        if (!dfa) return SkeletonSymbol{false, s.index};
        if (!rule_symbol_[s.index]) rule_symbol_[s.index] = lower_dfa(*dfa, ir_.nonterminals[s.index].name);
        return *rule_symbol_[s.index];
      }
      case Symbol::Kind::AnyToken: {
        if (!any_terminal_) any_terminal_ = add_terminal({LexTerminal::Kind::AnyToken, Dfa{}, 0, "any!", nullptr});
        return SkeletonSymbol{true, *any_terminal_};
      }
      case Symbol::Kind::Terminal: {
        if (!terminal_symbol_[s.index]) terminal_symbol_[s.index] = lower_terminal(s.index);
        return *terminal_symbol_[s.index];
      }
      case Symbol::Kind::Except: {
        if (!except_symbol_[s.index]) except_symbol_[s.index] = lower_except(s.index);
        return *except_symbol_[s.index];
      }
    }
    return std::nullopt;
  }

  SkeletonSymbol lower_terminal(uint32_t index) {
    const Terminal& t = ir_.terminals[index];
    const std::string name = ir_.symbol_name({Symbol::Kind::Terminal, index});
    return t.counted ? lower_counted(*t.counted, name) : lower_dfa(t.dfa, name);
  }

  // A counted lexeme, as lower_dfa (its start split off when it matches "").
  SkeletonSymbol lower_counted(const CountedDfa& counted, const std::string& name) {
    const bool matches_empty = counted.loop.accepts_empty();
    CountedDfa nonempty = counted;
    if (matches_empty) {
      nonempty.loop = without_empty_string(counted.loop, /*minimal=*/false);  // the new start is last
      const size_t start = size_t(counted.loop.start()) * 4;
      nonempty.starts.insert(nonempty.starts.end(), counted.starts.begin() + start, counted.starts.begin() + start + 4);
    }
    std::optional<uint32_t> terminal;
    if (nonempty.loop.accepts_nonempty()) {
      CountedLexeme lexeme = CountedLexeme::make(std::move(nonempty), longest_token_);
      Dfa window = lexeme.window_dfa();
      terminal = add_terminal({LexTerminal::Kind::Bytes, std::move(window), 0, matches_empty ? name + "+" : name,
                               std::make_shared<const CountedLexeme>(std::move(lexeme))});
      if (!matches_empty) return SkeletonSymbol{true, *terminal};
    }
    return *maybe_optional(terminal, name);
  }

  SkeletonSymbol lower_dfa(const Dfa& dfa, const std::string& name) {
    if (!dfa.accepts_empty()) return {true, add_terminal({LexTerminal::Kind::Bytes, dfa, 0, name, nullptr})};
    Dfa nonempty = without_empty_string(dfa);
    std::optional<uint32_t> terminal;
    if (!nonempty.empty_language()) terminal = add_terminal({LexTerminal::Kind::Bytes, nonempty, 0, name + "+", nullptr});
    return *maybe_optional(terminal, name);
  }

  SkeletonSymbol lower_except(uint32_t index) {
    const ExceptSpec& e = ir_.excepts[index];
    out_.excepts.push_back({e.automaton, e.max_tokens});
    std::string name = ir_.symbol_name({Symbol::Kind::Except, index});
    // Not minimised: the runtime reads the pending strings of the
    // automaton's own states when the matched text ends.
    Dfa nonempty = without_empty_string(e.automaton->dfa(), /*minimal=*/false);
    std::optional<uint32_t> terminal;
    if (nonempty.accepts_nonempty())
      terminal = add_terminal({LexTerminal::Kind::Except, nonempty,
                               static_cast<uint32_t>(out_.excepts.size() - 1), name + "+", nullptr});
    return *maybe_optional(terminal, name);
  }

  const GrammarIR& ir_;
  LexicalGrammar out_;
  std::vector<std::optional<SkeletonSymbol>> terminal_symbol_;
  std::vector<std::optional<SkeletonSymbol>> except_symbol_;
  std::vector<std::optional<SkeletonSymbol>> rule_symbol_;
  RegularRules regular_;
  uint32_t longest_token_;
  std::optional<uint32_t> any_terminal_;
};

}  // namespace

LexicalGrammar lower_lexical(const GrammarIR& ir, const CollapseLimits& limits, uint32_t longest_token) {
  return LexicalLowering(ir, limits, longest_token).run();
}

std::string LexicalGrammar::dump() const {
  std::string out;
  for (const SkeletonProduction& p : productions) {
    out += nonterminal_names[p.lhs] + " ->";
    if (p.rhs.empty()) out += " ε";
    for (SkeletonSymbol s : p.rhs) out += " " + (s.terminal ? terminals[s.index].name : nonterminal_names[s.index]);
    out += "\n";
  }
  for (const LexTerminal& t : terminals)
    if (t.counted)
      out += fmt::format("counted lexeme {}: {} iterations at most, {} states, a window of {} counts ({} states)\n",
                         t.name, t.counted->automaton.bound, t.counted->automaton.loop.size(), t.counted->window,
                         t.dfa.size());
  return out;
}

}  // namespace cgram::ir

#include "lexical.h"

#include <fmt/format.h>

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

// Rules whose language is regular and that recurse through no rule are
// collapsed into one DFA each (within a size budget): in JSON, `string`,
// `number` and `ws` become single terminals, so a token inside a string is
// classified by one DFA and only the closing quote ends the lexeme.
class RegularRules {
 public:
  explicit RegularRules(const GrammarIR& ir) : ir_(ir), dfa_(ir.nonterminals.size()), state_(ir.nonterminals.size(), 0) {
    for (uint32_t n = 0; n < ir.nonterminals.size(); ++n) visit(n);
  }
  // The rule's DFA, or null when it stays in the skeleton.
  const Dfa* dfa(uint32_t n) const { return dfa_[n] ? &*dfa_[n] : nullptr; }

 private:
  static constexpr size_t kBudget = 4096;

  // 0 unvisited, 1 in progress (a cycle: not regular here), 2 done.
  void visit(uint32_t n) {
    if (state_[n] != 0) return;
    state_[n] = 1;
    bool regular = true;
    for (uint32_t p : ir_.nonterminals[n].productions)
      for (Symbol s : ir_.productions[p].rhs) {
        if (s.kind == Symbol::Kind::AnyToken || s.kind == Symbol::Kind::Except) regular = false;
        if (s.kind != Symbol::Kind::Nonterminal) continue;
        visit(s.index);
        if (state_[s.index] != 2 || !dfa_[s.index]) regular = false;
      }
    if (regular) build(n);
    state_[n] = 2;
  }

  void build(uint32_t n) {
    Nfa nfa;
    nfa.start = nfa.add_state();
    nfa.accept = nfa.add_state();
    for (uint32_t p : ir_.nonterminals[n].productions) {
      uint32_t at = nfa.start;
      for (Symbol s : ir_.productions[p].rhs) {
        const Dfa& part = s.kind == Symbol::Kind::Terminal ? ir_.terminals[s.index].dfa : *dfa_[s.index];
        uint32_t end = nfa.add_state();
        nfa.add_epsilon(at, embed_dfa(part, nfa, end));
        at = end;
      }
      nfa.add_epsilon(at, nfa.accept);
    }
    AutomatonLimits limits;
    limits.max_dfa_states = kBudget;
    DfaResult result = nfa_to_dfa(nfa, limits);
    if (auto* d = std::get_if<Dfa>(&result)) dfa_[n] = minimize(*d);
  }

  const GrammarIR& ir_;
  std::vector<std::optional<Dfa>> dfa_;
  std::vector<uint8_t> state_;
};

class LexicalLowering {
 public:
  explicit LexicalLowering(const GrammarIR& ir) : ir_(ir), regular_(ir) {}

  LexicalGrammar run() {
    // Skeleton nonterminals: the IR's, then S', then optional wrappers.
    for (const Nonterminal& n : ir_.nonterminals) out_.nonterminal_names.push_back(n.name);
    out_.start = add_nonterminal("start'");
    out_.productions.push_back({out_.start, {{false, ir_.start}}});
    terminal_symbol_.resize(ir_.terminals.size());
    except_symbol_.resize(ir_.excepts.size());
    rule_symbol_.resize(ir_.nonterminals.size());
    // S' -> start is production 0; when start itself is regular it is one terminal.
    if (auto lowered = symbol({Symbol::Kind::Nonterminal, ir_.start})) out_.productions[0].rhs = {*lowered};
    else out_.productions[0].rhs.clear();
    for (const Production& p : ir_.productions) {
      if (regular_.dfa(p.lhs)) continue;  // collapsed: no skeleton production
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
        if (!any_terminal_) any_terminal_ = add_terminal({LexTerminal::Kind::AnyToken, Dfa{}, 0, "any!"});
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
    return lower_dfa(ir_.terminals[index].dfa, ir_.symbol_name({Symbol::Kind::Terminal, index}));
  }

  SkeletonSymbol lower_dfa(const Dfa& dfa, const std::string& name) {
    if (!dfa.accepts_empty()) return {true, add_terminal({LexTerminal::Kind::Bytes, dfa, 0, name})};
    Dfa nonempty = without_empty_string(dfa);
    std::optional<uint32_t> terminal;
    if (!nonempty.empty_language()) terminal = add_terminal({LexTerminal::Kind::Bytes, nonempty, 0, name + "+"});
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
                               static_cast<uint32_t>(out_.excepts.size() - 1), name + "+"});
    return *maybe_optional(terminal, name);
  }

  const GrammarIR& ir_;
  LexicalGrammar out_;
  std::vector<std::optional<SkeletonSymbol>> terminal_symbol_;
  std::vector<std::optional<SkeletonSymbol>> except_symbol_;
  std::vector<std::optional<SkeletonSymbol>> rule_symbol_;
  RegularRules regular_;
  std::optional<uint32_t> any_terminal_;
};

}  // namespace

LexicalGrammar lower_lexical(const GrammarIR& ir) { return LexicalLowering(ir).run(); }

std::string LexicalGrammar::dump() const {
  std::string out;
  for (const SkeletonProduction& p : productions) {
    out += nonterminal_names[p.lhs] + " ->";
    if (p.rhs.empty()) out += " ε";
    for (SkeletonSymbol s : p.rhs) out += " " + (s.terminal ? terminals[s.index].name : nonterminal_names[s.index]);
    out += "\n";
  }
  return out;
}

}  // namespace cgram::ir

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

class LexicalLowering {
 public:
  explicit LexicalLowering(const GrammarIR& ir) : ir_(ir) {}

  LexicalGrammar run() {
    // Skeleton nonterminals: the IR's, then S', then optional wrappers.
    for (const Nonterminal& n : ir_.nonterminals) out_.nonterminal_names.push_back(n.name);
    out_.start = add_nonterminal("start'");
    out_.productions.push_back({out_.start, {{false, ir_.start}}});
    terminal_symbol_.resize(ir_.terminals.size());
    except_symbol_.resize(ir_.excepts.size());
    for (const Production& p : ir_.productions) {
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
      case Symbol::Kind::Nonterminal: return SkeletonSymbol{false, s.index};
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
    const Terminal& t = ir_.terminals[index];
    std::string name = ir_.symbol_name({Symbol::Kind::Terminal, index});
    if (!t.dfa.accepts_empty()) return {true, add_terminal({LexTerminal::Kind::Bytes, t.dfa, 0, name})};
    Dfa nonempty = without_empty_string(t.dfa);
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

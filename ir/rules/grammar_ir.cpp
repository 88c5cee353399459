#include "grammar_ir.h"

#include <fmt/format.h>

#include <algorithm>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "memory_budget.h"

namespace cgram::ir {

// except!(r) walks r's rules recursively, like nesting.
inline constexpr size_t kMaxExceptRuleDepth = 256;


std::optional<uint32_t> GrammarIR::find(std::string_view name) const {
  for (uint32_t i = 0; i < nonterminals.size(); ++i)
    if (nonterminals[i].user_defined && nonterminals[i].name == name) return i;
  return std::nullopt;
}

size_t GrammarIR::user_rule_count() const {
  return std::count_if(nonterminals.begin(), nonterminals.end(),
                       [](const Nonterminal& n) { return n.user_defined; });
}

size_t GrammarIR::total_dfa_states() const {
  size_t total = 0;
  for (const Terminal& t : terminals) total += t.dfa.size();
  for (const ExceptSpec& e : excepts) total += e.automaton->dfa().size();
  return total;
}

namespace {
// What the IR keeps per piece, for the memory budget (the analyses' vectors
// and a bitset of first bytes per rule included).
size_t nonterminal_bytes(const Nonterminal& n) { return sizeof(Nonterminal) + n.name.size() + 64; }
size_t production_bytes(size_t rhs) { return sizeof(Production) + sizeof(uint32_t) + rhs * sizeof(Symbol); }
size_t terminal_bytes(const Terminal& t) { return sizeof(Terminal) + t.text.size() + t.dfa.memory_bytes(); }
size_t except_bytes(const ExceptSpec& e) {
  size_t bytes = sizeof(ExceptSpec) + e.automaton->dfa().memory_bytes();
  for (const std::string& s : e.strings) bytes += sizeof(std::string) + 2 * s.size();
  return bytes;
}
}  // namespace

size_t GrammarIR::memory_bytes() const {
  size_t bytes = 0;
  for (const Nonterminal& n : nonterminals) bytes += nonterminal_bytes(n);
  for (const Production& p : productions) bytes += production_bytes(p.rhs.size());
  for (const Terminal& t : terminals) bytes += terminal_bytes(t);
  for (const ExceptSpec& e : excepts) bytes += except_bytes(e);
  return bytes;
}

bool GrammarIR::uses_any_token() const {
  for (const Production& p : productions)
    for (Symbol s : p.rhs)
      if (s.kind == Symbol::Kind::AnyToken) return true;
  return false;
}

bool GrammarIR::uses_token_counts() const {
  return std::any_of(excepts.begin(), excepts.end(),
                     [](const ExceptSpec& e) { return e.max_tokens.has_value(); });
}

std::string quoted_bytes(std::string_view bytes) {
  std::string out = "'";
  for (char c : bytes) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '\'' || c == '\\') out += std::string("\\") + c;
    else if (u < 0x20 || u == 0x7F) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return out + "'";
}

std::string GrammarIR::symbol_name(Symbol s) const {
  switch (s.kind) {
    case Symbol::Kind::Nonterminal: return nonterminals[s.index].name;
    case Symbol::Kind::Terminal: {
      const Terminal& t = terminals[s.index];
      return t.kind == Terminal::Kind::Literal ? quoted_bytes(t.text) : "#'" + t.text + "'";
    }
    case Symbol::Kind::AnyToken: return "any!";
    case Symbol::Kind::Except: {
      const ExceptSpec& e = excepts[s.index];
      std::string out = "except!(";
      for (size_t i = 0; i < e.strings.size(); ++i) out += (i ? " | " : "") + quoted_bytes(e.strings[i]);
      if (e.max_tokens) out += fmt::format(", {}", *e.max_tokens);
      return out + ")";
    }
  }
  return "?";
}

std::string GrammarIR::dump() const {
  std::string out;
  for (const Nonterminal& n : nonterminals) {
    for (uint32_t p : n.productions) {
      out += n.name + " ->";
      if (productions[p].rhs.empty()) out += " ε";
      for (Symbol s : productions[p].rhs) out += " " + symbol_name(s);
      out += "\n";
    }
  }
  return out;
}

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of adjacent characters ("vaule" is one step from "value").
size_t edit_distance(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    return tolower(static_cast<unsigned char>(x)) == tolower(static_cast<unsigned char>(y));
  };
  // Three rows (two before the current one, for transpositions): memory
  // grows with one name, not the product of both.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]))
        current[j] = std::min(current[j], before[j - 2] + 1);
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[b.size()];
}

namespace {

// The DFAs of the regexes that most grammars share (a JSON string, a
// number, white space), built once per process: a JSON Schema's grammar
// repeats them, and each costs its UTF-8 classes' subsets again (0.1 ms of
// a first mask of 2). Small DFAs only, the most recently used, each under
// the limits it was built with.
class RegexMemo {
 public:
  static constexpr size_t kEntries = 64;
  static constexpr size_t kMaxStates = 32;  // 32 KiB a DFA: 2 MiB at most in all

  static RegexMemo& instance() {
    static RegexMemo memo;
    return memo;
  }

  std::optional<Dfa> find(const std::string& text, const AutomatonLimits& limits) {
    std::lock_guard lock(mutex_);
    auto it = index_.find(text);
    if (it == index_.end() || it->second->limits != limits) return std::nullopt;
    recent_.splice(recent_.begin(), recent_, it->second);
    return it->second->dfa;
  }

  void keep(const std::string& text, const AutomatonLimits& limits, const Dfa& dfa) {
    if (dfa.size() > kMaxStates) return;
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(text); it != index_.end()) {
      recent_.erase(it->second);
      index_.erase(it);
    }
    recent_.push_front(Entry{text, limits, dfa});
    index_[text] = recent_.begin();
    if (recent_.size() > kEntries) {
      index_.erase(recent_.back().text);
      recent_.pop_back();
    }
  }

 private:
  struct Entry {
    std::string text;
    AutomatonLimits limits;
    Dfa dfa;
  };
  std::mutex mutex_;
  std::list<Entry> recent_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

DfaResult compile_regex_memoized(const std::string& text, const RegexNode& regex, const AutomatonLimits& limits) {
  if (std::optional<Dfa> known = RegexMemo::instance().find(text, limits)) return std::move(*known);
  DfaResult dfa = compile_regex(regex, limits);
  if (const Dfa* built = dfa.if_value()) RegexMemo::instance().keep(text, limits, *built);
  return dfa;
}

class Lowering {
 public:
  Lowering(const ast::Grammar& grammar, const SourceFile& file, const LowerOptions& options,
           Diagnostics& diags)
      : grammar_(grammar), file_(file), options_(options), diags_(diags) {}

  std::optional<GrammarIR> run() {
    MemoryStage stage("lowering the grammar's rules and terminals");
    declare_rules();
    for (const ast::RuleDef& def : grammar_.rules) {
      if (stopped_) return std::nullopt;
      uint32_t nt = rule_ids_.at(def.name);
      add_alternatives(nt, def.body);
    }
    auto start = ir_.find(options_.start);
    if (!start) {
      std::string hint = suggestion(options_.start);
      if (grammar_.rules.empty())
        diags_.error_at_file(fmt::format("the grammar defines no rules; it needs a start rule '{}'",
                                         options_.start));
      else
        diags_.error_at_file(fmt::format("no rule named '{}', the start rule: define it, or name "
                                         "another start rule (--start NAME){}",
                                         options_.start, hint));
      return std::nullopt;
    }
    ir_.start = *start;
    if (diags_.has_errors()) return std::nullopt;
    analyze(ir_);
    check_analyses();
    if (diags_.has_errors()) return std::nullopt;
    warn_free_text_side_by_side();
    warn_ambiguous_recursion();
    return std::move(ir_);
  }

 private:
  void declare_rules() {
    for (const ast::RuleDef& def : grammar_.rules) {
      if (rule_ids_.count(def.name)) continue;
      Nonterminal n;
      n.name = def.name;
      n.user_defined = true;
      n.range = def.name_range;
      rule_ids_[def.name] = static_cast<uint32_t>(ir_.nonterminals.size());
      charge_memory(nonterminal_bytes(n) + sizeof(std::pair<std::string, uint32_t>) + def.name.size() + 32);
      ir_.nonterminals.push_back(std::move(n));
    }
  }

  // "Did you mean": only for names a person would type (64 bytes at most),
  // among names of about the same length, and for the first 100 names
  // asked about (a generated grammar could otherwise ask for every pair).
  std::string suggestion(std::string_view name) const {
    constexpr size_t kMaxName = 64, kMaxSuggestions = 100;
    if (name.size() > kMaxName || suggestions_made_ >= kMaxSuggestions) return "";
    ++suggestions_made_;
    size_t allowed = std::max<size_t>(1, name.size() / 3);
    std::string best;
    size_t best_distance = SIZE_MAX;
    for (const auto& [candidate, id] : rule_ids_) {
      const size_t gap = candidate.size() > name.size() ? candidate.size() - name.size() : name.size() - candidate.size();
      if (gap > allowed) continue;
      size_t d = edit_distance(name, candidate);
      if (d < best_distance) best_distance = d, best = candidate;
    }
    if (best.empty() || best_distance > allowed || best_distance >= name.size()) return "";
    return fmt::format("; did you mean '{}'?", best);
  }

  uint32_t new_helper(uint32_t owner) {
    Nonterminal n;
    n.name = fmt::format("{}#{}", ir_.nonterminals[owner].name, ++helper_count_[owner]);
    n.range = ir_.nonterminals[owner].range;
    charge_memory(nonterminal_bytes(n));
    ir_.nonterminals.push_back(std::move(n));
    return static_cast<uint32_t>(ir_.nonterminals.size() - 1);
  }

  void add_production(uint32_t lhs, std::vector<Symbol> rhs) {
    charge_memory(production_bytes(rhs.size()));
    ir_.nonterminals[lhs].productions.push_back(static_cast<uint32_t>(ir_.productions.size()));
    ir_.productions.push_back({lhs, std::move(rhs)});
  }

  void add_alternatives(uint32_t nt, const ast::Expr& body) {
    if (body.kind == ast::ExprKind::Alternation) {
      for (const ast::Expr& alt : body.children) {
        if (stopped_) return;
        add_production(nt, sequence(nt, alt));
      }
    } else {
      add_production(nt, sequence(nt, body));
    }
  }

  std::vector<Symbol> sequence(uint32_t owner, const ast::Expr& e) {
    std::vector<Symbol> out;
    if (e.kind == ast::ExprKind::Sequence) {
      for (const ast::Expr& child : e.children)
        if (auto s = item(owner, child)) out.push_back(*s);
    } else if (auto s = item(owner, e)) {
      out.push_back(*s);
    }
    return out;
  }

  // One expression as one symbol; nullopt for the empty literal '' (and for
  // nodes that already have an error).
  std::optional<Symbol> item(uint32_t owner, const ast::Expr& e) {
    if (e.poisoned || stopped_) return std::nullopt;
    switch (e.kind) {
      case ast::ExprKind::Literal:
        if (e.text.empty()) return std::nullopt;
        return literal(e);
      case ast::ExprKind::Regex: return regex(e);
      case ast::ExprKind::RuleRef: {
        auto it = rule_ids_.find(e.text);
        if (it == rule_ids_.end()) {
          diags_.error(e.range, fmt::format("undefined rule '{}'{}", e.text, suggestion(e.text)));
          return std::nullopt;
        }
        return Symbol{Symbol::Kind::Nonterminal, it->second};
      }
      case ast::ExprKind::Sequence:
      case ast::ExprKind::Alternation: {
        uint32_t helper = new_helper(owner);
        add_alternatives(helper, e);
        return Symbol{Symbol::Kind::Nonterminal, helper};
      }
      case ast::ExprKind::Repeat: return repeat(owner, e);
      case ast::ExprKind::AnyToken: return Symbol{Symbol::Kind::AnyToken, 0};
      case ast::ExprKind::Except: return except(e);
    }
    return std::nullopt;
  }

  std::optional<Symbol> repeat(uint32_t owner, const ast::Expr& e) {
    // except!(S) without a count matches the empty text, and two of them
    // side by side match exactly what one matches (no string of S may start
    // in either, even one the next completes): except!(S){n,m} is
    // except!(S) whenever m > 0. Read so, it is not split every way.
    if (e.children[0].kind == ast::ExprKind::Except && !e.children[0].except_count && e.max != 0) {
      if (e.max > 1)  // `except!(S)?` says what it means, if twice
        diags_.warning(e.range,
                     "a repetition of except! matches exactly what except!(S) alone matches (any text without S); "
                     "it is read as except!(S): write except!(S) alone");
      return item(owner, e.children[0]);
    }
    std::optional<Symbol> x = item(owner, e.children[0]);
    uint32_t n = new_helper(owner);
    if (!x) {  // repeating the empty string (or an error) is the empty string
      add_production(n, {});
      return Symbol{Symbol::Kind::Nonterminal, n};
    }
    std::vector<Symbol> required(e.min, *x);
    if (e.max == ast::kUnbounded) {
      // n -> x^min | n x   (left recursion: cheap for LR and Earley alike)
      add_production(n, required);
      add_production(n, {Symbol{Symbol::Kind::Nonterminal, n}, *x});
      return Symbol{Symbol::Kind::Nonterminal, n};
    }
    // Up to k more copies: o_k -> ε | x o_{k-1}, with o_1 -> ε | x.
    auto optional_copies = [&](uint32_t k, uint32_t o) {
      std::optional<Symbol> tail;
      for (uint32_t level = 1; level <= k; ++level) {
        uint32_t target = level == k && o != UINT32_MAX ? o : new_helper(owner);
        add_production(target, {});
        std::vector<Symbol> more{*x};
        if (tail) more.push_back(*tail);
        add_production(target, std::move(more));
        tail = Symbol{Symbol::Kind::Nonterminal, target};
      }
      return tail;
    };
    if (e.min == 0) {  // n itself is the outermost optional level
      if (e.max == 0) add_production(n, {});
      else optional_copies(e.max, n);
      return Symbol{Symbol::Kind::Nonterminal, n};
    }
    // n -> x^min o_{max-min}
    if (auto tail = optional_copies(e.max - e.min, UINT32_MAX)) required.push_back(*tail);
    add_production(n, std::move(required));
    return Symbol{Symbol::Kind::Nonterminal, n};
  }

  Symbol literal(const ast::Expr& e) {
    auto key = std::make_pair(Terminal::Kind::Literal, e.text);
    if (auto it = terminal_ids_.find(key); it != terminal_ids_.end())
      return Symbol{Symbol::Kind::Terminal, it->second};
    Terminal t;
    t.kind = Terminal::Kind::Literal;
    t.text = e.text;
    // One DFA state per byte: a literal is held to the DFA limit.
    if (e.text.size() >= options_.limits.max_dfa_states) {
      diags_.error(e.range, fmt::format("this literal is {} bytes long; the limit is {} bytes", e.text.size(),
                                        options_.limits.max_dfa_states - 1));
      t.dfa = literal_dfa("x");
    } else {
      t.dfa = literal_dfa(e.text);
    }
    t.range = e.range;
    return add_terminal(key, std::move(t));
  }

  // Counts a terminal's automaton against the grammar's total.
  void count_states(size_t states, SourceRange range) {
    total_states_ += states;
    if (total_states_ <= options_.limits.max_total_dfa_states || stopped_) return;
    // Lowering stops here: the terminals after this one would only take
    // more memory for an error already known.
    stopped_ = true;
    diags_.error(range, fmt::format("the grammar's terminals need more than {} DFA states in all (the limit, "
                                    "AutomatonLimits::max_total_dfa_states); lowering stopped here",
                                    options_.limits.max_total_dfa_states));
  }

  Symbol add_terminal(const std::pair<Terminal::Kind, std::string>& key, Terminal t) {
    charge_memory(terminal_bytes(t) + sizeof(key) + key.second.size() + 32);  // and its entry in terminal_ids_
    count_states(t.dfa.size(), t.range);
    uint32_t id = static_cast<uint32_t>(ir_.terminals.size());
    ir_.terminals.push_back(std::move(t));
    terminal_ids_[key] = id;
    return Symbol{Symbol::Kind::Terminal, id};
  }

  std::optional<Symbol> regex(const ast::Expr& e) {
    auto key = std::make_pair(Terminal::Kind::Regex, e.text);
    if (auto it = terminal_ids_.find(key); it != terminal_ids_.end())
      return Symbol{Symbol::Kind::Terminal, it->second};
    RegexParseResult parsed = parse_regex(e.text, options_.max_regex_nesting);
    if (auto* err = std::get_if<RegexError>(&parsed)) {
      SourceLoc b = file_.location_of(e.body_offset + err->offset);
      SourceLoc end = file_.location_of(e.body_offset + err->offset + err->length);
      diags_.error({b, end}, err->message);
      return std::nullopt;
    }
    Terminal t;
    t.kind = Terminal::Kind::Regex;
    t.text = e.text;
    t.regex = std::get<RegexNode>(std::move(parsed));
    t.range = e.range;
    Result<std::optional<CountedDfa>> counted = compile_counted_regex(t.regex, options_.limits);
    if (auto* err = counted.if_error()) {
      diags_.error(e.range, err->message);
      return std::nullopt;
    }
    if (*counted) {
      t.counted = std::make_shared<const CountedDfa>(std::move(**counted));
      t.dfa = t.counted->loop;
    } else {
      DfaResult dfa = compile_regex_memoized(e.text, t.regex, options_.limits);
      if (auto* err = dfa.if_error()) {
        diags_.error(e.range, err->message);
        return std::nullopt;
      }
      t.dfa = std::move(*dfa);
    }
    if (t.dfa.empty_language()) {
      diags_.error(e.range, "this regex matches no text at all (its language is empty)");
      return std::nullopt;
    }
    return add_terminal(key, std::move(t));
  }

  // The strings of an except! argument: a finite set of non-empty literals.
  bool finite_strings(const ast::Expr& e, std::vector<std::string>& out, std::set<std::string>& visiting) {
    switch (e.kind) {
      case ast::ExprKind::Literal:
        if (e.poisoned) return false;
        if (e.text.size() > options_.limits.max_except_string_bytes) return too_long(e);
        out.push_back(e.text);
        return out.size() <= options_.limits.max_except_strings || too_many(e);
      case ast::ExprKind::Alternation:
        for (const ast::Expr& c : e.children)
          if (!finite_strings(c, out, visiting)) return false;
        return true;
      case ast::ExprKind::Sequence: {
        // Limits are checked before each product is built, never after.
        std::vector<std::string> product{""};
        for (const ast::Expr& c : e.children) {
          std::vector<std::string> part, next;
          if (!finite_strings(c, part, visiting)) return false;
          if (part.size() > options_.limits.max_except_strings / product.size()) return too_many(e);
          for (const std::string& a : product)
            for (const std::string& b : part) {
              if (a.size() + b.size() > options_.limits.max_except_string_bytes) return too_long(e);
              next.push_back(a + b);
            }
          product = std::move(next);
        }
        if (out.size() + product.size() > options_.limits.max_except_strings) return too_many(e);
        out.insert(out.end(), product.begin(), product.end());
        return true;
      }
      case ast::ExprKind::RuleRef: {
        if (!rule_ids_.count(e.text)) {
          diags_.error(e.range, fmt::format("undefined rule '{}'{}", e.text, suggestion(e.text)));
          return false;
        }
        if (visiting.count(e.text)) {
          diags_.error(e.range, fmt::format("the argument of except! must be a finite set of literals, "
                                            "but rule '{}' is recursive",
                                            e.text));
          return false;
        }
        // Rules inside rules are walked recursively: bounded like nesting.
        if (visiting.size() >= kMaxExceptRuleDepth) {
          diags_.error(e.range, fmt::format("the argument of except! goes through more than {} rules inside one "
                                            "another",
                                            kMaxExceptRuleDepth));
          return false;
        }
        visiting.insert(e.text);
        used_in_except_.insert(e.text);
        for (const ast::RuleDef& def : grammar_.rules)
          if (def.name == e.text && !finite_strings(def.body, out, visiting)) return false;
        visiting.erase(e.text);
        return true;
      }
      case ast::ExprKind::Regex:
      case ast::ExprKind::Repeat:
      case ast::ExprKind::AnyToken:
      case ast::ExprKind::Except:
        diags_.error(e.range, fmt::format("the argument of except! must be a finite set of non-empty "
                                          "literals ('a', ('a' | 'b') or a rule that expands to them); "
                                          "a {} is not allowed here",
                                          ast::kind_name(e.kind)));
        return false;
    }
    return false;
  }

  bool too_many(const ast::Expr& e) {
    diags_.error(e.range, fmt::format("the argument of except! expands to more than {} strings",
                                      options_.limits.max_except_strings));
    return false;
  }
  bool too_long(const ast::Expr& e) {
    diags_.error(e.range, fmt::format("the argument of except! has a string longer than {} bytes (the limit)",
                                      options_.limits.max_except_string_bytes));
    return false;
  }

  std::optional<Symbol> except(const ast::Expr& e) {
    std::vector<std::string> strings;
    std::set<std::string> visiting;
    if (!finite_strings(e.children[0], strings, visiting)) return std::nullopt;
    if (strings.size() > options_.limits.max_except_strings) {
      too_many(e.children[0]);
      return std::nullopt;
    }
    if (std::any_of(strings.begin(), strings.end(), [](const std::string& s) { return s.empty(); })) {
      diags_.error(e.children[0].range,
                   "the strings of except! must not be empty: the empty string occurs everywhere, "
                   "so nothing could be matched");
      return std::nullopt;
    }
    std::sort(strings.begin(), strings.end());
    strings.erase(std::unique(strings.begin(), strings.end()), strings.end());
    ExceptSpec spec;
    spec.strings = std::move(strings);
    spec.max_tokens = e.except_count;
    spec.range = e.range;
    for (uint32_t i = 0; i < ir_.excepts.size(); ++i)
      if (ir_.excepts[i].strings == spec.strings && ir_.excepts[i].max_tokens == spec.max_tokens)
        return Symbol{Symbol::Kind::Except, i};
    // Every set's strings count against one total: the automata cost about
    // 3 KB per byte of strings.
    for (const std::string& str : spec.strings) except_bytes_ += str.size();
    if (except_bytes_ > options_.limits.max_except_bytes) {
      diags_.error(e.range, fmt::format("the strings of every except! in the grammar come to more than {} bytes "
                                        "(the limit)",
                                        options_.limits.max_except_bytes));
      return std::nullopt;
    }
    spec.automaton = std::make_shared<const ExceptAutomaton>(spec.strings);
    charge_memory(except_bytes(spec));
    count_states(spec.automaton->dfa().size(), e.range);
    ir_.excepts.push_back(std::move(spec));
    return Symbol{Symbol::Kind::Except, static_cast<uint32_t>(ir_.excepts.size() - 1)};
  }

  void check_analyses() {
    const std::string& start_name = ir_.nonterminals[ir_.start].name;
    for (uint32_t n = 0; n < ir_.nonterminals.size(); ++n) {
      const Nonterminal& nt = ir_.nonterminals[n];
      if (!nt.user_defined) continue;
      if (!ir_.productive[n]) {
        if (n == ir_.start)
          diags_.error(nt.range, fmt::format("the grammar's language is empty: the start rule '{}' "
                                             "has no finite derivation",
                                             nt.name));
        else
          diags_.error(nt.range, fmt::format("rule '{}' is unproductive: it can never finish (every "
                                             "alternative needs '{}' again, or a rule that does)",
                                             nt.name, nt.name));
        continue;
      }
      if (!ir_.reachable[n] && !used_in_except_.count(nt.name)) {
        diags_.warning(nt.range, fmt::format("rule '{}' is never used: it is not reachable from the "
                                             "start rule '{}'",
                                             nt.name, start_name));
        continue;
      }
      if (ir_.reachable[n] && !ir_.nonempty[n])
        diags_.warning(nt.range, fmt::format("rule '{}' only matches the empty string", nt.name));
    }
  }

  // Whether a symbol can match the empty text (after analyze()).
  bool nullable(Symbol s) const {
    switch (s.kind) {
      case Symbol::Kind::Nonterminal: return ir_.nullable[s.index];
      case Symbol::Kind::Terminal: return ir_.terminals[s.index].dfa.accepts_empty();
      case Symbol::Kind::AnyToken: return false;
      case Symbol::Kind::Except: return true;
    }
    return false;
  }

  // Two different pieces of except! text that can meet with nothing between
  // them (or the same one, with a token count) can be split at every byte
  // of the text: the matcher reads every split, and its work grows with the
  // text. (The same except! twice, without a count, is read once: Engine's
  // Head::no_restart.) A warning at the rule where they meet, once per rule.
  void warn_free_text_side_by_side() {
    const size_t specs = ir_.excepts.size(), n = ir_.nonterminals.size();
    if (specs < 1 || specs > 64) return;  // a bitset per rule; more is rare, and the warning is advice
    // Per nonterminal: the except! sets that can begin and end its text.
    std::vector<uint64_t> first(n, 0), last(n, 0);
    auto begins = [&](Symbol s) -> uint64_t {
      if (s.kind == Symbol::Kind::Except) return uint64_t{1} << s.index;
      return s.kind == Symbol::Kind::Nonterminal ? first[s.index] : 0;
    };
    auto ends = [&](Symbol s) -> uint64_t {
      if (s.kind == Symbol::Kind::Except) return uint64_t{1} << s.index;
      return s.kind == Symbol::Kind::Nonterminal ? last[s.index] : 0;
    };
    // Passes until nothing changes (bounded: an unfinished fixpoint only
    // leaves some warnings out).
    for (int pass = 0, changed = 1; changed && pass < 64; ++pass) {
      changed = 0;
      for (const Production& p : ir_.productions) {
        uint64_t f = 0, l = 0;
        for (size_t i = 0; i < p.rhs.size(); ++i) {
          f |= begins(p.rhs[i]);
          if (!nullable(p.rhs[i])) break;
        }
        for (size_t i = p.rhs.size(); i-- > 0;) {
          l |= ends(p.rhs[i]);
          if (!nullable(p.rhs[i])) break;
        }
        if ((first[p.lhs] | f) != first[p.lhs] || (last[p.lhs] | l) != last[p.lhs]) changed = 1;
        first[p.lhs] |= f;
        last[p.lhs] |= l;
      }
    }
    std::set<std::string> warned;
    for (const Production& p : ir_.productions) {
      if (!ir_.reachable[p.lhs]) continue;
      for (size_t i = 0; i < p.rhs.size(); ++i) {
        const uint64_t before = ends(p.rhs[i]);
        if (!before) continue;
        for (size_t j = i + 1; j < p.rhs.size(); ++j) {
          const uint64_t after = begins(p.rhs[j]);
          for (uint32_t a = 0; a < specs; ++a)
            for (uint32_t b = 0; b < specs; ++b) {
              if (!(before >> a & 1) || !(after >> b & 1)) continue;
              if (a == b && !ir_.excepts[a].max_tokens) continue;  // read once
              const Nonterminal& owner = ir_.nonterminals[p.lhs];
              const std::string rule = owner.name.substr(0, owner.name.find('#'));
              if (!warned.insert(rule).second) continue;
              diags_.warning(owner.range,
                             fmt::format("free text meets free text in rule '{}': {} can be followed directly by {}, "
                                         "and a matcher reads the text every way it can be split between them "
                                         "(masks get slower as the text grows, and a matcher may stop at its "
                                         "work limit); put a delimiter between them",
                                         rule, ir_.symbol_name({Symbol::Kind::Except, a}),
                                         ir_.symbol_name({Symbol::Kind::Except, b})));
            }
          if (!nullable(p.rhs[j])) break;
        }
      }
    }
  }

  // An alternative that is both left- and right-recursive (`e ::= e '+' e`,
  // `s ::= s s`) makes the grammar ambiguous: a text can be grouped in
  // exponentially many ways, every one of them is a reading the matcher
  // keeps, and its work grows with the text until the sequence's work
  // budget ends it (EngineLimits::max_work_per_byte). A warning at the rule,
  // once per rule.
  void warn_ambiguous_recursion() {
    std::set<uint32_t> warned;
    for (const Production& p : ir_.productions) {
      if (p.rhs.size() < 2 || !ir_.reachable[p.lhs] || warned.count(p.lhs)) continue;
      const Symbol self{Symbol::Kind::Nonterminal, p.lhs};
      // The first and the last place the rule itself can stand at an end of
      // the alternative (past nullable symbols); two different places.
      size_t first = p.rhs.size(), last = p.rhs.size();
      for (size_t i = 0; i < p.rhs.size(); ++i) {
        if (p.rhs[i] == self) {
          first = i;
          break;
        }
        if (!nullable(p.rhs[i])) break;
      }
      for (size_t i = p.rhs.size(); i-- > 0;) {
        if (p.rhs[i] == self) {
          last = i;
          break;
        }
        if (!nullable(p.rhs[i])) break;
      }
      if (first >= last || last == p.rhs.size()) continue;
      warned.insert(p.lhs);
      const Nonterminal& owner = ir_.nonterminals[p.lhs];
      const std::string rule = owner.name.substr(0, owner.name.find('#'));
      std::string alternative;
      for (Symbol s : p.rhs) alternative += " " + ir_.symbol_name(s);
      diags_.warning(owner.range,
                     fmt::format("rule '{}' is ambiguous: its alternative '{} ::={}' recurses on both sides, so a "
                                 "text can be grouped every way, and a matcher keeps every grouping (its work grows "
                                 "with the text until the sequence's work budget ends it); write the repetition "
                                 "with one side only, as in  {} ::= item ( op item )*",
                                 rule, owner.name, alternative, rule));
    }
  }

  const ast::Grammar& grammar_;
  const SourceFile& file_;
  const LowerOptions& options_;
  Diagnostics& diags_;
  GrammarIR ir_;
  std::map<std::string, uint32_t> rule_ids_;
  std::map<std::pair<Terminal::Kind, std::string>, uint32_t> terminal_ids_;
  std::map<uint32_t, uint32_t> helper_count_;
  std::set<std::string> used_in_except_;  // a rule named in except!(…) is used
  mutable size_t suggestions_made_ = 0;
  size_t total_states_ = 0;               // DFA states of every terminal so far
  bool stopped_ = false;                  // a grammar-wide limit was reached: lower nothing more
  size_t except_bytes_ = 0;               // bytes of every except! set's strings so far
};

}  // namespace

void analyze(GrammarIR& ir) {
  const size_t n = ir.nonterminals.size();
  ir.nullable.assign(n, false);
  ir.productive.assign(n, false);
  ir.nonempty.assign(n, false);
  ir.reachable.assign(n, false);
  ir.first_bytes.assign(n, {});

  // What each terminal contributes, computed once (not per visit).
  struct TerminalFacts {
    bool nullable, productive, nonempty;
    std::bitset<256> first;
  };
  std::vector<TerminalFacts> terminal_facts(ir.terminals.size());
  for (size_t t = 0; t < ir.terminals.size(); ++t) {
    const Dfa& dfa = ir.terminals[t].dfa;
    TerminalFacts& f = terminal_facts[t];
    f.nullable = dfa.accepts_empty();
    f.productive = !dfa.empty_language();
    f.nonempty = dfa.accepts_nonempty();
    const std::vector<bool> bytes = dfa.first_bytes();
    for (int b = 0; b < 256; ++b) f.first[b] = bytes[b];
  }
  std::vector<std::bitset<256>> except_first(ir.excepts.size());
  for (size_t e = 0; e < ir.excepts.size(); ++e) {
    except_first[e].set();
    for (const std::string& str : ir.excepts[e].strings)
      if (str.size() == 1) except_first[e][static_cast<uint8_t>(str[0])] = false;
  }
  auto symbol_nullable = [&](Symbol s) {
    switch (s.kind) {
      case Symbol::Kind::Nonterminal: return bool(ir.nullable[s.index]);
      case Symbol::Kind::Terminal: return terminal_facts[s.index].nullable;
      case Symbol::Kind::AnyToken: return false;
      case Symbol::Kind::Except: return true;
    }
    return false;
  };
  auto symbol_productive = [&](Symbol s) {
    switch (s.kind) {
      case Symbol::Kind::Nonterminal: return bool(ir.productive[s.index]);
      case Symbol::Kind::Terminal: return terminal_facts[s.index].productive;
      default: return true;
    }
  };
  auto symbol_nonempty = [&](Symbol s) {
    switch (s.kind) {
      case Symbol::Kind::Nonterminal: return bool(ir.nonempty[s.index]);
      case Symbol::Kind::Terminal: return terminal_facts[s.index].nonempty;
      default: return true;
    }
  };
  auto symbol_first = [&](Symbol s) {
    switch (s.kind) {
      case Symbol::Kind::Nonterminal: return ir.first_bytes[s.index];
      case Symbol::Kind::Terminal: return terminal_facts[s.index].first;
      case Symbol::Kind::AnyToken: return std::bitset<256>().set();
      case Symbol::Kind::Except: return except_first[s.index];
    }
    return std::bitset<256>();
  };

  // A worklist: a production is looked at again only when a nonterminal
  // on its right side changed (a fixpoint by passes was quadratic on long
  // chains of rules written in the wrong order).
  std::vector<std::vector<uint32_t>> used_in(n);
  for (uint32_t i = 0; i < ir.productions.size(); ++i)
    for (Symbol s : ir.productions[i].rhs)
      if (s.kind == Symbol::Kind::Nonterminal && (used_in[s.index].empty() || used_in[s.index].back() != i))
        used_in[s.index].push_back(i);
  std::vector<uint32_t> work(ir.productions.size());
  std::vector<bool> queued(ir.productions.size(), true);
  for (uint32_t i = 0; i < work.size(); ++i) work[i] = static_cast<uint32_t>(work.size() - 1 - i);
  while (!work.empty()) {
    const uint32_t index = work.back();
    work.pop_back();
    queued[index] = false;
    const Production& p = ir.productions[index];
    bool all_nullable = true, all_productive = true, some_nonempty = false;
    std::bitset<256> first;
    bool prefix_nullable = true;
    for (Symbol s : p.rhs) {
      all_nullable = all_nullable && symbol_nullable(s);
      all_productive = all_productive && symbol_productive(s);
      some_nonempty = some_nonempty || symbol_nonempty(s);
      if (prefix_nullable) first |= symbol_first(s);
      prefix_nullable = prefix_nullable && symbol_nullable(s);
    }
    bool changed = false;
    auto update = [&](std::vector<bool>& v, bool value) {
      if (value && !v[p.lhs]) v[p.lhs] = true, changed = true;
    };
    update(ir.nullable, all_nullable);
    update(ir.productive, all_productive);
    update(ir.nonempty, all_productive && some_nonempty);
    if ((ir.first_bytes[p.lhs] | first) != ir.first_bytes[p.lhs]) {
      ir.first_bytes[p.lhs] |= first;
      changed = true;
    }
    if (!changed) continue;
    for (uint32_t user : used_in[p.lhs])
      if (!queued[user]) queued[user] = true, work.push_back(user);
  }
  std::vector<uint32_t> stack{ir.start};
  if (n) ir.reachable[ir.start] = true;
  while (!stack.empty()) {
    uint32_t a = stack.back();
    stack.pop_back();
    for (uint32_t p : ir.nonterminals[a].productions)
      for (Symbol s : ir.productions[p].rhs)
        if (s.kind == Symbol::Kind::Nonterminal && !ir.reachable[s.index])
          ir.reachable[s.index] = true, stack.push_back(s.index);
  }
}

std::optional<GrammarIR> lower(const ast::Grammar& grammar, const SourceFile& file,
                               const LowerOptions& options, Diagnostics& diags) {
  return Lowering(grammar, file, options, diags).run();
}

}  // namespace cgram::ir

#include "grammar_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "grammar_ir.h"

namespace cgram::test::random {
namespace {

using Kind = Expr::Kind;

// The letters a grammar draws its literals, regexes and except! strings
// from: ASCII, whitespace, and characters of two, three and four bytes.
const std::vector<std::string> kLetterPool = {"a", "b", "c", "x", "y", "z", "1", "-", " ", "\n",
                                              "é", "λ", "Ā", "文", "😀"};
// Class ranges, several of them beyond ASCII (and one beyond the BMP).
const std::vector<std::string> kClassRanges = {"a-c", "x-z", "0-9", "à-ö", "α-ω", "Ā-ž", "一-鿿", "😀-🙏", "\\d", "\\w", "\\s"};

struct Weights {
  int literal = 30, regex = 10, empty = 5, ref = 20, except = 5, any = 2;
  int sequence = 8, choice = 8, group = 3, optional = 5, repeat = 3, quantified = 10;
};

Expr leaf(Kind kind, std::string text = {}) {
  Expr e;
  e.kind = kind;
  e.text = std::move(text);
  return e;
}

Expr wrap(Kind kind, Expr inner, std::string text = {}) {
  Expr e = leaf(kind, std::move(text));
  e.items.push_back(std::move(inner));
  return e;
}

Expr sequence(std::vector<Expr> items) {
  Expr e = leaf(Kind::Sequence);
  e.items = std::move(items);
  return e;
}

Expr ref(uint32_t rule) {
  Expr e = leaf(Kind::Ref);
  e.rule = rule;
  return e;
}

class Builder {
 public:
  explicit Builder(uint64_t seed) : rng_(seed) {
    std::vector<std::string> pool = kLetterPool;
    std::shuffle(pool.begin(), pool.end(), rng_);
    letters_.assign(pool.begin(), pool.begin() + static_cast<long>(pick(3, 5)));
  }

  RandomGrammar build(std::string_view shape) {
    g_.shape = std::string(shape);
    if (shape == "right-nullable") right_nullable();
    else if (shape == "dangling-else") dangling_else();
    else if (shape == "hidden-left") hidden_left();
    else if (shape == "left") left();
    else if (shape == "right") right();
    else if (shape == "middle") middle();
    else if (shape == "mutual") mutual();
    else if (shape == "unit-cycle") unit_cycle();
    else if (shape == "ambiguous") ambiguous();
    else if (shape == "nullable-ends") nullable_ends();
    else if (shape == "except") except_heavy();
    else if (shape == "any") any_heavy();
    else if (shape == "repetition") repetition_heavy();
    else if (shape == "regex") regex_heavy();
    else random_rules();
    fill_extra_rules();
    return std::move(g_);
  }

 private:
  size_t pick(size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng_); }
  bool chance(int percent) { return static_cast<int>(pick(0, 99)) < percent; }
  const std::string& letter() { return letters_[pick(0, letters_.size() - 1)]; }

  uint32_t add_rule() {
    Rule r;
    r.name = g_.rules.empty() ? "start" : fmt::format("r{}", g_.rules.size());
    g_.rules.push_back(std::move(r));
    return static_cast<uint32_t>(g_.rules.size() - 1);
  }
  void alt(uint32_t rule, std::vector<Expr> items) { g_.rules[rule].alternatives.push_back(sequence(std::move(items))); }

  // Core rules come first; a few extra rules follow, which fillers may use
  // (only those after the core, so that base cases stay productive).
  void reserve_extras() {
    extras_from_ = static_cast<uint32_t>(g_.rules.size());
    const size_t extras = pick(0, 2);
    for (size_t i = 0; i < extras; ++i) add_rule();
  }
  void fill_extra_rules() {
    for (uint32_t r = extras_from_; r < g_.rules.size(); ++r) {
      if (g_.rules[r].literal_set || !g_.rules[r].alternatives.empty()) continue;
      alt(r, {expr(2, r + 1)});
      const size_t more = pick(0, 2);
      for (size_t i = 0; i < more; ++i) alt(r, {expr(2, 0)});
    }
  }

  std::string literal_text() {
    std::string s = letter();
    if (chance(35)) s += letter();
    if (chance(10)) s += letter();
    return s;
  }

  // A small expression for the shapes' slots; it refers only to extra rules.
  Expr filler(int depth = 1) { return expr(depth, extras_from_); }
  Expr terminal_filler() { return chance(75) ? leaf(Kind::Literal, literal_text()) : leaf(Kind::Regex, regex(1)); }
  Expr nullable_filler() {
    switch (pick(0, 4)) {
      case 0: return wrap(Kind::Quantified, terminal_filler(), "?");
      case 1: return wrap(Kind::Quantified, terminal_filler(), "*");
      case 2: return wrap(Kind::Optional, filler());
      case 3: return leaf(Kind::Literal, "");
      default: return wrap(Kind::Repeat, terminal_filler());
    }
  }

  // Any expression; references only to rules >= min_ref.
  Expr expr(int depth, uint32_t min_ref) {
    const Weights& w = weights_;
    const bool can_ref = min_ref < g_.rules.size();
    const int composite = depth > 0 ? 1 : 0;
    const std::vector<int> weights = {w.literal, w.regex, w.empty, can_ref ? w.ref : 0, w.except, w.any,
                                      composite * w.sequence, composite * w.choice, composite * w.group,
                                      composite * w.optional, composite * w.repeat, composite * w.quantified};
    std::discrete_distribution<int> d(weights.begin(), weights.end());
    switch (d(rng_)) {
      case 0: return leaf(Kind::Literal, literal_text());
      case 1: return leaf(Kind::Regex, regex(2));
      case 2: return leaf(Kind::Literal, "");
      case 3: return ref(static_cast<uint32_t>(pick(min_ref, g_.rules.size() - 1)));
      case 4: return except();
      case 5: return leaf(Kind::Any);
      case 6: {
        std::vector<Expr> items;
        const size_t n = pick(2, 3);
        for (size_t i = 0; i < n; ++i) items.push_back(expr(depth - 1, min_ref));
        return sequence(std::move(items));
      }
      case 7: {
        Expr e = leaf(Kind::Choice);
        const size_t n = pick(2, 3);
        for (size_t i = 0; i < n; ++i) e.items.push_back(expr(depth - 1, min_ref));
        return e;
      }
      case 8: return wrap(Kind::Group, expr(depth - 1, min_ref));
      case 9: return wrap(Kind::Optional, expr(depth - 1, min_ref));
      case 10: return wrap(Kind::Repeat, expr(depth - 1, min_ref));
      default: return wrap(Kind::Quantified, expr(depth - 1, min_ref), quantifier());
    }
  }

  std::string quantifier() {
    static const std::vector<std::string> common = {"?", "*", "+"};
    if (chance(65)) return common[pick(0, 2)];
    const size_t n = pick(0, 3), m = n + pick(0, 2);
    switch (pick(0, 3)) {
      case 0: return fmt::format("{{{}}}", std::max<size_t>(n, 1));
      case 1: return fmt::format("{{{},}}", n);
      case 2: return fmt::format("{{{},{}}}", n, std::max<size_t>(m, 1));
      default: return fmt::format("{{,{}}}", std::max<size_t>(m, 1));
    }
  }

  Expr except() {
    Expr e = leaf(Kind::Except);
    if (chance(20)) {
      // S named by a rule of literals (made here, after the others).
      const uint32_t r = add_rule();
      g_.rules[r].literal_set = true;
      const size_t n = pick(1, 2);
      for (size_t i = 0; i < n; ++i) alt(r, {leaf(Kind::Literal, literal_text())});
      e.except_names_rule = true;
      e.rule = r;
    } else {
      const size_t n = pick(1, 2);
      for (size_t i = 0; i < n; ++i) e.strings.push_back(literal_text());
      std::sort(e.strings.begin(), e.strings.end());
      e.strings.erase(std::unique(e.strings.begin(), e.strings.end()), e.strings.end());
    }
    if (chance(25)) e.count = static_cast<uint32_t>(pick(1, 3));
    return e;
  }

  // Regex source text (no quotes in it: it goes between #'…').
  std::string regex_char(const std::string& c, bool in_class) {
    if (c == "\n") return "\\n";
    if (c == "-" && in_class) return "\\-";
    return c;
  }
  std::string regex(int depth) {
    std::string out = regex_branch(depth);
    if (depth > 0 && chance(20)) out += "|" + regex_branch(depth - 1);
    return out;
  }
  std::string regex_branch(int depth) {
    std::string out;
    const size_t n = pick(1, 3);
    for (size_t i = 0; i < n; ++i) out += regex_piece(depth);
    return out;
  }
  std::string regex_piece(int depth) {
    std::string atom;
    switch (pick(0, 9)) {
      case 0: case 1: case 2: atom = regex_char(letter(), false); break;
      case 3: case 4: {
        atom = chance(25) ? "[^" : "[";
        const size_t n = pick(1, 3);
        for (size_t i = 0; i < n; ++i) atom += chance(50) ? kClassRanges[pick(0, kClassRanges.size() - 1)] : regex_char(letter(), true);
        atom += "]";
        break;
      }
      case 5: atom = "."; break;
      case 6: {
        static const std::vector<std::string> escapes = {"\\d", "\\w", "\\s", "\\S", "\\D"};
        atom = escapes[pick(0, escapes.size() - 1)];
        break;
      }
      default:
        atom = depth > 0 ? (chance(50) ? "(" : "(?:") + regex(depth - 1) + ")" : regex_char(letter(), false);
        break;
    }
    static const std::vector<std::string> quantifiers = {"", "", "", "*", "+", "?", "{2}", "{1,3}", "{0}", "{0,2}", "{2,}"};
    return atom + quantifiers[pick(0, quantifiers.size() - 1)];
  }

  // The shapes. Rule 0 is start; t, u: terminals; base: the way out.
  void right_nullable() {
    const uint32_t x = add_rule();
    reserve_extras();
    alt(x, {filler()});
    alt(x, {terminal_filler(), ref(x), nullable_filler()});
    if (chance(40)) alt(x, {leaf(Kind::Literal, "")});
  }
  void dangling_else() {
    const uint32_t x = add_rule();
    reserve_extras();
    const std::string k_if = literal_text(), k_else = literal_text();
    alt(x, {filler()});
    alt(x, {leaf(Kind::Literal, k_if), ref(x), wrap(Kind::Optional, sequence({leaf(Kind::Literal, k_else), ref(x)}))});
    if (chance(60)) alt(x, {leaf(Kind::Literal, literal_text()), wrap(Kind::Quantified, ref(x), "*"), leaf(Kind::Literal, literal_text())});
  }
  void hidden_left() {
    const uint32_t x = add_rule(), n = add_rule();
    reserve_extras();
    alt(x, {filler()});
    alt(x, {ref(n), ref(x), terminal_filler()});
    alt(n, {leaf(Kind::Literal, "")});
    alt(n, {terminal_filler()});
    if (chance(40)) alt(n, {ref(n), nullable_filler()});
  }
  void left() {
    const uint32_t x = add_rule();
    reserve_extras();
    alt(x, {filler()});
    alt(x, {ref(x), terminal_filler()});
    if (chance(40)) alt(x, {ref(x), filler()});
  }
  void right() {
    const uint32_t x = add_rule();
    reserve_extras();
    alt(x, {filler()});
    alt(x, {terminal_filler(), ref(x)});
    if (chance(40)) alt(x, {filler(), ref(x)});
  }
  void middle() {
    const uint32_t x = add_rule();
    reserve_extras();
    alt(x, {filler()});
    alt(x, {terminal_filler(), ref(x), terminal_filler()});
    if (chance(40)) alt(x, {filler(), ref(x), filler()});
  }
  void mutual() {
    const uint32_t x = add_rule(), y = add_rule();
    reserve_extras();
    alt(x, {filler()});
    alt(x, {terminal_filler(), ref(y)});
    alt(y, {filler()});
    alt(y, {ref(x), terminal_filler()});
    if (chance(40)) alt(y, {leaf(Kind::Literal, "")});
  }
  void unit_cycle() {
    const uint32_t x = add_rule(), y = add_rule(), z = add_rule();
    reserve_extras();
    alt(x, {filler()});
    alt(x, {ref(y)});
    alt(y, {filler()});
    alt(y, {ref(x)});
    alt(y, {ref(z)});
    alt(z, {filler()});
    alt(z, {ref(x), nullable_filler()});
    if (chance(50)) alt(z, {ref(y)});
  }
  void ambiguous() {
    const uint32_t x = add_rule();
    reserve_extras();
    alt(x, {filler()});
    alt(x, {ref(x), ref(x)});
    if (chance(60)) alt(x, {ref(x), terminal_filler(), ref(x)});
    if (chance(50)) alt(x, {leaf(Kind::Literal, "")});
    if (chance(30)) alt(x, {terminal_filler()});
  }
  void nullable_ends() {
    const uint32_t x = add_rule(), n = add_rule();
    reserve_extras();
    alt(x, {ref(n), filler(), ref(n)});
    alt(x, {ref(n), ref(x), nullable_filler()});
    alt(n, {leaf(Kind::Literal, "")});
    alt(n, {terminal_filler()});
    if (chance(40)) alt(n, {ref(n), ref(n)});
  }
  void except_heavy() {
    weights_.except = 25;
    weights_.empty = 10;
    random_rules();
  }
  void any_heavy() {
    weights_.any = 15;
    random_rules();
  }
  void repetition_heavy() {
    weights_.quantified = 30;
    weights_.repeat = 8;
    random_rules();
  }
  void regex_heavy() {
    weights_.regex = 35;
    random_rules();
  }
  void random_rules() {
    const size_t count = pick(1, 4);
    for (size_t i = 0; i < count; ++i) add_rule();
    reserve_extras();
    for (uint32_t r = 0; r < count; ++r) {
      alt(r, {expr(2, r + 1)});
      const size_t more = pick(0, 2);
      for (size_t i = 0; i < more; ++i) alt(r, {expr(2, 0)});
    }
  }

  std::mt19937_64 rng_;
  std::vector<std::string> letters_;
  Weights weights_;
  RandomGrammar g_;
  uint32_t extras_from_ = 0;
};

// Rendering.

bool is_primary(const Expr& e) { return e.kind != Kind::Sequence && e.kind != Kind::Choice; }

void render(const RandomGrammar& g, const Expr& e, std::string& out);

void render_primary(const RandomGrammar& g, const Expr& e, std::string& out) {
  if (is_primary(e)) return render(g, e, out);
  out += "( ";
  render(g, e, out);
  out += " )";
}

void render(const RandomGrammar& g, const Expr& e, std::string& out) {
  switch (e.kind) {
    case Kind::Literal: out += ir::quoted_bytes(e.text); break;
    case Kind::Regex: out += "#'" + e.text + "'"; break;
    case Kind::Ref: out += g.rules[e.rule].name; break;
    case Kind::Sequence:
      if (e.items.empty()) out += "''";
      for (size_t i = 0; i < e.items.size(); ++i) {
        if (i) out += " ";
        render_primary(g, e.items[i], out);
      }
      break;
    case Kind::Choice:
      for (size_t i = 0; i < e.items.size(); ++i) {
        if (i) out += " | ";
        render(g, e.items[i], out);
      }
      break;
    case Kind::Group: out += "( "; render(g, e.items[0], out); out += " )"; break;
    case Kind::Optional: out += "[ "; render(g, e.items[0], out); out += " ]"; break;
    case Kind::Repeat: out += "{ "; render(g, e.items[0], out); out += " }"; break;
    case Kind::Quantified: render_primary(g, e.items[0], out); out += e.text; break;
    case Kind::Any: out += "any!"; break;
    case Kind::Except: {
      out += "except!(";
      if (e.except_names_rule) {
        out += g.rules[e.rule].name;
      } else if (e.strings.size() == 1) {
        out += ir::quoted_bytes(e.strings[0]);
      } else {
        out += "(";
        for (size_t i = 0; i < e.strings.size(); ++i) out += (i ? " | " : "") + ir::quoted_bytes(e.strings[i]);
        out += ")";
      }
      if (e.count) out += fmt::format(", {}", e.count);
      out += ")";
      break;
    }
  }
}

size_t count_nodes(const Expr& e) {
  size_t n = 1;
  for (const Expr& c : e.items) n += count_nodes(c);
  return n;
}

// Simplifications.

// Calls f on every node of every alternative, in pre-order, with its number.
void visit(RandomGrammar& g, const std::function<void(Expr&, size_t)>& f) {
  size_t counter = 0;
  std::function<void(Expr&)> go = [&](Expr& e) {
    f(e, counter++);
    for (Expr& c : e.items) go(c);
  };
  for (Rule& r : g.rules)
    for (Expr& a : r.alternatives) go(a);
}

// The grammar without rule r: references to it become '' (an except! that
// names it loses its argument and becomes '' too), later rules move down.
bool remove_rule(RandomGrammar& g, uint32_t r) {
  std::function<void(Expr&)> fix = [&](Expr& e) {
    for (Expr& c : e.items) fix(c);
    const bool names = e.kind == Kind::Ref || (e.kind == Kind::Except && e.except_names_rule);
    if (!names) return;
    if (e.rule == r) e = leaf(Kind::Literal, "");
    else if (e.rule > r) --e.rule;
  };
  g.rules.erase(g.rules.begin() + r);
  for (Rule& rule : g.rules)
    for (Expr& a : rule.alternatives) fix(a);
  for (uint32_t i = 1; i < g.rules.size(); ++i) g.rules[i].name = fmt::format("r{}", i);
  return true;
}

// Drops the last character (UTF-8 aware) of a literal.
std::string without_last_character(const std::string& s) {
  size_t end = s.size();
  while (end > 0 && (static_cast<unsigned char>(s[end - 1]) & 0xC0) == 0x80) --end;
  return s.substr(0, end > 0 ? end - 1 : 0);
}

}  // namespace


std::vector<std::string_view> shape_names() {
  return {"right-nullable", "dangling-else", "hidden-left", "left",   "right",      "middle",
          "mutual",         "unit-cycle",    "ambiguous",   "nullable-ends", "except", "any",
          "repetition",     "regex",         "random"};
}

RandomGrammar generate_grammar(uint64_t seed) {
  const auto shapes = shape_names();
  // Another stream than the one that picks the shape: neighbouring seeds
  // differ in everything.
  return Builder(seed * 0x9E3779B97F4A7C15ull + 1).build(shapes[seed % shapes.size()]);
}

std::string RandomGrammar::source() const {
  std::string out;
  for (const Rule& r : rules) {
    out += r.name + " ::= ";
    for (size_t i = 0; i < r.alternatives.size(); ++i) {
      if (i) out += " | ";
      render(*this, r.alternatives[i], out);
    }
    out += " ;\n";
  }
  return out;
}

size_t RandomGrammar::size() const {
  size_t n = rules.size();
  for (const Rule& r : rules)
    for (const Expr& a : r.alternatives) n += count_nodes(a);
  return n;
}

std::vector<RandomGrammar> simplifications(const RandomGrammar& g) {
  std::vector<RandomGrammar> out;
  // Whole rules, then alternatives.
  for (uint32_t r = 1; r < g.rules.size(); ++r) {
    RandomGrammar s = g;
    remove_rule(s, r);
    out.push_back(std::move(s));
  }
  for (uint32_t r = 0; r < g.rules.size(); ++r)
    for (size_t a = 0; g.rules[r].alternatives.size() > 1 && a < g.rules[r].alternatives.size(); ++a) {
      RandomGrammar s = g;
      s.rules[r].alternatives.erase(s.rules[r].alternatives.begin() + static_cast<long>(a));
      out.push_back(std::move(s));
    }
  // Nodes: each edit applied to the k-th node of a copy.
  size_t nodes = 0;
  {
    RandomGrammar copy = g;
    visit(copy, [&](Expr&, size_t) { ++nodes; });
  }
  auto edit = [&](size_t k, const std::function<bool(Expr&)>& f) {
    RandomGrammar s = g;
    bool changed = false;
    visit(s, [&](Expr& e, size_t i) {
      if (i == k) changed = f(e);
    });
    if (changed) out.push_back(std::move(s));
  };
  for (size_t k = 0; k < nodes; ++k) {
    // An item of a sequence or choice left out.
    for (size_t drop = 0; drop < 4; ++drop)
      edit(k, [&](Expr& e) {
        if ((e.kind != Kind::Sequence && e.kind != Kind::Choice) || drop >= e.items.size()) return false;
        if (e.kind == Kind::Choice && e.items.size() < 2) return false;
        e.items.erase(e.items.begin() + static_cast<long>(drop));
        return true;
      });
    // A composite replaced by its first or last part.
    for (int which = 0; which < 2; ++which)
      edit(k, [&](Expr& e) {
        if (e.items.empty()) return false;
        Expr part = which == 0 ? e.items.front() : e.items.back();
        e = std::move(part);
        return true;
      });
    edit(k, [](Expr& e) {
      if (e.kind == Kind::Literal && e.text.empty()) return false;
      if (e.kind == Kind::Sequence && e.items.empty()) return false;
      e = leaf(Kind::Literal, "");
      return true;
    });
    edit(k, [](Expr& e) {
      if (e.kind != Kind::Literal || e.text.empty()) return false;
      const std::string shorter = without_last_character(e.text);
      if (shorter.empty()) return false;
      e.text = shorter;
      return true;
    });
    edit(k, [](Expr& e) {
      if (e.kind != Kind::Quantified || e.text == "?") return false;
      e.text = e.text == "*" ? "?" : "*";
      return true;
    });
    edit(k, [](Expr& e) {
      if (e.kind != Kind::Except || (e.count == 0 && e.strings.size() < 2)) return false;
      if (e.count) e.count = 0;
      else e.strings.resize(1);
      return true;
    });
  }
  return out;
}

}  // namespace cgram::test::random

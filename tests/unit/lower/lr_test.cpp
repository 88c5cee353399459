// The LALR(1) table (lower/lr.h) on its own, for grammars small enough to
// build the automaton by hand: states, shifts, gotos, (right-nulled)
// reductions, the conflicts GLR keeps, accept, the limits, and saving.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "binary_io.h"
#include "helpers.h"
#include "lexical.h"
#include "lr.h"

using namespace cgram;
using namespace cgram::test;
using ir::LrReduction;
using ir::LrTable;

namespace {

// A grammar, its skeleton and its table (which points into the skeleton).
struct Built {
  std::shared_ptr<const Grammar> g;
  std::unique_ptr<ir::LexicalGrammar> lex;
  std::unique_ptr<LrTable> table;

  uint32_t t(std::string_view name) const {
    for (uint32_t i = 0; i < lex->terminals.size(); ++i)
      if (lex->terminals[i].name == name) return i;
    FAIL("no terminal " << name << " in\n" << lex->dump());
    return 0;
  }
  uint32_t nt(std::string_view name) const {
    for (uint32_t i = 0; i < lex->nonterminal_names.size(); ++i)
      if (lex->nonterminal_names[i] == name) return i;
    FAIL("no nonterminal " << name);
    return 0;
  }
  // The production with this left-hand side and right-hand side (by names).
  uint32_t production(std::string_view lhs, std::vector<std::string> rhs) const {
    for (uint32_t p = 0; p < lex->productions.size(); ++p) {
      const auto& prod = lex->productions[p];
      if (lex->nonterminal_names[prod.lhs] != lhs || prod.rhs.size() != rhs.size()) continue;
      bool same = true;
      for (size_t i = 0; i < rhs.size() && same; ++i) {
        const ir::SkeletonSymbol s = prod.rhs[i];
        same = (s.terminal ? lex->terminals[s.index].name : lex->nonterminal_names[s.index]) == rhs[i];
      }
      if (same) return p;
    }
    FAIL("no production for " << lhs << " in\n" << lex->dump());
    return 0;
  }
  // The reductions of a cell, sorted (the table keeps them sorted too).
  std::vector<LrReduction> reduce(uint32_t state, uint32_t terminal) const {
    std::vector<LrReduction> r = table->reductions(state, terminal);
    CHECK(std::is_sorted(r.begin(), r.end()));
    return r;
  }
};

Built build(std::string_view source, const ir::LrLimits& limits = {}) {
  Built b;
  b.g = grammar(source);
  b.lex = std::make_unique<ir::LexicalGrammar>(ir::lower_lexical(b.g->ir()));
  b.table = std::make_unique<LrTable>(*b.lex, limits);
  return b;
}

bool accepts_here(const Built& b, uint32_t state) {
  const auto r = b.reduce(state, b.table->end_marker());
  return std::any_of(r.begin(), r.end(), [](const LrReduction& x) { return x.production == 0; });
}

// Every lookup of two tables over the same grammar agrees.
void expect_same_lookups(const LrTable& a, const LrTable& b) {
  REQUIRE(a.state_count() == b.state_count());
  REQUIRE(a.terminal_count() == b.terminal_count());
  REQUIRE(a.nonterminal_count() == b.nonterminal_count());
  CHECK(a.conflict_count() == b.conflict_count());
  for (uint32_t s = 0; s < a.state_count(); ++s) {
    INFO("state " << s);
    CHECK(a.terminals_with_actions(s) == b.terminals_with_actions(s));
    for (uint32_t t = 0; t < a.terminal_count(); ++t) CHECK(a.shift(s, t) == b.shift(s, t));
    for (uint32_t t = 0; t <= a.terminal_count(); ++t) CHECK(a.reductions(s, t) == b.reductions(s, t));
    for (uint32_t n = 0; n < a.nonterminal_count(); ++n) CHECK(a.go(s, n) == b.go(s, n));
  }
}

}  // namespace

TEST_CASE("LR: S -> a S b | ε, five states by hand", "[lr-unit]") {
  Built b = build("start ::= 'a' start 'b' | '' ;");
  INFO(b.lex->dump());
  REQUIRE(b.table->error().empty());
  const LrTable& t = *b.table;
  const uint32_t a = b.t("'a'"), bb = b.t("'b'"), S = b.nt("start"), end = t.end_marker();
  const uint32_t p_asb = b.production("start", {"'a'", "start", "'b'"}), p_eps = b.production("start", {});
  CHECK(t.terminal_count() == 2);
  CHECK(end == 2);
  // I0 = {S'->•S, S->•aSb, S->•}, I1 = {S'->S•}, I2 = {S->a•Sb, ...},
  // I3 = {S->aS•b}, I4 = {S->aSb•}.
  CHECK(t.state_count() == 5);
  CHECK(t.conflict_count() == 0);
  const uint32_t i1 = t.go(0, S), i2 = t.shift(0, a);
  REQUIRE(i1 != LrTable::kNone);
  REQUIRE(i2 != LrTable::kNone);
  CHECK(t.shift(0, bb) == LrTable::kNone);
  CHECK(t.shift(i2, a) == i2);  // nesting stays in I2
  const uint32_t i3 = t.go(i2, S);
  REQUIRE(i3 != LrTable::kNone);
  const uint32_t i4 = t.shift(i3, bb);
  REQUIRE(i4 != LrTable::kNone);
  CHECK(std::set<uint32_t>{0, i1, i2, i3, i4}.size() == 5);  // all distinct
  CHECK(t.shift(i3, a) == LrTable::kNone);
  // Accept: S' -> S• on the end marker, and right-nulled in I0 (S is
  // nullable: the empty text is a sentence).
  CHECK(b.reduce(i1, end) == std::vector<LrReduction>{{0, 1}});
  CHECK(b.reduce(0, end) == std::vector<LrReduction>{{0, 0}, {p_eps, 0}});
  CHECK(accepts_here(b, i1));
  CHECK_FALSE(accepts_here(b, i2));
  // S -> • reduces where S is followed by b (inside) or the end (outside).
  CHECK(b.reduce(i2, bb) == std::vector<LrReduction>{{p_eps, 0}});
  CHECK(b.reduce(i2, end).empty());
  CHECK(b.reduce(0, bb).empty());
  CHECK(b.reduce(i4, bb) == std::vector<LrReduction>{{p_asb, 3}});
  CHECK(b.reduce(i4, end) == std::vector<LrReduction>{{p_asb, 3}});
  CHECK(b.reduce(i3, bb).empty());
  // Terminals with actions: shifts and reductions on terminals (not the end marker).
  CHECK(t.terminals_with_actions(0) == std::vector<uint32_t>{a});
  CHECK(t.terminals_with_actions(i2) == std::vector<uint32_t>{a, bb});
  CHECK(t.terminals_with_actions(i1).empty());
  CHECK(t.shifts(i3) == std::vector<std::pair<uint32_t, uint32_t>>{{bb, i4}});
  CHECK(t.gotos(0) == std::vector<std::pair<uint32_t, uint32_t>>{{S, i1}});
  CHECK(t.production(p_asb).rhs.size() == 3);
}

TEST_CASE("LR: the ambiguous E -> E + E | n keeps its shift/reduce conflict", "[lr-unit]") {
  Built b = build("start ::= e ; e ::= e '+' e | 'n' ;");
  INFO(b.lex->dump());
  REQUIRE(b.table->error().empty());
  const LrTable& t = *b.table;
  const uint32_t plus = b.t("'+'"), n = b.t("'n'"), E = b.nt("e"), end = t.end_marker();
  const uint32_t p_sum = b.production("e", {"e", "'+'", "e"}), p_n = b.production("e", {"'n'"});
  // I0, I1 = {S'->start•}, I2 = {start->e•, e->e•+e}, I3 = {e->n•},
  // I4 = {e->e+•e, ...}, I5 = {e->e+e•, e->e•+e}.
  CHECK(t.state_count() == 6);
  CHECK(t.conflict_count() == 1);
  const uint32_t i2 = t.go(0, E), i3 = t.shift(0, n);
  REQUIRE(i2 != LrTable::kNone);
  REQUIRE(i3 != LrTable::kNone);
  const uint32_t i4 = t.shift(i2, plus);
  REQUIRE(i4 != LrTable::kNone);
  CHECK(t.shift(i4, n) == i3);
  const uint32_t i5 = t.go(i4, E);
  REQUIRE(i5 != LrTable::kNone);
  // The conflict: in I5 on '+', shift and reduce both (GLR runs both).
  CHECK(t.shift(i5, plus) == i4);
  CHECK(b.reduce(i5, plus) == std::vector<LrReduction>{{p_sum, 3}});
  CHECK(b.reduce(i5, end) == std::vector<LrReduction>{{p_sum, 3}});
  CHECK(b.reduce(i3, plus) == std::vector<LrReduction>{{p_n, 1}});
  CHECK(b.reduce(i3, n).empty());
  // No conflict in I2: start -> e• only on the end marker.
  CHECK(b.reduce(i2, plus).empty());
  CHECK(b.reduce(i2, end) == std::vector<LrReduction>{{b.production("start", {"e"}), 1}});
  // The unambiguous spelling has none.
  Built plain = build("start ::= e ; e ::= e '+' t | t ; t ::= 'n' | '(' e ')' ;");
  REQUIRE(plain.table->error().empty());
  CHECK(plain.table->conflict_count() == 0);
}

TEST_CASE("LR: the dangling else, one conflict on 'e' and a right-nulled reduction", "[lr-unit]") {
  Built b = build("start ::= 'i' start tail | 'x' ; tail ::= 'e' start | '' ;");
  INFO(b.lex->dump());
  REQUIRE(b.table->error().empty());
  const LrTable& t = *b.table;
  const uint32_t i = b.t("'i'"), e = b.t("'e'"), x = b.t("'x'"), S = b.nt("start"), opt = b.nt("tail");
  const uint32_t end = t.end_marker();
  const uint32_t p_if = b.production("start", {"'i'", "start", "tail"}), p_none = b.production("tail", {});
  // With O = tail: I0, I1 = {S'->S•}, I2 = {S->i•S O}, I3 = {S->x•},
  // I4 = {S->i S•O, O->•, O->•e S}, I5 = {S->i S O•}, I6 = {O->e•S}, I7 = {O->e S•}.
  CHECK(t.state_count() == 8);
  CHECK(t.conflict_count() == 1);
  const uint32_t i2 = t.shift(0, i);
  REQUIRE(i2 != LrTable::kNone);
  const uint32_t i4 = t.go(i2, S);
  REQUIRE(i4 != LrTable::kNone);
  CHECK(t.shift(i2, i) == i2);
  CHECK(t.shift(i2, x) == t.shift(0, x));
  // In I4 on 'e': shift the else, or end the inner if (O -> ε, and S -> i S•O
  // right-nulled by two symbols).
  CHECK(t.shift(i4, e) != LrTable::kNone);
  std::vector<LrReduction> ending{{p_if, 2}, {p_none, 0}};
  std::sort(ending.begin(), ending.end());
  CHECK(b.reduce(i4, e) == ending);
  CHECK(b.reduce(i4, end) == ending);
  CHECK(t.go(i4, opt) != LrTable::kNone);
  CHECK(b.reduce(i4, x).empty());
}

TEST_CASE("LR: a grammar over its limits is refused with the documented message", "[lr-unit]") {
  const char* source = "start ::= 'a' start 'b' | '' ;";  // 5 states, 5 kernel items
  ir::LrLimits limits;
  limits.max_states = 5;
  CHECK(build(source, limits).table->error().empty());
  limits.max_states = 4;
  Built states = build(source, limits);
  CHECK(states.table->error() == "the grammar's LR automaton needs more than 4 states");
  CHECK(states.table->state_count() == 0);

  ir::LrLimits items;
  items.max_kernel_items = 5;
  CHECK(build(source, items).table->error().empty());
  items.max_kernel_items = 4;
  CHECK(build(source, items).table->error() == "the grammar's LR automaton needs more than 4 kernel items");

  Built fits = build(source);
  const size_t needed = fits.table->lookahead_bytes();
  CHECK(needed > 0);
  ir::LrLimits bytes;
  bytes.max_lookahead_bytes = needed;
  CHECK(build(source, bytes).table->error().empty());
  bytes.max_lookahead_bytes = needed - 1;
  const std::string message = build(source, bytes).table->error();
  CHECK_THAT(message, Catch::StartsWith("the grammar's LR lookahead sets need more than"));
  CHECK_THAT(message, Catch::Contains("LrLimits::max_lookahead_bytes"));
}

TEST_CASE("LR: sparse rows answer exactly as the dense table", "[lr-unit]") {
  for (const char* source : {"start ::= 'i' start [ 'e' start ] | 'x' ;", "start ::= e ; e ::= e '+' e | 'n' | '(' e ')' ;"}) {
    INFO(source);
    Built dense = build(source);
    ir::LrLimits no_dense;
    no_dense.max_dense_cells = 0;
    Built sparse = build(source, no_dense);
    REQUIRE(sparse.table->error().empty());
    expect_same_lookups(*dense.table, *sparse.table);
    CHECK(sparse.table->memory_bytes() < dense.table->memory_bytes());
    CHECK(sparse.table->memory_bytes() > 0);
  }
}

TEST_CASE("LR: cells that reduce alike share one list id, and only those", "[lr-unit]") {
  // The engine reuses a reduction closure for every lookahead whose lists
  // match in each state the closure met, by comparing these ids.
  Built b = build("start ::= e ; e ::= e '+' t | e '-' t | t ; t ::= t '*' f | f ; f ::= 'n' | '(' e ')' ;");
  const std::vector<uint32_t> terminals{b.t("'+'"), b.t("'-'"), b.t("'*'"), b.t("'n'"), b.t("'('"), b.t("')'")};
  bool shared = false;
  for (uint32_t s = 0; s < b.table->state_count(); ++s)
    for (uint32_t x : terminals)
      for (uint32_t y : terminals) {
        const uint32_t a = b.table->reduction_list_id(s, x), c = b.table->reduction_list_id(s, y);
        CHECK((a == c) == (b.table->reductions(s, x) == b.table->reductions(s, y)));
        shared = shared || (x != y && a == c && a != 0);
      }
  CHECK(shared);  // '+' and '-' after a term reduce it alike
  CHECK(b.table->reduction_list(0).empty());
}

TEST_CASE("LR: save and load give the same table; damaged bytes are refused", "[lr-unit]") {
  Built b = build("start ::= e ; e ::= e '+' e | 'n' | '(' e ')' ;");
  ir::BinaryWriter out;
  b.table->save(out);
  const std::string bytes = out.take();
  {
    ir::BinaryReader in(bytes);
    std::unique_ptr<LrTable> loaded = LrTable::load(in, *b.lex);
    REQUIRE(loaded);
    CHECK(in.ok());
    CHECK(in.at_end());
    CHECK(loaded->error().empty());
    CHECK(loaded->lookahead_bytes() == 0);
    expect_same_lookups(*b.table, *loaded);
  }
  // Truncated: null, with the reader's message.
  for (size_t cut : {size_t{0}, size_t{9}, bytes.size() / 2, bytes.size() - 1}) {
    INFO("cut at " << cut);
    ir::BinaryReader in(std::string_view(bytes).substr(0, cut));
    CHECK_FALSE(LrTable::load(in, *b.lex));
    CHECK_FALSE(in.error().empty());
  }
  // A table checked against a smaller grammar: its shifts name terminals
  // that grammar lacks.
  Built small = build("start ::= 'n' ;");
  ir::BinaryReader in(bytes);
  CHECK_FALSE(LrTable::load(in, *small.lex));
  CHECK_FALSE(in.error().empty());
}

TEST_CASE("LR: a recursive list inside brackets has no conflict and reduces on its followers only", "[lr-unit]") {
  // FOLLOW(item) = FOLLOW(list) = {',', ']'}.
  Built b = build("start ::= '[' list ']' ; list ::= list ',' item | item ; item ::= 'n' | start ;");
  INFO(b.lex->dump());
  REQUIRE(b.table->error().empty());
  const LrTable& t = *b.table;
  CHECK(t.conflict_count() == 0);
  const uint32_t open = b.t("'['"), close = b.t("']'"), comma = b.t("','"), n = b.t("'n'");
  const uint32_t p_n = b.production("item", {"'n'"});
  const uint32_t after_open = t.shift(0, open);
  REQUIRE(after_open != LrTable::kNone);
  const uint32_t after_n = t.shift(after_open, n);
  REQUIRE(after_n != LrTable::kNone);
  CHECK(b.reduce(after_n, comma) == std::vector<LrReduction>{{p_n, 1}});
  CHECK(b.reduce(after_n, close) == std::vector<LrReduction>{{p_n, 1}});
  CHECK(b.reduce(after_n, n).empty());
  CHECK(b.reduce(after_n, t.end_marker()).empty());
  // '[' nests: the state after "[[" is the state after "[".
  CHECK(t.shift(after_open, open) == after_open);
  CHECK(t.terminals_with_actions(after_open) == std::vector<uint32_t>{std::min(open, n), std::max(open, n)});
  // Only '[' can start the text; accept only after the outer ']'.
  CHECK(t.terminals_with_actions(0) == std::vector<uint32_t>{open});
  CHECK_FALSE(accepts_here(b, after_n));
  CHECK(accepts_here(b, t.go(0, b.nt("start"))));
}

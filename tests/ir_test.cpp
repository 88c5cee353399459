// Desugaring and the analyses: nullable, first bytes, productive, reachable.
#include <catch2/catch.hpp>

#include "helpers.h"

using namespace cgram;
using namespace cgram::test;

namespace {
uint32_t rule(const ir::GrammarIR& ir, std::string_view name) {
  auto id = ir.find(name);
  REQUIRE(id);
  return *id;
}
std::string first(const ir::GrammarIR& ir, std::string_view name) {
  std::string out;
  const auto& bits = ir.first_bytes[rule(ir, name)];
  for (int b = 0; b < 256; ++b)
    if (bits[b]) out += static_cast<char>(b);
  return out;
}
}  // namespace

TEST_CASE("desugaring: groups, repetitions and ISO forms become helper rules", "[ir]") {
  auto g = grammar("start ::= 'a'{2,3} ('b' | 'c')* [ 'd' ] x+; x ::= 'x';");
  CHECK(g->ir().dump() ==
        "start -> start#1 start#4 start#5 start#6\n"
        "x -> 'x'\n"
        "start#1 -> 'a' 'a' start#2\n"
        "start#2 -> ε\n"
        "start#2 -> 'a'\n"
        "start#3 -> 'b'\n"
        "start#3 -> 'c'\n"
        "start#4 -> ε\n"
        "start#4 -> start#4 start#3\n"
        "start#5 -> ε\n"
        "start#5 -> 'd'\n"
        "start#6 -> x\n"
        "start#6 -> start#6 x\n");
}

TEST_CASE("identical terminals and except! sets are shared", "[ir]") {
  auto g = grammar("start ::= 'a' 'a' #'b+' #'b+' except!('z') except!('z') 'z';");
  CHECK(g->ir().terminals.size() == 3);
  CHECK(g->ir().excepts.size() == 1);
}

TEST_CASE("nullable", "[ir]") {
  auto g = grammar("start ::= a b c d e; a ::= 'x'?; b ::= a a; c ::= 'y' | b; d ::= #'z*'; e ::= except!('q') 'q';");
  const auto& ir = g->ir();
  CHECK(ir.nullable[rule(ir, "a")]);
  CHECK(ir.nullable[rule(ir, "b")]);
  CHECK(ir.nullable[rule(ir, "c")]);
  CHECK(ir.nullable[rule(ir, "d")]);
  CHECK_FALSE(ir.nullable[rule(ir, "e")]);
  CHECK_FALSE(ir.nullable[rule(ir, "start")]);
}

TEST_CASE("first bytes", "[ir]") {
  auto g = grammar("start ::= a 'z' | b; a ::= 'x'? 'y'; b ::= #'[0-2]+' | c; c ::= 'é';");
  const auto& ir = g->ir();
  CHECK(first(ir, "a") == "xy");
  CHECK(first(ir, "b") == "012\xC3");
  CHECK(first(ir, "start") == "012xy\xC3");
}

TEST_CASE("productive and reachable", "[ir]") {
  ir::GrammarIR ir = grammar("start ::= a; a ::= 'a' | a 'b'; b ::= 'c';")->ir();
  CHECK(ir.productive[rule(ir, "a")]);
  CHECK(ir.reachable[rule(ir, "a")]);
  CHECK_FALSE(ir.reachable[rule(ir, "b")]);
  // Recompute after cutting the base case: 'a' becomes unproductive.
  uint32_t a = rule(ir, "a");
  ir.productions[ir.nonterminals[a].productions[0]].rhs.push_back({ir::Symbol::Kind::Nonterminal, a});
  ir::analyze(ir);
  CHECK_FALSE(ir.productive[a]);
  CHECK_FALSE(ir.productive[rule(ir, "start")]);
}

// Desugaring and the analyses: nullable, first bytes, productive, reachable.
#include <catch2/catch.hpp>

#include "helpers.h"
#include "lexical.h"
#include "lr.h"

#include <algorithm>

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

TEST_CASE("lexical lowering: regular rules become single terminals, nullable ones optional", "[ir][lexical]") {
  auto g = grammar(read_example("json.cgram"));
  ir::LexicalGrammar lexical = ir::lower_lexical(g->ir());
  std::string dump = lexical.dump();
  INFO(dump);
  // string, number and ws are regular: one terminal each; ws may be empty.
  std::vector<std::string> names;
  for (const auto& t : lexical.terminals) names.push_back(t.name);
  CHECK(std::count(names.begin(), names.end(), "string") == 1);
  CHECK(std::count(names.begin(), names.end(), "number") == 1);
  CHECK(std::count(names.begin(), names.end(), "ws+") == 1);
  CHECK(dump.find("ws? -> ε\nws? -> ws+\n") != std::string::npos);
  // No skeleton production is left for a collapsed rule.
  CHECK(dump.find("\nstring ->") == std::string::npos);
  CHECK(dump.find("\nnumber ->") == std::string::npos);
  CHECK(dump.rfind("start' -> start\n", 0) == 0);
  // The recursive rules stay context-free.
  CHECK(dump.find("\nvalue -> object\n") != std::string::npos);
  // A whole regular grammar (chess: turns repeated) is one terminal.
  ir::LexicalGrammar chess = ir::lower_lexical(grammar(read_example("chess.cgram"))->ir());
  CHECK(chess.terminals.size() == 1);
  CHECK(chess.dump() == "start' -> start\n");
  // The LALR(1) table of an ambiguous grammar keeps its conflicts.
  ir::LexicalGrammar ambiguous = ir::lower_lexical(grammar("start ::= e; e ::= e '+' e | 'a';")->ir());
  CHECK(ir::LrTable(ambiguous).conflict_count() > 0);
  ir::LexicalGrammar plain = ir::lower_lexical(grammar("start ::= e; e ::= e '+' t | t; t ::= 'a' | '(' e ')';")->ir());
  CHECK(ir::LrTable(plain).conflict_count() == 0);
}

TEST_CASE("lexical lowering: regular parts collapse whatever their notation", "[ir][lexical]") {
  // Each of these is regular: the start rule becomes one terminal, and the
  // skeleton is just S' -> start.
  const char* regular[] = {
      "start ::= ('a' | 'b')* ;",
      "start ::= #'[0-9]'{1,16} ;",
      "start ::= x ; x ::= 'a' x | '' ;",                                  // right-linear
      "start ::= l ; l ::= l 'x' | 'y' ;",                                 // left-linear
      "start ::= a ; a ::= 'x' b | 'y' ; b ::= 'z' a | 'w' ;",            // a right-linear group
      "start ::= a ; a ::= b 'x' | 'y' ; b ::= a 'z' | a ;",               // a left-linear group
      "start ::= item+ ; item ::= '- ' #'[^\\n]'+ '\\n' ;",                 // a list, char by char
      "start ::= '\"' ( #'[^\"\\\\]' | '\\\\' #'[\"\\\\/bfnrt]' )* '\"' ;",  // a JSON string body
      "start ::= ( #'[a-z]+' ' '? )* ;",                                   // words, optional spaces
  };
  for (const char* source : regular) {
    ir::LexicalGrammar lexical = ir::lower_lexical(grammar(source)->ir());
    INFO(source << "\n" << lexical.dump());
    CHECK(lexical.terminals.size() == 1);
    CHECK(lexical.context_free_reasons[grammar(source)->ir().start].empty());
  }
  // Self-embedding stays context-free, and says why.
  auto g = grammar("start ::= p ; p ::= '(' p ')' | 'x' ;");
  ir::LexicalGrammar balanced = ir::lower_lexical(g->ir());
  CHECK(balanced.terminals.size() == 3);
  CHECK(balanced.context_free_reasons[*g->ir().find("p")] ==
        "it recurses through 'p' in the middle of a sequence (self-embedding)");
  CHECK(balanced.context_free_reasons[*g->ir().find("start")] == "it uses 'p', which is context-free");
  auto mixed = grammar("start ::= m ; m ::= 'a' m | m 'b' | 'c' ;");
  CHECK(ir::lower_lexical(mixed->ir()).context_free_reasons[*mixed->ir().find("m")] ==
        "its recursion is on the left in one place and on the right in another");
  auto any = grammar("start ::= (any! 'a')* ;");
  CHECK(ir::lower_lexical(any->ir()).context_free_reasons[any->ir().start] ==
        "it uses 'start#2', which is context-free");
  // A repetition that may end or go on at a byte that can also follow it
  // (C's `type ::= base { ws '*' }` before `sp`) stays with the parser,
  // which shares that reading; inside a collapsed rule it is fine.
  auto shared = grammar("start ::= t #' +' 'x' | '(' start ')' ; t ::= 'int' (#' *' '*')* ;");
  ir::LexicalGrammar shared_lexical = ir::lower_lexical(shared->ir());
  CHECK(shared_lexical.context_free_reasons[*shared->ir().find("t")].starts_with(
      "where it may end it may also go on with byte 0x20"));
  CHECK(shared_lexical.dump().find("\nt -> 'int'") != std::string::npos);
  // Over the budget: the part stays context-free, with the reason.
  auto big = grammar("start ::= #'[ab]'* 'a' #'[ab]'{16} ;");
  ir::LexicalGrammar huge = ir::lower_lexical(big->ir());
  CHECK(huge.context_free_reasons[big->ir().start] == "as a DFA it would need more than 4096 states");
}

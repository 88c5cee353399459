// Every construct of the .cgram language, checked through its meaning: the
// oracle's verdict on texts the construct must accept or reject.
#include <catch2/catch.hpp>

#include "helpers.h"
#include "parse.h"

using cgram::oracle::Verdict;
using namespace cgram::test;

namespace {
constexpr auto C = Verdict::Complete;
constexpr auto P = Verdict::Prefix;
constexpr auto R = Verdict::Rejected;

void expect(std::string_view source, std::initializer_list<std::pair<std::string_view, Verdict>> cases) {
  auto g = oracle_grammar(*grammar(source));
  for (auto [text, expected] : cases) {
    INFO("grammar: " << source << "\ntext: '" << text << "'");
    CHECK(verdict(g, text) == expected);
  }
}
}  // namespace

TEST_CASE("rules are defined with ::= or =", "[language]") {
  expect("start ::= a; a = 'x';", {{"x", C}, {"", P}, {"y", R}});
}

TEST_CASE("defining a name again adds alternatives", "[language]") {
  expect("start ::= a; a ::= 'x'; a ::= 'y' | 'z'; a = 'w';",
         {{"x", C}, {"y", C}, {"z", C}, {"w", C}, {"v", R}});
}

TEST_CASE("literals in both quote styles with every escape", "[language]") {
  auto g = grammar(R"(start ::= 'a\n\r\t\\\'\"' "\x41\u00e9\u{1F600}\"'" ;)");
  const auto& terminals = g->ir().terminals;
  REQUIRE(terminals.size() == 2);
  CHECK(terminals[0].text == "a\n\r\t\\'\"");
  CHECK(terminals[1].text == "A\xC3\xA9\xF0\x9F\x98\x80\"'");
}

TEST_CASE("the empty literal is the empty string", "[language]") {
  expect("start ::= 'a' '' 'b' | '';", {{"", C}, {"ab", C}, {"a", P}, {"b", R}});
}

TEST_CASE("regex terminals in both quote styles are anchored", "[language]") {
  expect(R"(start ::= #'[a-c]+' #"x|y'z";)",
         {{"ax", C}, {"cbay'z", C}, {"a", P}, {"y'z", R}, {"axx", R}});
}

TEST_CASE("concatenation by juxtaposition or comma", "[language]") {
  expect("start ::= 'a' 'b', 'c' , 'd';", {{"abcd", C}, {"abc", P}, {"abd", R}});
}

TEST_CASE("alternation and grouping", "[language]") {
  expect("start ::= 'a' ('b' | 'c' 'd') 'e' | 'f';",
         {{"abe", C}, {"acde", C}, {"f", C}, {"ace", R}, {"af", R}});
}

TEST_CASE("repetition suffixes", "[language]") {
  expect("start ::= 'a'? 'b';", {{"b", C}, {"ab", C}, {"aab", R}});
  expect("start ::= 'a'* 'b';", {{"b", C}, {"aaaab", C}, {"aaa", P}});
  expect("start ::= 'a'+ 'b';", {{"b", R}, {"ab", C}, {"aaab", C}});
  expect("start ::= 'a'{3};", {{"aa", P}, {"aaa", C}, {"aaaa", R}});
  expect("start ::= 'a'{2,};", {{"a", P}, {"aa", C}, {"aaaaaa", C}});
  expect("start ::= 'a'{1,3};", {{"", P}, {"a", C}, {"aaa", C}, {"aaaa", R}});
  expect("start ::= 'a'{,2} 'b';", {{"b", C}, {"aab", C}, {"aaab", R}});
  expect("start ::= ('a' 'b'){2} 'c'?;", {{"abab", C}, {"ababc", C}, {"abc", R}});
  expect("start ::= 'x'{0} 'y';", {{"y", C}, {"xy", R}});
}

TEST_CASE("ISO optional and zero-or-more", "[language]") {
  expect("start ::= [ 'a' ] { 'b' | 'c' } 'd';",
         {{"d", C}, {"ad", C}, {"abcbd", C}, {"aad", R}, {"bcb", P}});
}

TEST_CASE("comments may span lines and sit anywhere", "[language]") {
  expect("(* a\n comment *) start (* here *) ::= 'a' (* and ** here *) ;(**)", {{"a", C}});
}

TEST_CASE("any! is one token: any non-empty text without a segmentation", "[language]") {
  expect("start ::= 'a' any! 'b';", {{"axb", C}, {"axyzb", C}, {"ab", P}, {"a", P}});
  CHECK(verdict_tokens("start ::= 'a' any! 'b';", {"a", "xyz", "b"}) == C);
  CHECK(verdict_tokens("start ::= 'a' any! 'b';", {"a", "xy", "z", "b"}) == R);
  CHECK(verdict_tokens("start ::= 'a' any!{0,2} 'b';", {"a", "b"}) == C);
  CHECK(verdict_tokens("start ::= 'a' any!{0,2} 'b';", {"a", "x", "y", "b"}) == C);
  CHECK(verdict_tokens("start ::= 'a' any!{0,2} 'b';", {"a", "x", "y", "z", "b"}) == R);
  // The token any! consumes starts where the previous token ended.
  CHECK(verdict_tokens("start ::= 'a' any! 'b';", {"ax", "b"}) == R);
}

TEST_CASE("except! with a literal, an alternation and a rule name", "[language]") {
  expect("start ::= except!('ab') 'ab';", {{"xxab", C}, {"ab", C}, {"xab", C}, {"xaab", C}, {"abab", R}});
  expect("start ::= except!(('x' | 'yz')) '.';", {{"ab.", C}, {"ay.", C}, {"ax.", R}, {"yz.", R}});
  expect("start ::= except!(stop) stop; stop ::= 'END' | 'STOP';",
         {{"abcEND", C}, {"xSTOP", C}, {"ENDxEND", R}, {"xST", P}});
}

TEST_CASE("except! with a token count", "[language]") {
  const char* g = "start ::= except!('.', 2) '.';";
  CHECK(verdict_tokens(g, {"ab", "cd", "."}) == C);
  CHECK(verdict_tokens(g, {"ab", "cd", "e", "."}) == R);
  // A token that ends the matched text counts too ("c." holds 'c').
  CHECK(verdict_tokens(g, {"ab", "c."}) == C);
  CHECK(verdict_tokens(g, {"a", "b", "c."}) == R);
  CHECK(verdict_tokens(g, {"a", "b"}) == P);
  CHECK(verdict_tokens(g, {"a", "b", "c"}) == R);
}

TEST_CASE("the start rule can be named", "[language]") {
  auto g = grammar("top ::= 'a' | other; other ::= 'b';", "top");
  CHECK(verdict(oracle_grammar(*g), "b") == C);
  auto outcome = parse("top ::= 'a';");
  CHECK_FALSE(outcome.ok());
}

TEST_CASE("the AST keeps a source range on every node", "[language]") {
  cgram::SourceFile file("g.cgram", "start ::= 'a'\n  | x+ ;\nx ::= #'b';");
  cgram::Diagnostics diags(&file);
  cgram::ast::Grammar tree = cgram::parse_grammar(file, diags);
  REQUIRE_FALSE(diags.has_errors());
  REQUIRE(tree.rules.size() == 2);
  const auto& body = tree.rules[0].body;
  CHECK(body.kind == cgram::ast::ExprKind::Alternation);
  CHECK(body.range.begin.line == 1);
  CHECK(body.range.begin.column == 11);
  CHECK(body.range.end.line == 2);
  const auto& repeat = body.children[1];
  CHECK(repeat.kind == cgram::ast::ExprKind::Repeat);
  CHECK(repeat.range.begin.column == 5);
  CHECK(repeat.range.end.column == 7);
  CHECK(repeat.children[0].range.begin.column == 5);
  CHECK(tree.rules[1].body.kind == cgram::ast::ExprKind::Regex);
  CHECK(tree.rules[1].body.range.begin.line == 3);
  CHECK(tree.rules[1].body.range.begin.column == 7);
}

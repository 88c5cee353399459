// The oracle on its own: the except! cases of DESIGN §2, ambiguity, empty
// rules, left and right recursion, and the rejection offset.
#include <catch2/catch.hpp>

#include "helpers.h"

using namespace cgram;
using namespace cgram::test;
using oracle::Verdict;

TEST_CASE("except!: the examples of DESIGN section 2", "[oracle][except]") {
  const char* g = "start ::= except!('\\n\\n') '\\n\\n';";
  CHECK(verdict_of(g, "114514\n\n") == Verdict::Complete);
  CHECK(verdict_of(g, "114514") == Verdict::Prefix);
  CHECK(verdict_of(g, "114\n\n514\n\n") == Verdict::Rejected);
  CHECK(verdict_of(g, "x\n\n\n") == Verdict::Rejected);
  CHECK(verdict_of(g, "\n\n") == Verdict::Complete);
  CHECK(verdict_of(g, "a\n") == Verdict::Prefix);
  CHECK(verdict_of(g, "a\nb\n\n") == Verdict::Complete);
}

TEST_CASE("except!: the *[ … ]* grammar", "[oracle][except]") {
  auto g = oracle_grammar(*grammar("start ::= except!('*[') '*[' except!(('*[' | ']*')) ']*' ;"));
  for (std::string_view ok : {"*[]*", "abc*[def]*", "a*b*[x]*", "*[*]*", "]*x*[]]*", "*[]]*"})
    CHECK(verdict(g, ok) == Verdict::Complete);
  for (std::string_view prefix : {"", "abc", "a*", "a*[", "a*[x]", "a*[x*", "*[]"})
    CHECK(verdict(g, prefix) == Verdict::Prefix);
  for (std::string_view bad : {"a*[b*[c]*", "a]*[*[b*c]]*", "a*[x]*]*", "*[]*x", "*[a]*b]*", "*[*[", "a*[x]*y"})
    CHECK(verdict(g, bad) == Verdict::Rejected);
}

TEST_CASE("except!: occurrences completed by what follows are forbidden", "[oracle][except]") {
  // w may not end in 'a' when the next byte is 'b': "ab" would start inside w.
  const char* g = "start ::= except!('ab') 'b' 'x';";
  CHECK(verdict_of(g, "bx") == Verdict::Complete);
  CHECK(verdict_of(g, "cbx") == Verdict::Complete);
  CHECK(verdict_of(g, "abx") == Verdict::Rejected);
  // "a" is still viable: w can grow ("ac…") before the 'b'.
  CHECK(verdict_of(g, "a") == Verdict::Prefix);
  CHECK(verdict_of(g, "acbx") == Verdict::Complete);
  // Only prefixes whose every continuation is blocked are dead.
  CHECK(verdict_of("start ::= except!('ab') 'b';", "a") == Verdict::Prefix);
  CHECK(verdict_of("start ::= except!('ab');", "a") == Verdict::Complete);
  CHECK(verdict_of("start ::= except!('ab');", "ab") == Verdict::Rejected);
}

TEST_CASE("except!: a pending occurrence spans several symbols", "[oracle][except]") {
  // After w = "x<", the following text must not complete "<end>".
  const char* g = "start ::= except!('<end>') rest; rest ::= 'e' 'n' 'd' '>' | '</' #'[a-z]+' '>';";
  CHECK(verdict_of(g, "x</b>") == Verdict::Complete);
  CHECK(verdict_of(g, "x<end>") == Verdict::Rejected);
  CHECK(verdict_of(g, "xend>") == Verdict::Complete);
}

TEST_CASE("ambiguous grammars, empty rules, left and right recursion", "[oracle]") {
  const char* ambiguous = "start ::= e; e ::= e '+' e | e e | 'a' | '';";
  CHECK(verdict_of(ambiguous, "a+a+aa") == Verdict::Complete);
  CHECK(verdict_of(ambiguous, "") == Verdict::Complete);
  CHECK(verdict_of(ambiguous, "++") == Verdict::Complete);
  CHECK(verdict_of(ambiguous, "b") == Verdict::Rejected);
  const char* left = "start ::= l; l ::= l 'x' | 'y';";
  CHECK(verdict_of(left, "yxxx") == Verdict::Complete);
  CHECK(verdict_of(left, "xy") == Verdict::Rejected);
  const char* right = "start ::= r; r ::= 'x' r | 'y';";
  CHECK(verdict_of(right, "xxxy") == Verdict::Complete);
  CHECK(verdict_of(right, "xxx") == Verdict::Prefix);
  const char* nested_empty = "start ::= a a a 'z'; a ::= b | 'q'; b ::= '' | c; c ::= b;";
  CHECK(verdict_of(nested_empty, "z") == Verdict::Complete);
  CHECK(verdict_of(nested_empty, "qqz") == Verdict::Complete);
  CHECK(verdict_of(nested_empty, "qqqqz") == Verdict::Rejected);
  const char* balanced = "start ::= p; p ::= '(' p ')' p | '';";
  CHECK(verdict_of(balanced, "(()())()") == Verdict::Complete);
  CHECK(verdict_of(balanced, "(()") == Verdict::Prefix);
  CHECK(verdict_of(balanced, "())") == Verdict::Rejected);
}

TEST_CASE("the rejection offset is the length of the longest viable prefix", "[oracle]") {
  auto g = oracle_grammar(*grammar("start ::= 'ab' 'cd' | 'abx';"));
  CHECK(oracle::match_text(g, "abce").viable_bytes == 3);
  CHECK(oracle::match_text(g, "abx!").viable_bytes == 3);
  CHECK(oracle::match_text(g, "z").viable_bytes == 0);
  auto e = oracle_grammar(*grammar("start ::= except!('ab') 'b';"));
  // "ab": the 'a' is viable alone, but no continuation survives the 'b'.
  CHECK(oracle::match_text(e, "abb").verdict == Verdict::Rejected);
  CHECK(oracle::match_text(e, "ab").viable_bytes == 1);
}

TEST_CASE("segmented recognition: push and pop", "[oracle]") {
  auto g = oracle_grammar(*grammar("start ::= 'ab' any! 'cd';"));
  oracle::Recognizer r(g, /*segmented=*/true);
  r.push_token("a");
  r.push_token("b");
  r.push_token("zz");
  CHECK(r.verdict() == Verdict::Prefix);
  r.push_token("cd");
  CHECK(r.verdict() == Verdict::Complete);
  r.pop_bytes(2);
  r.push_token("c");
  CHECK(r.verdict() == Verdict::Prefix);
  r.push_token("x");
  CHECK(r.verdict() == Verdict::Rejected);
}

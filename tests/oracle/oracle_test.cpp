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

// The oracle is the ground truth of the random differential (tests/differential/random):
// its answers on each shape the random grammars take, checked by hand.
TEST_CASE("the oracle on every shape the random grammars have", "[oracle]") {
  struct Expect {
    const char* grammar;
    const char* text;
    Verdict verdict;
    size_t viable = 0;  // for Rejected
  };
  const Expect cases[] = {
      // ε-productions, optional and starred tails, nullable rules at either end
      {"start ::= a b; a ::= ''; b ::= 'x' | '';", "", Verdict::Complete},
      {"start ::= a b; a ::= ''; b ::= 'x' | '';", "xx", Verdict::Rejected, 1},
      {"start ::= 'a' start 'b'* | 'c';", "acbb", Verdict::Complete},
      {"start ::= 'a' start 'b'* | 'c';", "aacb", Verdict::Complete},
      {"start ::= 'a' start 'b'* | 'c';", "cb", Verdict::Rejected, 1},
      {"start ::= n 'x' n; n ::= '' | 'y';", "yxy", Verdict::Complete},
      {"start ::= n 'x' n; n ::= '' | 'y';", "yyx", Verdict::Rejected, 1},
      // left, right, middle, hidden-left and mutual recursion, unit cycles
      {"start ::= a; a ::= 'x' a 'y' | '';", "xxyy", Verdict::Complete},
      {"start ::= a; a ::= 'x' a 'y' | '';", "xyy", Verdict::Rejected, 2},
      {"start ::= a; a ::= n a 'c' | 'b'; n ::= '' | 'x';", "xbcc", Verdict::Complete},
      {"start ::= a; a ::= n a 'c' | 'b'; n ::= '' | 'x';", "cb", Verdict::Rejected, 0},
      {"start ::= a; a ::= 'x' b | 'y'; b ::= a 'z';", "xxyzz", Verdict::Complete},
      {"start ::= a; a ::= 'x' b | 'y'; b ::= a 'z';", "xyzz", Verdict::Rejected, 3},
      {"start ::= a; a ::= b | 'q'; b ::= a | c; c ::= 'r' a;", "rrq", Verdict::Complete},
      {"start ::= a; a ::= b | 'q'; b ::= a | c; c ::= 'r' a;", "r", Verdict::Prefix},
      // ambiguity
      {"start ::= e; e ::= e e | e '-' e | 'a' | '';", "a-a-aa", Verdict::Complete},
      {"start ::= e; e ::= e e | e '-' e | 'a' | '';", "ab", Verdict::Rejected, 1},
      // literals, regexes and classes beyond ASCII (offsets count bytes)
      {"start ::= #'[α-ω]+' '!';", "αβ!", Verdict::Complete},
      {"start ::= #'[α-ω]+' '!';", "αA", Verdict::Rejected, 2},
      {"start ::= #'[一-鿿]' 'é';", "文é", Verdict::Complete},
      {"start ::= #'[一-鿿]' 'é';", "文\xc3", Verdict::Prefix},
      {"start ::= #'[一-鿿]' 'é';", "\xe6", Verdict::Prefix},
      {"start ::= #'[😀-🙏]{2}';", "😀🙏", Verdict::Complete},
      // bounded repetition
      {"start ::= 'ab'{2,3};", "ababab", Verdict::Complete},
      {"start ::= 'ab'{2,3};", "abababab", Verdict::Rejected, 6},
      {"start ::= 'ab'{2,3};", "aba", Verdict::Prefix},
      {"start ::= 'x'{,2};", "", Verdict::Complete},
      {"start ::= 'x'{,2};", "xxx", Verdict::Rejected, 2},
      // any! without a vocabulary spans any non-empty text; except!
      {"start ::= 'a' any! 'b';", "axyzb", Verdict::Complete},
      {"start ::= 'a' any! 'b';", "ab", Verdict::Prefix},
      {"start ::= except!('ab') 'b';", "aab", Verdict::Rejected, 2},
      {"start ::= except!('ab') 'b';", "acb", Verdict::Complete},
  };
  for (const Expect& c : cases) {
    INFO(c.grammar << " on '" << c.text << "'");
    const oracle::MatchResult r = oracle::match_text(oracle_grammar(*grammar(c.grammar)), c.text);
    CHECK(r.verdict == c.verdict);
    if (c.verdict == Verdict::Rejected) CHECK(r.viable_bytes == c.viable);
  }
}

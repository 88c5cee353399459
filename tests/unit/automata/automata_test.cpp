// Literal DFAs and the except! automaton against naive string searches.
#include <catch2/catch.hpp>

#include <random>
#include <set>

#include "automata.h"
#include "except_automaton.h"

using namespace cgram::ir;

TEST_CASE("literal DFAs accept exactly their strings", "[automata]") {
  Dfa one = literal_dfa("abc");
  CHECK(one.matches("abc"));
  CHECK_FALSE(one.matches("ab"));
  CHECK_FALSE(one.matches("abcd"));
  CHECK(one.size() == 4);
  std::vector<std::string> words{"true", "false", "null", "nul"};
  Dfa many = literals_dfa(words);
  for (const auto& w : words) CHECK(many.matches(w));
  CHECK_FALSE(many.matches("nu"));
  CHECK_FALSE(many.matches("tru"));
  Dfa empty = literal_dfa("");
  CHECK(empty.matches(""));
  CHECK_FALSE(empty.accepts_nonempty());
}

TEST_CASE("distinct columns: one byte of each group the transitions treat alike", "[automata]") {
  // "ab", "cb" and "d": a and c lead to the same state everywhere, b and d
  // each differ, every other byte is dead everywhere.
  const std::vector<std::string> words{"ab", "cb", "d"};
  const Dfa dfa = minimize(literals_dfa(words));
  const std::vector<uint8_t> bytes = distinct_columns(dfa);
  CHECK(bytes == std::vector<uint8_t>{0, 'a', 'b', 'd'});
  // Each byte's column equals that of exactly one kept byte.
  for (int b = 0; b < 256; ++b) {
    int equal = 0;
    for (uint8_t k : bytes) {
      bool same = true;
      for (uint32_t s = 0; s < dfa.size(); ++s) same = same && dfa.next(s, static_cast<uint8_t>(b)) == dfa.next(s, k);
      equal += same;
    }
    CHECK(equal == 1);
  }
}

namespace {

// Naive: does `w` contain a whole occurrence of a string of S?
bool contains_occurrence(const std::string& w, const std::vector<std::string>& strings) {
  for (const auto& s : strings)
    if (w.find(s) != std::string::npos) return true;
  return false;
}

// Naive: remainders of strings of S begun inside w and not finished there.
std::vector<std::string> naive_pending(const std::string& w, const std::vector<std::string>& strings) {
  std::vector<std::string> out;
  for (size_t i = 0; i < w.size(); ++i) {
    std::string tail = w.substr(i);
    for (const auto& s : strings)
      if (s.size() > tail.size() && s.compare(0, tail.size(), tail) == 0) out.push_back(s.substr(tail.size()));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

TEST_CASE("the except! automaton agrees with naive search", "[automata][except]") {
  std::mt19937 rng(42);
  const std::vector<std::vector<std::string>> sets{
      {"\n\n"}, {"*[", "]*"}, {"abab", "bab", "b"}, {"aaa", "aab"}, {"</think>"}, {"ab", "ba", "abc"}};
  for (const auto& strings : sets) {
    ExceptAutomaton ac(strings);
    std::string alphabet;
    for (const auto& s : strings) alphabet += s;
    alphabet += "x";
    for (int trial = 0; trial < 2000; ++trial) {
      std::string w;
      size_t length = rng() % 10;
      for (size_t i = 0; i < length; ++i) w += alphabet[rng() % alphabet.size()];
      uint32_t state = ac.dfa().run(ac.dfa().start(), w);
      INFO("w = '" << w << "'");
      CHECK(ac.dfa().accepting(state) == !contains_occurrence(w, strings));
      if (ac.dfa().accepting(state)) CHECK(ac.pending(state) == naive_pending(w, strings));
    }
  }
}

TEST_CASE("except! with the empty string in S allows nothing", "[automata][except]") {
  std::vector<std::string> strings{""};
  ExceptAutomaton ac(strings);
  CHECK(ac.dfa().empty_language());
}

// A finite language's minimal DFA has one live state per distinct set of
// suffixes its prefixes leave (Myhill-Nerode): the acyclic minimisation
// (one bottom-up pass) must find exactly those, for random word lists, and
// accept the words and nothing else.
TEST_CASE("minimising finite languages: one state per distinct suffix set", "[automata][minimize]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::set<std::string> words;
    const int count = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < count; ++i) {
      std::string w;
      const int length = static_cast<int>(rng() % 7);
      for (int k = 0; k < length; ++k) w += static_cast<char>('a' + rng() % 3);
      words.insert(w);
    }
    const std::vector<std::string> list(words.begin(), words.end());
    const Dfa dfa = minimize(literals_dfa(list));
    // The distinct suffix sets of the prefixes.
    std::set<std::set<std::string>> residuals;
    for (const std::string& w : list)
      for (size_t cut = 0; cut <= w.size(); ++cut) {
        std::set<std::string> suffixes;
        for (const std::string& v : list)
          if (v.compare(0, cut, w, 0, cut) == 0 && v.size() >= cut) suffixes.insert(v.substr(cut));
        residuals.insert(suffixes);
      }
    INFO("round " << round);
    CHECK(dfa.size() == residuals.size());
    for (const std::string& w : list) CHECK(dfa.matches(w));
    for (int i = 0; i < 20; ++i) {
      std::string w;
      for (int k = static_cast<int>(rng() % 8); k > 0; --k) w += static_cast<char>('a' + rng() % 4);
      CHECK(dfa.matches(w) == words.count(w) > 0);
    }
  }
}

// The engine's sets of pending except! occurrences (engine/pending_excepts.h)
// on their own: interned once, stepped over bytes until a string is
// completed or left, grown where an except! lexeme ends, bounded.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "except_automaton.h"
#include "pending_excepts.h"

using namespace cgram;

TEST_CASE("pending excepts: a set is one id, whatever its order or repeats; the empty set is 0", "[engine-unit]") {
  PendingExcepts p(16);
  CHECK(p.intern({}) == PendingExcepts::kNothing);
  const uint32_t a = p.intern({{0, "ab"}, {1, "c"}});
  CHECK(a != PendingExcepts::kNothing);
  CHECK(p.intern({{1, "c"}, {0, "ab"}, {1, "c"}}) == a);
  CHECK(p.set(a) == PendingExcepts::Set{{0, "ab"}, {1, "c"}});
  CHECK(p.intern({{0, "ab"}}) != a);
  CHECK(p.size() == 3);
}

TEST_CASE("pending excepts: a byte steps every occurrence; completing one is a violation", "[engine-unit]") {
  PendingExcepts p(16);
  const uint32_t both = p.intern({{0, "ab"}, {0, "ax"}, {1, "b"}});
  // 'a' starts two rests, leaves the third: {ab→b, ax→x}.
  const uint32_t after_a = p.step(both, 'a');
  CHECK(p.set(after_a) == PendingExcepts::Set{{0, "b"}, {0, "x"}});
  CHECK(p.step(after_a, 'b') == PendingExcepts::kViolated);  // "ab" completed
  CHECK(p.step(after_a, 'y') == PendingExcepts::kNothing);   // neither goes on
  CHECK(p.step(both, 'b') == PendingExcepts::kViolated);     // 'b' completes rule 1's
  CHECK(p.step(both, 'z') == PendingExcepts::kNothing);
  CHECK(p.step(both, std::string_view("ay")) == PendingExcepts::kNothing);
  CHECK(p.step(both, std::string_view("ab")) == PendingExcepts::kViolated);
  CHECK(p.step(PendingExcepts::kNothing, 'a') == PendingExcepts::kNothing);
  // Remembered: the same step again is the same id, and makes no set.
  const size_t sets = p.size();
  CHECK(p.step(both, 'a') == after_a);
  CHECK(p.size() == sets);
}

TEST_CASE("pending excepts: an except! lexeme's end adds what its automaton state leaves pending", "[engine-unit]") {
  const std::vector<std::string> strings = {"</a>"};
  const ir::ExceptAutomaton automaton(strings);
  PendingExcepts p(16);
  const uint32_t after_lt = automaton.dfa().run(automaton.dfa().start(), "x <");
  REQUIRE(automaton.has_pending(after_lt));
  const uint32_t id = p.add(PendingExcepts::kNothing, 3, after_lt, automaton);
  CHECK(p.set(id) == PendingExcepts::Set{{3, "/a>"}});
  CHECK(p.add(PendingExcepts::kNothing, 3, after_lt, automaton) == id);
  // A state with nothing pending, or out of range, leaves the set as it was.
  const uint32_t plain = automaton.dfa().run(automaton.dfa().start(), "x");
  CHECK(p.add(id, 3, plain, automaton) == id);
  CHECK(p.add(id, 3, 1u << 30, automaton) == id);
  CHECK(p.step(id, std::string_view("/a>")) == PendingExcepts::kViolated);
}

TEST_CASE("pending excepts: past max_sets a new set is kFull, a known one still found", "[engine-unit]") {
  PendingExcepts p(2);  // the empty set and one more
  const uint32_t one = p.intern({{0, "a"}});
  CHECK(one == 1);
  CHECK(p.intern({{0, "b"}}) == PendingExcepts::kFull);
  CHECK(p.intern({{0, "a"}}) == one);
  const uint32_t two = p.intern({{0, "ab"}});
  CHECK(two == PendingExcepts::kFull);
  PendingExcepts q(2);
  const uint32_t ab = q.intern({{0, "ab"}});
  CHECK(q.step(ab, 'a') == PendingExcepts::kFull);  // {b} would be a third set
  CHECK(q.step(ab, 'a') == PendingExcepts::kFull);  // not remembered as an answer
}

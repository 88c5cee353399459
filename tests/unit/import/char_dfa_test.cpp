// The JSON Schema converter's automata over code points (import/char_dfa.h):
// random regexes against std::regex on every short string, their
// intersections, differences and unions, and the way back to a regex.
#include <catch2/catch.hpp>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "char_dfa.h"
#include "regex.h"

namespace {

using cgram::json::CharDfa;

cgram::ir::RegexNode parsed(const std::string& text) {
  auto result = cgram::ir::parse_regex(text);
  REQUIRE(std::holds_alternative<cgram::ir::RegexNode>(result));
  return std::get<cgram::ir::RegexNode>(result);
}

// A random regex over a, b, c in the syntax both std::regex (ECMAScript)
// and cgram read alike.
std::string random_regex(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  if (depth == 0 || pick(4) == 0) {
    static const char* atoms[] = {"a", "b", "c", "[ab]", "[^a]", "."};
    return atoms[pick(6)];
  }
  switch (pick(5)) {
    case 0: return random_regex(rng, depth - 1) + random_regex(rng, depth - 1);
    case 1: return "(?:" + random_regex(rng, depth - 1) + "|" + random_regex(rng, depth - 1) + ")";
    case 2: return "(?:" + random_regex(rng, depth - 1) + ")*";
    case 3: return "(?:" + random_regex(rng, depth - 1) + ")?";
    default: return "(?:" + random_regex(rng, depth - 1) + "){1,2}";
  }
}

std::vector<std::string> strings_up_to(size_t length) {
  std::vector<std::string> out{""};
  for (size_t begin = 0, end = 1; length-- > 0; begin = end, end = out.size())
    for (size_t i = begin; i < end; ++i)
      for (char c : std::string("abcd")) out.push_back(out[i] + c);
  return out;
}

}  // namespace

TEST_CASE("char dfa: random regexes, their set operations and their regexes match std::regex", "[json-schema]") {
  std::mt19937 rng(20261127);
  const std::vector<std::string> texts = strings_up_to(5);
  for (int round = 0; round < 150; ++round) {
    const std::string x = random_regex(rng, 3), y = random_regex(rng, 3);
    INFO("x = " << x << ", y = " << y);
    const std::regex rx(x), ry(y);
    const auto dx = CharDfa::of_regex(parsed(x)), dy = CharDfa::of_regex(parsed(y));
    REQUIRE(dx);
    REQUIRE(dy);
    const auto both = dx->intersect(*dy), only_x = dx->minus(*dy), either = dx->unite(*dy);
    REQUIRE(both);
    REQUIRE(only_x);
    REQUIRE(either);
    // The way back: a regex whose automaton is the same language.
    std::optional<CharDfa> back;
    if (!only_x->empty()) {
      const auto regex = only_x->to_regex();
      REQUIRE(regex);
      back = CharDfa::of_regex(*regex);
      REQUIRE(back);
    }
    for (const std::string& t : texts) {
      INFO("text = '" << t << "'");
      const bool in_x = std::regex_match(t, rx), in_y = std::regex_match(t, ry);
      REQUIRE(dx->matches(t) == in_x);
      REQUIRE(dy->matches(t) == in_y);
      REQUIRE(both->matches(t) == (in_x && in_y));
      REQUIRE(only_x->matches(t) == (in_x && !in_y));
      REQUIRE(either->matches(t) == (in_x || in_y));
      if (back) REQUIRE(back->matches(t) == (in_x && !in_y));
    }
  }
}

TEST_CASE("char dfa: keys beside many names, and the limits", "[json-schema]") {
  std::vector<std::string> names;
  std::mt19937 rng(7);
  for (int i = 0; i < 400; ++i) {
    std::string name = "prop";
    for (int k = 0; k < 8; ++k) name += static_cast<char>('a' + rng() % 26);
    names.push_back(name);
  }
  names.push_back("é→");
  const auto listed = CharDfa::of_strings(names);
  REQUIRE(listed);
  const auto others = CharDfa::everything().minus(*listed);
  REQUIRE(others);
  for (const std::string& name : names) {
    CHECK(listed->matches(name));
    CHECK_FALSE(others->matches(name));
    CHECK(others->matches(name + "x"));
    CHECK(others->matches(name.substr(0, name.size() - 1)));
  }
  CHECK(others->matches(""));
  CHECK(others->matches("é"));
  const auto regex = others->to_regex();
  REQUIRE(regex);
  // (Its subset construction passes through more states than the minimal DFA has.)
  cgram::json::CharDfaLimits roomy;
  roomy.max_nfa_states = size_t{1} << 20;
  roomy.max_states = size_t{1} << 16;
  const auto back = CharDfa::of_regex(*regex, roomy);
  REQUIRE(back);
  CHECK(back->intersect(*listed)->empty());
  CHECK(back->unite(*listed)->minus(CharDfa::everything())->empty());
  CHECK(CharDfa::everything().minus(*back->unite(*listed))->empty());

  // A counted class and what it leaves out come back counted, not as 250
  // nested groups (which the depth limit refuses).
  for (const char* counted : {"[a-z0-9_-]{0,250}", "[a-z]{1,100}", "x-[0-9]{3,40}"}) {
    INFO(counted);
    const auto keys = CharDfa::of_regex(parsed(counted));
    REQUIRE(keys);
    const auto rest = CharDfa::everything().minus(*keys);
    REQUIRE(rest);
    for (const CharDfa* language : {&*keys, &*rest}) {
      const auto regex = language->to_regex();
      REQUIRE(regex);
      const auto again = CharDfa::of_regex(*regex);
      REQUIRE(again);
      CHECK(again->minus(*language)->empty());
      CHECK(language->minus(*again)->empty());
    }
  }

  // (a|b)*a(a|b){14}: the subset construction needs 2^15 states.
  CHECK_FALSE(CharDfa::of_regex(parsed("[ab]*a[ab]{14}")));
  // A language with no string.
  const auto none = CharDfa::of_regex(parsed("a"))->intersect(*CharDfa::of_regex(parsed("b")));
  REQUIRE(none);
  CHECK(none->empty());
  CHECK_FALSE(none->to_regex());
}

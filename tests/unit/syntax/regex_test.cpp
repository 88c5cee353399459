// Regex → NFA → DFA → minimal DFA, checked against std::regex (ECMAScript)
// on many generated regexes and ASCII strings, and against the oracle's own
// expansion of the regex into byte rules.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <regex>

#include "automata.h"
#include "helpers.h"

using namespace cgram;
using namespace cgram::test;

namespace {

ir::Dfa compile(std::string_view pattern) {
  auto parsed = ir::parse_regex(pattern);
  INFO("pattern: " << pattern);
  REQUIRE(std::holds_alternative<ir::RegexNode>(parsed));
  auto dfa = ir::compile_regex(std::get<ir::RegexNode>(parsed));
  REQUIRE(dfa.ok());
  return std::move(*dfa);
}

// Random regexes over a small alphabet, in the syntax shared by .cgram and
// ECMAScript.
class RegexGenerator {
 public:
  explicit RegexGenerator(uint64_t seed) : rng_(seed) {}
  std::string generate(int depth = 3) {
    int pick = static_cast<int>(rng_() % (depth > 0 ? 12 : 6));
    switch (pick) {
      case 0: return std::string(1, "abc"[rng_() % 3]);
      case 1: return "[" + std::string(rng_() % 2 ? "^" : "") + "a-" + std::string(1, "bc"[rng_() % 2]) + "]";
      case 2: return std::vector<std::string>{"\\d", "\\w", "\\s", "\\D", "\\W", "\\S"}[rng_() % 6];
      case 3: return ".";
      case 4: return std::vector<std::string>{"[0-9_]", "[ \\n]", "[\\-a]", "\\.", "\\x61", "\\u0062"}[rng_() % 6];
      case 5: return std::string(1, "abc"[rng_() % 3]) + std::string(1, "ab0"[rng_() % 3]);
      case 6: return generate(depth - 1) + generate(depth - 1);
      case 7: return "(" + generate(depth - 1) + "|" + generate(depth - 1) + ")";
      case 8: return "(?:" + generate(depth - 1) + ")*";
      case 9: return "(" + generate(depth - 1) + ")+";
      case 10: return "(" + generate(depth - 1) + ")?";
      default: {
        int lo = static_cast<int>(rng_() % 3), hi = lo + static_cast<int>(rng_() % 3);
        std::string q = rng_() % 3 == 0 ? "{" + std::to_string(lo) + ",}"
                                        : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
        return "(" + generate(depth - 1) + ")" + q;
      }
    }
  }
  std::string text() {
    static const std::string alphabet = "abc0_ \n-.";
    size_t length = rng_() % 7;
    std::string out;
    for (size_t i = 0; i < length; ++i) out += alphabet[rng_() % alphabet.size()];
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

TEST_CASE("regex DFAs agree with std::regex and with the oracle on generated cases", "[regex]") {
  RegexGenerator gen(20261121);
  size_t compared = 0;
  for (int r = 0; r < 300; ++r) {
    std::string pattern = gen.generate();
    std::regex reference(pattern, std::regex::ECMAScript);
    ir::Dfa dfa = compile(pattern);
    auto oracle = oracle_grammar(*grammar("start ::= #'" + pattern + "';"));
    std::vector<std::string> texts{""};
    for (int t = 0; t < 40; ++t) texts.push_back(gen.text());
    for (const std::string& text : texts) {
      INFO("pattern: " << pattern << "  text: '" << text << "'");
      bool expected = std::regex_match(text, reference);
      CHECK(dfa.matches(text) == expected);
      CHECK((verdict(oracle, text) == oracle::Verdict::Complete) == expected);
      ++compared;
    }
  }
  CHECK(compared == 300 * 41);
}

TEST_CASE("DFA prefixes: a state is live exactly when some extension matches", "[regex]") {
  ir::Dfa dfa = compile("ab(cd)*e");
  CHECK(dfa.run(dfa.start(), "ab") != ir::Dfa::kDead);
  CHECK(dfa.run(dfa.start(), "abcdc") != ir::Dfa::kDead);
  CHECK(dfa.run(dfa.start(), "abce") == ir::Dfa::kDead);
  CHECK(dfa.run(dfa.start(), "b") == ir::Dfa::kDead);
  CHECK(dfa.matches("abcdcde"));
}

TEST_CASE("regex UTF-8: 2-, 3- and 4-byte characters and range boundaries", "[regex][utf8]") {
  ir::Dfa dot = compile(".");
  for (std::string s : {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\x7F", "\xC2\x80", "\xDF\xBF",
                        "\xE0\xA0\x80", "\xEF\xBF\xBF", "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "\xED\x9F\xBF",
                        "\xEE\x80\x80"})
    CHECK(dot.matches(s));
  // Not characters: newline, surrogates, overlong forms, beyond U+10FFFF, stray bytes.
  for (std::string s : {"\n", "\xED\xA0\x80", "\xED\xBF\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80",
                        "\xF0\x80\x80\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80", "\xFF", "ab"})
    CHECK_FALSE(dot.matches(s));
  // A partial character is a live prefix.
  CHECK(dot.run(dot.start(), "\xF0\x9F") != ir::Dfa::kDead);
  CHECK_FALSE(dot.accepting(dot.run(dot.start(), "\xF0\x9F")));

  ir::Dfa range = compile("[\\u{7F}-\\u{80}\\u{7FF}-\\u{800}\\u{FFFF}-\\u{10000}\\u{10FFFF}]");
  for (std::string s : {"\x7F", "\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xEF\xBF\xBF", "\xF0\x90\x80\x80",
                        "\xF4\x8F\xBF\xBF"})
    CHECK(range.matches(s));
  for (std::string s : {"\x7E", "\xC2\x81", "\xDF\xBE", "\xE0\xA0\x81", "\xEF\xBF\xBE", "\xF0\x90\x80\x81",
                        "\xF4\x8F\xBF\xBE"})
    CHECK_FALSE(range.matches(s));

  ir::Dfa negated = compile("[^a\\u{E9}]+");
  CHECK(negated.matches("b\xF0\x9F\x98\x80\xE2\x82\xAC\n"));
  CHECK_FALSE(negated.matches("\xC3\xA9"));
  CHECK_FALSE(negated.matches("a"));

  ir::Dfa literal = compile("\xC3\xA9+x\\u{1F600}");
  CHECK(literal.matches("\xC3\xA9\xC3\xA9x\xF0\x9F\x98\x80"));
  CHECK_FALSE(literal.matches("\xC3\xA9x"));

  ir::Dfa top = compile("[^\\x00-\\u{10FFFD}]");
  CHECK(top.matches("\xF4\x8F\xBF\xBE"));
  CHECK(top.matches("\xF4\x8F\xBF\xBF"));
  CHECK_FALSE(top.matches("\xF4\x8F\xBF\xBD"));
}

TEST_CASE("regex escapes and classes", "[regex]") {
  CHECK(compile("\\d+").matches("0123456789"));
  CHECK_FALSE(compile("\\d").matches("a"));
  CHECK(compile("\\w+").matches("aZ_09"));
  CHECK(compile("\\s+").matches(" \t\n\r\f\v"));
  CHECK(compile("\\S").matches("\xC3\xA9"));
  CHECK(compile("[\\d\\s]+").matches("1 2"));
  CHECK(compile("\\x41\\u0042\\u{43}\\n\\t\\r\\f\\v\\0").matches(std::string("ABC\n\t\r\f\v\0", 9)));
  CHECK(compile("\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\\\\\/\\-\\^\\$").matches(".*+?()[]{}|\\/-^$"));
  CHECK(compile("[]a]+").matches("]a]"));
  CHECK(compile("[a-]+").matches("-a"));
  CHECK(compile("a{").matches("a{"));
  CHECK(compile("a{,2}").matches("aa"));
  CHECK_FALSE(compile("a{,2}").matches("aaa"));
  CHECK(compile("(?<name>ab)+").matches("abab"));
  CHECK(compile("").matches(""));
  CHECK(compile("a||b").matches(""));
}

TEST_CASE("minimisation gives the minimal DFA", "[regex]") {
  // The textbook example: (a|b)*abb has a 4-state minimal DFA.
  CHECK(compile("(a|b)*abb").size() == 4);
  CHECK(compile("a*").size() == 1);
  CHECK(compile("(a|b)*").size() == 1);
  CHECK(compile("aa*|a+").size() == 2);
  // Equal languages give equal sizes whatever the syntax.
  CHECK(compile("(ab|ac)").size() == compile("a(b|c)").size());
}

namespace {
// Minimal DFAs are numbered in BFS order from the start, so two minimal DFAs
// of one language are equal table for table.
bool same_dfa(const ir::Dfa& a, const ir::Dfa& b) {
  if (a.size() != b.size() || a.start() != b.start()) return false;
  for (uint32_t s = 0; s < a.size(); ++s) {
    if (a.accepting(s) != b.accepting(s)) return false;
    for (int c = 0; c < 256; ++c)
      if (a.next(s, static_cast<uint8_t>(c)) != b.next(s, static_cast<uint8_t>(c))) return false;
  }
  return true;
}
}  // namespace

TEST_CASE("the DFA limit applies to the minimal DFA, built part by part when needed", "[regex]") {
  // The subset construction of {,3} outgrows 32768 states; the minimal DFA has 917, the
  // same as the language spelled with three optional copies.
  const std::string x = "(?:[^y-z]+.\\D{2,4}\\S{0,2}|a)";
  ir::Dfa bounded = compile(x + "{,3}");
  CHECK(bounded.size() == 917);
  CHECK(same_dfa(bounded, compile(x + "?" + x + "?" + x + "?")));
  // Forcing the part-by-part construction (limit = the minimal size) gives
  // the same minimal DFA on generated regexes.
  RegexGenerator gen(20261123);
  size_t forced = 0;
  for (int r = 0; r < 200; ++r) {
    std::string pattern = gen.generate();
    ir::Dfa direct = compile(pattern);
    ir::AutomatonLimits tight;
    tight.max_dfa_states = direct.size();
    auto again = ir::compile_regex(std::get<ir::RegexNode>(ir::parse_regex(pattern)), tight);
    INFO("pattern: " << pattern);
    REQUIRE(again.ok());
    CHECK(same_dfa(direct, *again));
    ir::AutomatonLimits too_tight;
    too_tight.max_dfa_states = direct.size() - 1;
    if (direct.size() > 1) {
      CHECK(!(ir::compile_regex(std::get<ir::RegexNode>(ir::parse_regex(pattern)), too_tight)).ok());
      ++forced;
    }
  }
  CHECK(forced > 100);
}

namespace {
// Moore's refinement, naive and slow, as a reference for the number of
// states of the minimal DFA.
size_t moore_classes(const ir::Dfa& dfa) {
  const size_t n = dfa.size();
  std::vector<uint32_t> cls(n);
  for (uint32_t s = 0; s < n; ++s) cls[s] = dfa.accepting(s) ? 1 : 2;
  for (size_t classes = 0;;) {
    std::map<std::vector<uint32_t>, uint32_t> ids;
    std::vector<uint32_t> next(n);
    for (uint32_t s = 0; s < n; ++s) {
      std::vector<uint32_t> sig{cls[s]};
      for (int b = 0; b < 256; ++b) {
        uint32_t t = dfa.next(s, static_cast<uint8_t>(b));
        sig.push_back(t == ir::Dfa::kDead ? 0 : cls[t]);
      }
      next[s] = ids.emplace(sig, static_cast<uint32_t>(ids.size() + 1)).first->second;
    }
    cls = std::move(next);
    if (ids.size() == classes) return classes;
    classes = ids.size();
  }
}
}  // namespace

TEST_CASE("Hopcroft's minimisation agrees with Moore's on generated regexes", "[regex]") {
  RegexGenerator gen(7);
  for (int r = 0; r < 200; ++r) {
    std::string pattern = gen.generate();
    auto parsed = std::get<ir::RegexNode>(ir::parse_regex(pattern));
    auto nfa = (*(ir::regex_to_nfa(parsed)));
    auto dfa = (*(ir::nfa_to_dfa(nfa)));
    ir::Dfa trimmed = ir::minimize(dfa);
    INFO("pattern: " << pattern);
    // Moore on the (trimmed, hence complete over live states) minimal DFA
    // must find nothing more to merge, and on the raw DFA the same count.
    CHECK(moore_classes(trimmed) == trimmed.size());
    CHECK(same_dfa(ir::minimize(trimmed), trimmed));
  }
}

TEST_CASE("the minimal DFA built on byte classes is the one built on whole rows", "[regex]") {
  // nfa_to_minimal_dfa works on the classes of bytes the NFA's edges tell
  // apart and writes 256-wide rows for the minimal DFA only; minimize(nfa_to_dfa)
  // builds every row. Both number states breadth first by byte: identical.
  RegexGenerator gen(20261127);
  for (int r = 0; r < 300; ++r) {
    const std::string pattern = gen.generate();
    INFO("pattern: " << pattern);
    const auto parsed = std::get<ir::RegexNode>(ir::parse_regex(pattern));
    const ir::Nfa nfa = *ir::regex_to_nfa(parsed);
    size_t whole_elements = 0, class_elements = 0, subset_states = 0;
    const ir::Dfa whole = *ir::nfa_to_dfa(nfa, {}, &whole_elements);
    const ir::DfaResult classes = ir::nfa_to_minimal_dfa(nfa, {}, &class_elements, &subset_states);
    REQUIRE(classes.ok());
    CHECK(same_dfa(*classes, ir::minimize(whole)));
    // The same subsets, counted alike (the budgets of the lexer's collapse read them).
    CHECK(class_elements == whole_elements);
    CHECK(subset_states == whole.size());
  }
  // The limit on subsets is the same error, on the same count.
  ir::AutomatonLimits small;
  small.max_dfa_states = 4;
  const ir::Nfa wide = *ir::regex_to_nfa(std::get<ir::RegexNode>(ir::parse_regex("[a-z]{8}")));
  const ir::DfaResult refused = ir::nfa_to_minimal_dfa(wide, small);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.if_error()->message, Catch::Contains("more than 4 states"));
}

TEST_CASE("inline flags: i folds ASCII letters, s lets '.' match a newline, scoped to their group", "[regex]") {
  // The whole pattern under (?i) against std::regex's icase, on generated
  // regexes and texts with both cases of their letters.
  RegexGenerator gen(20261128);
  for (int r = 0; r < 200; ++r) {
    const std::string pattern = gen.generate();
    std::regex reference(pattern, std::regex::ECMAScript | std::regex::icase);
    ir::Dfa folded = compile("(?i)" + pattern);
    ir::Dfa scoped = compile("(?i:" + pattern + ")");
    for (int t = 0; t < 30; ++t) {
      std::string text = gen.text();
      for (char& c : text)
        if (c >= 'a' && c <= 'c' && t % 2) c = static_cast<char>(c - 'a' + 'A');
      INFO("pattern: " << pattern << "  text: '" << text << "'");
      const bool expected = std::regex_match(text, reference);
      CHECK(folded.matches(text) == expected);
      CHECK(scoped.matches(text) == expected);
    }
  }
  CHECK(compile("a(?i:b)c").matches("aBc"));
  CHECK_FALSE(compile("a(?i:b)c").matches("abC"));
  CHECK(compile("a(?i)bc").matches("aBC"));
  CHECK_FALSE(compile("a(?i)bc").matches("ABC"));
  CHECK(compile("(?:a(?i)b)c").matches("aBc"));
  CHECK_FALSE(compile("(?:a(?i)b)c").matches("aBC"));
  CHECK(compile("(?i)[^a]").matches("b"));
  CHECK_FALSE(compile("(?i)[^a]").matches("A"));
  CHECK(compile("(?i)\\u00e9").matches("\xC3\xA9"));
  CHECK_FALSE(compile("(?i)\\u00e9").matches("\xC3\x89"));  // only ASCII letters fold
  CHECK_FALSE(compile(".").matches("\n"));
  CHECK(compile("(?s).").matches("\n"));
  CHECK(compile("(?s:.)").matches("\n"));
  CHECK_FALSE(compile("(?s:.)(?-s:.)").matches("\n\n"));
  CHECK(compile("(?is:A.)").matches("a\n"));
  CHECK(compile("(?mu)a").matches("a"));
}

TEST_CASE("regex_text writes a regex that parses back to the same language", "[regex]") {
  RegexGenerator gen(20261129);
  for (int r = 0; r < 200; ++r) {
    const std::string pattern = gen.generate();
    auto parsed = ir::parse_regex(pattern);
    REQUIRE(std::holds_alternative<ir::RegexNode>(parsed));
    const std::string written = ir::regex_text(std::get<ir::RegexNode>(parsed));
    ir::Dfa original = compile(pattern), again = compile(written);
    for (int t = 0; t < 40; ++t) {
      const std::string text = gen.text();
      INFO("pattern: " << pattern << "  written: " << written << "  text: '" << text << "'");
      CHECK(original.matches(text) == again.matches(text));
    }
  }
  CHECK(ir::regex_text(std::get<ir::RegexNode>(ir::parse_regex("a'[^\\]]+|(?:b|c)?"))) == "a[\\'][^\\]]+|(?:b|c)?");
}

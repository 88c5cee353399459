// The oracle on every example grammar: hand-written sentences, generated
// sentences (with every prefix of each checked viable), and hand-written
// rejections with the offset where the text stops being viable.
#include <catch2/catch.hpp>

#include "helpers.h"
#include "sentence_generator.h"

#include <random>

using namespace cgram;
using namespace cgram::test;
using oracle::Verdict;

namespace {

struct Case {
  std::string_view example;
  std::vector<std::string_view> complete;
  std::vector<std::pair<std::string_view, size_t>> rejected;  // text, viable prefix length
};

const std::vector<Case>& example_cases() {
  static const std::vector<Case> all = {
      {"json.cgram",
       {R"({"a": [1, 2.5e3, -0.5E-2, "x\u00e9\n"], "b": {}, "c": [], "d": null})", "[true, false]",
        " \"caf\xC3\xA9 \xF0\x9F\x98\x80\" ", "0", "-12.5e+10", "{\"\": {\"\": [[[]]]}}"},
       {{R"({"a": [1, 2}})", 11}, {R"({"a" 1})", 5}, {"01", 1}, {"[1,]", 3}, {"\"a\tb\"", 2},
        {"\"\\x\"", 2}, {"tru e", 3}, {"{\"a\":1}}", 7}}},
      {"record.cgram",
       {R"({"name": "Ann", "age": 33, "email": "ann@example.com", "tags": ["a", "b"], "active": true})",
        "{\"name\":\"\",\"age\":0,\"email\":\"x@y.io\",\"tags\":[],\"active\":false}"},
       {{R"({"age": 3})", 2}, {R"({"name": "A", "age": 1000)", 24}, {R"({"name":"A","age":01)", 19}}},
      {"arithmetic.cgram",
       {"1", "-(1 + 2) * max(3, 4^2^-1) / x % 7", "f()", "a*b+c*d-e/f", "((((x))))", "2 ^ - 3"},
       {{"1 +* 2", 3}, {"(1))", 3}, {"f(1,)", 4}, {"1 2", 2}}},
      {"c_subset.cgram",
       {"int main(void) { int x = 1, *p; for (x = 0; x < 10; x++) { if (x == 3) break; else continue; } "
        "return x * 2 + f(1, \"a\"); }",
        "char *s = \"hi\"; // comment\nlong n[4];\n/* block */ void f(int a, char *b) { a += b[0] && !a; }",
        "", "unsigned int u; int g() { while (1) ; return; }"},
       {{"int main( { }", 10}, {"intx;", 3}, {"int f() { return 1 }", 19}}},
      {"markup.cgram",
       {"<a x=\"1\" y='2'><b/>text &amp; more<!-- c --><![CDATA[ <x> ]]></a>", "<root/>",
        "<p>caf\xC3\xA9 &#233; &#xE9;</p>"},
       {{"<a></a><b/>", 7}, {"<a>x & y</a>", 6}, {"<!-- x --><a/>", 1}, {"<a><!-- x -- y --></a>", 12}}},
      {"csv.cgram",
       {"a,b,\"c,\"\"d\"\"\"\r\n1,2,3\r\n", "x", "", "a,,b\nc\n", "\"multi\r\nline\",2"},
       {{"a\"b", 1}, {"\"a\"b", 3}}},
      {"chess.cgram",
       {"1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Bxc6+ dxc6 5. O-O f6 6. d8=Q# 1-0", "1. d4", "1-0",
        "12. Raxe1!? Qh4?? 13. exf7+ 1/2-1/2", "5... Ke7"},
       {{"1. e9", 4}, {"1. Kz", 4}, {"1. O-O-O-O", 8}, {"e4", 0}}},
      {"delimited.cgram", {"abc*[def]*", "*[]*"}, {{"a*[b*[c]*", 5}, {"*[]*x", 4}}},
      {"reply.cgram",
       {"<think>hmm</think>\nSure.\n\nbye", "<think></think>\nok<tool>search(x)</tool>\n\n"},
       {{"<think>a</think>b", 16}, {"<think>x</think>\nhi<tool>f(a)b", 29}}},
      {"reasoning_json.cgram",
       {"Let me see: <b>1</b> < 2.</think>{\"a\": [1, true]}", "</think>{}", "<think>\n\n</think>\n{\"x\": null}\n",
        "a </think nor </thin> end</think>    {  }"},
       {{"hmm</think>[1]", 11}, {"x</think>{} </think>", 12}, {"</think>{\"a\": 1}}", 16},
        {"</think>{                     }", 29}}},
      {"tool_calls.cgram",
       {"", "Just text, no call.", "Let me look.<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"cgram\"}}</tool_call>",
        "a<tool_call>\n{\"name\": \"f.g\", \"arguments\": {}}\n</tool_call>\nthen more <tool_ text"
        "<tool_call>{\"name\":\"x\",\"arguments\":{\"n\":[1,2]}}</tool_call>"},
       {{"<tool_call>{\"name\": 1", 20}, {"x<tool_call>{\"name\": \"f\", \"arguments\": {}}x", 42},
        {"<tool_call>{\"arguments\": {}}", 13}}},
  };
  return all;
}

}  // namespace

TEST_CASE("every example checks clean", "[examples]") {
  for (const std::string& name : example_names()) {
    Grammar::Outcome outcome = Grammar::parse(read_example(name), name);
    INFO(name << "\n" << outcome.diagnostics.render());
    CHECK(outcome.ok());
    CHECK(outcome.diagnostics.all().empty());
  }
}

TEST_CASE("every example has oracle cases", "[examples]") {
  for (const std::string& name : example_names()) {
    bool found = false;
    for (const Case& c : example_cases()) found = found || c.example == name;
    INFO(name);
    CHECK(found);
  }
}

TEST_CASE("the oracle on hand-written sentences and rejections of every example", "[examples][oracle]") {
  for (const Case& c : example_cases()) {
    auto g = oracle_grammar(*grammar(read_example(c.example)));
    for (std::string_view text : c.complete) {
      INFO(c.example << ": '" << text << "'");
      CHECK(verdict(g, text) == Verdict::Complete);
    }
    for (auto [text, offset] : c.rejected) {
      INFO(c.example << ": '" << text << "'");
      oracle::MatchResult result = oracle::match_text(g, text);
      CHECK(result.verdict == Verdict::Rejected);
      CHECK(result.viable_bytes == offset);
    }
  }
}

TEST_CASE("generated sentences are complete and all their prefixes viable", "[examples][oracle]") {
  size_t sentences = 0, prefixes = 0;
  for (const Case& c : example_cases()) {
    auto parsed = grammar(read_example(c.example));
    auto g = oracle_grammar(*parsed);
    SentenceGenerator generator(parsed->ir(), 1234);
    for (int i = 0; i < 25; ++i) {
      std::string sentence = generator.generate(8);
      INFO(c.example << ": '" << sentence << "'");
      oracle::Recognizer r(g, /*segmented=*/false);
      for (size_t k = 0; k < sentence.size(); ++k) {
        r.push_bytes(std::string_view(sentence).substr(k, 1));
        INFO("prefix of length " << k + 1);
        REQUIRE(r.viable());
        ++prefixes;
      }
      CHECK(r.complete());
      ++sentences;
    }
  }
  CHECK(sentences == 25 * example_cases().size());
  CHECK(prefixes > 1000);
}

TEST_CASE("mutated sentences: rejections happen at or after the mutation", "[examples][oracle]") {
  // s[0..i) is a prefix of a generated sentence, hence viable: a text that
  // differs from s only from byte i on can only be rejected at offset >= i,
  // and the reported offset must be exactly where viability ends.
  size_t rejected = 0;
  std::mt19937 rng(99);
  for (const Case& c : example_cases()) {
    auto parsed = grammar(read_example(c.example));
    auto g = oracle_grammar(*parsed);
    SentenceGenerator generator(parsed->ir(), 777);
    for (int i = 0; i < 30; ++i) {
      std::string sentence = generator.generate(6);
      size_t at = sentence.empty() ? 0 : rng() % (sentence.size() + 1);
      std::string mutated = sentence;
      const char junk[] = {'}', ']', ')', '"', '\'', '<', '>', ',', ';', '#', '\x01', '@', '\xFF', 'q', '9', '*'};
      mutated.insert(mutated.begin() + at, junk[rng() % sizeof(junk)]);
      INFO(c.example << ": '" << mutated << "' (inserted at " << at << ")");
      oracle::MatchResult result = oracle::match_text(g, mutated);
      if (result.verdict != Verdict::Rejected) continue;
      ++rejected;
      CHECK(result.viable_bytes >= at);
      oracle::Recognizer r(g, /*segmented=*/false);
      r.push_bytes(std::string_view(mutated).substr(0, result.viable_bytes));
      CHECK(r.viable());
      r.push_bytes(std::string_view(mutated).substr(result.viable_bytes, 1));
      CHECK_FALSE(r.viable());
    }
  }
  CHECK(rejected >= 150);
}

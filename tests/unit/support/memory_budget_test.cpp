// Nothing a request sends can take the process down (docs/LIMITS.md): the
// compile's memory budget, lowering that stops at its first limit, real
// schemas that once exhausted memory, the sequence's work budget on
// ambiguous grammars, and the warning that names such a rule.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>

#include "compiled_grammar.h"
#include "helpers.h"
#include "matcher.h"
#include "text_match.h"

using namespace cgram;
using namespace cgram::test;

namespace {

// One rule of `n` distinct literal alternatives.
std::string alternatives(size_t n) {
  std::string out = "start ::= ";
  for (size_t i = 0; i < n; ++i) out += fmt::format("{}'w{} x'", i ? " | " : "", i);
  return out + ";";
}

std::string errors_of(const Grammar::Outcome& outcome) { return outcome.diagnostics.render(false); }

}  // namespace

TEST_CASE("memory budget: parsing stops where the budget runs out, and says which stage reached it", "[limits][memory]") {
  const std::string text = alternatives(20000);
  CHECK(Grammar::parse(text, "alternatives.cgram").ok());  // the default, 1 GiB, is far away
  ParseOptions options;
  options.max_memory_bytes = 4 << 20;  // the tokens alone need more
  auto parsed = Grammar::parse(text, "alternatives.cgram", options);
  REQUIRE_FALSE(parsed.ok());
  REQUIRE(parsed.diagnostics.error_count() == 1);
  CHECK_THAT(errors_of(parsed), Catch::Contains("needs more than 4 MiB of memory") &&
                                    Catch::Contains("ParseOptions::max_memory_bytes") &&
                                    Catch::Contains("while parsing the grammar"));
  options.max_memory_bytes = 48 << 20;  // the tokens fit (24 MB); the terminals' automata (160 MB) do not
  auto lowered = Grammar::parse(text, "alternatives.cgram", options);
  REQUIRE_FALSE(lowered.ok());
  CHECK_THAT(errors_of(lowered), Catch::Contains("while lowering the grammar's rules and terminals"));
  // GBNF and JSON Schemas are read on the same budget, translation included.
  std::string gbnf = "root ::= ";
  for (int i = 0; i < 20000; ++i) gbnf += fmt::format("{}\"w{} x\"", i ? " | " : "", i);
  options.format = GrammarFormat::Gbnf;
  CHECK_THAT(errors_of(Grammar::parse(gbnf + "\n", "alternatives.gbnf", options)), Catch::Contains("of memory"));
}

TEST_CASE("memory budget: compiling counts the grammar, and names the stage", "[limits][memory]") {
  auto g = grammar(alternatives(3000));
  CompileOptions options;
  options.eager_index = true;
  REQUIRE((CompiledGrammar::compile(g, bundled_vocabulary(), options)).ok());
  options.max_memory_bytes = g->memory_bytes() + 1024;  // the grammar fits, nothing more
  auto refused = CompiledGrammar::compile(g, bundled_vocabulary(), options);
  REQUIRE(!refused.ok());
  CHECK_THAT(refused.error().message,
             Catch::Contains("CompileOptions::max_memory_bytes") && Catch::Contains("while collapsing rules"));
  options.max_memory_bytes = g->memory_bytes() / 2;
  CHECK_THAT((CompiledGrammar::compile(g, bundled_vocabulary(), options)).error().message,
             Catch::Contains("while parsing the grammar"));  // what the grammar holds already
  // The eager token index: each state's entry counts (16 KB and more each
  // with Llama 3; here a few KB on the bundled vocabulary).
  auto json = grammar(read_example("json.cgram"));
  CompileOptions eager;
  eager.eager_index = true;
  auto whole = (*(CompiledGrammar::compile(json, bundled_vocabulary(), eager)));
  eager.max_memory_bytes = whole->memory_bytes() / 2 + json->memory_bytes();
  auto half = CompiledGrammar::compile(json, bundled_vocabulary(), eager);
  REQUIRE(!half.ok());
  CHECK_THAT(half.error().message, Catch::Contains("while building the token index"));
  // Lazily, the same grammar compiles in that budget.
  eager.eager_index = false;
  auto lazily = CompiledGrammar::compile(json, bundled_vocabulary(), eager);
  INFO((lazily.ok() ? std::string() : lazily.error().message));
  CHECK(lazily.ok());
}

TEST_CASE("lowering stops at the first grammar-wide limit", "[limits][memory]") {
  // Past the total of DFA states, the terminals after are not built (they
  // took 10 KB each, and the abort came at 3 GB): one error, at once.
  ParseOptions options;
  options.limits.max_total_dfa_states = 1000;
  auto outcome = Grammar::parse(alternatives(100000), "alternatives.cgram", options);
  REQUIRE_FALSE(outcome.ok());
  REQUIRE(outcome.diagnostics.error_count() == 1);
  CHECK_THAT(errors_of(outcome), Catch::Contains("more than 1000 DFA states in all") &&
                                     Catch::Contains("lowering stopped here"));
}

TEST_CASE("real schemas that exhausted memory convert within 256 MiB, or are refused with a reason", "[limits][memory][json_schema]") {
  ParseOptions options;
  options.format = GrammarFormat::JsonSchema;
  options.schema.whitespace = JsonWhitespace::Compact;
  options.max_memory_bytes = 256 << 20;
  const std::string dir = std::string(CGRAM_SOURCE_DIR) + "/tests/data/schemas/jsonschemabench/";
  // A recursive $ref inside anyOf beside minProperties: 19 GB once.
  auto resjson = Grammar::parse(read_file(dir + "JsonSchemaStore-resjson.json"), "resjson.json", options);
  INFO(errors_of(resjson));
  REQUIRE(resjson.ok());
  CHECK(resjson.grammar->file().text().size() < 4000);  // the recursion is a rule, not unrolled
  REQUIRE((CompiledGrammar::compile(resjson.grammar, bundled_vocabulary())).ok());
  // Resources inside resources, to any depth.
  CHECK(match_text(*resjson.grammar, R"({"a":{"b":{"c":"d"},"e":"f"}})").verdict == TextVerdict::Complete);
  CHECK(match_text(*resjson.grammar, R"({"a":{"b":1}})").verdict == TextVerdict::Rejected);
  // 12 KB that grew past 6 GB.
  auto o61026 = Grammar::parse(read_file(dir + "Github_hard-o61026.json"), "o61026.json", options);
  INFO(errors_of(o61026));
  CHECK(o61026.ok());
  // Refused once for the regex of its keys; the shorter character classes
  // (negated where shorter) bring it within the limit, and within the budget.
  auto o47197 = Grammar::parse(read_file(dir + "Github_hard-o47197.json"), "o47197.json", options);
  INFO(errors_of(o47197));
  CHECK(o47197.ok());
  // Schemas that took 10 to 41 s, then were refused at once: hundreds of
  // properties beside additionalProperties need a regex of the other keys.
  // Written with the characters no name uses once, not at every node of the
  // names' trie, those regexes are about half as long: four fit the limits
  // and convert within the budget.
  for (const char* file : {"JsonSchemaStore-detekt-1.22.0.json", "JsonSchemaStore-jscsrc.json",
                           "JsonSchemaStore-pantsbuild-2.16.0.json", "JsonSchemaStore-renovate-schema.json"}) {
    INFO(file);
    auto outcome = Grammar::parse(read_file(dir + file), file, options);
    INFO(errors_of(outcome));
    CHECK(outcome.ok());
  }
  auto renovate = Grammar::parse(read_file(dir + "JsonSchemaStore-renovate-schema.json"), "renovate.json", options);
  REQUIRE(renovate.ok());
  REQUIRE((CompiledGrammar::compile(renovate.grammar, bundled_vocabulary())).ok());
  CHECK(match_text(*renovate.grammar, R"({"automerge":true,"extends":["config:base"]})").verdict ==
        TextVerdict::Complete);
  CHECK(match_text(*renovate.grammar, R"({"automerge":"yes"})").verdict == TextVerdict::Rejected);
  // 412 properties still pass it: refused at once, with the reason.
  auto o43012 = Grammar::parse(read_file(dir + "Github_ultra-o43012.json"), "o43012.json", options);
  CHECK_FALSE(o43012.ok());
  CHECK_THAT(errors_of(o43012), Catch::Contains("412 properties (additionalProperties is not false) need a regex of"));
}

TEST_CASE("ambiguous grammars: the sequence's work budget ends them with its error", "[limits][matcher]") {
  struct Case {
    const char* source;
    std::vector<const char*> tokens;  // repeated
  } cases[] = {{"start ::= s ; s ::= s s | 'a' | '' ;", {"a"}},
               {"start ::= e ; e ::= e '+' e | 'a' ;", {"a", "+"}}};
  for (const Case& c : cases) {
    INFO(c.source);
    auto compiled = (*CompiledGrammar::compile(grammar(c.source), bundled_vocabulary()));
    Matcher m(compiled);
    std::vector<uint32_t> words(m.mask_words());
    size_t steps = 0;
    for (; steps < 5000 && !m.has_error(); ++steps) {
      m.fill_mask(words);
      if (m.advance(*bundled_vocabulary()->find(c.tokens[steps % c.tokens.size()])) != AdvanceResult::Ongoing) break;
    }
    INFO("steps " << steps);
    REQUIRE(m.has_error());
    // The sequence's budget stopped it, not the limit of one call.
    CHECK_THAT(m.error(), Catch::Contains("over this sequence") && Catch::Contains("max_work_per_byte"));
    // A fresh sequence starts with a fresh budget.
    m.reset();
    CHECK_FALSE(m.has_error());
    CHECK(m.advance(*bundled_vocabulary()->find("a")) == AdvanceResult::Ongoing);
  }
  // 0 turns the bound off (the per-call bound still holds).
  MatcherOptions off;
  off.limits.max_work_per_byte = 0;
  auto compiled = (*CompiledGrammar::compile(grammar("start ::= e ; e ::= e '+' e | 'a' ;"), bundled_vocabulary()));
  Matcher m(compiled, off);
  for (int i = 0; i < 50; ++i) REQUIRE(m.advance(*bundled_vocabulary()->find(i % 2 ? "+" : "a")) == AdvanceResult::Ongoing);
}

TEST_CASE("a rule that recurses on both sides gets a warning that names it", "[limits][diagnostics]") {
  auto warned = [](const char* source) {
    auto outcome = parse(source);
    REQUIRE(outcome.ok());
    std::string out;
    for (const Diagnostic& d : outcome.diagnostics.all())
      if (d.severity == Severity::Warning && d.message.find("is ambiguous") != std::string::npos) out += d.message;
    return out;
  };
  CHECK_THAT(warned("start ::= e ; e ::= e '+' e | 'a' ;"), Catch::Contains("rule 'e' is ambiguous") &&
                                                               Catch::Contains("e ::= e '+' e"));
  CHECK_THAT(warned("start ::= s ; s ::= s s | 'a' | '' ;"), Catch::Contains("rule 's' is ambiguous"));
  // Hidden behind nullable symbols.
  CHECK_THAT(warned("start ::= s ; s ::= n s n s n | 'a' ; n ::= 'x' | '' ;"), Catch::Contains("rule 's'"));
  // One side only, or the same place reached from both ends: not ambiguous
  // in this way.
  CHECK(warned("start ::= e ; e ::= e '+' 'a' | 'a' ;").empty());
  CHECK(warned("start ::= e ; e ::= 'a' '+' e | 'a' ;").empty());
  CHECK(warned("start ::= l ; l ::= l 'x'? | 'a' ;").empty());
  CHECK(warned("start ::= ('a'?)* ;").empty());
  // Every example and suite grammar stays quiet.
  size_t read = 0;
  for (const char* dir : {"/examples", "/bench/suite"})
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(CGRAM_SOURCE_DIR) + dir)) {
      if (entry.path().extension() != ".cgram") continue;
      INFO(entry.path());
      CHECK(warned(read_file(entry.path().string()).c_str()).empty());
      ++read;
    }
  CHECK(read >= 20);
}

TEST_CASE("a property name of 300,000 characters is refused before anything recursive reads it", "[limits][memory][json_schema]") {
  // The regex of "a key other than this one" is built a level per
  // character, and the trie of names is freed the same way.
  ParseOptions options;
  options.format = GrammarFormat::JsonSchema;
  const std::string schema = fmt::format(R"({{"type": "object", "properties": {{"{}": {{}}}}}})", std::string(300000, 'a'));
  auto outcome = Grammar::parse(schema, "long_name.json", options);
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(errors_of(outcome), Catch::Contains("need a regex of more than 128 KiB"));
  // A name of 100 characters is read as usual. (Past about 250, the regex nests its groups
  // deeper than the regex limit: issue "Every schema users send".)
  const std::string fine = fmt::format(R"({{"type": "object", "properties": {{"{}": {{}}}}}})", std::string(100, 'a'));
  CHECK(Grammar::parse(fine, "name.json", options).ok());
}

// JSON Schema in: the pieces of the translator (import/json_text.h,
// import/json_schema.h), each against an independent reference.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "grammar.h"
#include "helpers.h"
#include "json_schema.h"
#include "json_text.h"

using namespace cgram;
using namespace cgram::test;

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <random>
#include <regex>

#include "sentence_generator.h"

namespace {

std::shared_ptr<const Grammar> grammar_of(std::string_view source) {
  Grammar::Outcome outcome = Grammar::parse(source, "test.cgram");
  INFO(outcome.diagnostics.render() << source);
  REQUIRE(outcome.ok());
  return outcome.grammar;
}

bool complete(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  return verdict(oracle_grammar(*g), text) == oracle::Verdict::Complete;
}

Grammar::Outcome parse_schema(std::string_view schema, JsonWhitespace layout = JsonWhitespace::Compact,
                              bool strict = false) {
  return parse_json_schema(schema, layout, JsonPropertyOrder::Schema, strict);
}

// A random fixed-point number of few digits (as the grammar of bounds writes them).
std::string random_number(std::mt19937_64& rng) {
  std::string out = rng() % 2 ? "-" : "";
  const int integer_digits = 1 + static_cast<int>(rng() % 3);
  std::string integer;
  for (int i = 0; i < integer_digits; ++i) integer += static_cast<char>('0' + rng() % 10);
  integer.erase(0, std::min(integer.find_first_not_of('0'), integer.size() - 1));
  out += integer;
  if (rng() % 2) {
    out += '.';
    const int fraction_digits = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < fraction_digits; ++i) out += static_cast<char>('0' + rng() % 10);
  }
  return out;
}

}  // namespace

TEST_CASE("number bounds are exact digit automata: every fixed-point number is in iff its value is",
          "[json-schema]") {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 60; ++round) {
    std::optional<json::NumberBound> lower, upper;
    if (rng() % 4) lower = json::NumberBound{*json::parse_decimal(random_number(rng)), rng() % 2 == 0};
    if (rng() % 4) upper = json::NumberBound{*json::parse_decimal(random_number(rng)), rng() % 2 == 0};
    const bool integer = rng() % 3 == 0;
    auto regex = json::number_regex(lower, upper, integer);
    // The reference: strtod values (few digits: exact as doubles).
    auto in_range = [&](const std::string& text) {
      const double v = std::strtod(text.c_str(), nullptr);
      if (integer && text.find('.') != std::string::npos) return false;
      if (lower) {
        const double b = std::strtod(json::to_string(lower->value).c_str(), nullptr);
        if (lower->inclusive ? v < b : v <= b) return false;
      }
      if (upper) {
        const double b = std::strtod(json::to_string(upper->value).c_str(), nullptr);
        if (upper->inclusive ? v > b : v >= b) return false;
      }
      return true;
    };
    std::vector<std::string> samples;
    for (int i = 0; i < 150; ++i) samples.push_back(random_number(rng));
    for (const auto* b : {&lower, &upper})
      if (*b) {
        const std::string at = json::to_string((*b)->value);
        const bool point = at.find('.') != std::string::npos;
        samples.push_back(at);
        samples.push_back(at + (point ? "0" : ".0"));
        samples.push_back(at + (point ? "1" : ".1"));
      }
    samples.push_back("-0");
    samples.push_back("0.0");
    if (!regex) {
      for (const std::string& s : samples) {
        INFO(s);
        CHECK_FALSE(in_range(s));
      }
      continue;
    }
    auto g = grammar_of(fmt::format("start ::= #'{}' ;", *regex));
    for (const std::string& s : samples) {
      INFO(fmt::format("{} in [{}{}, {}{}] integer {}", s, lower ? (lower->inclusive ? "≥" : ">") : "",
                       lower ? json::to_string(lower->value) : "-inf", upper ? (upper->inclusive ? "≤" : "<") : "",
                       upper ? json::to_string(upper->value) : "inf", integer));
      CHECK(complete(g, s) == in_range(s));
    }
  }
}

TEST_CASE("decimals are parsed exactly, exponents included", "[json-schema]") {
  CHECK(json::to_string(*json::parse_decimal("1.50e2")) == "150");
  CHECK(json::to_string(*json::parse_decimal("-0.000")) == "0");
  CHECK(json::to_string(*json::parse_decimal("12.5e-3")) == "0.0125");
  CHECK(json::to_string(*json::parse_decimal("1e400")).size() == 401);
  CHECK_FALSE(json::parse_decimal("1e401"));
  CHECK_FALSE(json::parse_decimal("1.2.3"));
  CHECK_FALSE(json::parse_decimal("e5"));
  CHECK(json::compare(*json::parse_decimal("-0"), *json::parse_decimal("0.0")) == 0);
  CHECK(json::compare(*json::parse_decimal("-2"), *json::parse_decimal("-10")) > 0);
}

TEST_CASE("ECMAScript patterns mean what std::regex (ECMAScript) finds in the string", "[json-schema]") {
  const std::vector<std::string> patterns = {"a+b", "^a", "b$", "^ab*$", "^a|b$", "[a-c]{2}", "x(?:ab)?y",
                                             "^\\d{2,3}$", "a.c", "\\s", "^[^a]*$", "(a|b)c", "",
                                             // Lazy quantifiers: the same strings have some match.
                                             "a+?b", "^a*?$", "x(?:ab)??y", "^[a-c]{1,2}?c", "a??b", "[?]a",
                                             // Anchors inside groups that begin or end an alternative.
                                             "^$|(^a+$)", "(^ab)|(^c$)", "(^a|^b|c1)", "^(a$|b)", "(^a|b)c",
                                             "^(x(y)?$)", "(?:^a|b)(?:c|d$)",
                                             // \S inside a class: the class or a character that is no space.
                                             "^[\\S]+$", "^[a\\S ]+$", "[\\S\n]b", "^[ \\S]*$"};
  std::mt19937_64 rng(5);
  for (const std::string& pattern : patterns) {
    auto converted = json::ecma_pattern_to_regex(pattern);
    REQUIRE(converted.ok());
    auto parsed = ir::parse_regex(*converted);
    REQUIRE(std::holds_alternative<ir::RegexNode>(parsed));
    auto encoded = json::encode_regex(std::get<ir::RegexNode>(parsed));
    REQUIRE(encoded);
    auto g = grammar_of(fmt::format("start ::= #'\\\"{}\\\"' ;", *encoded));
    const std::regex reference(pattern, std::regex::ECMAScript);
    for (int i = 0; i < 200; ++i) {
      static constexpr std::string_view kChars = "abcxy19 \n\"";
      std::string s;
      for (size_t n = rng() % 6; n > 0; --n) s += kChars[rng() % kChars.size()];
      INFO(fmt::format("pattern {} on {:?}", pattern, s));
      CHECK(complete(g, json::json_string_text(s)) == std::regex_search(s, reference));
    }
  }
}

TEST_CASE("a brace that closes no count is a character: the '?' after it stays a quantifier", "[json-schema]") {
  // ECMAScript's Annex B (std::regex refuses these, so no reference above).
  for (const char* pattern : {"a}?b", "x{a}?y", "a{,5}?b"}) {
    auto converted = json::ecma_pattern_to_regex(pattern);
    REQUIRE(converted.ok());
    CHECK(converted->find(std::string(pattern)) != std::string::npos);
  }
  auto lazy = json::ecma_pattern_to_regex("a{1,5}?b");
  REQUIRE(lazy.ok());
  CHECK(lazy->find("a{1,5}b") != std::string::npos);
}

TEST_CASE("a pattern that starts with look-aheads is its rest within and outside their languages", "[json-schema]") {
  // std::regex (ECMAScript) has look-aheads: the reference.
  const std::vector<std::string> patterns = {"^(?!ab)[a-c]*$", "^(?=.{1,3}$)[a-c]+", "^(?=a)(?!ab)",
                                             "^(?!^b|c)a*",    "^(?=[^=]+$)(?!\\s+$)(.|\\n)+$", "^(?!a)^b?c*$",
                                             "^(?!(a|b)c$)(?=.*c)"};
  std::mt19937_64 rng(9);
  for (const std::string& pattern : patterns) {
    const nlohmann::json schema = {{"type", "string"}, {"pattern", pattern}};
    Grammar::Outcome outcome = parse_schema(schema.dump());
    INFO(pattern << "\n" << outcome.diagnostics.render());
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.render().empty());
    const std::regex reference(pattern, std::regex::ECMAScript);
    for (int i = 0; i < 300; ++i) {
      static constexpr std::string_view kChars = "abc= \n";
      std::string s;
      for (size_t n = rng() % 6; n > 0; --n) s += kChars[rng() % kChars.size()];
      INFO(fmt::format("on {:?}", s));
      CHECK(complete(outcome.grammar, json::json_string_text(s)) == std::regex_search(s, reference));
    }
  }
  // Look-aheads elsewhere are still refused, with the reason.
  Grammar::Outcome inner = parse_schema(R"js({"type": "string", "pattern": "^a(?!b)"})js");
  CHECK_FALSE(inner.ok());
  CHECK_THAT(inner.diagnostics.render(), Catch::Contains("lookahead is not supported"));
}

TEST_CASE("unsupported patterns are errors that say why", "[json-schema]") {
  for (const char* p : {"a^b", "a$b", "\\p{L}", "(a)\\1", "\\bword", "[]", "(?=a)"}) {
    auto converted = json::ecma_pattern_to_regex(p);
    if (auto* e = converted.if_error()) {
      CHECK_FALSE(e->message.empty());
      continue;
    }
    // Lookahead passes through and is refused by the regex parser.
    CHECK(std::holds_alternative<ir::RegexError>(ir::parse_regex(*converted)));
  }
}

TEST_CASE("additional property keys are exactly the names not declared", "[json-schema]") {
  const std::vector<std::string> names = {"a", "ab", "b\"c", "é", ""};
  auto g = grammar_of(fmt::format("start ::= #'{}' ;", *json::key_not_in_regex(names)));
  for (const char* key : {"a", "ab", "b\"c", "é", "", "b", "abc", "ba", "b\"", "e", "éé", "A", "\n"}) {
    INFO(key);
    const bool declared = std::find(names.begin(), names.end(), std::string(key)) != names.end();
    CHECK(complete(g, json::json_string_text(key)) == !declared);
  }
  // One spelling per character: \u0061 is not another way to write "a".
  CHECK_FALSE(complete(g, "\"\\u0061x\""));
}

TEST_CASE("additional property keys: random name sets, every key up to three characters", "[json-schema]") {
  // Characters of every kind the key regex writes apart: letters, one that
  // needs two bytes, one that needs an escape, and one no name uses.
  const std::vector<std::string> alphabet = {"a", "b", "é", "\"", "\n", "z"};
  std::vector<std::string> keys{""};
  for (size_t length = 1, from = 0; length <= 3; ++length) {
    const size_t to = keys.size();
    for (size_t i = from; i < to; ++i)
      for (const std::string& c : alphabet) keys.push_back(keys[i] + c);
    from = to;
  }
  std::mt19937 random(7);
  for (int round = 0; round < 12; ++round) {
    std::vector<std::string> names;
    const size_t count = 1 + random() % 5;
    for (size_t i = 0; i < count; ++i) {
      std::string name;
      for (size_t n = random() % 4; n > 0; --n) name += alphabet[random() % (alphabet.size() - 1)];  // never z
      names.push_back(name);
    }
    auto g = grammar_of(fmt::format("start ::= #'{}' ;", *json::key_not_in_regex(names)));
    for (const std::string& key : keys) {
      const bool declared = std::find(names.begin(), names.end(), key) != names.end();
      INFO(fmt::format("names {}, key '{}'", fmt::join(names, " | "), key));
      CHECK(complete(g, json::json_string_text(key)) == !declared);
    }
  }
}

TEST_CASE("the compact and pretty layouts are exactly what JSON serialisers write", "[json-schema]") {
  const std::string schema = R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 4},
      "tags": {"type": "array", "items": {"enum": ["x", "y", [1, {"k": null}]]}, "maxItems": 3},
      "child": {"$ref": "#"},
      "flags": {"type": "object", "additionalProperties": {"type": "boolean"}, "maxProperties": 2}
    },
    "required": ["name"],
    "additionalProperties": false
  })";
  for (JsonWhitespace layout : {JsonWhitespace::Compact, JsonWhitespace::Pretty}) {
    Grammar::Outcome outcome = parse_schema(schema, layout);
    INFO(outcome.diagnostics.render());
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.warning_count() == 0);  // maxProperties 2: the members counted
    test::SentenceGenerator generator(outcome.grammar->ir(), 3);
    for (int i = 0; i < 60; ++i) {
      const std::string text = generator.generate(8);
      INFO(text);
      const auto value = nlohmann::ordered_json::parse(text);
      CHECK(text == (layout == JsonWhitespace::Pretty ? value.dump(2) : value.dump()));
    }
  }
}

TEST_CASE("flexible whitespace: runs of at most 20 by default, any length on request", "[json-schema]") {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}})";
  auto spaced = [](size_t run) {
    const std::string ws(run, ' ');
    return "{" + ws + "\"a\"" + ws + ":" + ws + "[" + ws + "1" + ws + "," + ws + "2" + ws + "]" + ws + "}";
  };
  ParseOptions options;
  options.format = GrammarFormat::JsonSchema;
  CHECK(options.schema.max_whitespace == kDefaultMaxWhitespace);
  CHECK(kDefaultMaxWhitespace == 20);
  for (std::optional<uint32_t> bound : {std::optional<uint32_t>(20), std::optional<uint32_t>(3),
                                        std::optional<uint32_t>(0), std::optional<uint32_t>()}) {
    options.schema.max_whitespace = bound;
    Grammar::Outcome outcome = Grammar::parse(schema, "schema.json", options);
    REQUIRE(outcome.ok());
    auto g = oracle_grammar(*outcome.grammar);
    for (size_t run : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{20}, size_t{21}, size_t{200}}) {
      INFO("bound " << (bound ? std::to_string(*bound) : "none") << ", runs of " << run);
      CHECK((verdict(g, spaced(run)) == oracle::Verdict::Complete) == (!bound || run <= *bound));
      // Mixed whitespace counts alike, and around the document too.
      const std::string mixed = std::string(run, '\n') + "{}" + std::string(run, '\t');
      CHECK((verdict(g, mixed) == oracle::Verdict::Complete) == (!bound || run <= *bound));
    }
  }
}

TEST_CASE("schema diagnostics point into the schema; --strict makes ignored keywords errors", "[json-schema]") {
  const std::string schema = "{\n  \"type\": \"array\",\n  \"uniqueItems\": true\n}";
  Grammar::Outcome relaxed = parse_schema(schema);
  REQUIRE(relaxed.ok());
  CHECK(relaxed.diagnostics.render().find("schema.json:3:18: warning: 'uniqueItems' is not supported") !=
        std::string::npos);
  Grammar::Outcome strict = parse_schema(schema, JsonWhitespace::Compact, true);
  CHECK_FALSE(strict.ok());
  CHECK(strict.diagnostics.render().find("schema.json:3:18: error: 'uniqueItems'") != std::string::npos);

  auto error_of = [](std::string_view text) {
    Grammar::Outcome outcome = parse_schema(text);
    REQUIRE_FALSE(outcome.ok());
    return outcome.diagnostics.render();
  };
  CHECK(error_of("{\"type\": \"object\",}").find("schema.json:1:19: error: invalid JSON") != std::string::npos);
  CHECK(error_of("{\"$ref\": \"#/$defs/missing\"}").find("names nothing in the schema") != std::string::npos);
  CHECK(error_of("{\"$ref\": \"other.json\"}").find("only references inside the schema") != std::string::npos);
  CHECK(error_of("{\"type\": \"string\", \"pattern\": \"\\\\p{L}\"}").find("1:31: error: 'pattern': Unicode") !=
        std::string::npos);
  CHECK(error_of("{\"type\": \"strin\"}").find("'type' must be one of") != std::string::npos);
  CHECK(error_of("false").find("the schema accepts no JSON value") != std::string::npos);
  CHECK(error_of("{\"allOf\": [{\"type\": \"string\"}, {\"type\": \"number\"}]}").find("accepts no JSON value") !=
        std::string::npos);
  CHECK(error_of("{\"$dynamicRef\": \"#x\"}").find("'$dynamicRef' is not supported") != std::string::npos);
  CHECK(error_of("{\"minimum\": 1e999}").find("invalid JSON: number overflow") != std::string::npos);
  CHECK(error_of("{\"minimum\": \"1\"}").find("'minimum' must be a number") != std::string::npos);
  CHECK(error_of(std::string(300, '[') + std::string(300, ']')).find("nests deeper than 256") != std::string::npos);
  // oneOf whose branches cannot overlap is exact; otherwise it is read as anyOf, with a warning.
  CHECK(parse_schema(R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})", JsonWhitespace::Compact, true).ok());
  CHECK(parse_schema(R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                                   {"type": "object", "properties": {"k": {"const": 2}}, "required": ["k"]}]})",
                     JsonWhitespace::Compact, true)
            .ok());
  CHECK_FALSE(parse_schema(R"({"oneOf": [{"type": "array"}, {"type": "array", "uniqueItems": true}]})",
                           JsonWhitespace::Compact, true)
                  .ok());
}

TEST_CASE("allOf merges: properties with additionalProperties, bounds, types, enums", "[json-schema]") {
  Grammar::Outcome outcome = parse_schema(R"({"allOf": [
      {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "additionalProperties": false},
      {"properties": {"a": {"maximum": 5}, "b": {"type": "string"}}, "required": ["a"]}]})");
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  auto oracle = oracle_grammar(*outcome.grammar);
  auto ok = [&](std::string_view text) { return verdict(oracle, text) == oracle::Verdict::Complete; };
  CHECK(ok(R"({"a":5})"));
  CHECK(ok(R"({"a":0})"));
  CHECK_FALSE(ok(R"({"a":6})"));
  CHECK_FALSE(ok(R"({"a":-1})"));
  CHECK_FALSE(ok(R"({})"));
  // b is not allowed by the first part (additionalProperties: false there).
  CHECK_FALSE(ok(R"({"a":1,"b":"x"})"));
}

TEST_CASE("anyOf and oneOf side by side both constrain, with the schema's other keywords", "[json-schema]") {
  Grammar::Outcome outcome = parse_schema(
      R"({"type": "integer", "anyOf": [{"minimum": 0}], "oneOf": [{"maximum": 9}, {"type": "string"}]})");
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  auto oracle = oracle_grammar(*outcome.grammar);
  auto ok = [&](std::string_view text) { return verdict(oracle, text) == oracle::Verdict::Complete; };
  CHECK(ok("0"));
  CHECK(ok("9"));
  CHECK_FALSE(ok("10"));
  CHECK_FALSE(ok("-1"));
  CHECK_FALSE(ok("\"x\""));
}

TEST_CASE("numbers beyond any integer type are read without overflow", "[json-schema]") {
  // 1e300 is an integer value (JSON Schema counts values, not writings).
  Grammar::Outcome big = parse_schema(R"({"type": "integer", "enum": [1e300, 0.5]})");
  INFO(big.diagnostics.render());
  REQUIRE(big.ok());
  CHECK(complete(big.grammar, "1" + std::string(300, '0')));
  CHECK_FALSE(complete(big.grammar, "0.5"));
  Grammar::Outcome length = parse_schema(R"({"type": "string", "minLength": 1e300})");
  CHECK_FALSE(length.ok());
  CHECK(length.diagnostics.render().find("'minLength' must be a non-negative integer") != std::string::npos);
}

TEST_CASE("enum and const numbers in every fixed-point spelling: trailing fraction zeros too", "[json-schema]") {
  // MaskBench's documents write `"since": 2.0` for `"enum": [2.0]`, as
  // Python's json module does.
  Grammar::Outcome two = parse_schema(R"({"enum": [2.0, 0.25, -3]})");
  INFO(two.diagnostics.render());
  REQUIRE(two.ok());
  for (const char* text : {"2", "2.0", "2.000", "0.25", "0.250", "-3", "-3.0"}) CHECK(complete(two.grammar, text));
  for (const char* text : {"2.", "2.01", "0.2", "0.251", "3", "-3.5", "02"}) CHECK_FALSE(complete(two.grammar, text));
  Grammar::Outcome one = parse_schema(R"({"type": "integer", "const": 7})");
  REQUIRE(one.ok());
  CHECK(complete(one.grammar, "7"));
  CHECK(complete(one.grammar, "7.00"));  // an integer to JSON Schema
  CHECK_FALSE(complete(one.grammar, "7.1"));
}

TEST_CASE("keys that are no JSON Schema keyword are annotations, beside enum too; bounds beside enum filter it",
          "[json-schema]") {
  // `readonly`, `example`, `id`, OpenAPI's `x-…`: ignored as the specification
  // says, with no loosening warning (strict mode takes them).
  Grammar::Outcome outcome = parse_schema(
      R"({"type": "object", "x-order": 3, "properties": {
            "kind": {"enum": ["a", "bb", "ccc"], "readonly": true, "example": "a", "minLength": 2},
            "n": {"enum": [1, 5, 10, "x"], "id": "n", "maximum": 5, "exclusiveMinimum": 1},
            "l": {"const": [1, 2], "minItems": 3}},
          "required": ["kind", "n"]})",
      JsonWhitespace::Compact, true);
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  CHECK(outcome.diagnostics.warning_count() == 0);
  auto oracle = oracle_grammar(*outcome.grammar);
  auto ok = [&](std::string_view text) { return verdict(oracle, text) == oracle::Verdict::Complete; };
  CHECK(ok(R"({"kind":"bb","n":5})"));
  CHECK(ok(R"({"kind":"ccc","n":"x"})"));
  CHECK_FALSE(ok(R"({"kind":"a","n":5})"));  // minLength 2
  CHECK_FALSE(ok(R"({"kind":"bb","n":1})"));  // exclusiveMinimum 1
  CHECK_FALSE(ok(R"({"kind":"bb","n":10})"));  // maximum 5
  CHECK_FALSE(ok(R"({"kind":"bb","n":5,"l":[1,2]})"));  // minItems 3 leaves no value
  // A near miss of a keyword is still ignored, with a note that names it.
  Grammar::Outcome typo = parse_schema(R"({"type": "string", "minLenght": 3})");
  REQUIRE(typo.ok());
  CHECK(typo.diagnostics.render().find("note: 'minLenght' is not a JSON Schema keyword and is ignored; did you mean "
                                       "'minLength'?") != std::string::npos);
  // The nearest keyword is named (`mxItems` is one edit from maxItems, two from minItems).
  Grammar::Outcome nearest = parse_schema(R"({"type": "array", "mxItems": 3})");
  REQUIRE(nearest.ok());
  CHECK(nearest.diagnostics.render().find("did you mean 'maxItems'?") != std::string::npos);
  // Bounds beside the values are read as anywhere: 2.0 is a length, "2" an error.
  Grammar::Outcome float_bound = parse_schema(R"({"enum": ["a", "bb"], "minLength": 2.0})");
  REQUIRE(float_bound.ok());
  CHECK_FALSE(verdict(oracle_grammar(*float_bound.grammar), R"("a")") == oracle::Verdict::Complete);
  CHECK(verdict(oracle_grammar(*float_bound.grammar), R"("bb")") == oracle::Verdict::Complete);
  Grammar::Outcome bad_bound = parse_schema(R"({"enum": ["a", "bb"], "minLength": "2"})");
  CHECK_FALSE(bad_bound.ok());
  CHECK(bad_bound.diagnostics.render().find("'minLength' must be a non-negative integer") != std::string::npos);
  // A keyword the values cannot be checked against here is still refused.
  Grammar::Outcome props = parse_schema(R"({"enum": [{"a": 1}], "properties": {"a": {"type": "string"}}})");
  CHECK_FALSE(props.ok());
  CHECK(props.diagnostics.render().find("'properties' together with 'enum' or 'const' is not supported") !=
        std::string::npos);
}

TEST_CASE("a chain of definitions nests as deep as its references go, within a bound of its own", "[json-schema]") {
  // Each definition one level deep, each referring to the next: the text is
  // shallow, the translation follows the chain.
  auto chain = [](int length) {
    nlohmann::json defs = nlohmann::json::object();
    for (int i = 0; i < length; ++i) {
      nlohmann::json next = i + 1 < length ? nlohmann::json{{"$ref", fmt::format("#/$defs/d{}", i + 1)}}
                                           : nlohmann::json{{"type", "integer"}};
      defs[fmt::format("d{}", i)] = {{"type", "object"}, {"properties", {{"next", next}}}, {"additionalProperties", false}};
    }
    return nlohmann::json{{"$defs", defs}, {"$ref", "#/$defs/d0"}}.dump();
  };
  Grammar::Outcome deep = parse_schema(chain(600));
  INFO(deep.diagnostics.render());
  REQUIRE(deep.ok());
  auto oracle = oracle_grammar(*deep.grammar);
  CHECK(verdict(oracle, R"({"next":{"next":{}}})") == oracle::Verdict::Complete);
  CHECK(verdict(oracle, R"({"next":1})") != oracle::Verdict::Complete);
  Grammar::Outcome too_deep = parse_schema(chain(3000));
  CHECK_FALSE(too_deep.ok());
  CHECK(too_deep.diagnostics.render().find(
            fmt::format("followed through its references, nests deeper than {} levels", kMaxReferenceNesting)) !=
        std::string::npos);
}

TEST_CASE("an error is never dropped for warnings past the diagnostics cap", "[json-schema]") {
  // 150 properties each with an ignored keyword (a warning each), then one
  // that refuses the schema, last in the file.
  std::string properties;
  for (int i = 0; i < 150; ++i) properties += fmt::format("\"p{}\": {{\"type\": \"array\", \"uniqueItems\": true}}, ", i);
  properties += "\"last\": {\"$dynamicRef\": \"#x\"}";
  Grammar::Outcome outcome = parse_schema("{\"type\": \"object\", \"properties\": {" + properties + "}}");
  CHECK_FALSE(outcome.ok());
  CHECK(outcome.diagnostics.dropped() > 0);
  CHECK(outcome.diagnostics.render().find("error: '$dynamicRef' is not supported") != std::string::npos);
}

TEST_CASE("bounds that leave one item or no character write no empty repetition", "[json-schema]") {
  // `(',' item){0}` would be read, with a warning that is no loosening.
  for (const char* schema : {R"({"type": "array", "items": {"type": "integer"}, "maxItems": 1})",
                             R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 1})",
                             R"({"type": "string", "maxLength": 0})"}) {
    INFO(schema);
    Grammar::Outcome outcome = parse_schema(schema);
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.warning_count() == 0);
  }
  auto one = oracle_grammar(*parse_schema(R"({"type": "array", "items": {"type": "integer"}, "maxItems": 1})").grammar);
  CHECK(verdict(one, "[]") == oracle::Verdict::Complete);
  CHECK(verdict(one, "[7]") == oracle::Verdict::Complete);
  CHECK(verdict(one, "[7,8]") != oracle::Verdict::Complete);
  auto empty = oracle_grammar(*parse_schema(R"({"type": "string", "maxLength": 0})").grammar);
  CHECK(verdict(empty, R"("")") == oracle::Verdict::Complete);
  CHECK(verdict(empty, R"("a")") != oracle::Verdict::Complete);
}

TEST_CASE("allOf with a reference to a recursive allOf merges its parts, not itself again", "[json-schema]") {
  // Merging `c` (an allOf) kept whole met the same merge again when
  // converted: the grammar was `r ::= r` and the schema refused as empty.
  Grammar::Outcome outcome = parse_schema(R"({"definitions": {"c": {"allOf": [
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        {"oneOf": [{"properties": {"cs": {"type": "array", "items": {"$ref": "#/definitions/c"}}}, "required": ["cs"]},
                   {"properties": {"x": {"type": "integer"}}, "required": ["x"]}]}]}},
      "allOf": [{"$ref": "#/definitions/c"}, {"properties": {"d": {"type": "integer"}}, "required": ["d"]}]})");
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  auto oracle = oracle_grammar(*outcome.grammar);
  auto ok = [&](std::string_view text) { return verdict(oracle, text) == oracle::Verdict::Complete; };
  CHECK(ok(R"({"n":1,"d":2,"cs":[]})"));
  CHECK(ok(R"({"n":1,"d":2,"x":3})"));
  CHECK(ok(R"({"n":1,"d":2,"cs":[{"n":5,"x":1}]})"));
  CHECK_FALSE(ok(R"({"n":1,"d":2})"));                    // one of cs, x
  CHECK_FALSE(ok(R"({"n":1,"d":2,"cs":[{"x":1}]})"));     // n inside too
}

namespace {
Grammar::Outcome parse_schema_any_order(std::string_view schema) {
  return parse_json_schema(schema, JsonWhitespace::Compact, JsonPropertyOrder::Any);
}
}  // namespace

TEST_CASE("patternProperties: every key gets the schemas of its name, its patterns, or additionalProperties",
          "[json-schema]") {
  Grammar::Outcome outcome = parse_schema(R"({"type": "object",
      "properties": {"ab": {"type": ["string", "integer"]}},
      "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 5}, "^c{2}$": false},
      "additionalProperties": {"type": "boolean"}})");
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  CHECK(outcome.diagnostics.render().empty());  // exact: no warning
  auto oracle = oracle_grammar(*outcome.grammar);
  std::vector<std::string> keys{""};
  for (size_t begin = 0, end = 1, length = 0; length < 3; ++length, begin = end, end = keys.size())
    for (size_t i = begin; i < end; ++i)
      for (char c : std::string("abc")) keys.push_back(keys[i] + c);
  const std::vector<std::string> values{"1", "7", "\"s\"", "true"};
  for (const std::string& key : keys)
    for (const std::string& value : values) {
      const bool number = value == "1" || value == "7", is_string = value == "\"s\"", boolean = value == "true";
      const bool a = std::regex_search(key, std::regex("^a")), b = std::regex_search(key, std::regex("b$")),
                 cc = std::regex_search(key, std::regex("^c{2}$"));
      bool allowed = true;
      if (key == "ab") allowed = allowed && (is_string || number);
      if (a) allowed = allowed && number;
      if (b) allowed = allowed && (!number || value == "7");
      if (cc) allowed = false;
      if (key != "ab" && !a && !b && !cc) allowed = allowed && boolean;
      const std::string document = fmt::format(R"({{"{}":{}}})", key, value);
      INFO(document);
      CHECK((verdict(oracle, document) == oracle::Verdict::Complete) == allowed);
    }
}

TEST_CASE("allOf merges patternProperties where it is exact, and says where it is not", "[json-schema]") {
  Grammar::Outcome outcome = parse_schema(R"({"allOf": [
      {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
      {"properties": {"xa": {"minimum": 3}, "y": {"type": "string"}}}]})");
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  auto oracle = oracle_grammar(*outcome.grammar);
  auto ok = [&](std::string_view text) { return verdict(oracle, text) == oracle::Verdict::Complete; };
  CHECK(ok(R"({"xa":4})"));
  CHECK_FALSE(ok(R"({"xa":2})"));
  CHECK_FALSE(ok(R"({"xa":"s"})"));  // the pattern's schema applies to the listed name too
  CHECK_FALSE(ok(R"({"xb":"s"})"));
  CHECK(ok(R"({"y":"s","xb":1})"));
  Grammar::Outcome refused = parse_schema(R"({"allOf": [
      {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
      {"additionalProperties": false}]})");
  CHECK_FALSE(refused.ok());
  CHECK_THAT(refused.diagnostics.render(),
             Catch::Contains("'patternProperties' of one part beside 'additionalProperties' of another"));
}

TEST_CASE("property order any: members in every order, each once, the required ones all there", "[json-schema]") {
  Grammar::Outcome outcome = parse_schema_any_order(R"({"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
      "required": ["a", "c"], "additionalProperties": {"type": "null"}})");
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  auto oracle = oracle_grammar(*outcome.grammar);
  const std::map<std::string, std::string> member{
      {"a", R"("a":1)"}, {"b", R"("b":"s")"}, {"c", R"("c":true)"}, {"x", R"("x":null)"}, {"y", R"("y":null)"}};
  // Every sequence of up to four members (repeats included).
  std::vector<std::string> sequences{""};
  for (size_t begin = 0, end = 1, length = 0; length < 4; ++length, begin = end, end = sequences.size())
    for (size_t i = begin; i < end; ++i)
      for (char c : std::string("abcxy")) sequences.push_back(sequences[i] + c);
  for (const std::string& sequence : sequences) {
    std::string document = "{";
    for (char c : sequence) document += (document.size() > 1 ? "," : "") + member.at(std::string(1, c));
    document += "}";
    auto count = [&](char c) { return std::count(sequence.begin(), sequence.end(), c); };
    // (An additional key may come back: a grammar cannot remember every key
    // string, and JSON leaves duplicate names to the reader. In schema order
    // too.)
    const bool valid = count('a') == 1 && count('c') == 1 && count('b') <= 1;
    INFO(document);
    CHECK((verdict(oracle, document) == oracle::Verdict::Complete) == valid);
  }
  // Past eight properties, any order without the checks: a warning says so.
  std::string many = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 9; ++i) many += fmt::format(R"({}"p{}": {{"type": "integer"}})", i ? ", " : "", i);
  many += R"(}, "required": ["p0"]})";
  Grammar::Outcome loose = parse_schema_any_order(many);
  REQUIRE(loose.ok());
  CHECK_THAT(loose.diagnostics.render(), Catch::Contains("more than 8 properties"));
  auto loose_oracle = oracle_grammar(*loose.grammar);
  CHECK(verdict(loose_oracle, R"({"p8":1,"p0":2})") == oracle::Verdict::Complete);
}

TEST_CASE("pattern and format beside enum keep the values they match", "[json-schema]") {
  Grammar::Outcome outcome =
      parse_schema(R"({"enum": ["abc", "ABC", "x1", "2024-01-01", "2024-13-01", 3], "pattern": "^[a-z0-9]", "format": "date"})");
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  auto oracle = oracle_grammar(*outcome.grammar);
  auto ok = [&](std::string_view text) { return verdict(oracle, text) == oracle::Verdict::Complete; };
  CHECK(ok(R"("2024-01-01")"));
  CHECK(ok("3"));  // pattern and format say nothing of numbers
  CHECK_FALSE(ok(R"("abc")"));  // not a date
  CHECK_FALSE(ok(R"("ABC")"));
  CHECK_FALSE(ok(R"("2024-13-01")"));
}

TEST_CASE("allOf keeps one of two different ignored keywords, with the warning one alone gets", "[json-schema]") {
  Grammar::Outcome outcome = parse_schema(R"({"allOf": [
      {"type": "integer", "not": {"const": 1}}, {"not": {"const": 2}, "minimum": 0}]})");
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  CHECK_THAT(outcome.diagnostics.render(), Catch::Contains("'not' is not supported and is ignored"));
  Grammar::Outcome strict = parse_schema(R"({"allOf": [{"not": {"const": 1}}, {"not": {"const": 2}}]})",
                                         JsonWhitespace::Compact, /*strict=*/true);
  CHECK_FALSE(strict.ok());
}

TEST_CASE("minLength and maxLength beside a pattern or a format are the intersection", "[json-schema]") {
  for (const auto& [pattern, lo, hi] : {std::tuple{"^[a-c]+$", 2, 4}, std::tuple{"b", 0, 3}, std::tuple{"^a|c$", 3, 5}}) {
    Grammar::Outcome outcome = parse_schema(
        fmt::format(R"({{"type": "string", "pattern": "{}", "minLength": {}, "maxLength": {}}})", pattern, lo, hi));
    INFO(outcome.diagnostics.render());
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.render().empty());  // exact
    auto oracle = oracle_grammar(*outcome.grammar);
    const std::regex reference(pattern, std::regex::ECMAScript);
    std::vector<std::string> texts{""};
    for (size_t begin = 0, end = 1, length = 0; length < 6; ++length, begin = end, end = texts.size())
      for (size_t i = begin; i < end; ++i)
        for (char c : std::string("abx")) texts.push_back(texts[i] + c);
    for (const std::string& text : texts) {
      INFO(pattern << " on '" << text << "'");
      const bool valid = std::regex_search(text, reference) && static_cast<int>(text.size()) >= lo &&
                         static_cast<int>(text.size()) <= hi;
      CHECK((verdict(oracle, json::json_string_text(text)) == oracle::Verdict::Complete) == valid);
    }
  }
  // A format too: dates are ten characters long.
  CHECK_FALSE(parse_schema(R"({"type": "string", "format": "date", "maxLength": 9})").ok());
  Grammar::Outcome date = parse_schema(R"({"type": "string", "format": "date", "minLength": 10, "maxLength": 10})");
  REQUIRE(date.ok());
  CHECK(verdict(oracle_grammar(*date.grammar), R"("2024-02-29")") == oracle::Verdict::Complete);
}

TEST_CASE("oneOf is exact where each pair of alternatives is proved disjoint, and names a pair where not",
          "[json-schema]") {
  // Disjoint: by type, by values, by a discriminator behind references, by
  // a required property the other forbids, by patterns, lengths and ranges.
  for (const char* schema : {
           R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})",
           R"({"oneOf": [{"enum": ["a", "b"]}, {"type": "string", "pattern": "^[0-9]+$"}]})",
           R"({"oneOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
               "$defs": {"a": {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                         "b": {"type": "object", "properties": {"kind": {"enum": ["b", "c"]}}, "required": ["kind"]}}})",
           R"({"oneOf": [{"type": "object", "properties": {"x": {}}, "required": ["x"]},
                         {"type": "object", "properties": {"y": {}}, "additionalProperties": false}]})",
           R"({"type": "object", "oneOf": [
                         {"properties": {"p": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}},
                          "required": ["p"]},
                         {"properties": {"p": {"type": "object", "properties": {"q": {"type": "null"}}, "required": ["q"]}},
                          "required": ["p"]}]})",
           R"({"oneOf": [{"type": "string", "pattern": "^x"}, {"type": "string", "pattern": "^y"}]})",
           R"({"oneOf": [{"type": "string", "maxLength": 2}, {"type": "string", "minLength": 3}]})",
           R"({"oneOf": [{"type": "integer", "maximum": 0}, {"type": "number", "exclusiveMinimum": 0}]})"}) {
    Grammar::Outcome outcome = parse_schema(schema);
    INFO(schema << "\n" << outcome.diagnostics.render());
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.render().find("'oneOf' is read as 'anyOf'") == std::string::npos);
  }
  // Overlapping alternatives with no complement to exclude them (unique
  // items; an enum of numbers).
  for (const char* schema : {
           R"({"oneOf": [{"type": "array", "uniqueItems": true}, {"type": "array", "maxItems": 3}]})",
           // Without "type": "object", a string matches both.
           R"({"oneOf": [{"properties": {"k": {"const": 1}}, "required": ["k"]},
                         {"properties": {"k": {"const": 2}}, "required": ["k"]}]})"}) {
    Grammar::Outcome outcome = parse_schema(schema);
    INFO(schema << "\n" << outcome.diagnostics.render());
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.render().find("'oneOf' is read as 'anyOf': alternatives") != std::string::npos);
  }
  Grammar::Outcome named = parse_schema(
      R"({"oneOf": [{"type": "string"}, {"type": "array"}, {"type": "array", "uniqueItems": true}]})");
  CHECK_THAT(named.diagnostics.render(), Catch::Contains("alternatives 1 and 2 may overlap"));
  // Two equal alternatives exclude each other: integers only.
  Grammar::Outcome twice = parse_schema(R"({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "string"}]})");
  REQUIRE(twice.ok());
  CHECK(twice.diagnostics.render().empty());
  CHECK(complete(twice.grammar, "12"));
  CHECK_FALSE(complete(twice.grammar, R"("s")"));
  // Overlapping, each excluding the others (json_schema_logic_test.cpp).
  for (const char* schema : {
           R"({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "string", "pattern": "a"}]})",
           R"({"oneOf": [{"properties": {"x": {}}, "required": ["x"]}, {"properties": {"y": {}}}]})"}) {
    Grammar::Outcome outcome = parse_schema(schema);
    INFO(schema << "\n" << outcome.diagnostics.render());
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.render().empty());
  }
}

TEST_CASE("review cases: contradictory lengths, patterns past the limits, malformed branches, bounded proofs",
          "[json-schema]") {
  // minLength above maxLength beside a pattern: no string.
  CHECK_FALSE(parse_schema(R"({"type": "string", "pattern": "^a+$", "minLength": 5, "maxLength": 3})").ok());
  // A pattern whose automaton passes the limit proves nothing and filters nothing.
  Grammar::Outcome unproved =
      parse_schema(R"({"oneOf": [{"const": "abbbbbbbbbbbb"}, {"type": "string", "pattern": "a[ab]{12}$"}]})");
  REQUIRE(unproved.ok());
  CHECK_THAT(unproved.diagnostics.render(), Catch::Contains("warning"));
  Grammar::Outcome enum_pattern = parse_schema(R"({"enum": ["abbbbbbbbbbbb"], "pattern": "a[ab]{12}$"})");
  CHECK_FALSE(enum_pattern.ok());
  CHECK_THAT(enum_pattern.diagnostics.render(), Catch::Contains("needs more than 4096 states"));
  // A malformed alternative is an error, not a crash in the proof.
  Grammar::Outcome malformed = parse_schema(R"({"oneOf": [{"const": "x"}, {"pattern": 1}, {"format": 2}]})");
  CHECK_FALSE(malformed.ok());
  CHECK_THAT(malformed.diagnostics.render(), Catch::Contains("'pattern' must be a string"));
  // Discriminators nested in a recursive schema: the proof gives up in bounded time.
  std::string names, properties;
  for (char c = 'a'; c <= 'h'; ++c) {
    names += fmt::format(R"({}"{}")", c == 'a' ? "" : ", ", c);
    properties += fmt::format(R"({}"{}": {{"$ref": "#/$defs/T"}})", c == 'a' ? "" : ", ", c);
  }
  Grammar::Outcome recursive = parse_schema(fmt::format(
      R"({{"$defs": {{"T": {{"type": ["object", "string"], "required": [{}], "properties": {{{}}}}}}},
          "oneOf": [{{"$ref": "#/$defs/T"}}, {{"$ref": "#/$defs/T"}}]}})",
      names, properties));
  REQUIRE(recursive.ok());
  CHECK_THAT(recursive.diagnostics.render(), Catch::Contains("may overlap"));
  // Two different ignored keywords merged: warned at the merge, even where the one kept is a no-op.
  Grammar::Outcome unique = parse_schema(R"({"allOf": [{"type": "array", "uniqueItems": false}, {"uniqueItems": true}]})");
  REQUIRE(unique.ok());
  CHECK_THAT(unique.diagnostics.render(), Catch::Contains("'uniqueItems' is not supported"));
  // Any order with one listed property and additional ones.
  Grammar::Outcome one = parse_schema_any_order(R"({"properties": {"a": {"type": "integer"}}})");
  REQUIRE(one.ok());
  CHECK(verdict(oracle_grammar(*one.grammar), R"({"b":1,"a":2})") == oracle::Verdict::Complete);
}

TEST_CASE("minProperties and maxProperties of 0 or 1 are exact", "[json-schema]") {
  Grammar::Outcome non_empty = parse_schema(R"({"type": "object", "minProperties": 1})");
  REQUIRE(non_empty.ok());
  CHECK(non_empty.diagnostics.render().empty());
  CHECK_FALSE(complete(non_empty.grammar, "{}"));
  CHECK(complete(non_empty.grammar, R"({"x":1})"));
  Grammar::Outcome at_most_one = parse_schema(
      R"({"type": "object", "properties": {"a": {"type": "integer"}}, "maxProperties": 1, "minProperties": 0})");
  REQUIRE(at_most_one.ok());
  CHECK(at_most_one.diagnostics.render().empty());
  CHECK(complete(at_most_one.grammar, "{}"));
  CHECK(complete(at_most_one.grammar, R"({"a":1})"));
  CHECK(complete(at_most_one.grammar, R"({"z":"s"})"));
  CHECK_FALSE(complete(at_most_one.grammar, R"({"a":1,"z":"s"})"));
  Grammar::Outcome just_required =
      parse_schema(R"({"type": "object", "properties": {"a": {}, "b": {}}, "required": ["b"], "maxProperties": 1})");
  REQUIRE(just_required.ok());
  CHECK(complete(just_required.grammar, R"({"b":1})"));
  CHECK_FALSE(complete(just_required.grammar, R"({"a":1})"));
  CHECK_FALSE(complete(just_required.grammar, "{}"));
  CHECK_FALSE(parse_schema(R"({"type": "object", "minProperties": 1, "maxProperties": 0})").ok());
  // Past 1: counted in the schema's order (json_schema_logic_test.cpp), not in any order.
  Grammar::Outcome two = parse_schema(R"({"type": "object", "minProperties": 2})");
  REQUIRE(two.ok());
  CHECK(two.diagnostics.render().empty());
  CHECK(complete(two.grammar, R"({"a":1,"b":2})"));
  CHECK_FALSE(complete(two.grammar, R"({"a":1})"));
  Grammar::Outcome any_order = parse_schema_any_order(R"({"type": "object", "minProperties": 2})");
  CHECK_THAT(any_order.diagnostics.render(), Catch::Contains("'minProperties' is not supported"));
}

TEST_CASE("multipleOf a power of ten is exact, written in fixed point", "[json-schema]") {
  struct Case {
    const char* schema;
    std::vector<std::pair<const char*, bool>> numbers;
  };
  const std::vector<Case> cases = {
      {R"({"type": "number", "multipleOf": 0.01})",
       {{"1", true}, {"1.5", true}, {"-3.25", true}, {"1.255", false}, {"0.001", false}}},
      {R"({"type": "number", "multipleOf": 0.1, "minimum": 0, "maximum": 1})",
       {{"0.5", true}, {"1", true}, {"0.55", false}, {"1.1", false}, {"-0.1", false}}},
      {R"({"type": "integer", "multipleOf": 100})", {{"0", true}, {"-300", true}, {"1000", true}, {"150", false}}},
      {R"({"type": "number", "multipleOf": 1})", {{"7", true}, {"7.5", false}}},
      // Other steps: the remainder of the digits read (a multiple of m·10^-e).
      {R"({"type": "integer", "multipleOf": 3})",
       {{"0", true}, {"-3", true}, {"12", true}, {"123456789", true}, {"10", false}, {"-7", false}}},
      {R"({"type": "number", "multipleOf": 0.25, "minimum": -1})",
       {{"0.5", true}, {"-0.75", true}, {"3", true}, {"2.25", true}, {"0.2", false}, {"-1.25", false}, {"0.125", false}}},
      {R"({"type": "number", "multipleOf": 1.5})", {{"4.5", true}, {"-3", true}, {"0", true}, {"1", false}, {"2.5", false}}}};
  for (const Case& c : cases) {
    Grammar::Outcome outcome = parse_schema(c.schema);
    INFO(c.schema << "\n" << outcome.diagnostics.render());
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.render().empty());
    auto oracle = oracle_grammar(*outcome.grammar);
    for (const auto& [number, in] : c.numbers) {
      INFO(number);
      CHECK((verdict(oracle, number) == oracle::Verdict::Complete) == in);
    }
  }
  // A step whose remainder automaton would be too large, and a step beside values: not enforced, with the warning.
  CHECK_THAT(parse_schema(R"({"type": "number", "multipleOf": 123456.7})").diagnostics.render(),
             Catch::Contains("'multipleOf' is not supported"));
  CHECK_THAT(parse_schema(R"({"enum": [3, 4], "multipleOf": 3})").diagnostics.render(),
             Catch::Contains("'multipleOf' is not supported"));
  CHECK_FALSE(parse_schema(R"({"type": "integer", "multipleOf": 10, "minimum": 1, "maximum": 9})").ok());
}

TEST_CASE("not: {} accepts nothing, not a type takes it away, not one required name forbids it", "[json-schema]") {
  Grammar::Outcome forbidden = parse_schema(
      R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"not": {}}}, "not": {"required": ["c"]}})");
  INFO(forbidden.diagnostics.render());
  REQUIRE(forbidden.ok());
  CHECK(forbidden.diagnostics.render().empty());
  CHECK(complete(forbidden.grammar, R"({"a":1,"d":2})"));
  CHECK_FALSE(complete(forbidden.grammar, R"({"a":1,"b":2})"));
  CHECK_FALSE(complete(forbidden.grammar, R"({"a":1,"c":2})"));
  CHECK_FALSE(complete(forbidden.grammar, R"({"c":2})"));
  Grammar::Outcome not_string = parse_schema(R"({"type": ["string", "null", "number"], "not": {"type": "number"}})");
  REQUIRE(not_string.ok());
  CHECK(not_string.diagnostics.render().empty());
  CHECK(complete(not_string.grammar, R"("s")"));
  CHECK(complete(not_string.grammar, "null"));
  CHECK_FALSE(complete(not_string.grammar, "1"));
  CHECK_FALSE(parse_schema(R"({"type": "object", "required": ["c"], "not": {"required": ["c"]}})").ok());
  // Numbers that are no integer cannot be said: ignored, with the warning.
  CHECK_THAT(parse_schema(R"({"not": {"type": "integer"}})").diagnostics.render(), Catch::Contains("'not' is not supported"));
}

TEST_CASE("a string's pattern, format, lengths and not are one language", "[json-schema]") {
  Grammar::Outcome both = parse_schema(R"({"type": "string", "pattern": "^2024", "format": "date"})");
  REQUIRE(both.ok());
  CHECK(both.diagnostics.render().empty());
  CHECK(complete(both.grammar, R"("2024-02-29")"));
  CHECK_FALSE(complete(both.grammar, R"("2023-01-01")"));
  CHECK_FALSE(complete(both.grammar, R"("2024-02-30")"));
  Grammar::Outcome not_pattern = parse_schema(R"({"type": "string", "maxLength": 3, "not": {"pattern": "^x"}})");
  REQUIRE(not_pattern.ok());
  CHECK(not_pattern.diagnostics.render().empty());
  CHECK(complete(not_pattern.grammar, R"("abc")"));
  CHECK(complete(not_pattern.grammar, R"("")"));
  CHECK_FALSE(complete(not_pattern.grammar, R"("xab")"));
  CHECK_FALSE(complete(not_pattern.grammar, R"("abcd")"));
  Grammar::Outcome not_values = parse_schema(R"({"type": "string", "not": {"enum": ["", "a", 3]}})");
  REQUIRE(not_values.ok());
  CHECK(not_values.diagnostics.render().empty());
  CHECK(complete(not_values.grammar, R"("b")"));
  CHECK(complete(not_values.grammar, R"("aa")"));
  CHECK_FALSE(complete(not_values.grammar, R"("a")"));
  CHECK_FALSE(complete(not_values.grammar, R"("")"));
  CHECK_FALSE(parse_schema(R"({"type": "string", "const": "a", "not": {"const": "a"}})").ok());
}

TEST_CASE("keywords beside $ref: merged in 2020-12, ignored where the schema names draft 04 to 07", "[json-schema]") {
  const char* body = R"("type": "object", "properties": {"s": {"type": "string", "$ref": "#/definitions/o"}},
                        "definitions": {"o": {"type": "object"}}})";
  Grammar::Outcome draft7 = parse_schema(std::string(R"({"$schema": "http://json-schema.org/draft-07/schema#", )") + body);
  REQUIRE(draft7.ok());
  CHECK(verdict(oracle_grammar(*draft7.grammar), R"({"s":{}})") == oracle::Verdict::Complete);
  Grammar::Outcome modern = parse_schema(std::string("{") + body);
  REQUIRE(modern.ok());
  CHECK_FALSE(verdict(oracle_grammar(*modern.grammar), R"({"s":{}})") == oracle::Verdict::Complete);
}

TEST_CASE("uniqueItems over a few values is exact: random value sets, bounds and arrays against a direct check",
          "[json-schema]") {
  // The arrays of distinct values, with minItems/maxItems, from a grammar of
  // one rule per set of values used; the reference compares the values as
  // JSON values (nlohmann::json: 1 and 1.0 are one, and so are two objects
  // whose members come in another order, which ordered_json writes apart),
  // and takes an object as one of the spellings listed (the schema's
  // property order, the default).
  using Ordered = nlohmann::ordered_json;
  const auto same = [](const Ordered& a, const Ordered& b) {
    return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump());
  };
  std::mt19937_64 rng(11);
  const std::vector<Ordered> pool = {"a", "b", "c", 1, 2, true, false, nullptr, "d",
                                     Ordered::parse(R"({"x":1,"y":2})"), Ordered::parse(R"({"y":2,"x":1})")};
  for (int round = 0; round < 40; ++round) {
    const size_t k = 1 + rng() % 5;
    Ordered values = Ordered::array();
    for (size_t i = 0; i < k; ++i) values.push_back(pool[rng() % pool.size()]);  // repeats allowed
    Ordered schema = {{"type", "array"}, {"items", {{"enum", values}}}, {"uniqueItems", true}};
    const uint64_t min_items = rng() % 3;
    std::optional<uint64_t> max_items;
    if (rng() % 2) schema["minItems"] = min_items;
    if (rng() % 2) max_items = min_items + rng() % 3, schema["maxItems"] = *max_items;
    const uint64_t lo = schema.contains("minItems") ? min_items : 0;
    Grammar::Outcome outcome = parse_schema(schema.dump());
    INFO(schema.dump());
    size_t distinct = 0;
    for (size_t i = 0; i < values.size(); ++i)
      distinct += std::none_of(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(i),
                               [&](const Ordered& w) { return same(w, values[i]); });
    if ((max_items && *max_items < lo) || distinct < lo) {  // no array can be valid
      CHECK_FALSE(outcome.ok());
      continue;
    }
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.render().empty());
    for (int a = 0; a < 30; ++a) {
      Ordered array = Ordered::array();
      for (size_t n = rng() % 5; n > 0; --n) array.push_back(pool[rng() % pool.size()]);
      bool valid = array.size() >= lo && (!max_items || array.size() <= *max_items);
      for (size_t i = 0; i < array.size() && valid; ++i) {
        // In the schema's property order: an object as one of its spellings listed.
        valid = std::any_of(values.begin(), values.end(), [&](const Ordered& v) { return v == array[i]; });
        for (size_t j = 0; j < i && valid; ++j) valid = !same(array[i], array[j]);
      }
      INFO(array.dump());
      CHECK(complete(outcome.grammar, array.dump()) == valid);
    }
  }
  // Beside allOf, the merged schema says whether it is exact.
  Grammar::Outcome merged =
      parse_schema(R"({"uniqueItems": true, "allOf": [{"type": "array", "items": {"enum": [1, 2]}}]})");
  REQUIRE(merged.ok());
  CHECK(merged.diagnostics.render().empty());
  CHECK(complete(merged.grammar, "[2,1]"));
  CHECK_FALSE(complete(merged.grammar, "[1,1]"));
  Grammar::Outcome merged_strings =
      parse_schema(R"({"uniqueItems": true, "allOf": [{"type": "array", "items": {"type": "string"}}]})");
  CHECK_THAT(merged_strings.diagnostics.render(), Catch::Contains("'uniqueItems' is not supported"));
  // Past kMaxUniqueValues values, or items that are not a few values: ignored, with the warning.
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i < 9; ++i) many.push_back(i);
  Grammar::Outcome nine = parse_schema(nlohmann::json{{"items", {{"enum", many}}}, {"uniqueItems", true}}.dump());
  REQUIRE(nine.ok());
  CHECK_THAT(nine.diagnostics.render(), Catch::Contains("'uniqueItems' is not supported"));
  Grammar::Outcome strings = parse_schema(R"({"items": {"type": "string"}, "uniqueItems": true})");
  CHECK_THAT(strings.diagnostics.render(), Catch::Contains("'uniqueItems' is not supported"));
  // Booleans: at most two items, different.
  Grammar::Outcome flags = parse_schema(R"({"items": {"type": "boolean"}, "uniqueItems": true})");
  REQUIRE(flags.ok());
  CHECK(flags.diagnostics.render().empty());
  CHECK(complete(flags.grammar, "[true,false]"));
  CHECK_FALSE(complete(flags.grammar, "[false,false]"));
}

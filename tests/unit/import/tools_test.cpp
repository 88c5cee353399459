// Many tools, one grammar (import/tools.h): the reply grammar of each call
// format accepts the replies it should and refuses the others (the oracle's
// verdicts), tools with one schema share its rules, every error says which
// tool, and the matcher's masks along replies and random walks are the
// oracle's, bit for bit.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "compiled_grammar.h"
#include "differential.h"
#include "helpers.h"
#include "oracle_mask.h"
#include "tokenizer/encoder.h"
#include "tools.h"

using namespace cgram;
using namespace cgram::test;

namespace {

// Three tools, two of them with the same parameters.
constexpr std::string_view kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"], "additionalProperties": false}}},
  {"name": "stop", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}
])";

Grammar::Outcome parse_tools(std::string_view tools, ToolFormat format) {
  ParseOptions options;
  options.format = GrammarFormat::Tools;
  options.tool_format = format;
  return Grammar::parse(tools, "tools.json", options);
}

std::shared_ptr<const Grammar> tools_grammar(ToolFormat format) {
  Grammar::Outcome outcome = parse_tools(kTools, format);
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  return outcome.grammar;
}

struct Replies {
  ToolFormat format;
  std::vector<std::string> accepted, rejected;
};

const std::vector<Replies>& replies() {
  static const std::vector<Replies> all = {
      {ToolFormat::Hermes,
       {"", "Just text, no call.",
        "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
        "</tool_call>\nand <tool_call>{\"name\":\"stop\",\"arguments\":{}}</tool_call>",
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"},
       {"<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"days\": 2}}</tool_call>",
        "<tool_call>{\"name\": \"get_news\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"stop\", \"arguments\": {\"x\": 1}}</tool_call>",
        "<tool_call>{\"name\": \"stop\", \"arguments\": {}}"}},
      {ToolFormat::Llama3,
       {"Sure.", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
        "I'll call two.{\"name\": \"stop\", \"parameters\": {}} {\"name\": \"get_time\", \"parameters\": {\"city\": \"x\"}}"},
       {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}", "{\"name\": \"stop\"}"}},
      {ToolFormat::Qwen,
       {"Text only.",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n"
        "</parameter>\n</function>\n</tool_call> done",
        "<tool_call>\n<function=stop>\n</function>\n</tool_call>"},
       {"<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>\n<parameter=days>\nthree\n"
        "</parameter>\n</function>\n</tool_call>"}},
      {ToolFormat::Mistral,
       {"Here: [TOOL_CALLS][{\"name\": \"stop\", \"arguments\": {}}, {\"name\": \"get_time\", \"arguments\": "
        "{\"city\": \"Lima\", \"days\": 1}}]"},
       {"[TOOL_CALLS][]", "[TOOL_CALLS][{\"name\": \"stop\", \"arguments\": {}},]"}},
      {ToolFormat::JsonArray,
       {"[]", "[{\"name\": \"stop\", \"arguments\": {}}]",
        "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\"}}, {\"name\": \"stop\", \"arguments\": {}}]"},
       {"text [{\"name\": \"stop\", \"arguments\": {}}]", "[{\"name\": \"stop\"}]"}},
  };
  return all;
}

}  // namespace

TEST_CASE("tools: each call format accepts its replies and refuses the others", "[tools]") {
  for (const Replies& r : replies()) {
    auto g = tools_grammar(r.format);
    auto oracle = oracle_grammar(*g);
    for (const std::string& text : r.accepted) {
      INFO(tool_format_name(r.format) << " accepted: " << text << "\n" << g->file().text());
      CHECK(verdict(oracle, text) == oracle::Verdict::Complete);
    }
    for (const std::string& text : r.rejected) {
      INFO(tool_format_name(r.format) << " rejected: " << text << "\n" << g->file().text());
      CHECK(verdict(oracle, text) != oracle::Verdict::Complete);
    }
  }
}

TEST_CASE("tools: one schema's rules for the tools that share it", "[tools]") {
  SourceFile file("tools.json", std::string(kTools));
  Diagnostics diags(&file);
  auto translation = translate_tools(file, diags);
  INFO(diags.render());
  REQUIRE(translation);
  CHECK(translation->tools == 3);
  CHECK(translation->distinct_schemas == 2);
  CHECK(translation->cgram.find("'\"get_time\"' ws ',' ws '\"arguments\"' ws ':' args_get_weather\n") !=
        std::string::npos);
}

TEST_CASE("tools: errors name the tool", "[tools]") {
  auto first_error = [](std::string_view tools) {
    Grammar::Outcome outcome = parse_tools(tools, ToolFormat::Hermes);
    REQUIRE_FALSE(outcome.ok());
    return outcome.diagnostics.render();
  };
  CHECK_THAT(first_error("[{\"function\": {\"parameters\": {}}}]"), Catch::Contains("tool 0 has no name"));
  CHECK_THAT(first_error("[{\"name\": \"a\"}, {\"name\": \"a\"}]"),
             Catch::Contains("tool 1 is named 'a', as an earlier tool is"));
  CHECK_THAT(first_error("{\"tools\": 3}"), Catch::Contains("expecting a JSON list of tools"));
  CHECK_THAT(first_error("[]"), Catch::Contains("the list has no tools"));
  CHECK_THAT(first_error("[{\"name\": \"a\""), Catch::Contains("invalid JSON"));
  CHECK_THAT(first_error("[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"required\": [\"x\"], "
                         "\"additionalProperties\": false}}]"),
             Catch::Contains("tool 'f'"));
}

TEST_CASE("tools: the matcher's masks along replies and random walks are the oracle's", "[tools][differential]") {
  auto vocab = bundled_vocabulary();
  auto encoder = Encoder::create(vocab);
  REQUIRE(encoder.ok());
  size_t pairs = 0;
  for (const Replies& r : replies()) {
    auto g = tools_grammar(r.format);
    auto compiled = CompiledGrammar::compile(g, vocab);
    REQUIRE(compiled.ok());
    OracleMasker oracle(oracle_grammar(*g), vocab);
    for (const std::string& text : r.accepted) {
      const WalkStats walk = walk_document(*compiled, oracle, (*encoder)->encode_continuation(text));
      INFO(tool_format_name(r.format) << ": " << text << ": " << walk.first_mismatch);
      CHECK(walk.mismatches == 0);
      pairs += walk.pairs;
    }
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const WalkStats walk = walk_random(*compiled, oracle, seed, 24);
      INFO(tool_format_name(r.format) << " walk " << seed << ": " << walk.first_mismatch);
      CHECK(walk.mismatches == 0);
      pairs += walk.pairs;
    }
  }
  CHECK(pairs > 1000000);
}

TEST_CASE("tools: argument objects hold only the members their schema names, unless it says otherwise", "[tools]") {
  const std::string tools = R"([{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}},
                                  "required": ["a", "b"]}},
                                {"name": "g", "parameters": {"type": "object", "additionalProperties": {"type": "string"}}}])";
  const std::string extra = R"(<tool_call>{"name": "f", "arguments": {"a": 1, "b": [true], "c": 2}}</tool_call>)";
  const std::string named = R"(<tool_call>{"name": "f", "arguments": {"a": 1, "b": [true]}}</tool_call>)";
  const std::string said = R"(<tool_call>{"name": "g", "arguments": {"x": "y"}}</tool_call>)";
  ParseOptions options;
  options.format = GrammarFormat::Tools;
  auto closed = Grammar::parse(tools, "tools.json", options);
  REQUIRE(closed.ok());
  CHECK(verdict(oracle_grammar(*closed.grammar), named) == oracle::Verdict::Complete);  // required names: any value
  CHECK(verdict(oracle_grammar(*closed.grammar), extra) != oracle::Verdict::Complete);
  CHECK(verdict(oracle_grammar(*closed.grammar), said) == oracle::Verdict::Complete);
  options.open_tool_arguments = true;
  auto open = Grammar::parse(tools, "tools.json", options);
  REQUIRE(open.ok());
  CHECK(verdict(oracle_grammar(*open.grammar), extra) == oracle::Verdict::Complete);
}

TEST_CASE("tools: Qwen3-Coder's string values are raw text, their enum, pattern and lengths kept", "[tools]") {
  const std::string tools = R"([{"name": "w", "parameters": {"type": "object", "properties": {
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
      "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
      "note": {"type": "string", "maxLength": 5},
      "n": {"type": "integer"}}, "required": ["unit"]}}])";
  ParseOptions options;
  options.format = GrammarFormat::Tools;
  options.tool_format = ToolFormat::Qwen;
  auto outcome = Grammar::parse(tools, "tools.json", options);
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  auto oracle = oracle_grammar(*outcome.grammar);
  auto call = [](const std::string& params) { return "<tool_call>\n<function=w>\n" + params + "</function>\n</tool_call>"; };
  auto param = [](const std::string& name, const std::string& value) {
    return "<parameter=" + name + ">\n" + value + "\n</parameter>\n";
  };
  CHECK(verdict(oracle, call(param("unit", "celsius") + param("code", "OSL") + param("note", "hi\nyo") + param("n", "7"))) ==
        oracle::Verdict::Complete);
  CHECK(verdict(oracle, call(param("unit", "\"celsius\""))) != oracle::Verdict::Complete);  // raw, not JSON
  CHECK(verdict(oracle, call(param("unit", "kelvin"))) != oracle::Verdict::Complete);
  CHECK(verdict(oracle, call(param("unit", "celsius") + param("code", "osl"))) != oracle::Verdict::Complete);
  CHECK(verdict(oracle, call(param("unit", "celsius") + param("note", "toolong"))) != oracle::Verdict::Complete);
  CHECK(verdict(oracle, call(param("unit", "celsius") + param("n", "seven"))) != oracle::Verdict::Complete);
}

namespace {

Grammar::Outcome parse_tools_with(std::string_view tools, ToolFormat format, bool strict = false) {
  ParseOptions options;
  options.format = GrammarFormat::Tools;
  options.tool_format = format;
  options.schema.strict = strict;
  return Grammar::parse(tools, "tools.json", options);
}

std::string qwen_call(const std::string& tool, const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out = "<tool_call>\n<function=" + tool + ">\n";
  for (const auto& [name, value] : params) out += "<parameter=" + name + ">\n" + value + "\n</parameter>\n";
  return out + "</function>\n</tool_call>";
}

}  // namespace

TEST_CASE("tools: qwen reads $ref, $defs, anyOf and allOf in the parameters as the JSON formats do", "[tools]") {
  struct Case {
    const char* parameters;
    std::vector<std::vector<std::pair<std::string, std::string>>> accepted, rejected;
  };
  const std::vector<Case> cases = {
      // A top-level $ref to $defs.
      {R"({"$ref": "#/$defs/P", "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}},
          "required": ["x"]}}})",
       {{{"x", "3"}}},
       {{}, {{"x", "three"}}}},
      // A top-level anyOf of objects.
      {R"({"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                     {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]})",
       {{{"a", "hi"}}, {{"b", "2"}}},
       {{}, {{"a", "hi"}, {"b", "2"}}}},
      // Pydantic: properties whose schemas are $refs, and an allOf beside them.
      {R"({"type": "object", "properties": {"color": {"$ref": "#/$defs/Color"}, "size": {"$ref": "#/$defs/Size"}},
          "required": ["color"], "allOf": [{"required": ["size"]}],
          "$defs": {"Color": {"type": "string", "enum": ["red", "blue"]},
                    "Size": {"type": "object", "properties": {"w": {"type": "integer"}}, "required": ["w"]}}})",
       {{{"color", "red"}, {"size", "{\"w\":1}"}}},
       {{{"color", "red"}}, {{"color", "\"red\""}, {"size", "{\"w\":1}"}}, {{"color", "green"}, {"size", "{\"w\":1}"}}}},
      // minProperties over optional parameters, and additionalProperties naming other parameters.
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "minProperties": 1,
          "additionalProperties": {"type": "boolean"}})",
       {{{"a", "1"}}, {{"b", "2"}}, {{"zz", "true"}}, {{"a", "1"}, {"b", "2"}, {"c", "false"}}},
       {{}, {{"zz", "3"}}, {{"b", "2"}, {"a", "1"}}}},
      // maxProperties.
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "maxProperties": 1})",
       {{}, {{"a", "1"}}, {{"b", "2"}}},
       {{{"a", "1"}, {"b", "2"}}}},
      // A required name that is not listed, allowed as another member.
      {R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["q"],
          "additionalProperties": {"type": "string"}})",
       {{{"q", "text"}}, {{"a", "1"}, {"q", "t"}}},
       {{}, {{"a", "1"}}}},
  };
  for (const Case& c : cases) {
    const std::string tools = std::string(R"([{"name": "f", "parameters": )") + c.parameters + "}]";
    auto outcome = parse_tools_with(tools, ToolFormat::Qwen);
    INFO(c.parameters << "\n" << outcome.diagnostics.render());
    REQUIRE(outcome.ok());
    INFO(outcome.grammar->file().text());
    CHECK(outcome.diagnostics.render().find("never used") == std::string::npos);
    auto oracle = oracle_grammar(*outcome.grammar);
    for (const auto& params : c.accepted) {
      INFO("accepted: " << qwen_call("f", params));
      CHECK(verdict(oracle, qwen_call("f", params)) == oracle::Verdict::Complete);
    }
    for (const auto& params : c.rejected) {
      INFO("rejected: " << qwen_call("f", params));
      CHECK(verdict(oracle, qwen_call("f", params)) != oracle::Verdict::Complete);
    }
  }
}

TEST_CASE("tools: parameters that are no object schema are refused in every format, with the tool's name", "[tools]") {
  for (const char* parameters : {R"("string")", "null", "[1]", R"({"type": "integer"})", "5"})
    for (ToolFormat format : {ToolFormat::Qwen, ToolFormat::Hermes, ToolFormat::Llama3}) {
      const std::string tools = std::string(R"([{"name": "f", "parameters": )") + parameters + "}]";
      auto outcome = parse_tools_with(tools, format);
      INFO(tool_format_name(format) << ": " << parameters);
      CHECK_FALSE(outcome.ok());
      CHECK_THAT(outcome.diagnostics.render(), Catch::Contains("tool 'f'"));
    }
  // Keywords the qwen format cannot write are named, not dropped.
  auto refused = parse_tools_with(R"([{"name": "f", "parameters": {"type": "object", "patternProperties": {"^x": {}}}}])",
                                  ToolFormat::Qwen);
  CHECK_FALSE(refused.ok());
  CHECK_THAT(refused.diagnostics.render(), Catch::Contains("patternProperties"));
  // A name that would end <parameter=…> early.
  auto broken = parse_tools_with(
      R"([{"name": "f", "parameters": {"type": "object", "properties": {"a>\n</parameter>": {"type": "string"}}}}])",
      ToolFormat::Qwen);
  CHECK_FALSE(broken.ok());
  CHECK_THAT(broken.diagnostics.render(), Catch::Contains("cannot be written in the qwen format"));
}

TEST_CASE("tools: a tool that accepts no call is left out with a warning naming it, the rest kept", "[tools]") {
  // JSONSchemaBench's Glaive shape: each oneOf branch forbids a property that `required` demands.
  const std::string dead_schema = R"({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
      "required": ["a", "b"], "oneOf": [{"not": {"required": ["a"]}}, {"not": {"required": ["b"]}}]})";
  const std::string tools = R"([{"name": "dead", "parameters": )" + dead_schema +
                            R"(}, {"name": "never", "parameters": false},
      {"name": "loop", "parameters": {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}},
      {"name": "ok", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}])";
  for (ToolFormat format : {ToolFormat::Hermes, ToolFormat::Mistral}) {
    auto outcome = parse_tools_with(tools, format);
    const std::string said = outcome.diagnostics.render();
    INFO(tool_format_name(format) << "\n" << said);
    REQUIRE(outcome.ok());
    CHECK_THAT(said, Catch::Contains("tool 'dead' accepts no call"));
    CHECK_THAT(said, Catch::Contains("tool 'never' accepts no call"));
    CHECK_THAT(said, Catch::Contains("tool 'loop' accepts no call"));
    CHECK(said.find("unproductive") == std::string::npos);
    CHECK(said.find("never used") == std::string::npos);
    auto oracle = oracle_grammar(*outcome.grammar);
    const std::string ok = format == ToolFormat::Hermes
                               ? R"(<tool_call>{"name": "ok", "arguments": {"x": 1}}</tool_call>)"
                               : R"([TOOL_CALLS][{"name": "ok", "arguments": {"x": 1}}])";
    CHECK(verdict(oracle, ok) == oracle::Verdict::Complete);
    const std::string never = format == ToolFormat::Hermes
                                  ? R"(<tool_call>{"name": "never", "arguments": {}}</tool_call>)"
                                  : R"([TOOL_CALLS][{"name": "never", "arguments": {}}])";
    CHECK(verdict(oracle, never) != oracle::Verdict::Complete);
    // Strict: an error, naming the tool.
    auto strict = parse_tools_with(tools, format, true);
    CHECK_FALSE(strict.ok());
    CHECK_THAT(strict.diagnostics.render(), Catch::Contains("tool 'dead' accepts no call"));
  }
  auto qwen = parse_tools_with(
      R"([{"name": "never", "parameters": {"type": "object", "required": ["z"], "additionalProperties": false}},
          {"name": "ok", "parameters": {"type": "object", "properties": {}}}])",
      ToolFormat::Qwen);
  INFO(qwen.diagnostics.render());
  REQUIRE(qwen.ok());
  CHECK_THAT(qwen.diagnostics.render(), Catch::Contains("tool 'never' accepts no call"));
}

TEST_CASE("tools: qwen counts, oneOf overlaps and nested true as a review found them", "[tools]") {
  // maxProperties reached by the listed parameters: no zero-copy repetition (and its warning).
  auto counted = parse_tools_with(R"([{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type":
      "integer"}}, "maxProperties": 1, "additionalProperties": {"type": "boolean"}}}])", ToolFormat::Qwen);
  INFO(counted.diagnostics.render());
  REQUIRE(counted.ok());
  CHECK(counted.diagnostics.render().find("zero copies") == std::string::npos);
  auto oracle = oracle_grammar(*counted.grammar);
  CHECK(verdict(oracle, qwen_call("f", {{"a", "1"}})) == oracle::Verdict::Complete);
  CHECK(verdict(oracle, qwen_call("f", {{"z", "true"}})) == oracle::Verdict::Complete);
  CHECK(verdict(oracle, qwen_call("f", {{"a", "1"}, {"z", "true"}})) != oracle::Verdict::Complete);
  // Many optional parameters under a maxProperties they cannot pass: nothing to count.
  std::string many = R"([{"name": "m", "parameters": {"type": "object", "maxProperties": 64, "properties": {)";
  for (int i = 0; i < 64; ++i) many += fmt::format("{}\"p{}\": {{\"type\": \"integer\"}}", i ? ", " : "", i);
  many += "}}}]";
  CHECK(parse_tools_with(many, ToolFormat::Qwen).ok());
  // oneOf branches that only require: a call with both matches both branches, and is said to.
  auto overlapping = parse_tools_with(R"([{"name": "o", "parameters": {"type": "object", "properties": {"a": {},
      "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}}])", ToolFormat::Qwen);
  REQUIRE(overlapping.ok());
  CHECK_THAT(overlapping.diagnostics.render(), Catch::Contains("'oneOf' is read as 'anyOf'"));
  // A nested `true` opens nothing: the object stays closed.
  auto nested = parse_tools_with(R"([{"name": "t", "parameters": {"type": "object", "properties": {"a": {"type":
      "integer"}}, "allOf": [true]}}])", ToolFormat::Qwen);
  REQUIRE(nested.ok());
  CHECK(verdict(oracle_grammar(*nested.grammar), qwen_call("t", {{"zz", "1"}})) != oracle::Verdict::Complete);
  CHECK(verdict(oracle_grammar(*nested.grammar), qwen_call("t", {{"a", "1"}})) == oracle::Verdict::Complete);
  // Shared $refs read again and again are bounded, not exponential.
  std::string defs = R"([{"name": "x", "parameters": {"$ref": "#/$defs/d0", "$defs": {)";
  for (int k = 0; k < 30; ++k)
    defs += fmt::format("\"d{}\": {{\"allOf\": [{{\"$ref\": \"#/$defs/d{}\"}}, {{\"$ref\": \"#/$defs/d{}\"}}]}}, ", k, k + 1, k + 1);
  defs += R"("d30": {"type": "object"}}}}])";
  auto bounded = parse_tools_with(defs, ToolFormat::Qwen);
  CHECK_FALSE(bounded.ok());
  CHECK_THAT(bounded.diagnostics.render(), Catch::Contains("steps to read"));
}

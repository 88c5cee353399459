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

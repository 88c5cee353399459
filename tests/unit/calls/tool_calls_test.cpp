// Many tools, compiled one at a time (calls/tool_calls.h): the cut reply's
// masks are the whole grammar's (whose masks the oracle checks in
// tools_test.cpp), bit for bit, in every call format, along replies, random
// walks with rollbacks, and a vocabulary whose tokens span the cuts (a
// name's end and its arguments, two calls in one token); only the tools
// called are compiled.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <random>
#include <thread>

#include "compiler.h"
#include "helpers.h"
#include "tokenizer/encoder.h"
#include "tool_calls.h"

using namespace cgram;
using namespace cgram::test;

namespace {

constexpr std::string_view kCallTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"], "additionalProperties": false}}},
  {"name": "get", "parameters": {"type": "object", "properties": {"id": {"enum": [1, 2]}}}},
  {"name": "stop", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}
])";

constexpr ToolFormat kFormats[] = {ToolFormat::Hermes, ToolFormat::Llama3, ToolFormat::Qwen, ToolFormat::Mistral,
                                   ToolFormat::JsonArray};

std::shared_ptr<const CompiledGrammar> whole_grammar(ToolFormat format, const std::shared_ptr<const Vocabulary>& vocab) {
  Compiler compiler;
  CompileRequest request;
  request.text = kCallTools;
  request.filename = "tools.json";
  request.parse.format = GrammarFormat::Tools;
  request.parse.tool_format = format;
  CompileOutcome outcome = compiler.compile(request, vocab);
  INFO(outcome.message);
  REQUIRE(outcome.ok());
  return outcome.grammar;
}

std::shared_ptr<const ToolCallsGrammar> cut_grammar(ToolFormat format, const std::shared_ptr<const Vocabulary>& vocab) {
  ToolCallsOptions options;
  options.parse.tool_format = format;
  auto grammar = ToolCallsGrammar::create(kCallTools, "tools.json", vocab, options);
  INFO((grammar ? std::string() : grammar.error().message));
  REQUIRE(grammar.ok());
  return *grammar;
}

std::vector<uint32_t> mask_of(ToolCallsMatcher& m) {
  std::vector<uint32_t> words(m.mask_words());
  REQUIRE(m.fill_mask(words));
  return words;
}
std::vector<uint32_t> mask_of(Matcher& m) {
  std::vector<uint32_t> words(m.mask_words());
  REQUIRE(m.fill_mask(words));
  return words;
}

std::vector<uint32_t> allowed(const std::vector<uint32_t>& words) {
  std::vector<uint32_t> out;
  for (uint32_t w = 0; w < words.size(); ++w)
    for (uint32_t bits = words[w]; bits; bits &= bits - 1) out.push_back(w * 32 + std::countr_zero(bits));
  return out;
}

struct Compared {
  size_t steps = 0, masks = 0;
  std::string first_mismatch;
};

// Walks the cut matcher and the whole grammar's side by side: the same
// mask, the same verdicts, at every step; tokens drawn from the mask (the
// ones that span a cut first, half the time), with rollbacks.
void walk_both(Matcher& whole, ToolCallsMatcher& cut, const Vocabulary& vocab, std::mt19937_64& rng,
               size_t steps, const std::vector<uint32_t>& preferred, Compared& out) {
  for (size_t i = 0; i < steps && out.first_mismatch.empty(); ++i) {
    const auto expected = mask_of(whole), got = mask_of(cut);
    ++out.masks;
    if (expected != got) {
      size_t differ = 0;
      uint32_t example = 0;
      for (uint32_t w = 0; w < got.size(); ++w)
        if (uint32_t x = got[w] ^ expected[w]) differ += std::popcount(x), example = w * 32 + std::countr_zero(x);
      out.first_mismatch = fmt::format("after {} tokens: {} tokens differ, {} ('{}') {} by the cut", whole.tokens_accepted(),
                                       differ, example, vocab.bytes(example),
                                       got[example / 32] >> (example % 32) & 1 ? "allowed" : "refused");
      return;
    }
    if (whole.can_end() != cut.can_end()) {
      out.first_mismatch = fmt::format("after {} tokens: can_end differs", whole.tokens_accepted());
      return;
    }
    std::vector<uint32_t> choices = allowed(expected);
    std::erase_if(choices, [&](uint32_t t) { return vocab.is_eos(t); });
    if (choices.empty()) return;
    std::vector<uint32_t> spanning;
    for (uint32_t t : preferred)
      if (expected[t / 32] >> (t % 32) & 1) spanning.push_back(t);
    const bool span = !spanning.empty() && rng() % 2;
    const uint32_t token = span ? spanning[rng() % spanning.size()] : choices[rng() % choices.size()];
    // A refused token is refused by both.
    const uint32_t other = static_cast<uint32_t>(rng() % vocab.size());
    if (whole.is_allowed(other) != cut.is_allowed(other)) {
      out.first_mismatch = fmt::format("is_allowed({}) differs", other);
      return;
    }
    REQUIRE(whole.advance(token) == AdvanceResult::Ongoing);
    REQUIRE(cut.advance(token) == AdvanceResult::Ongoing);
    ++out.steps;
    if (rng() % 8 == 0 && whole.tokens_accepted() > 2) {
      const size_t back = 1 + rng() % 2;
      REQUIRE(whole.rollback(back));
      REQUIRE(cut.rollback(back));
    }
  }
}

// A vocabulary whose tokens span the cuts: every byte, and pieces of calls
// in each format, long ones holding a name's end, its arguments and the
// next call.
std::shared_ptr<const Vocabulary> spanning_vocabulary(std::vector<uint32_t>& spanning) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  const size_t first = tokens.size();
  for (const char* t : {"\"get_weather\", \"arguments\": {\"city\": \"", "_weather\",", "weather\"", "\", \"",
                        "\",", "time\", \"", "get\", \"arguments\": {\"id\": 1}}", "\"stop\", \"arguments\": {}}",
                        "\"stop\",", "stop\", \"parameters\": {}}", "p\"", "\"get\"", "\"get\": \"get\",",
                        " \"get_time\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"stop\", \"",
                        "\"}}</tool_call><tool_call>{\"name\": \"get\", \"", "get_time>\n<parameter=city>\n",
                        "weather>\n", ">\n<parameter=", "stop>\n</function>", "=get>\n", "\"}}, {\"name\": \"stop\"}",
                        "}}, {\"name\": \"get\", \"arguments\": {", "\"get_weather\"", "get_", "<tool_call>", "{\"name\": \""})
    tokens.push_back(t);
  for (size_t i = first; i < tokens.size(); ++i) spanning.push_back(static_cast<uint32_t>(i));
  tokens.push_back("</s>");
  auto vocab = Vocabulary::from_tokens(tokens, {static_cast<uint32_t>(tokens.size() - 1)});
  REQUIRE(vocab.ok());
  return *vocab;
}

}  // namespace

TEST_CASE("tool calls: the cut reply's masks are the whole grammar's, with tokens that span the cuts",
          "[tools][calls][differential]") {
  std::vector<uint32_t> spanning;
  auto vocab = spanning_vocabulary(spanning);
  for (ToolFormat format : kFormats) {
    auto whole_compiled = whole_grammar(format, vocab);
    auto cut_compiled = cut_grammar(format, vocab);
    Compared compared;
    for (uint64_t seed = 1; seed <= 12 && compared.first_mismatch.empty(); ++seed) {
      std::mt19937_64 rng(seed);
      Matcher whole(whole_compiled);
      ToolCallsMatcher cut(cut_compiled);
      walk_both(whole, cut, *vocab, rng, 120, spanning, compared);
    }
    INFO(tool_format_name(format) << ": " << compared.first_mismatch);
    CHECK(compared.first_mismatch.empty());
    CHECK(compared.steps > 600);
    // Only the tools called were compiled.
    CHECK(cut_compiled->compiled_tools() <= 3);
  }
}

TEST_CASE("tool calls: the cut reply's masks are the whole grammar's with a real vocabulary", "[tools][calls][differential]") {
  auto vocab = bundled_vocabulary();
  auto encoder = Encoder::create(vocab);
  REQUIRE(encoder.ok());
  const std::string replies[] = {
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\nand <tool_call>{\"name\":\"stop\",\"arguments\":{}}</tool_call> done",
      "{\"name\": \"get_time\", \"parameters\": {\"city\": \"Oslo\"}} and {\"name\": \"get\", \"parameters\": {}}"};
  for (ToolFormat format : kFormats) {
    auto whole_compiled = whole_grammar(format, vocab);
    auto cut_compiled = cut_grammar(format, vocab);
    Compared compared;
    std::vector<uint32_t> none;
    for (uint64_t seed = 1; seed <= 6 && compared.first_mismatch.empty(); ++seed) {
      std::mt19937_64 rng(seed);
      Matcher whole(whole_compiled);
      ToolCallsMatcher cut(cut_compiled);
      walk_both(whole, cut, *vocab, rng, 40, none, compared);
    }
    for (const std::string& reply : replies) {
      Matcher whole(whole_compiled);
      ToolCallsMatcher cut(cut_compiled);
      for (uint32_t token : (*encoder)->encode_continuation(reply)) {
        if (!whole.is_allowed(token)) break;  // the reply is another format's
        const bool same = mask_of(whole) == mask_of(cut);
        CHECK(same);
        if (!same) break;
        REQUIRE(whole.advance(token) == AdvanceResult::Ongoing);
        REQUIRE(cut.advance(token) == AdvanceResult::Ongoing);
        ++compared.masks;
      }
    }
    INFO(tool_format_name(format) << ": " << compared.first_mismatch);
    CHECK(compared.first_mismatch.empty());
  }
}

TEST_CASE("tool calls: a call's tool, errors, and names the cut cannot delimit", "[tools][calls]") {
  auto vocab = bundled_vocabulary();
  auto encoder = Encoder::create(vocab);
  REQUIRE(encoder.ok());
  auto grammar = cut_grammar(ToolFormat::Hermes, vocab);
  ToolCallsMatcher m(grammar);
  CHECK(m.current_tool() == std::nullopt);
  CHECK(grammar->compiled_tools() == 0);
  for (uint32_t t : (*encoder)->encode_continuation("Hi <tool_call>{\"name\": \"stop\""))
    REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
  REQUIRE(m.current_tool().has_value());
  CHECK(*m.current_tool() == 3);
  CHECK(grammar->compiled_tools() == 1);
  REQUIRE(m.rollback(1));
  CHECK(m.current_tool() == std::nullopt);

  auto refused = ToolCallsGrammar::create(R"([{"name": "a\"b"}])", "t.json", vocab);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("a name cut at its delimiters"));
  auto empty = ToolCallsGrammar::create("[]", "t.json", vocab);
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.error().message, Catch::Contains("the list has no tools"));
  auto bad_schema = ToolCallsGrammar::create(R"([{"name": "f", "parameters": {"type": "nope"}}])", "t.json", vocab);
  REQUIRE(bad_schema.ok());  // a tool's schema is read when a call to it is written
  ToolCallsMatcher b(*bad_schema);
  bool refused_call = false;
  for (uint32_t t : (*encoder)->encode_continuation("<tool_call>{\"name\": \"f\""))
    if (b.advance(t) != AdvanceResult::Ongoing) refused_call = true;
  CHECK(refused_call);
  CHECK(b.has_error());
  CHECK_THAT(b.error(), Catch::Contains("tool 'f'"));
  // A schema with no finite value (it requires itself): the error names the tool, not a rule.
  auto loop = ToolCallsGrammar::create(
      R"([{"name": "f", "parameters": {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}}])",
      "t.json", vocab);
  REQUIRE(loop.ok());
  ToolCallsMatcher l(*loop);
  for (uint32_t t : (*encoder)->encode_continuation("<tool_call>{\"name\": \"f\""))
    if (l.advance(t) != AdvanceResult::Ongoing) break;
  CHECK(l.has_error());
  CHECK_THAT(l.error(), Catch::Contains("tool 'f' accepts no call"));
  CHECK(l.error().find("unproductive") == std::string::npos);
}

TEST_CASE("tool calls: matchers on several threads share one grammar and its lazy cuts", "[tools][calls]") {
  std::vector<uint32_t> spanning;
  auto vocab = spanning_vocabulary(spanning);
  auto whole_compiled = whole_grammar(ToolFormat::Hermes, vocab);
  auto cut_compiled = cut_grammar(ToolFormat::Hermes, vocab);
  // Walks drawn on the whole grammar, with their masks.
  struct Walk {
    std::vector<uint32_t> tokens;
    std::vector<std::vector<uint32_t>> masks;
  };
  std::vector<Walk> walks(8);
  for (size_t w = 0; w < walks.size(); ++w) {
    std::mt19937_64 rng(100 + w);
    Matcher whole(whole_compiled);
    for (int i = 0; i < 60; ++i) {
      walks[w].masks.push_back(mask_of(whole));
      std::vector<uint32_t> choices = allowed(walks[w].masks.back());
      std::erase_if(choices, [&](uint32_t t) { return vocab->is_eos(t); });
      if (choices.empty()) break;
      std::vector<uint32_t> preferred;
      for (uint32_t t : spanning)
        if (walks[w].masks.back()[t / 32] >> (t % 32) & 1) preferred.push_back(t);
      const uint32_t token = !preferred.empty() && rng() % 2 ? preferred[rng() % preferred.size()]
                                                            : choices[rng() % choices.size()];
      walks[w].tokens.push_back(token);
      REQUIRE(whole.advance(token) == AdvanceResult::Ongoing);
    }
  }
  std::vector<int> failures(walks.size(), 0);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < walks.size(); ++w)
    threads.emplace_back([&, w] {
      ToolCallsMatcher cut(cut_compiled);
      std::vector<uint32_t> words(cut.mask_words());
      for (size_t i = 0; i < walks[w].tokens.size(); ++i) {
        cut.fill_mask(words);
        if (words != walks[w].masks[i] || cut.advance(walks[w].tokens[i]) != AdvanceResult::Ongoing) {
          ++failures[w];
          return;
        }
      }
    });
  for (std::thread& t : threads) t.join();
  for (size_t w = 0; w < walks.size(); ++w) {
    INFO("walk " << w);
    CHECK(failures[w] == 0);
  }
}

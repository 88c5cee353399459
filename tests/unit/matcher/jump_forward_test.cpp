// The forced text and jump-forward with token healing. The forced text is
// checked against the reference recognizer: at every step of random walks,
// it is exactly the longest common prefix of all continuations (the bytes
// the oracle finds to be the only viable next byte, one after the other,
// until the text could end). Every allowed token agrees with it. Each jump
// is checked: its tokens are accepted after its rollback, spell the
// taken-back bytes and a prefix of the forced text, and are the
// vocabulary's own encoding of that text.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "encoder.h"
#include "helpers.h"
#include "matcher.h"
#include "oracle.h"

using namespace cgram;

namespace {

std::shared_ptr<const Grammar> schema_grammar(const std::string& path, JsonWhitespace layout) {
  ParseOptions options;
  options.format = GrammarFormat::JsonSchema;
  options.schema.whitespace = layout;
  Grammar::Outcome outcome = Grammar::parse(test::read_file(path), path, options);
  INFO(outcome.diagnostics.render(false));
  REQUIRE(outcome.ok());
  return outcome.grammar;
}

std::shared_ptr<const CompiledGrammar> compile_grammar(const std::shared_ptr<const Grammar>& g,
                                               std::shared_ptr<const Vocabulary> vocab = test::bundled_vocabulary()) {
  auto result = CompiledGrammar::compile(g, std::move(vocab));
  REQUIRE(result.ok());
  return (*result);
}

// The longest common prefix of every continuation of `text`, by the oracle
// (unsegmented: any! spans any text, so nothing after it is forced).
std::string oracle_forced(const std::shared_ptr<const oracle::OracleGrammar>& g, const std::string& text,
                          size_t limit) {
  oracle::Recognizer r(g, /*segmented=*/false);
  r.push_bytes(text);
  std::string forced;
  while (forced.size() < limit && !r.complete()) {
    int only = -1;
    for (int b = 0; b < 256; ++b) {
      const char c = static_cast<char>(b);
      r.push_bytes(std::string_view(&c, 1));
      const bool viable = r.viable();
      r.pop_bytes(1);
      if (!viable) continue;
      if (only >= 0) return forced;
      only = b;
    }
    if (only < 0) break;
    forced.push_back(static_cast<char>(only));
    r.push_bytes(forced.substr(forced.size() - 1));
  }
  return forced;
}

struct Counts {
  size_t steps = 0, forced_steps = 0, forced_bytes = 0, jumps = 0, healed = 0;
};

// Random walks; at each step the forced text against the oracle, the
// allowed tokens against the forced text, and the jump.
void check_walks(const std::shared_ptr<const CompiledGrammar>& compiled, const std::shared_ptr<const Grammar>& g,
                 uint64_t seed, size_t walks, size_t max_steps, Counts& counts) {
  const auto reference = test::oracle_grammar(*g);
  const Vocabulary& vocab = compiled->vocabulary();
  auto enc = compiled->encoder();
  REQUIRE(enc.ok());
  const Encoder& encoder = *(*enc);
  std::mt19937_64 rng(seed);
  for (size_t w = 0; w < walks; ++w) {
    Matcher m(compiled);
    std::string text;
    std::vector<uint32_t> accepted;
    for (size_t step = 0; step < max_steps; ++step) {
      INFO("walk " << w << " step " << step << " text '" << text << "'");
      const std::string forced = m.forced_text(48);
      REQUIRE(forced == oracle_forced(reference, text, 48));
      ++counts.steps;
      if (!forced.empty()) {
        ++counts.forced_steps;
        counts.forced_bytes += forced.size();
      }
      const std::vector<uint32_t> allowed = m.current_possible_tokens();
      for (uint32_t t : allowed) {
        if (vocab.is_eos(t)) {
          REQUIRE(forced.empty());
          continue;
        }
        const std::string_view b = vocab.bytes(t);
        const size_t common = std::min(b.size(), forced.size());
        REQUIRE(b.substr(0, common) == std::string_view(forced).substr(0, common));
      }

      auto jumped = m.jump_forward(48);
      REQUIRE(jumped.ok());
      const Matcher::JumpForward& jump = *jumped;
      REQUIRE(m.tokens_accepted() == accepted.size());  // asking moved nothing
      if (!jump.tokens.empty()) {
        ++counts.jumps;
        if (jump.rollback > 0) ++counts.healed;
        REQUIRE(jump.rollback <= 1);
        REQUIRE(jump.forced == forced);
        std::string taken, spelled;
        for (size_t i = accepted.size() - jump.rollback; i < accepted.size(); ++i) taken += vocab.bytes(accepted[i]);
        for (uint32_t t : jump.tokens) spelled += vocab.bytes(t);
        // The taken-back bytes, then at least one forced byte, no more than all.
        REQUIRE(spelled.size() > taken.size());
        REQUIRE(spelled.size() <= taken.size() + forced.size());
        REQUIRE(spelled == taken + forced.substr(0, spelled.size() - taken.size()));
        // The vocabulary's own encoding of the text it ends with (its last
        // token left out unless the text must end there).
        const std::vector<uint32_t> own = encoder.encode_continuation(taken + forced);
        REQUIRE(own.size() >= jump.tokens.size());
        REQUIRE(std::equal(jump.tokens.begin(), jump.tokens.end(), own.begin()));
        Matcher copy = m.clone();
        REQUIRE(copy.rollback(jump.rollback));
        for (uint32_t t : jump.tokens) REQUIRE(copy.advance(t) == AdvanceResult::Ongoing);
      }

      std::vector<uint32_t> text_tokens;
      for (uint32_t t : allowed)
        if (!vocab.is_eos(t)) text_tokens.push_back(t);
      if (text_tokens.empty()) break;
      // Half the time take the jump, as a server would.
      if (!jump.tokens.empty() && rng() % 2 == 0) {
        REQUIRE(m.rollback(jump.rollback));
        for (size_t i = 0; i < jump.rollback; ++i) {
          text.resize(text.size() - vocab.bytes(accepted.back()).size());
          accepted.pop_back();
        }
        for (uint32_t t : jump.tokens) {
          REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
          accepted.push_back(t);
          text += vocab.bytes(t);
        }
        continue;
      }
      const uint32_t t = text_tokens[rng() % text_tokens.size()];
      REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
      accepted.push_back(t);
      text += vocab.bytes(t);
    }
  }
}

}  // namespace

TEST_CASE("forced text: exactly the longest common prefix of all continuations, and jumps are right",
          "[jump-forward][differential]") {
  Counts counts;
  SECTION("the fixed-shape record") {
    auto g = test::grammar(test::read_example("record.cgram"));
    check_walks(compile_grammar(g), g, 1, 6, 40, counts);
  }
  SECTION("JSON Schemas, every layout") {
    const std::string dir = std::string(CGRAM_SOURCE_DIR) + "/tests/data/schemas/";
    for (const char* name : {"tool_call.json", "event.json", "mixed.json"})
      for (JsonWhitespace layout : {JsonWhitespace::Compact, JsonWhitespace::Pretty, JsonWhitespace::Flexible}) {
        INFO(name << " layout " << static_cast<int>(layout));
        auto g = schema_grammar(dir + name, layout);
        check_walks(compile_grammar(g), g, 2, 3, 30, counts);
      }
  }
  SECTION("JSON, and a reply with except! and any!") {
    for (const char* name : {"json.cgram", "reply.cgram"}) {
      auto g = test::grammar(test::read_example(name));
      check_walks(compile_grammar(g), g, 3, 4, 30, counts);
    }
  }
  CHECK(counts.forced_steps > 0);
  WARN(counts.steps << " steps: " << counts.forced_steps << " with forced text (" << counts.forced_bytes
                    << " bytes), " << counts.jumps << " jumps, " << counts.healed << " healing the last token");
}

TEST_CASE("forced text: a fixed record, through any tokenization; nothing where the text may end", "[jump-forward]") {
  auto g = test::grammar(R"(start ::= '{"name": "' #'[a-z]+' '", "kind": "record"}' ;)");
  auto compiled = compile_grammar(g);
  Matcher m(compiled);
  CHECK(m.forced_text() == R"({"name": ")");
  CHECK(m.forced_text(3) == R"({"n)");
  // The record's fixed tail after its free field.
  const Vocabulary& vocab = compiled->vocabulary();
  auto encoder = (*compiled->encoder());
  for (uint32_t t : encoder->encode_continuation(R"({"name": "ada)")) REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
  CHECK(m.forced_text().empty());  // more letters, or the quote
  REQUIRE(m.advance(encoder->encode_continuation("\"").at(0)) == AdvanceResult::Ongoing);
  CHECK(m.forced_text() == R"(, "kind": "record"})");
  // The whole rest is forced and nothing may follow it: every token of its
  // encoding is appended, the last one included.
  auto jump = (*m.jump_forward());
  std::string spelled;
  for (uint32_t t : jump.tokens) spelled += vocab.bytes(t);
  const std::string taken = jump.rollback ? std::string(vocab.bytes(encoder->encode_continuation("\"").at(0))) : "";
  CHECK(spelled == taken + R"(, "kind": "record"})");
  REQUIRE(m.rollback(jump.rollback));
  for (uint32_t t : jump.tokens) REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
  CHECK(m.can_end());
  CHECK(m.forced_text().empty());
  CHECK((*m.jump_forward()).tokens.empty());
}

TEST_CASE("forced text: the rest of a keyword; any! forces nothing", "[jump-forward]") {
  auto compiled = compile_grammar(test::grammar(test::read_example("json.cgram")));
  Matcher m(compiled);
  auto encoder = (*compiled->encoder());
  for (uint32_t t : encoder->encode_continuation("[tr")) REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
  CHECK(m.forced_text() == "ue");
  Matcher any(compile_grammar(test::grammar("start ::= 'x' any! 'y' ;")));
  REQUIRE(any.advance(encoder->encode_continuation("x").at(0)) == AdvanceResult::Ongoing);
  CHECK(any.forced_text().empty());
  // A grammar of one sentence is forced whole, and ends there.
  Matcher one(compile_grammar(test::grammar("start ::= 'hello world' ;")));
  CHECK(one.forced_text() == "hello world");
  auto jump = (*one.jump_forward());
  CHECK(jump.rollback == 0);
  CHECK(jump.tokens == encoder->encode_continuation("hello world"));
}

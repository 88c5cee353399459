// Count-based speculative drafts: they never break the grammar, asking
// leaves the matcher as it was, they learn a structure that repeats, the
// state key is the same for the same state, and memory stays bounded.
#include <catch2/catch.hpp>

#include <random>

#include "drafts.h"
#include "encoder.h"
#include "helpers.h"

using namespace cgram;

namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::string& source) {
  auto result = CompiledGrammar::compile(test::grammar(source), test::bundled_vocabulary());
  REQUIRE(result.ok());
  return (*result);
}

// A random walk's tokens (text tokens only; stops where none is allowed).
std::vector<uint32_t> random_walk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng,
                                  size_t steps) {
  Matcher m(g);
  std::vector<uint32_t> tokens;
  for (size_t i = 0; i < steps; ++i) {
    std::vector<uint32_t> allowed;
    for (uint32_t t : m.current_possible_tokens())
      if (!g->vocabulary().is_eos(t)) allowed.push_back(t);
    if (allowed.empty()) break;
    // Skewed towards the first few allowed tokens, so that states repeat
    // their choices (as a model does).
    const uint32_t t = allowed[std::min<size_t>(allowed.size() - 1, rng() % 3 == 0 ? rng() % allowed.size() : 0)];
    REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
    tokens.push_back(t);
  }
  return tokens;
}

}  // namespace

TEST_CASE("drafts never break the grammar and leave the matcher as it was", "[drafts]") {
  for (const char* name : {"json.cgram", "record.cgram", "reply.cgram", "csv.cgram"}) {
    INFO(name);
    auto g = compile(test::read_example(name));
    std::mt19937_64 rng(std::hash<std::string>()(name));
    DraftOptions options;
    options.threshold = 0.3;  // many drafts
    options.min_count = 1;
    DraftModel drafts(options);
    for (int i = 0; i < 20; ++i) drafts.learn(g, random_walk(g, rng, 40));
    size_t proposed = 0;
    for (int walk = 0; walk < 10; ++walk) {
      const std::vector<uint32_t> path = random_walk(g, rng, 30);
      Matcher m(g);
      for (uint32_t t : path) {
        const std::vector<uint32_t> before = m.current_possible_tokens();
        const std::vector<uint32_t> proposal = drafts.propose(m, 8);
        proposed += proposal.size();
        REQUIRE(proposal.size() <= 8);
        CHECK(m.current_possible_tokens() == before);
        Matcher check = m.clone();
        for (uint32_t d : proposal) {
          REQUIRE_FALSE(g->vocabulary().is_eos(d));
          REQUIRE(check.advance(d) == AdvanceResult::Ongoing);
        }
        REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
      }
    }
    CHECK(proposed > 0);
  }
}

TEST_CASE("drafts learn a structure that repeats", "[drafts]") {
  auto g = compile(test::read_example("record.cgram"));
  auto encoder = (*g->encoder());
  const std::vector<std::string> docs = {
      R"({"name": "Ada", "age": 36, "email": "ada@example.com", "tags": ["a"], "active": true})",
      R"({"name": "Bob", "age": 7, "email": "bob@example.com", "tags": [], "active": false})",
      R"({"name": "Cy", "age": 101, "email": "cy@example.org", "tags": ["x", "y"], "active": true})"};
  DraftModel drafts;
  for (const std::string& d : docs) {
    Matcher probe(g);
    const std::vector<uint32_t> tokens = encoder->encode_continuation(d);
    for (uint32_t t : tokens) REQUIRE(probe.advance(t) == AdvanceResult::Ongoing);  // a valid record
    drafts.learn(g, tokens);
  }
  // A new record: the drafts give its fixed text.
  const std::vector<uint32_t> next = encoder->encode_continuation(R"({"name": "Dee", "age": 4, "email": "d)");
  Matcher m(g);
  const std::vector<uint32_t> start = drafts.propose(m, 3);
  REQUIRE_FALSE(start.empty());
  CHECK(std::equal(start.begin(), start.end(), next.begin()));
  size_t matched = 0, steps = 0;
  for (size_t i = 0; i < next.size(); ++i) {
    const std::vector<uint32_t> proposal = drafts.propose(m, 4);
    size_t ok = 0;
    while (ok < proposal.size() && i + ok < next.size() && proposal[ok] == next[i + ok]) ++ok;
    matched += ok;
    steps += !proposal.empty();
    REQUIRE(m.advance(next[i]) == AdvanceResult::Ongoing);
  }
  CHECK(steps > 0);
  CHECK(matched * 2 >= steps);  // most drafts on the fixed parts are right
}

TEST_CASE("drafts: the state key is the same for the same state, and memory is bounded", "[drafts]") {
  auto g = compile(test::read_example("json.cgram"));
  auto encoder = (*g->encoder());
  const std::vector<uint32_t> a = encoder->encode_continuation(R"({"k": [1, 2)");
  Matcher x(g), y(g);
  for (uint32_t t : a) REQUIRE(x.advance(t) == AdvanceResult::Ongoing);
  // y gets there after a detour, rolled back.
  for (uint32_t t : encoder->encode_continuation(R"({"other": {"deep": [)")) REQUIRE(y.advance(t) == AdvanceResult::Ongoing);
  REQUIRE(y.rollback(y.tokens_accepted()));
  for (uint32_t t : a) REQUIRE(y.advance(t) == AdvanceResult::Ongoing);
  CHECK(x.context_key() == y.context_key());
  // Inside an object and inside an array are different states.
  Matcher z(g);
  for (uint32_t t : encoder->encode_continuation(R"({"k": 1)")) REQUIRE(z.advance(t) == AdvanceResult::Ongoing);
  CHECK(z.context_key() != x.context_key());

  DraftOptions tiny;
  tiny.buckets = 4;
  tiny.min_count = 1;
  tiny.threshold = 0.1;
  DraftModel drafts(tiny);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) drafts.learn(g, random_walk(g, rng, 30));
  CHECK(drafts.memory_bytes() == 4 * 64);
  Matcher m(g);
  for (uint32_t t : a) {
    Matcher check = m.clone();
    for (uint32_t d : drafts.propose(m, 6)) REQUIRE(check.advance(d) == AdvanceResult::Ongoing);
    REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
  }
}

TEST_CASE("drafts: no draft below the threshold", "[drafts]") {
  auto g = compile("start ::= ('a' | 'b') 'c' ;");
  const Vocabulary& vocab = g->vocabulary();
  DraftModel drafts;  // threshold 0.6
  for (int i = 0; i < 10; ++i) {
    drafts.learn(g, std::vector<uint32_t>{*vocab.find("a"), *vocab.find("c")});
    drafts.learn(g, std::vector<uint32_t>{*vocab.find("b"), *vocab.find("c")});
  }
  Matcher m(g);
  CHECK(drafts.propose(m, 2).empty());  // a or b, half each
  REQUIRE(m.advance(*vocab.find("a")) == AdvanceResult::Ongoing);
  CHECK(drafts.propose(m, 2) == std::vector<uint32_t>{*vocab.find("c")});
}

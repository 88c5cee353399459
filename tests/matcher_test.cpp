// The matcher against the oracle, bit for bit, and its API.
#include <catch2/catch.hpp>

#include "differential.h"
#include "encoder.h"
#include "helpers.h"
#include "matcher.h"

using namespace cgram;
using namespace cgram::test;

namespace {

std::shared_ptr<const Vocabulary> bundled() {
  static auto vocab = std::get<std::shared_ptr<const Vocabulary>>(Vocabulary::bundled());
  return vocab;
}

std::shared_ptr<const CompiledGrammar> compile(const std::shared_ptr<const Grammar>& g,
                                               std::shared_ptr<const Vocabulary> vocab = bundled()) {
  auto result = CompiledGrammar::compile(g, std::move(vocab));
  REQUIRE(std::holds_alternative<std::shared_ptr<const CompiledGrammar>>(result));
  return std::get<std::shared_ptr<const CompiledGrammar>>(result);
}

}  // namespace

TEST_CASE("dev: random walk on one example", "[.][dev]") {
  auto name = std::getenv("CGRAM_EXAMPLE") ? std::getenv("CGRAM_EXAMPLE") : "json.cgram";
  auto g = grammar(read_example(name));
  auto compiled = compile(g);
  OracleMasker oracle(oracle_grammar(*g), bundled());
  size_t steps = std::getenv("CGRAM_STEPS") ? std::stoul(std::getenv("CGRAM_STEPS")) : 20;
  uint64_t seed = std::getenv("CGRAM_SEED") ? std::stoul(std::getenv("CGRAM_SEED")) : 1;
  WalkStats s = walk_random(compiled, oracle, seed, steps);
  INFO(s.first_mismatch);
  CHECK(s.mismatches == 0);
  WARN("steps " << s.steps << " pairs " << s.pairs);
}

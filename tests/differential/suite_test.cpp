// The benchmark suite (bench/suite/FORMAT/*.cgram and FORMAT/docs/) joins
// the differential tests: every grammar of every format, in every spelling,
// against the oracle, bit for bit, on its documents and on random walks.
// The quick run takes the start of one document per grammar with the
// bundled vocabulary; the long run takes more of each document with three
// vocabulary kinds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "differential.h"
#include "encoder.h"
#include "helpers.h"

using namespace cgram;
using namespace cgram::test;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::shared_ptr<const Grammar>& g,
                                               std::shared_ptr<const Vocabulary> vocab) {
  auto result = CompiledGrammar::compile(g, std::move(vocab));
  REQUIRE(result.ok());
  return (*result);
}

// The first `max_tokens` tokens of each of `documents` documents, then
// random walks: every mask against the oracle's. Returns the pairs compared.
size_t differential(const SuiteGrammar& sg, const std::shared_ptr<const Vocabulary>& vocab, size_t documents,
                    size_t max_tokens, std::initializer_list<uint64_t> seeds, size_t walk_steps) {
  auto g = grammar(sg.source);
  auto compiled = compile(g, vocab);
  OracleMasker oracle(oracle_grammar(*g), vocab);
  auto created = Encoder::create(vocab);
  REQUIRE(created.ok());
  const Encoder& enc = *(*created);
  size_t pairs = 0;
  for (size_t d = 0; d < documents && d < sg.documents.size(); ++d) {
    std::vector<uint32_t> tokens = enc.encode_continuation(sg.documents[d]);
    if (tokens.size() > max_tokens) tokens.resize(max_tokens);
    WalkStats s = walk_document(compiled, oracle, tokens);
    INFO(sg.label << " document " << d + 1 << " with " << vocab->name() << ": " << s.first_mismatch);
    CHECK(s.mismatches == 0);
    CHECK(s.steps == tokens.size() + 1);  // the document stays in the language
    pairs += s.pairs;
  }
  for (uint64_t seed : seeds) {
    WalkStats s = walk_random(compiled, oracle, seed, walk_steps);
    INFO(sg.label << " random walk " << seed << " with " << vocab->name() << ": " << s.first_mismatch);
    CHECK(s.mismatches == 0);
    pairs += s.pairs;
  }
  return pairs;
}

}  // namespace

// The quick run: one spelling of every format (the first of its folder);
// the other spellings are the long run's, below.
TEST_CASE("differential: the benchmark suite, every format, bundled vocabulary", "[suite][differential]") {
  auto vocab = (*(Vocabulary::bundled()));
  const std::vector<SuiteGrammar> grammars = suite_grammars();
  REQUIRE(grammars.size() >= 24);
  size_t pairs = 0;
  std::string last_format;
  for (const SuiteGrammar& sg : grammars) {
    const std::string format = sg.label.substr(0, sg.label.find('/'));
    if (format == last_format) continue;
    last_format = format;
    pairs += differential(sg, vocab, 1, 24, {1}, 8);
  }
  WARN("benchmark suite (quick): " << pairs << " (step, token) pairs compared");
}

TEST_CASE("differential, exhaustive: the benchmark suite, every spelling, bundled vocabulary", "[long][differential]") {
  auto vocab = (*(Vocabulary::bundled()));
  size_t pairs = 0;
  for (const SuiteGrammar& sg : suite_grammars()) pairs += differential(sg, vocab, 1, 24, {1}, 8);
  WARN("benchmark suite, every spelling: " << pairs << " (step, token) pairs compared");
}

TEST_CASE("differential, exhaustive: the benchmark suite with three vocabulary kinds", "[long][differential]") {
  if (!shared_vocab("llama3-tokenizer.json")) return skip_without_shared("llama3-tokenizer.json");
  const std::string shared = shared_dir() + "/vocab/";
  const std::vector<SuiteGrammar> grammars = suite_grammars();
  size_t pairs = 0;
  for (std::string file : {"llama3-tokenizer.json", "gemma-tokenizer.json", "cl100k_base.tiktoken"}) {
    auto vocab = (*(Vocabulary::load(shared + file)));
    size_t vocab_pairs = 0;
    for (const SuiteGrammar& sg : grammars) vocab_pairs += differential(sg, vocab, 1, 32, {1}, 10);
    WARN(file << ": benchmark suite, " << vocab_pairs << " (step, token) pairs compared");
    pairs += vocab_pairs;
  }
  WARN("benchmark suite (exhaustive): " << pairs << " (step, token) pairs compared in all");
}

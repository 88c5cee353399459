// The matcher against the oracle, bit for bit, and its API.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <random>

#include "batch.h"
#include "differential.h"
#include "encoder.h"
#include "helpers.h"
#include "matcher.h"

using namespace cgram;
using namespace cgram::test;

namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::shared_ptr<const Grammar>& g,
                                               std::shared_ptr<const Vocabulary> vocab = bundled_vocabulary()) {
  auto result = CompiledGrammar::compile(g, std::move(vocab));
  REQUIRE(result.ok());
  return (*result);
}

std::vector<uint32_t> mask_of(Matcher& m) {
  std::vector<uint32_t> words(m.mask_words());
  m.fill_mask(words);
  return words;
}

bool bit(const std::vector<uint32_t>& words, uint32_t id) { return words[id / 32] >> (id % 32) & 1; }

// Documents of each example, in the language.
const std::vector<std::pair<std::string, std::string>>& documents() {
  static const std::vector<std::pair<std::string, std::string>> docs = {
      {"json.cgram", R"({"name": "cgram", "tags": ["exact", "fast"], "n": -1.5e3, "ok": true, "x": null})"},
      {"record.cgram", R"({"name": "Ann", "age": 33, "email": "ann@example.com", "tags": ["a"], "active": true})"},
      {"arithmetic.cgram", "-(1 + 2) * max(3, 4^2) / x"},
      {"c_subset.cgram", "int f(int a) { if (a > 1) return a * f(a - 1); else return 1; }"},
      {"markup.cgram", "<a x=\"1\"><b/>text &amp; more<!-- c --></a>"},
      {"csv.cgram", "a,b,\"c,\"\"d\"\"\"\r\n1,2,3\r\n"},
      {"chess.cgram", "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 1/2-1/2"},
      {"delimited.cgram", "some text*[inner ]]] text]*"},
      {"reply.cgram", "<think>hmm</think>\nSure, here.\n\nbye now"},
      {"reasoning_json.cgram", "The user wants </thin> a <b>record</b>.\n</think>\n{\"name\": \"cgram\", \"n\": [1, 2]}"},
      {"tool_calls.cgram",
       "Let me look <tool_ it up.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"cgram\"}}\n</tool_call>\n"
       "Found it."},
  };
  return docs;
}

std::unique_ptr<Encoder> encoder(const std::shared_ptr<const Vocabulary>& vocab) {
  auto created = Encoder::create(vocab);
  REQUIRE(created.ok());
  return std::move(*created);
}

// One example's document, then random walks from each seed: every mask
// against the oracle's. Returns the (step, token) pairs compared.
size_t differential(const std::string& label, const std::shared_ptr<const Vocabulary>& vocab, const Encoder& enc,
                    const std::string& name, const std::string& doc, const std::vector<uint64_t>& seeds,
                    size_t steps, size_t min_document_steps = 0) {
  auto g = grammar(read_example(name));
  auto compiled = compile(g, vocab);
  OracleMasker oracle(oracle_grammar(*g), vocab);
  WalkStats d = walk_document(compiled, oracle, enc.encode_continuation(doc));
  INFO(label << " " << name << " document: " << d.first_mismatch);
  CHECK(d.mismatches == 0);
  CHECK(d.steps > min_document_steps);
  size_t pairs = d.pairs;
  for (uint64_t seed : seeds) {
    WalkStats r = walk_random(compiled, oracle, seed, steps);
    INFO(label << " " << name << " random walk " << seed << ": " << r.first_mismatch);
    CHECK(r.mismatches == 0);
    pairs += r.pairs;
  }
  return pairs;
}

}  // namespace

TEST_CASE("differential: every example, documents and random walks, bundled vocabulary", "[matcher][differential]") {
  auto vocab = bundled_vocabulary();
  auto enc = encoder(vocab);
  size_t pairs = 0;
  for (const auto& [name, doc] : documents()) pairs += differential("phi-3", vocab, *enc, name, doc, {1, 2}, 12, 5);
  CHECK(pairs > 4'000'000);
  WARN("differential (quick): " << pairs << " (step, token) pairs compared");
}

// Byte-level BPE and tiktoken against the oracle: the quick run takes a
// sample (each vocabulary with two examples), the long run all four on both.
void other_vocabulary_kinds(bool all) {
  if (!shared_vocab("cl100k_base.tiktoken")) return skip_without_shared("cl100k_base.tiktoken");
  const std::string shared = shared_dir() + "/vocab/";
  for (std::string file : {"gguf/ggml-vocab-gpt-2.gguf", "cl100k_base.tiktoken"}) {
    auto vocab = (*(Vocabulary::load(shared + file)));
    auto enc = encoder(vocab);
    const bool gpt2 = file.find("gpt-2") != std::string::npos;
    for (const auto& [name, doc] : documents()) {
      const bool sampled = gpt2 ? (name == "json.cgram" || name == "c_subset.cgram")
                                : (name == "reply.cgram" || name == "tool_calls.cgram");
      if ((all || sampled) &&
          (name == "json.cgram" || name == "reply.cgram" || name == "c_subset.cgram" || name == "tool_calls.cgram"))
        differential(file, vocab, *enc, name, doc, {7}, 6);
    }
  }
}

TEST_CASE("differential on other vocabulary kinds: byte-level BPE and tiktoken", "[matcher][differential][shared]") {
  other_vocabulary_kinds(false);
}

TEST_CASE("differential, exhaustive: other vocabulary kinds, every example of the sample", "[long][differential]") {
  other_vocabulary_kinds(true);
}

TEST_CASE("rollback restores the exact previous masks", "[matcher]") {
  auto compiled = compile(grammar(read_example("json.cgram")));
  auto enc = encoder(bundled_vocabulary());
  Matcher m(compiled);
  std::vector<std::vector<uint32_t>> masks{mask_of(m)};
  std::vector<uint32_t> tokens = enc->encode_continuation(R"({"a": [1, 2, {"b": "c"}]})");
  for (uint32_t t : tokens) {
    REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
    masks.push_back(mask_of(m));
  }
  for (size_t n : {size_t(1), size_t(3), size_t(0), tokens.size() - 4}) {
    size_t before = m.tokens_accepted();
    REQUIRE(m.rollback(n));
    CHECK(m.tokens_accepted() == before - n);
    CHECK(mask_of(m) == masks[m.tokens_accepted()]);
  }
  CHECK_FALSE(m.rollback(m.tokens_accepted() + 1));
  REQUIRE(m.rollback(m.tokens_accepted()));
  CHECK(mask_of(m) == masks[0]);
  // Rolling back over end of sequence reopens the matcher.
  Matcher done(compiled);
  for (uint32_t t : tokens) done.advance(t);
  REQUIRE(done.advance(bundled_vocabulary()->eos_ids()[0]) == AdvanceResult::Finished);
  CHECK(done.is_finished());
  REQUIRE(done.rollback(1));
  CHECK_FALSE(done.is_finished());
  CHECK(mask_of(done) == masks.back());
}

TEST_CASE("clones are independent and share the compiled grammar", "[matcher]") {
  auto compiled = compile(grammar(read_example("json.cgram")));
  auto enc = encoder(bundled_vocabulary());
  Matcher a(compiled);
  for (uint32_t t : enc->encode_continuation(R"({"k": )")) REQUIRE(a.advance(t) == AdvanceResult::Ongoing);
  Matcher b = a.clone();
  auto before = mask_of(a);
  for (uint32_t t : enc->encode_continuation("[1")) REQUIRE(b.advance(t) == AdvanceResult::Ongoing);
  CHECK(mask_of(a) == before);
  CHECK(mask_of(b) != before);
  CHECK(&a.grammar() == &b.grammar());
}

TEST_CASE("a rejected token changes nothing", "[matcher]") {
  auto compiled = compile(grammar(read_example("json.cgram")));
  auto vocab = bundled_vocabulary();
  Matcher m(compiled);
  auto enc = encoder(vocab);
  for (uint32_t t : enc->encode_continuation(R"({"a": 1)")) REQUIRE(m.advance(t) == AdvanceResult::Ongoing);
  auto before = mask_of(m);
  size_t accepted = m.tokens_accepted();
  for (uint32_t id = 0; id < vocab->size(); ++id) {
    if (bit(before, id)) continue;
    CHECK(m.advance(id) == AdvanceResult::Rejected);
    if (id % 997 == 0) CHECK(mask_of(m) == before);
  }
  CHECK(m.advance(static_cast<uint32_t>(vocab->size())) == AdvanceResult::Rejected);
  CHECK(m.tokens_accepted() == accepted);
  CHECK(mask_of(m) == before);
}

TEST_CASE("is_allowed agrees with the mask", "[matcher]") {
  auto compiled = compile(grammar(read_example("c_subset.cgram")));
  auto vocab = bundled_vocabulary();
  auto enc = encoder(vocab);
  Matcher m(compiled);
  std::vector<uint32_t> tokens = enc->encode_continuation("int main(void) { return 0; }");
  for (size_t step = 0; step <= tokens.size(); ++step) {
    auto mask = mask_of(m);
    for (uint32_t id = 0; id < vocab->size(); id += step % 2 ? 1 : 7) CHECK(m.is_allowed(id) == bit(mask, id));
    if (step < tokens.size()) REQUIRE(m.advance(tokens[step]) == AdvanceResult::Ongoing);
  }
}

TEST_CASE("end of sequence exactly when the text is complete; finished matchers allow nothing", "[matcher]") {
  auto compiled = compile(grammar("start ::= 'ab' | 'abcd';"));
  auto vocab = bundled_vocabulary();
  uint32_t eos = vocab->eos_ids()[0];
  Matcher m(compiled);
  CHECK_FALSE(m.can_end());
  CHECK_FALSE(m.is_allowed(eos));
  REQUIRE(m.advance(*vocab->find("ab")) == AdvanceResult::Ongoing);
  CHECK(m.can_end());
  CHECK(m.is_allowed(eos));
  CHECK(m.advance(eos) == AdvanceResult::Finished);
  CHECK(m.is_finished());
  CHECK(m.current_possible_tokens().empty());
  CHECK(m.advance(*vocab->find("cd")) == AdvanceResult::Rejected);
  m.reset();
  CHECK(m.tokens_accepted() == 0);
  CHECK_FALSE(m.can_end());
}

TEST_CASE("forced text: bytes only one token may spell come through any tokenization", "[matcher]") {
  auto vocab = bundled_vocabulary();
  // Only the byte-fallback tokens <0x01> and <0x02> can spell these bytes.
  auto compiled = compile(grammar(R"(start ::= #'\x01\x02' #'[a-z]+';)"));
  Matcher m(compiled);
  CHECK(m.forced_text() == "\x01\x02");
  CHECK(m.tokens_accepted() == 0);  // asking changed nothing
  REQUIRE(m.advance(vocab->find("\x01").value()) == AdvanceResult::Ongoing);
  CHECK(m.forced_text() == "\x02");
  REQUIRE(m.advance(vocab->find("\x02").value()) == AdvanceResult::Ongoing);
  // Then many letters are possible: nothing is forced.
  CHECK(m.forced_text().empty());
  // JSON starts with one of several characters.
  Matcher json(compile(grammar(read_example("json.cgram"))));
  CHECK(json.forced_text().empty());
}

TEST_CASE("logits: masked to -inf, untouched when rejected", "[matcher]") {
  auto compiled = compile(grammar(read_example("json.cgram")));
  auto vocab = bundled_vocabulary();
  Matcher m(compiled);
  std::vector<float> logits(vocab->size() + 7, 1.0f);  // padded, as servers do
  CHECK(m.modify_possible_logits(*vocab->find("{"), logits) == AdvanceResult::Ongoing);
  auto mask = mask_of(m);
  for (uint32_t i = 0; i < logits.size(); ++i) {
    bool allowed = i < vocab->size() && bit(mask, i);
    REQUIRE((logits[i] == 1.0f) == allowed);
    REQUIRE((std::isinf(logits[i]) && logits[i] < 0) == !allowed);
  }
  std::vector<float> untouched(vocab->size(), 2.0f);
  CHECK(m.modify_possible_logits(*vocab->find("{"), untouched) == AdvanceResult::Rejected);
  CHECK(std::all_of(untouched.begin(), untouched.end(), [](float x) { return x == 2.0f; }));
}

TEST_CASE("the threaded batch gives the same masks as one by one", "[matcher][batch]") {
  auto compiled = compile(grammar(read_example("json.cgram")));
  auto vocab = bundled_vocabulary();
  auto enc = encoder(vocab);
  std::vector<std::string> texts = {"", "{", R"({"a)", R"({"a": [1, 2)", R"({"a": tr)", R"([)", R"({"x": {"y": )", R"(12)"};
  std::vector<std::unique_ptr<Matcher>> matchers;
  std::vector<Matcher*> pointers;
  for (int copy = 0; copy < 4; ++copy)
    for (const std::string& t : texts) {
      matchers.push_back(std::make_unique<Matcher>(compiled));
      for (uint32_t id : enc->encode_continuation(t)) REQUIRE(matchers.back()->advance(id) == AdvanceResult::Ongoing);
      pointers.push_back(matchers.back().get());
    }
  const size_t words = compiled->mask_words();
  std::vector<uint32_t> batch(words * pointers.size());
  ThreadPool pool(4);
  fill_masks(pointers, batch, pool);
  for (size_t i = 0; i < pointers.size(); ++i) {
    std::vector<uint32_t> row(batch.begin() + i * words, batch.begin() + (i + 1) * words);
    CHECK(row == mask_of(*pointers[i]));
  }
}

TEST_CASE("dev: random walk on one example", "[.][dev]") {
  auto name = std::getenv("CGRAM_EXAMPLE") ? std::getenv("CGRAM_EXAMPLE") : "json.cgram";
  auto g = grammar(read_example(name));
  auto vocab = std::getenv("CGRAM_VOCAB") ? (*(Vocabulary::load(std::getenv("CGRAM_VOCAB")))) : bundled_vocabulary();
  auto compiled = compile(g, vocab);
  OracleMasker oracle(oracle_grammar(*g), vocab);
  size_t steps = std::getenv("CGRAM_STEPS") ? std::stoul(std::getenv("CGRAM_STEPS")) : 20;
  uint64_t seed = std::getenv("CGRAM_SEED") ? std::stoul(std::getenv("CGRAM_SEED")) : 1;
  WalkStats s = walk_random(compiled, oracle, seed, steps);
  INFO(s.first_mismatch);
  CHECK(s.mismatches == 0);
  WARN("steps " << s.steps << " pairs " << s.pairs);
}

TEST_CASE("differential, exhaustive: three vocabulary kinds, every example", "[long][differential]") {
  if (!shared_vocab("llama3-tokenizer.json")) return skip_without_shared("llama3-tokenizer.json");
  const std::string shared = shared_dir() + "/vocab/";
  size_t pairs = 0;
  for (std::string file : {"llama3-tokenizer.json", "gemma-tokenizer.json", "cl100k_base.tiktoken"}) {
    auto vocab = (*(Vocabulary::load(shared + file)));
    auto enc = encoder(vocab);
    size_t vocab_pairs = 0;
    for (const auto& [name, doc] : documents()) vocab_pairs += differential(file, vocab, *enc, name, doc, {1, 2, 3}, 10);
    WARN(file << ": " << vocab_pairs << " (step, token) pairs compared");
    pairs += vocab_pairs;
  }
  WARN("differential (exhaustive): " << pairs << " (step, token) pairs compared in all");
  CHECK(pairs >= 10'000'000);
}

TEST_CASE("differential: ambiguous, recursive and empty-rule grammars", "[matcher][differential]") {
  auto vocab = bundled_vocabulary();
  const char* grammars[] = {
      "start ::= e; e ::= e '+' e | e e | 'a' | '';",                    // ambiguous, empty
      "start ::= l; l ::= l 'x' | 'y';",                                 // left recursion
      "start ::= r; r ::= 'x' r | 'y';",                                 // right recursion
      "start ::= p; p ::= '(' p ')' p | '';",                            // balanced, empty
      "start ::= a a a 'z'; a ::= b | 'q'; b ::= '' | c; c ::= b;",      // nested empty rules
      "start ::= s; s ::= 'if' s | 'if' s 'else' s | 'x' | ' ' s;",       // dangling else
      "start ::= #'[a-z]+' (' ' #'[a-z]+')* | #'[a-z]+' '!';",           // lexical ambiguity
      "start ::= except!('ab') 'b' 'x' | 'a' except!(('b' | 'cd'), 2) 'b';",
  };
  size_t pairs = 0;
  for (const char* source : grammars) {
    auto g = grammar(source);
    auto compiled = compile(g, vocab);
    OracleMasker oracle(oracle_grammar(*g), vocab);
    for (uint64_t seed : {1, 2, 3}) {
      WalkStats r = walk_random(compiled, oracle, seed, 10);
      INFO(source << " seed " << seed << ": " << r.first_mismatch);
      CHECK(r.mismatches == 0);
      pairs += r.pairs;
    }
  }
  CHECK(pairs > 1'000'000);
}

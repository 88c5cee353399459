// What inference servers call (issue: serving integration): draft
// validation, rows of a batch bitmask wider than the vocabulary, several
// end-of-sequence ids, bounded rollback memory, all-allowed rows.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "batch.h"
#include "differential.h"
#include "encoder.h"
#include "helpers.h"
#include "matcher.h"

using namespace cgram;
using namespace cgram::test;

namespace {

std::shared_ptr<const CompiledGrammar> compile_source(std::string_view source,
                                               std::shared_ptr<const Vocabulary> vocab = bundled_vocabulary()) {
  auto result = CompiledGrammar::compile(grammar(source), std::move(vocab));
  REQUIRE(result.ok());
  return (*result);
}

std::vector<uint32_t> encode(std::string_view text, const std::shared_ptr<const Vocabulary>& vocab = bundled_vocabulary()) {
  auto created = Encoder::create(vocab);
  REQUIRE(created.ok());
  return (*created)->encode_continuation(std::string(text));
}

std::vector<uint32_t> serving_mask(Matcher& m) {
  std::vector<uint32_t> words(m.mask_words());
  m.fill_mask(words);
  return words;
}

// A long text of the tool-call format: free text and calls, `calls` times.
std::string tool_call_text(int calls) {
  std::string text;
  for (int i = 0; i < calls; ++i)
    text += fmt::format(
        "Step {}: I look the answer up, then compare it with what the user said before.\n<tool_call>\n"
        "{{\"name\": \"search\", \"arguments\": {{\"q\": \"item {}\", \"limit\": [1, 2, {{\"deep\": [[{}]]}}]}}}}\n"
        "</tool_call>\n",
        i, i, i);
  return text + "Done.";
}

}  // namespace

TEST_CASE("validate_tokens counts what advance would accept and changes nothing", "[serving]") {
  auto g = compile_source(read_example("json.cgram"));
  const std::vector<uint32_t> doc = encode(R"({"a": [1, 2.5], "b": "x"})");
  const uint32_t eos = bundled_vocabulary()->eos_ids().front();
  Matcher m(g);
  size_t refused_drafts = 0;
  for (size_t start = 0; start < doc.size(); start += 3) {
    const std::vector<uint32_t> before = serving_mask(m);
    const size_t accepted_before = m.tokens_accepted();
    // The rest of the document, then end of sequence, then anything.
    std::vector<uint32_t> draft(doc.begin() + static_cast<std::ptrdiff_t>(start), doc.end());
    draft.push_back(eos);
    draft.push_back(doc.front());
    CHECK(m.validate_tokens(draft) == doc.size() - start + 1);  // nothing after end of sequence
    CHECK(m.tokens_accepted() == accepted_before);
    CHECK(serving_mask(m) == before);
    CHECK_FALSE(m.is_finished());
    // A draft that goes wrong: counted up to the first token advance refuses.
    for (std::string_view bad : {"}", "q", "\"", ","}) {
      std::vector<uint32_t> wrong(draft.begin(), draft.begin() + 2);
      wrong.push_back(*bundled_vocabulary()->find(bad));
      wrong.push_back(draft[0]);
      Matcher copy = m.clone();
      size_t advanced = 0;
      for (uint32_t t : wrong) {
        const AdvanceResult r = copy.advance(t);
        if (r == AdvanceResult::Rejected) break;
        ++advanced;
        if (r == AdvanceResult::Finished) break;
      }
      refused_drafts += advanced < wrong.size();
      CHECK(m.validate_tokens(wrong) == advanced);
    }
    CHECK(m.validate_tokens({}) == 0);
    CHECK(serving_mask(m) == before);
    for (size_t i = start; i < std::min(start + 3, doc.size()); ++i) REQUIRE(m.advance(doc[i]) == AdvanceResult::Ongoing);
  }
  CHECK(refused_drafts > 10);
  // An id outside the vocabulary stops the count; a finished matcher accepts nothing.
  CHECK(m.validate_tokens(std::vector<uint32_t>{UINT32_MAX}) == 0);
  REQUIRE(m.advance(eos) == AdvanceResult::Finished);
  CHECK(m.validate_tokens(std::vector<uint32_t>{eos}) == 0);
}

TEST_CASE("validate_tokens past max_rollback_tokens still changes nothing", "[serving]") {
  auto g = compile_source(read_example("tool_calls.cgram"));
  const std::vector<uint32_t> doc = encode(tool_call_text(6));
  MatcherOptions options;
  options.max_rollback_tokens = 2;
  Matcher m(g, options), reference(g);
  // A draft far longer than the history kept: validated whole, then undone.
  CHECK(m.validate_tokens(doc) == doc.size());
  CHECK(m.tokens_accepted() == 0);
  CHECK(serving_mask(m) == serving_mask(reference));
}

TEST_CASE("rows of a bitmask wider than the vocabulary: padding ids are never allowed", "[serving]") {
  auto g = compile_source(read_example("reply.cgram"));
  Matcher m(g);
  const size_t words = m.mask_words();
  // A model with 64 more logits than the tokenizer has ids: two more words.
  const size_t row_words = words + 2;
  std::vector<uint32_t> bitmask(3 * row_words, 0xFFFFFFFFu);
  const Bitmask view{bitmask, row_words};
  CHECK(view.rows() == 3);
  REQUIRE(m.fill_row(view.row(1)));
  const std::vector<uint32_t> mask = serving_mask(m);
  CHECK(std::equal(mask.begin(), mask.end(), view.row(1).begin()));
  CHECK(view.row(1)[words] == 0);
  CHECK(view.row(1)[words + 1] == 0);
  // The tail bits of the last tokenizer word are clear too.
  const size_t tail = bundled_vocabulary()->size() % 32;
  if (tail) CHECK((view.row(1)[words - 1] >> tail) == 0);
  // Rows 0 and 2 are untouched; a row narrower than the mask is refused, untouched.
  CHECK(view.row(0)[0] == 0xFFFFFFFFu);
  CHECK(view.row(2)[words + 1] == 0xFFFFFFFFu);
  std::vector<uint32_t> narrow(words - 1, 7u);
  CHECK_FALSE(m.fill_row(narrow));
  CHECK(narrow == std::vector<uint32_t>(words - 1, 7u));
}

TEST_CASE("a batch fill over (matcher, row) pairs: any rows, any grammars, checked first", "[serving][batch]") {
  auto json = compile_source(read_example("json.cgram"));
  auto reply = compile_source(read_example("reply.cgram"));
  Matcher a(json), b(reply), c(json);
  REQUIRE(c.advance(encode("[1")[0]) == AdvanceResult::Ongoing);
  const size_t row_words = a.mask_words() + 1;
  std::vector<uint32_t> bitmask(5 * row_words, 0xAAAAAAAAu);
  const Bitmask view{bitmask, row_words};
  ThreadPool pool(2);
  const std::vector<MatcherRow> pairs = {{&a, 4}, {&b, 0}, {&c, 2}};
  REQUIRE(fill_bitmask(pairs, view, pool).ok());
  for (const auto& [matcher, row] : pairs) {
    std::vector<uint32_t> expected = serving_mask(*matcher);
    expected.resize(row_words, 0u);
    CHECK(std::equal(expected.begin(), expected.end(), view.row(row).begin()));
  }
  CHECK(view.row(1)[0] == 0xAAAAAAAAu);  // rows no pair names are untouched
  CHECK(view.row(3)[0] == 0xAAAAAAAAu);

  // Every misuse is refused before anything is written.
  std::fill(bitmask.begin(), bitmask.end(), 0x55555555u);
  auto refused = [&](std::vector<MatcherRow> bad, const Bitmask& where, const std::string& message) {
    Result<void> filled = fill_bitmask(bad, where, pool);
    REQUIRE_FALSE(filled.ok());
    CHECK(filled.error().message == message);
    CHECK(std::all_of(bitmask.begin(), bitmask.end(), [](uint32_t w) { return w == 0x55555555u; }));
  };
  refused({{&a, 0}, {&b, 0}}, view, "row 0 is given twice");
  refused({{&a, 0}, {&a, 1}}, view, "a matcher is given twice");
  refused({{&a, 5}}, view, "row 5 (pair 0) is outside the bitmask (5 rows)");
  refused({{nullptr, 0}}, view, "matcher 0 is null");
  const Bitmask narrow{std::span<uint32_t>(bitmask).first(2 * (a.mask_words() - 1)), a.mask_words() - 1};
  refused({{&a, 0}}, narrow,
          fmt::format("pair 0: a row has {} words; the matcher's vocabulary needs {}", a.mask_words() - 1,
                      a.mask_words()));
  const Bitmask ragged{std::span<uint32_t>(bitmask).first(row_words + 1), row_words};
  refused({{&a, 0}}, ragged, fmt::format("the bitmask has {} words, not a whole number of rows of {}", row_words + 1,
                                         row_words));
  CHECK(fill_bitmask({}, view, pool).ok());
}

TEST_CASE("all-allowed rows: any! and free text fill the whole vocabulary at once", "[serving][differential]") {
  const std::vector<uint32_t> doc = encode("Some free text, with caf\xC3\xA9 and \xE4\xB8\xAD\xE6\x96\x87 too.");
  for (std::string_view source : {"start ::= any!* ;", "start ::= any!{0,1000} ;", "start ::= except!('</think>') ;",
                                  "start ::= any!{0,4} 'x' ;"}) {
    INFO(source);
    auto g = compile_source(source);
    // Against the oracle along a text and along walks that stop inside characters.
    OracleMasker oracle(oracle_grammar(*grammar(source)), bundled_vocabulary());
    const WalkStats along = walk_document(g, oracle, doc);
    INFO(along.first_mismatch);
    CHECK(along.mismatches == 0);
    for (uint64_t seed : {1, 2, 3}) {
      const WalkStats walk = walk_random(g, oracle, seed, 12, /*favour_partial_characters=*/true);
      INFO(walk.first_mismatch);
      CHECK(walk.mismatches == 0);
    }
  }
  // At the start of any!*: every token with valid UTF-8, and end of sequence, nothing else.
  auto g = compile_source("start ::= any!* ;");
  Matcher m(g);
  std::vector<uint32_t> expected(g->any_tokens().begin(), g->any_tokens().end());
  for (uint32_t eos : bundled_vocabulary()->eos_ids()) expected[eos / 32] |= 1u << (eos % 32);
  CHECK(serving_mask(m) == expected);
}

TEST_CASE("max_rollback_tokens: the same masks, bounded memory, rollback past it refused", "[serving]") {
  for (const char* example : {"tool_calls.cgram", "json.cgram"}) {
    auto g = compile_source(read_example(example));
    std::string text = example == std::string("json.cgram") ? "[" : tool_call_text(40);
    if (text == "[") {
      for (int i = 0; i < 1500; ++i) text += fmt::format("{{\"k\": [{}, [\"v\"]]}}, ", i);
      text += "0]";
    }
    const std::vector<uint32_t> doc = encode(text);
    REQUIRE(doc.size() > 1000);
    MatcherOptions options;
    options.max_rollback_tokens = 8;
    Matcher bounded(g, options), reference(g);
    CHECK(bounded.max_rollback_tokens() == 8u);
    size_t most_first_half = 0, most_second_half = 0;
    std::mt19937 rng(7);
    for (size_t i = 0; i < doc.size(); ++i) {
      INFO(example << " token " << i);
      if (i % 97 == 0) REQUIRE(serving_mask(bounded) == serving_mask(reference));
      REQUIRE(bounded.is_allowed(doc[i]) == reference.is_allowed(doc[i]));
      REQUIRE(bounded.advance(doc[i]) == reference.advance(doc[i]));
      CHECK(bounded.tokens_accepted() == i + 1);
      CHECK(bounded.rollback_depth() == std::min<size_t>(i + 1, 8));
      // Now and then, back a few tokens (within the window) and forward again.
      if (i % 53 == 52) {
        const size_t back = 1 + rng() % 8;
        REQUIRE(bounded.rollback(back));
        REQUIRE(reference.rollback(back));
        REQUIRE(serving_mask(bounded) == serving_mask(reference));
        for (size_t j = i + 1 - back; j <= i; ++j) REQUIRE(bounded.advance(doc[j]) == reference.advance(doc[j]));
      }
      size_t& most = 2 * i < doc.size() ? most_first_half : most_second_half;
      most = std::max(most, bounded.stack_elements());
    }
    CHECK(serving_mask(bounded) == serving_mask(reference));
    CHECK(bounded.can_end() == reference.can_end());
    // Past the window: refused, and nothing changes.
    const std::vector<uint32_t> before = serving_mask(bounded);
    CHECK_FALSE(bounded.rollback(9));
    CHECK(bounded.tokens_accepted() == doc.size());
    CHECK(serving_mask(bounded) == before);
    // The window counts from the furthest point reached: 3 back, then 5 more at most.
    REQUIRE(bounded.rollback(3));
    CHECK(bounded.rollback_depth() == 5);
    CHECK_FALSE(bounded.rollback(6));
    REQUIRE(bounded.rollback(5));
    REQUIRE(reference.rollback(8));
    CHECK(serving_mask(bounded) == serving_mask(reference));
    CHECK(bounded.rollback_depth() == 0);
    CHECK_FALSE(bounded.rollback(1));
    // The unbounded matcher's stack grew with the text; the bounded one did not.
    INFO(example << ": most " << most_first_half << " then " << most_second_half << ", unbounded "
                 << reference.stack_elements());
    CHECK(reference.stack_elements() > 4 * most_second_half);
    CHECK(most_second_half <= most_first_half + most_first_half / 2);
    // Clones copy the bounded history; reset starts over.
    Matcher copy = bounded.clone();
    CHECK(copy.rollback_depth() == 0);
    CHECK(serving_mask(copy) == serving_mask(reference));
    bounded.reset();
    CHECK(bounded.tokens_accepted() == 0);
  }
}

TEST_CASE("several end-of-sequence ids: each one ends the text", "[serving][vocab]") {
  const std::vector<uint32_t> found = bundled_vocabulary()->eos_ids();
  // Two more, as a model with several stop tokens has: specials of the vocabulary.
  std::vector<uint32_t> extra;
  for (uint32_t id = 0; id < bundled_vocabulary()->size() && extra.size() < 2; ++id)
    if (bundled_vocabulary()->is_special(id) && !bundled_vocabulary()->is_eos(id)) extra.push_back(id);
  REQUIRE(extra.size() == 2);
  auto more = (*(bundled_vocabulary()->with_eos_ids(extra)));
  CHECK(more->eos_ids().size() == found.size() + 2);
  for (uint32_t id : extra) CHECK(more->is_eos(id));
  CHECK(more->fingerprint() != bundled_vocabulary()->fingerprint());
  CHECK(more->size() == bundled_vocabulary()->size());
  CHECK(more->find("hello") == bundled_vocabulary()->find("hello"));
  auto g = compile_source(read_example("json.cgram"), more);
  for (uint32_t eos : more->eos_ids()) {
    Matcher m(g);
    REQUIRE(m.advance(*more->find("[]")) == AdvanceResult::Ongoing);
    const std::vector<uint32_t> mask = serving_mask(m);
    CHECK((mask[eos / 32] >> (eos % 32) & 1));
    CHECK(m.validate_tokens(std::vector<uint32_t>{eos}) == 1);
    CHECK(m.advance(eos) == AdvanceResult::Finished);
  }
  // A text token made end of sequence is no longer text.
  const uint32_t word = *bundled_vocabulary()->find("hello");
  auto odd = (*(bundled_vocabulary()->with_eos_ids(std::vector<uint32_t>{word})));
  CHECK(odd->is_special(word));
  CHECK(odd->find("hello") != word);
  CHECK((bundled_vocabulary()->with_eos_ids(std::vector<uint32_t>{4000000})).error().message ==
        fmt::format("{}: end-of-sequence id 4000000 is not in the vocabulary ({} ids)", bundled_vocabulary()->name(),
                    bundled_vocabulary()->size()));
  VocabularyOptions options;
  options.extra_eos_ids = extra;
  auto loaded = (*(Vocabulary::bundled(options)));
  CHECK(loaded->eos_ids() == more->eos_ids());
}

TEST_CASE("a tokenizer.json's generation_config.json adds its end-of-sequence ids", "[serving][vocab]") {
  std::string pattern = (std::filesystem::temp_directory_path() / "cgram-eos-XXXXXX").string();
  REQUIRE(mkdtemp(pattern.data()));
  const std::filesystem::path dir = pattern;
  auto write = [&](const char* name, std::string_view content) {
    std::ofstream(dir / name, std::ios::binary) << content;
    return (dir / name).string();
  };
  const std::string tokenizer = write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
    "merges": ["a b"]}, "added_tokens": [{"id": 3, "content": "<|end|>", "special": true},
    {"id": 4, "content": "<|eot|>", "special": true}, {"id": 5, "content": "<|eom|>", "special": true}]})");
  write("tokenizer_config.json", R"({"eos_token": "<|end|>"})");
  auto eos_of = [&](const VocabularyOptions& options = {}) {
    VocabularyResult result = Vocabulary::load(tokenizer, options);
    if (auto* e = result.if_error()) FAIL(e->message);
    return (*result)->eos_ids();
  };
  CHECK(eos_of() == std::vector<uint32_t>{3});
  write("generation_config.json", R"({"bos_token_id": 0, "eos_token_id": [4, 5], "temperature": 0.6})");
  CHECK(eos_of() == std::vector<uint32_t>{3, 4, 5});
  write("generation_config.json", R"({"eos_token_id": 4})");
  CHECK(eos_of() == std::vector<uint32_t>{3, 4});
  VocabularyOptions override_ids;  // the caller's own list replaces the tokenizer's data
  override_ids.eos_ids = std::vector<uint32_t>{5};
  CHECK(eos_of(override_ids) == std::vector<uint32_t>{5});
  write("generation_config.json", R"({"eos_token_id": "<|eot|>"})");
  VocabularyResult bad = Vocabulary::load(tokenizer);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message ==
        (dir / "generation_config.json").string() + ": eos_token_id is neither a token id nor a list of them");
  write("generation_config.json", R"({"eos_token_id": [4, 99]})");
  CHECK((Vocabulary::load(tokenizer)).error().message ==
        tokenizer + ": end-of-sequence id 99 is not in the vocabulary (6 ids)");
  std::filesystem::remove_all(dir);
}

TEST_CASE("max_rollback_tokens in canonical mode: the pair rule still sees the tokens before", "[serving][canonical]") {
  CompileOptions options;
  options.canonical = true;
  auto result = CompiledGrammar::compile(grammar(read_example("tool_calls.cgram")), bundled_vocabulary(), options);
  REQUIRE(result.ok());
  auto g = *result;
  const std::vector<uint32_t> doc = encode(tool_call_text(8));
  REQUIRE(doc.size() > 300);
  MatcherOptions bounded_options;
  bounded_options.max_rollback_tokens = 0;  // the least kept: the window is empty
  Matcher bounded(g, bounded_options), reference(g);
  for (size_t i = 0; i < doc.size(); ++i) {
    INFO("token " << i);
    if (i % 7 == 0) REQUIRE(serving_mask(bounded) == serving_mask(reference));
    REQUIRE(bounded.advance(doc[i]) == reference.advance(doc[i]));
    CHECK(bounded.rollback_depth() == 0);
  }
  CHECK(serving_mask(bounded) == serving_mask(reference));
  CHECK(bounded.can_end() == reference.can_end());
}

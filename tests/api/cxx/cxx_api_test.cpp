// The C++ API (cgram.hpp) from outside: this program includes <cgram.hpp>
// alone and links libcgram.so alone, as a user's program does.
//
//   cxx_api_test TMPDIR EXAMPLES_DIR
//
// It mirrors the important parts of tests/api/c/capi_test.c: exact masks on
// a grammar small enough to work out by hand (table and JIT tiers), a JSON
// document token by token with the bundled vocabulary to the end of
// sequence, grammar errors with their diagnostics, misuse given back as
// Error values, AOT save and load, jump-forward, logits and batch fills.
#include <cgram.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#if __cplusplus >= 202002L
#include <span>
#endif

namespace {

int checks = 0;
int failures = 0;

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    ++checks;                                                                                \
    if (!(cond)) {                                                                           \
      ++failures;                                                                            \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);         \
    }                                                                                        \
  } while (0)

// A Result that must be ok; on failure, its error is printed.
#define CHECK_OK(result)                                                                      \
  do {                                                                                        \
    ++checks;                                                                                 \
    const auto& r_ = (result);                                                                \
    if (!r_.ok()) {                                                                           \
      ++failures;                                                                             \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #result,                    \
                   r_.error().to_string().c_str());                                           \
    }                                                                                         \
  } while (0)

// A Result that must be an error of `status`, with a message.
#define CHECK_ERROR(result, expected)                                                          \
  do {                                                                                         \
    ++checks;                                                                                  \
    const auto& r_ = (result);                                                                 \
    if (r_.ok() || r_.error().status() != (expected) || r_.error().message().empty()) {        \
      ++failures;                                                                              \
      std::fprintf(stderr, "%s:%d: %s gave %s (%s), expected %s\n", __FILE__, __LINE__, #result, \
                   r_.ok() ? "ok" : std::string(r_.error().name()).c_str(),                    \
                   r_.error().message().c_str(), cgram_status_name(expected));                 \
    }                                                                                          \
  } while (0)

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string tmp_dir;
std::string examples_dir;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The tiny vocabulary: ids 0..5 are "a" "b" "c" "ab" "ac" "x", 6 is the end of sequence.
enum : uint32_t { A = 0, B = 1, C = 2, AB = 3, AC = 4, X = 5, EOS = 6, TINY_SIZE = 7 };
constexpr uint32_t bit(uint32_t t) { return 1u << t; }

cgram::Vocabulary tiny_vocab() {
  auto vocab = cgram::Vocabulary::from_tokens({"a", "b", "c", "ab", "ac", "x", "</s>"}, {EOS});
  CHECK_OK(vocab);
  return vocab ? std::move(*vocab) : cgram::Vocabulary();
}

uint32_t mask_of(cgram::Matcher& m) {
  uint32_t word = 0xDEADBEEF;
  CHECK_OK(m.fill_mask(cgram::Span<uint32_t>(&word, 1)));
  return word;
}

cgram::Advance advance(cgram::Matcher& m, uint32_t token) {
  auto r = m.advance(token);
  CHECK_OK(r);
  return r ? *r : cgram::Advance::rejected;
}

void test_versions() {
  CHECK(cgram::abi_matches());
  CHECK(cgram::abi_version() == CGRAM_ABI_VERSION);
  CHECK(cgram::version().size() >= 5);
  cgram::Error error(CGRAM_ERROR_LOAD, "no");
  CHECK(error.name() == "CGRAM_ERROR_LOAD");
  CHECK(error.to_string() == "CGRAM_ERROR_LOAD: no");
  cgram::Result<void> fine;
  CHECK(fine.ok() && fine.error().status() == CGRAM_OK);
}

void test_vocabulary() {
  cgram::Vocabulary vocab = tiny_vocab();
  CHECK(vocab.size() == TINY_SIZE);
  CHECK(vocab.eos_ids() == std::vector<uint32_t>{EOS});
  auto bytes = vocab.token_bytes(AC);
  CHECK(bytes && *bytes == "ac");
  CHECK_ERROR(vocab.token_bytes(TINY_SIZE), CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK(contains(vocab.token_bytes(TINY_SIZE).error().message(), "cgram_vocab_token_bytes"));
  CHECK(vocab.is_special(EOS).value());
  CHECK(!vocab.is_special(X).value());
  // Bytes with NUL in them, from std::string_views of explicit length.
  const std::vector<std::string_view> binary{std::string_view("a\0b", 3), "c"};
  auto with_nul = cgram::Vocabulary::from_tokens(binary);
  CHECK(with_nul && with_nul->token_bytes(0).value() == std::string_view("a\0b", 3));
  // Misuse: an end of sequence outside the list, a missing file, JSON from memory.
  CHECK_ERROR(cgram::Vocabulary::from_tokens({"a", "b"}, {3}), CGRAM_ERROR_VOCABULARY);
  auto missing = cgram::Vocabulary::load("/nonexistent/tokenizer.json");
  CHECK_ERROR(missing, CGRAM_ERROR_VOCABULARY);
  CHECK(contains(missing.error().message(), "/nonexistent/tokenizer.json"));
  auto list = cgram::Vocabulary::from_memory(R"(["x", "y", "</s>"])", "list", {}, {2});
  CHECK(list && list->size() == 3 && list->eos_ids() == std::vector<uint32_t>{2});
  // Several ends of sequence.
  auto more = vocab.with_eos({X});
  CHECK(more && more->eos_ids() == (std::vector<uint32_t>{X, EOS}));
  // A moved-from handle is empty: calls on it are errors, never crashes.
  cgram::Vocabulary moved = std::move(vocab);
  CHECK(vocab.size() == 0 && vocab.eos_ids().empty());  // NOLINT(bugprone-use-after-move): on purpose
  CHECK_ERROR(vocab.token_bytes(A), CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK(moved.size() == TINY_SIZE);
}

// start ::= 'ab' | 'ac' : every mask worked out by hand.
void test_exact_masks(cgram::Tier tier) {
  cgram::Vocabulary vocab = tiny_vocab();
  cgram::CompileOptions options;
  options.tier = tier;
  auto grammar = cgram::Grammar::compile(vocab, "start ::= 'ab' | 'ac' ;", options);
  CHECK_OK(grammar);
  if (!grammar) return;
  CHECK(grammar->tier() == (tier == cgram::Tier::jit ? "jit" : "table"));
  CHECK(grammar->mask_words() == 1);
  CHECK(grammar->diagnostics().empty());
  auto created = cgram::Matcher::create(*grammar);
  CHECK_OK(created);
  if (!created) return;
  cgram::Matcher m = std::move(*created);

  CHECK(mask_of(m) == (bit(A) | bit(AB) | bit(AC)));
  for (uint32_t t = 0; t < TINY_SIZE; ++t) CHECK(m.is_allowed(t).value() == (((mask_of(m) >> t) & 1) != 0));
  CHECK(!m.can_end().value());
  CHECK(advance(m, X) == cgram::Advance::rejected);
  CHECK(advance(m, EOS) == cgram::Advance::rejected);
  CHECK(m.tokens_accepted() == 0);

  CHECK(advance(m, A) == cgram::Advance::ongoing);
  CHECK(mask_of(m) == (bit(B) | bit(C)));
  auto copy = m.clone();
  CHECK_OK(copy);
  CHECK(advance(m, B) == cgram::Advance::ongoing);
  CHECK(m.mask().value() == std::vector<uint32_t>{bit(EOS)});
  CHECK(m.can_end().value());
  if (copy) {
    CHECK(mask_of(*copy) == (bit(B) | bit(C)));
    CHECK(advance(*copy, C) == cgram::Advance::ongoing);
    CHECK(copy->tokens_accepted() == 2);
  }

  // The end; a finished matcher refuses to advance, with an Error value.
  CHECK(advance(m, EOS) == cgram::Advance::finished);
  CHECK(m.is_finished());
  CHECK(mask_of(m) == 0);
  auto after = m.advance(A);
  CHECK_ERROR(after, CGRAM_ERROR_STATE);
  CHECK(contains(after.error().message(), "finished"));

  // Rollback and reset.
  CHECK_ERROR(m.rollback(4), CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK(m.rollback_depth() == 3);
  CHECK_OK(m.rollback(2));
  CHECK(!m.is_finished() && mask_of(m) == (bit(B) | bit(C)));
  CHECK_OK(m.reset());
  CHECK(m.tokens_accepted() == 0 && mask_of(m) == (bit(A) | bit(AB) | bit(AC)));

  // Masks and logits into any contiguous buffer; a short one is refused.
  std::array<uint32_t, 2> words{0xAAAAAAAAu, 0x55555555u};
  CHECK_OK(m.fill_mask(words));
  CHECK(words[0] == (bit(A) | bit(AB) | bit(AC)) && words[1] == 0x55555555u);
  std::vector<uint32_t> none;
  CHECK_ERROR(m.fill_mask(none), CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR(m.advance(TINY_SIZE), CGRAM_ERROR_INVALID_ARGUMENT);
  std::vector<float> logits(TINY_SIZE + 2, 1.0f);
  CHECK_OK(m.update_logits(logits));
  for (uint32_t t = 0; t < TINY_SIZE + 2; ++t)
    CHECK((t == A || t == AB || t == AC) ? logits[t] == 1.0f : (std::isinf(logits[t]) && logits[t] < 0));
  std::fill(logits.begin(), logits.end(), 2.0f);
  auto r = m.modify_possible_logits(A, logits);
  CHECK(r && *r == cgram::Advance::ongoing && logits[B] == 2.0f && std::isinf(logits[A]));
  CHECK(m.validate_tokens({C, EOS, A}).value() == 2);
  CHECK(m.tokens_accepted() == 1);

  // A bitmask row, wider than the vocabulary.
  std::vector<uint32_t> bitmask(3 * 2, 0xFFFFFFFFu);
  CHECK_OK(m.fill_bitmask(bitmask, 2, 1));
  CHECK(bitmask[2] == (bit(B) | bit(C)) && bitmask[3] == 0 && bitmask[0] == 0xFFFFFFFFu);
  CHECK_ERROR(m.fill_bitmask(bitmask, 2, 3), CGRAM_ERROR_INVALID_ARGUMENT);

#if __cplusplus >= 202002L
  // std::span is a Span.
  std::span<uint32_t> span(words);
  CHECK_OK(m.fill_mask(span));
  CHECK(words[0] == (bit(B) | bit(C)));
#endif

  // A matcher outlives the grammar and the vocabulary it was made from.
  cgram::Grammar gone = std::move(*grammar);
  { cgram::Grammar dropped = std::move(gone); }
  vocab = cgram::Vocabulary();
  CHECK(mask_of(m) == (bit(B) | bit(C)));
  cgram::Matcher empty;
  CHECK_ERROR(empty.fill_mask(words), CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR(empty.clone(), CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK(!empty.is_finished() && empty.mask_words() == 0);
}

void test_grammar_errors() {
  cgram::Vocabulary vocab = tiny_vocab();
  cgram::CompileOptions options;
  options.filename = "broken.cgram";
  auto broken = cgram::Grammar::compile(vocab, "start ::= vaule ;\nvalue ::= 'v' ;\n", options);
  CHECK_ERROR(broken, CGRAM_ERROR_GRAMMAR);
  CHECK(contains(broken.error().message(), "broken.cgram:1:11: error"));
  CHECK(contains(broken.error().message(), "vaule"));
  CHECK(contains(broken.error().message(), "^"));  // the caret under the source line

  // Warnings come with a grammar that compiles.
  auto ambiguous = cgram::Grammar::compile(vocab, "start ::= s ; s ::= s s | 'a' | '' ;");
  CHECK(ambiguous && contains(ambiguous->diagnostics(), "rule 's' is ambiguous"));

  // The start rule, eager index, and options the vocabulary cannot honour.
  options = cgram::CompileOptions();
  options.start_rule = "value";
  options.eager_index = true;
  auto value = cgram::Grammar::compile(vocab, "start ::= value 'b' ; value ::= 'a' ;", options);
  CHECK_OK(value);
  if (value) {
    auto m = cgram::Matcher::create(*value);
    CHECK(m && mask_of(*m) == bit(A));
  }
  options.start_rule = "nosuch";
  auto nosuch = cgram::Grammar::compile(vocab, "start ::= 'a' ;", options);
  CHECK_ERROR(nosuch, CGRAM_ERROR_GRAMMAR);
  CHECK(contains(nosuch.error().message(), "nosuch"));
  options = cgram::CompileOptions();
  options.canonical = true;
  auto canonical = cgram::Grammar::compile(vocab, "start ::= 'a' ;", options);
  CHECK_ERROR(canonical, CGRAM_ERROR_COMPILE);
  CHECK(contains(canonical.error().message(), "canonical mode needs a merge-based vocabulary"));
  CHECK_ERROR(cgram::Grammar::compile(cgram::Vocabulary(), "start ::= 'a' ;"), CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR(cgram::Matcher::create(cgram::Grammar()), CGRAM_ERROR_INVALID_ARGUMENT);
}

// {"a": [1, 2]} in the bundled vocabulary, token by token, to the end of sequence.
constexpr std::array<uint32_t, 9> kDoc{6377, 29874, 1115, 518, 29896, 29892, 29871, 29906, 12258};

void test_json(const cgram::Vocabulary& bundled, const cgram::Grammar& json) {
  auto created = cgram::Matcher::create(json);
  CHECK_OK(created);
  if (!created) return;
  cgram::Matcher& m = *created;
  std::string text;
  std::vector<uint32_t> mask(json.mask_words());
  for (uint32_t token : kDoc) {
    CHECK_OK(m.fill_mask(mask));
    CHECK(((mask[token / 32] >> (token % 32)) & 1) != 0);
    CHECK(advance(m, token) == cgram::Advance::ongoing);
    text += bundled.token_bytes(token).value();
  }
  CHECK(text == R"({"a": [1, 2]})");
  CHECK(m.can_end().value());
  std::vector<uint32_t> eos = bundled.eos_ids();
  CHECK(!eos.empty());
  if (!eos.empty()) CHECK(advance(m, eos[0]) == cgram::Advance::finished);
  CHECK(m.is_finished() && m.tokens_accepted() == kDoc.size() + 1);
}

void test_jump_forward(const cgram::Vocabulary& bundled) {
  auto grammar = cgram::Grammar::compile(bundled, R"(start ::= '{"name": "' #'[a-z]+' '", "kind": "record"}' ;)");
  CHECK_OK(grammar);
  if (!grammar) return;
  auto m = cgram::Matcher::create(*grammar).value();
  CHECK(m.forced_text().value() == R"({"name": ")");
  CHECK(m.forced_text(3).value() == R"({"n)");
  auto jump = m.jump_forward();
  CHECK_OK(jump);
  if (!jump) return;
  CHECK(jump->rollback == 0 && !jump->tokens.empty());
  for (uint32_t token : jump->tokens) CHECK(advance(m, token) == cgram::Advance::ongoing);
  auto nothing = m.jump_forward();
  CHECK(nothing && nothing->tokens.empty());
  // A plain token list has no encoder.
  auto tiny = tiny_vocab();
  auto abx = cgram::Grammar::compile(tiny, "start ::= 'abx' ;").value();
  auto t = cgram::Matcher::create(abx).value();
  CHECK_ERROR(t.jump_forward(), CGRAM_ERROR_VOCABULARY);
}

void test_aot(const cgram::Vocabulary& bundled) {
  auto compiled = cgram::Grammar::compile(bundled, "start ::= 'ab' | 'ac' ;");
  CHECK_OK(compiled);
  if (!compiled) return;
  const std::string object = tmp_dir + "/cxx-tiny.so";
  CHECK_OK(compiled->save(object));
  CHECK_ERROR(compiled->save(tmp_dir + "/no/such/dir/x.so"), CGRAM_ERROR_COMPILE);
  auto loaded = cgram::Grammar::load(object, bundled);
  CHECK_OK(loaded);
  if (!loaded) return;
  CHECK(loaded->tier() == "aot");
  CHECK(loaded->mask_words() == 1002);
  auto a = cgram::Matcher::create(*compiled).value();
  auto b = cgram::Matcher::create(*loaded).value();
  CHECK(a.mask().value() == b.mask().value());
  auto wrong = cgram::Grammar::load(object, tiny_vocab());
  CHECK_ERROR(wrong, CGRAM_ERROR_LOAD);
  CHECK(contains(wrong.error().message(), "vocabulary"));
  CHECK_ERROR(cgram::Grammar::load("/nonexistent/g.so", bundled), CGRAM_ERROR_LOAD);
  auto back = loaded->vocabulary();
  CHECK(back && back->size() == bundled.size());
}

void test_batch(const cgram::Grammar& json, const cgram::Grammar& jit) {
  constexpr size_t N = 5;
  const size_t words = json.mask_words();
  std::vector<cgram::Matcher> matchers;
  std::vector<cgram::Matcher*> pointers;
  for (size_t i = 0; i < N; ++i) {
    matchers.push_back(cgram::Matcher::create(i % 2 ? jit : json).value());
    for (size_t j = 0; j < i * 2 && j < kDoc.size(); ++j)
      CHECK(advance(matchers.back(), kDoc[j]) == cgram::Advance::ongoing);
  }
  for (cgram::Matcher& m : matchers) pointers.push_back(&m);
  auto pool = cgram::ThreadPool::create(2);
  CHECK_OK(pool);
  if (!pool) return;
  std::vector<uint32_t> batch(N * words);
  CHECK_OK(pool->fill_masks(pointers, batch));
  for (size_t i = 0; i < N; ++i) {
    std::vector<uint32_t> single = matchers[i].mask().value();
    CHECK(std::equal(single.begin(), single.end(), batch.begin() + static_cast<std::ptrdiff_t>(i * words)));
  }
  // Rows in any order, one row wider than the mask.
  std::vector<uint32_t> bitmask(3 * (words + 1), 0xFFFFFFFFu);
  CHECK_OK(pool->fill_bitmask({pointers[0], pointers[3]}, {2, 0}, bitmask, words + 1));
  CHECK(std::equal(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(words),
                   bitmask.begin() + static_cast<std::ptrdiff_t>(2 * (words + 1))));
  CHECK(bitmask[words] == 0 && bitmask[words + 1] == 0xFFFFFFFFu);
  CHECK_ERROR(pool->fill_masks({pointers[0], pointers[0]}, batch), CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR(pool->fill_bitmask({pointers[0]}, {0, 1}, bitmask, words + 1), CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR(cgram::ThreadPool().fill_masks(pointers, batch), CGRAM_ERROR_INVALID_ARGUMENT);
}

}  // namespace

// A JSON Schema (by its .json filename), members in any order or not.
void test_any_property_order() {
  auto vocab = cgram::Vocabulary::from_tokens({"{", "}", "\"", "a", "b", ":", ",", "1", "</s>"}, {8});
  CHECK_OK(vocab);
  if (!vocab) return;
  const std::string schema = R"({"type": "object", "properties": {"a": {"const": 1}, "b": {"const": 1}},
                                 "required": ["a", "b"], "additionalProperties": false})";
  // {"b":1,"a":1}
  const std::vector<uint32_t> b_first{0, 2, 4, 2, 5, 7, 6, 2, 3, 2, 5, 7, 1, 8};
  cgram::CompileOptions options;
  options.filename = "schema.json";
  for (bool any : {false, true}) {
    options.any_property_order = any;
    auto grammar = cgram::Grammar::compile(*vocab, schema, options);
    CHECK_OK(grammar);
    if (!grammar) continue;
    auto matcher = cgram::Matcher::create(*grammar);
    CHECK_OK(matcher);
    if (!matcher) continue;
    auto accepted = matcher->validate_tokens(b_first);
    CHECK_OK(accepted);
    CHECK(accepted && *accepted == (any ? b_first.size() : 2));
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: cxx_api_test TMPDIR EXAMPLES_DIR\n");
    return 2;
  }
  tmp_dir = argv[1];
  examples_dir = argv[2];

  test_versions();
  test_vocabulary();
  test_exact_masks(cgram::Tier::table);
  test_exact_masks(cgram::Tier::jit);
  test_grammar_errors();
  test_any_property_order();
  auto bundled = cgram::Vocabulary::bundled();
  CHECK_OK(bundled);
  const std::string source = read_file(examples_dir + "/json.cgram");
  CHECK(!source.empty());
  if (bundled && !source.empty()) {
    CHECK(bundled->size() == 32064);
    cgram::CompileOptions options;
    options.filename = "json.cgram";
    auto json = cgram::Grammar::compile(*bundled, source, options);
    options.tier = cgram::Tier::jit;
    auto jit = cgram::Grammar::compile(*bundled, source, options);
    CHECK_OK(json);
    CHECK_OK(jit);
    if (json && jit) {
      test_json(*bundled, *json);
      test_json(*bundled, *jit);
      test_batch(*json, *jit);
    }
    test_jump_forward(*bundled);
    test_aot(*bundled);
  }
  std::printf("cgram %s from C++ (cgram.hpp, C++%ld): %d checks, %d failed\n", std::string(cgram::version()).c_str(),
              static_cast<long>(__cplusplus / 100 % 100), checks, failures);
  return failures == 0 ? 0 : 1;
}

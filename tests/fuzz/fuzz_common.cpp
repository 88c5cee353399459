#include "fuzz_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <variant>

#include "matcher.h"

namespace cgram::fuzz {

void check_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
  std::fflush(stderr);
  __builtin_trap();
}

const std::shared_ptr<const Vocabulary>& bundled_vocabulary() {
  static const std::shared_ptr<const Vocabulary> vocab = [] {
    auto loaded = Vocabulary::bundled();
    FUZZ_CHECK(loaded.ok());
    return (*loaded);
  }();
  return vocab;
}

const std::shared_ptr<const Vocabulary>& tiny_vocabulary() {
  static const std::shared_ptr<const Vocabulary> vocab = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, char(b));
    for (const char* t : {"true", "false", "null", "\": ", "{\"", "\",", "[1", ", ", "  ", "\n\n", "\"\"", "12",
                          "0.5", "e+", "ab", "abc", "<a>", "</a>", "<think>", "</think>", "<tool>", "\xc3\xa9",
                          "\xe4\xb8\xad\xe6\x96\x87", "\xe4\xb8", "\xad\xe6\x96\x87", "\xf0\x9f\x98\x80", "a1", "x = ", ";\n",
                          "int ", "return ", "()", "{}", "[]"})
      tokens.emplace_back(t);
    tokens.emplace_back("</s>");
    const uint32_t eos = uint32_t(tokens.size() - 1);
    auto built = Vocabulary::from_tokens(std::move(tokens), {eos}, {eos});
    FUZZ_CHECK(built.ok());
    return (*built);
  }();
  return vocab;
}

std::string read_example(std::string_view name) {
  std::ifstream in(std::string(CGRAM_SOURCE_DIR) + "/examples/" + std::string(name), std::ios::binary);
  if (!in) std::fprintf(stderr, "cannot read examples/%.*s\n", int(name.size()), name.data());
  FUZZ_CHECK(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::shared_ptr<const CompiledGrammar> compile_or_die(std::string_view text, std::string_view name,
                                                      const std::shared_ptr<const Vocabulary>& vocab,
                                                      bool eager_index) {
  Grammar::Outcome outcome = Grammar::parse(text, name);
  if (!outcome.ok()) std::fprintf(stderr, "%s", outcome.diagnostics.render().c_str());
  FUZZ_CHECK(outcome.ok());
  CompileOptions options;
  options.eager_index = eager_index;
  auto compiled = CompiledGrammar::compile(outcome.grammar, vocab, options);
  if (auto* e = compiled.if_error()) std::fprintf(stderr, "%s\n", e->message.c_str());
  FUZZ_CHECK(compiled.ok());
  return (*compiled);
}

void check_grammar(std::string_view text, const ParseOptions& options) {
  const std::string name = fmt::format("fuzz.{}", grammar_format_name(options.format));
  Grammar::Outcome outcome = Grammar::parse(text, name, options);
  if (!outcome.ok()) {
    FUZZ_CHECK(outcome.diagnostics.has_errors());
    std::string rendered = outcome.diagnostics.render();
    FUZZ_CHECK(!rendered.empty());
    return;
  }
  const auto& vocab = fuzz::bundled_vocabulary();
  auto compiled = CompiledGrammar::compile(outcome.grammar, vocab);
  if (auto* error = compiled.if_error()) {
    FUZZ_CHECK(!error->message.empty());
    return;
  }
  Matcher matcher(*compiled);
  std::vector<uint32_t> mask(matcher.mask_words());
  // The first mask, then one step on an allowed token and the next mask.
  matcher.fill_mask(mask);
  check_mask(mask, vocab->size());
  std::vector<uint32_t> allowed = matcher.current_possible_tokens();
  for (uint32_t t : allowed) FUZZ_CHECK(t < vocab->size());
  auto text_token = std::find_if(allowed.begin(), allowed.end(), [&](uint32_t t) { return !vocab->is_eos(t); });
  if (text_token != allowed.end()) {
    // The last allowed text token: usually a long one, unlike the first.
    uint32_t t = *std::find_if(allowed.rbegin(), allowed.rend(), [&](uint32_t t) { return !vocab->is_eos(t); });
    FUZZ_CHECK(matcher.is_allowed(t));
    FUZZ_CHECK(matcher.advance(t) == AdvanceResult::Ongoing);
    matcher.fill_mask(mask);
    check_mask(mask, vocab->size());
  }
}

size_t check_mask(std::span<const uint32_t> mask, size_t vocab_size) {
  FUZZ_CHECK(mask.size() == (vocab_size + 31) / 32);
  size_t count = 0;
  for (uint32_t w : mask) count += size_t(std::popcount(w));
  if (vocab_size % 32) FUZZ_CHECK(mask.back() >> (vocab_size % 32) == 0);
  return count;
}

uint64_t hash_words(std::span<const uint32_t> words) {
  uint64_t h = 14695981039346656037ull;
  for (uint32_t w : words) h = (h ^ w) * 1099511628211ull;
  return h;
}

void exercise_loaded(const std::shared_ptr<const CompiledGrammar>& grammar, uint32_t seed) {
  const Vocabulary& vocab = grammar->vocabulary();
  const uint32_t n = uint32_t(vocab.size());
  Matcher m(grammar);
  std::vector<uint32_t> mask(m.mask_words());
  for (int step = 0; step < 12; ++step) {
    m.fill_mask(mask);
    if (check_mask(mask, n) == 0) break;
    std::vector<uint32_t> allowed = m.current_possible_tokens();
    for (uint32_t t = 0; t < n; t += 1 + n / 97) FUZZ_CHECK(m.is_allowed(t) == (mask[t / 32] >> (t % 32) & 1));
    seed = seed * 1103515245u + 12345u;
    uint32_t t = allowed[(seed >> 8) % allowed.size()];
    FUZZ_CHECK(m.is_allowed(t));
    AdvanceResult r = m.advance(t);
    FUZZ_CHECK(r != AdvanceResult::Rejected);
    if (r == AdvanceResult::Finished) break;
  }
  (void)m.can_end();
  if (m.tokens_accepted() > 0) FUZZ_CHECK(m.rollback(1));
  m.fill_mask(mask);
  check_mask(mask, n);
}

}  // namespace cgram::fuzz

// cgram.h included from C++ (extern "C", no C-only constructs), built with
// -Wall -Wextra -pedantic -Werror, and a few calls through it.
#include "cgram.h"

#include <cstdio>
#include <cstring>
#include <memory>

namespace {
// The handles fit std::unique_ptr with their free functions.
struct VocabFree {
  void operator()(cgram_vocab* v) const { cgram_vocab_free(v); }
};
struct GrammarFree {
  void operator()(cgram_grammar* g) const { cgram_grammar_free(g); }
};
struct MatcherFree {
  void operator()(cgram_matcher* m) const { cgram_matcher_free(m); }
};
}  // namespace

int main() {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "FAILED: %s (last error: %s)\n", what, cgram_last_error());
      ++failures;
    }
  };
  check(cgram_abi_version() == CGRAM_ABI_VERSION, "ABI version");
  check(std::strlen(cgram_version()) > 0, "version");

  const char* const tokens[] = {"a", "b", "<eos>"};
  const uint32_t eos = 2;
  cgram_vocab* raw_vocab = nullptr;
  check(cgram_vocab_from_tokens(tokens, nullptr, 3, &eos, 1, nullptr, 0, &raw_vocab) == CGRAM_OK, "vocabulary");
  std::unique_ptr<cgram_vocab, VocabFree> vocab(raw_vocab);

  cgram_compile_options options;
  cgram_compile_options_init(&options);
  options.filename = "ab.cgram";
  const char source[] = "start ::= 'a' 'b' ;";
  cgram_grammar* raw_grammar = nullptr;
  char* diagnostics = nullptr;
  check(cgram_grammar_compile(vocab.get(), source, sizeof source - 1, &options, &raw_grammar, &diagnostics) == CGRAM_OK,
        "compile");
  cgram_string_free(diagnostics);
  std::unique_ptr<cgram_grammar, GrammarFree> grammar(raw_grammar);

  cgram_matcher* raw_matcher = nullptr;
  check(cgram_matcher_new(grammar.get(), &raw_matcher) == CGRAM_OK, "matcher");
  std::unique_ptr<cgram_matcher, MatcherFree> matcher(raw_matcher);
  uint32_t mask = 0;
  check(cgram_matcher_fill_mask(matcher.get(), &mask, 1) == CGRAM_OK && mask == 1u, "mask at the start: a");
  cgram_advance_result result = CGRAM_ADVANCE_REJECTED;
  check(cgram_matcher_advance(matcher.get(), 0, &result) == CGRAM_OK && result == CGRAM_ADVANCE_ONGOING, "advance a");
  check(cgram_matcher_advance(matcher.get(), 7, &result) == CGRAM_ERROR_INVALID_ARGUMENT, "bad id refused");
  std::printf("cgram %s from C++: %s\n", cgram_version(), failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

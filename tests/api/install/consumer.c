/* An outside C program built against an installed cgram with pkg-config:
 *   cc consumer.c $(pkg-config --cflags --libs cgram) */
#include <cgram.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  static const char* const tokens[] = {"{", "}", "</s>"};
  static const char grammar_text[] = "start ::= '{' '}' ;";
  const uint32_t eos = 2;
  cgram_vocab* vocab = NULL;
  cgram_grammar* grammar = NULL;
  cgram_matcher* matcher = NULL;
  uint32_t mask = 0;
  int ok;

  printf("cgram %s (ABI %u) from C\n", cgram_version(), (unsigned)cgram_abi_version());
  ok = cgram_abi_version() == CGRAM_ABI_VERSION &&
       cgram_vocab_from_tokens(tokens, NULL, 3, &eos, 1, NULL, 0, &vocab) == CGRAM_OK &&
       cgram_grammar_compile(vocab, grammar_text, strlen(grammar_text), NULL, &grammar, NULL) == CGRAM_OK &&
       cgram_matcher_new(grammar, &matcher) == CGRAM_OK && cgram_matcher_fill_mask(matcher, &mask, 1) == CGRAM_OK &&
       mask == 1u; /* only "{" */
  if (!ok) fprintf(stderr, "error: %s\n", cgram_last_error());
  cgram_matcher_free(matcher);
  cgram_grammar_free(grammar);
  cgram_vocab_free(vocab);
  return ok ? 0 : 1;
}

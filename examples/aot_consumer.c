/* A plain C program that uses a grammar compiled ahead of time.
 *
 *   cgram compile examples/json.cgram -o json.so
 *   cc examples/aot_consumer.c -Iinclude/cgram -Lbuild/capi -lcgram -o aot_consumer
 *   ./aot_consumer json.so "" 6377 29874 1115 518 29896 29892 29871 29906 12258
 *
 * Arguments: the object, a vocabulary file ("" for the bundled Phi-3 one,
 * which `cgram compile` uses by default), then token ids (those above are
 * {"a": [1, 2]} in Phi-3; `cgram mask FILE --prefix TEXT --json` lists the
 * ids of any prefix). For each id it
 * prints how many tokens the grammar allows at that point, and advances;
 * at the end it says whether the text may end there.
 *
 * Exit status: 0 every token was accepted, 1 one was rejected, 2 the
 * vocabulary or the object could not be loaded, 64 bad arguments. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cgram.h"

static size_t count_bits(const uint32_t* words, size_t n) {
  size_t count = 0, i;
  for (i = 0; i < n; ++i)
    for (uint32_t w = words[i]; w; w &= w - 1) ++count;
  return count;
}

static int parse_id(const char* text, uint32_t* id) {
  char* end = NULL;
  unsigned long long value;
  errno = 0;
  value = strtoull(text, &end, 10);
  if (errno || end == text || *end != '\0' || value > UINT32_MAX || text[0] == '-') return 0;
  *id = (uint32_t)value;
  return 1;
}

int main(int argc, char** argv) {
  cgram_vocab* vocab = NULL;
  cgram_grammar* grammar = NULL;
  cgram_matcher* matcher = NULL;
  uint32_t* mask = NULL;
  size_t words;
  bool can_end = false;
  int status = 0, i;

  if (argc < 3) {
    fprintf(stderr, "usage: %s GRAMMAR.so VOCAB|\"\" [TOKEN-ID...]\n", argv[0]);
    return 64;
  }
  if (cgram_abi_version() != CGRAM_ABI_VERSION) {
    fprintf(stderr, "libcgram has ABI %u; this program was built for %u\n", (unsigned)cgram_abi_version(),
            (unsigned)CGRAM_ABI_VERSION);
    return 2;
  }
  if ((argv[2][0] ? cgram_vocab_load(argv[2], NULL, 0, &vocab) : cgram_vocab_bundled(NULL, 0, &vocab)) != CGRAM_OK ||
      cgram_load(argv[1], vocab, &grammar) != CGRAM_OK) {
    fprintf(stderr, "error: %s\n", cgram_last_error());
    cgram_vocab_free(vocab);
    return 2;
  }
  printf("%s: tier %s, cgram %s\n", argv[1], cgram_grammar_tier(grammar), cgram_version());

  words = cgram_grammar_mask_words(grammar);
  mask = malloc(words * sizeof *mask);
  if (!mask || cgram_matcher_new(grammar, &matcher) != CGRAM_OK) {
    fprintf(stderr, "error: %s\n", mask ? cgram_last_error() : "out of memory");
    status = 2;
    goto done;
  }
  for (i = 3; i < argc; ++i) {
    uint32_t id;
    cgram_advance_result result;
    if (!parse_id(argv[i], &id)) {
      fprintf(stderr, "error: '%s' is not a token id\n", argv[i]);
      status = 64;
      goto done;
    }
    if (cgram_matcher_fill_mask(matcher, mask, words) != CGRAM_OK ||
        cgram_matcher_advance(matcher, id, &result) != CGRAM_OK) {
      /* An id past the vocabulary, or a token after the end. */
      fprintf(stderr, "error: %s\n", cgram_last_error());
      status = 1;
      goto done;
    }
    printf("step %d: %zu allowed; token %u %s\n", i - 3, count_bits(mask, words), (unsigned)id,
           result == CGRAM_ADVANCE_REJECTED ? "rejected" : result == CGRAM_ADVANCE_FINISHED ? "ends it" : "accepted");
    if (result == CGRAM_ADVANCE_REJECTED) {
      status = 1;
      goto done;
    }
  }
  if (cgram_matcher_can_end(matcher, &can_end) != CGRAM_OK) {
    fprintf(stderr, "error: %s\n", cgram_last_error());
    status = 2;
    goto done;
  }
  printf("can end: %s\n", cgram_matcher_is_finished(matcher) ? "ended" : can_end ? "yes" : "no");

done:
  free(mask);
  cgram_matcher_free(matcher);
  cgram_grammar_free(grammar);
  cgram_vocab_free(vocab);
  return status;
}

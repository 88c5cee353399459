/* The C API, tested from C: every call, used well and misused.
 *
 *   capi_test TMPDIR EXAMPLES_DIR
 *
 * A tiny harness: CHECK counts failures, and the exit status is nonzero
 * when any check failed (CHECK is used on the main thread only; the
 * threads of test_threads report back through their results). Masks are checked exactly against a grammar small
 * enough to work out by hand. */
#define _POSIX_C_SOURCE 200809L /* pthreads under -std=c11 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgram.h"

static int checks = 0;
static int failures = 0;

#define CHECK(cond)                                                                                       \
  do {                                                                                                    \
    ++checks;                                                                                             \
    if (!(cond)) {                                                                                        \
      ++failures;                                                                                         \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  (last error: %s)\n", __FILE__, __LINE__, #cond,        \
              cgram_last_error());                                                                        \
    }                                                                                                     \
  } while (0)

/* A call's status must be `expected`; on failure, the message must say something. */
#define CHECK_STATUS(call, expected)                                                                      \
  do {                                                                                                    \
    cgram_status status_ = (call);                                                                        \
    ++checks;                                                                                             \
    if (status_ != (expected)) {                                                                          \
      ++failures;                                                                                         \
      fprintf(stderr, "%s:%d: %s\n  gave %s, expected %s\n  (last error: %s)\n", __FILE__, __LINE__, #call, \
              cgram_status_name(status_), cgram_status_name(expected), cgram_last_error());               \
    } else if (status_ != CGRAM_OK && cgram_last_error()[0] == '\0') {                                    \
      ++failures;                                                                                         \
      fprintf(stderr, "%s:%d: %s failed with no message\n", __FILE__, __LINE__, #call);                  \
    }                                                                                                     \
  } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, CGRAM_OK)
#define CHECK_INVALID(call) CHECK_STATUS(call, CGRAM_ERROR_INVALID_ARGUMENT)

static int contains(const char* text, const char* part) { return text && strstr(text, part) != NULL; }

static const char* tmp_dir;
static const char* examples_dir;

static void path_in(char* out, size_t size, const char* dir, const char* name) {
  snprintf(out, size, "%s/%s", dir, name);
}

static int write_file(const char* path, const char* content) {
  FILE* f = fopen(path, "wb");
  if (!f) return 0;
  fputs(content, f);
  return fclose(f) == 0;
}

/* The whole file, NUL-terminated (freed by the caller); NULL when unreadable. */
static char* read_file(const char* path, size_t* length) {
  FILE* f = fopen(path, "rb");
  char* text = NULL;
  long size;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    text = malloc((size_t)size + 1);
    if (text && fread(text, 1, (size_t)size, f) == (size_t)size) {
      text[size] = '\0';
      *length = (size_t)size;
    } else {
      free(text);
      text = NULL;
    }
  }
  fclose(f);
  return text;
}

/* ------------------------------------------------------------------------
 * The tiny vocabulary: ids 0..5 are "a" "b" "c" "ab" "ac" "x", 6 is the end
 * of sequence. */
enum { A = 0, B = 1, C = 2, AB = 3, AC = 4, X = 5, EOS = 6, TINY_SIZE = 7 };
#define BIT(t) (1u << (t))

static cgram_vocab* tiny_vocab(void) {
  static const char* const tokens[TINY_SIZE] = {"a", "b", "c", "ab", "ac", "x", "</s>"};
  const uint32_t eos = EOS;
  cgram_vocab* vocab = NULL;
  CHECK_OK(cgram_vocab_from_tokens(tokens, NULL, TINY_SIZE, &eos, 1, NULL, 0, &vocab));
  return vocab;
}

static cgram_grammar* compile_text(const cgram_vocab* vocab, const char* text, cgram_tier tier) {
  cgram_compile_options options;
  cgram_grammar* grammar = NULL;
  char* diagnostics = NULL;
  cgram_compile_options_init(&options);
  options.tier = tier;
  CHECK_OK(cgram_grammar_compile(vocab, text, strlen(text), &options, &grammar, &diagnostics));
  CHECK(diagnostics == NULL);
  cgram_string_free(diagnostics);
  return grammar;
}

static uint32_t mask_of(cgram_matcher* m) {
  uint32_t word = 0xDEADBEEF;
  CHECK_OK(cgram_matcher_fill_mask(m, &word, 1));
  return word;
}

static cgram_advance_result advance(cgram_matcher* m, uint32_t token) {
  cgram_advance_result result = CGRAM_ADVANCE_REJECTED;
  CHECK_OK(cgram_matcher_advance(m, token, &result));
  return result;
}

/* ------------------------------------------------------------------------ */

static void test_versions(void) {
  CHECK(cgram_abi_version() == CGRAM_ABI_VERSION);
  CHECK(cgram_version() != NULL && strlen(cgram_version()) >= 5);
  CHECK(strcmp(cgram_status_name(CGRAM_OK), "CGRAM_OK") == 0);
  CHECK(strcmp(cgram_status_name(CGRAM_ERROR_LOAD), "CGRAM_ERROR_LOAD") == 0);
  CHECK(strcmp(cgram_status_name((cgram_status)1234), "unknown status") == 0);
  CHECK(cgram_last_error() != NULL);
  cgram_string_free(NULL);
}

static void test_tiny_vocabulary(void) {
  cgram_vocab* vocab = tiny_vocab();
  uint32_t ids[4] = {0, 0, 0, 0};
  size_t count = 99, length = 0;
  const char* bytes = NULL;
  bool special = false;
  if (!vocab) return;

  CHECK(cgram_vocab_size(vocab) == TINY_SIZE);
  CHECK_OK(cgram_vocab_eos_ids(vocab, ids, 4, &count));
  CHECK(count == 1 && ids[0] == EOS);
  count = 99;
  CHECK_STATUS(cgram_vocab_eos_ids(vocab, NULL, 0, &count), CGRAM_ERROR_BUFFER_TOO_SMALL);
  CHECK(count == 1); /* the size needed */
  CHECK_INVALID(cgram_vocab_eos_ids(vocab, NULL, 1, &count));
  CHECK_INVALID(cgram_vocab_eos_ids(vocab, ids, 4, NULL));
  CHECK_INVALID(cgram_vocab_eos_ids(NULL, ids, 4, &count));

  CHECK_OK(cgram_vocab_token_bytes(vocab, AC, &bytes, &length));
  CHECK(length == 2 && memcmp(bytes, "ac", 2) == 0);
  CHECK_INVALID(cgram_vocab_token_bytes(vocab, TINY_SIZE, &bytes, &length));
  CHECK_INVALID(cgram_vocab_token_bytes(vocab, UINT32_MAX, &bytes, &length));
  CHECK_INVALID(cgram_vocab_token_bytes(vocab, A, NULL, &length));
  CHECK_INVALID(cgram_vocab_token_bytes(vocab, A, &bytes, NULL));
  CHECK_INVALID(cgram_vocab_token_bytes(NULL, A, &bytes, &length));
  CHECK(contains(cgram_last_error(), "cgram_vocab_token_bytes"));

  CHECK_OK(cgram_vocab_is_special(vocab, EOS, &special));
  CHECK(special);
  CHECK_OK(cgram_vocab_is_special(vocab, X, &special));
  CHECK(!special);
  CHECK_INVALID(cgram_vocab_is_special(vocab, TINY_SIZE, &special));
  CHECK_INVALID(cgram_vocab_is_special(vocab, A, NULL));
  CHECK_INVALID(cgram_vocab_is_special(NULL, A, &special));
  CHECK(cgram_vocab_size(NULL) == 0);
  cgram_vocab_free(vocab);
  cgram_vocab_free(NULL);
}

static void test_vocabulary_misuse(void) {
  static const char* const tokens[3] = {"a", "b", "c"};
  static const char* const with_null[2] = {"a", NULL};
  static const char* const binary[2] = {"a\0b", "c"};
  const size_t lengths[2] = {3, 1};
  const uint32_t eos = 2, bad_eos = 3, bad_special = 7;
  cgram_vocab* vocab = NULL;
  const char* bytes = NULL;
  size_t length = 0;
  char path[4096];

  CHECK_INVALID(cgram_vocab_from_tokens(tokens, NULL, 3, &eos, 1, NULL, 0, NULL));
  CHECK_INVALID(cgram_vocab_from_tokens(NULL, NULL, 3, &eos, 1, NULL, 0, &vocab));
  CHECK_INVALID(cgram_vocab_from_tokens(tokens, NULL, 3, NULL, 1, NULL, 0, &vocab));
  CHECK_INVALID(cgram_vocab_from_tokens(tokens, NULL, 3, &eos, 1, NULL, 2, &vocab));
  CHECK_INVALID(cgram_vocab_from_tokens(with_null, NULL, 2, NULL, 0, NULL, 0, &vocab));
  CHECK_INVALID(cgram_vocab_from_tokens(tokens, NULL, 3, &eos, 1, &bad_special, 1, &vocab));
  CHECK_INVALID(cgram_vocab_from_tokens(tokens, NULL, SIZE_MAX, &eos, 1, NULL, 0, &vocab));
  CHECK_STATUS(cgram_vocab_from_tokens(tokens, NULL, 3, &bad_eos, 1, NULL, 0, &vocab), CGRAM_ERROR_VOCABULARY);
  CHECK(contains(cgram_last_error(), "end-of-sequence"));
  CHECK_STATUS(cgram_vocab_from_tokens(NULL, NULL, 0, NULL, 0, NULL, 0, &vocab), CGRAM_ERROR_VOCABULARY);
  CHECK(vocab == NULL);

  /* Explicit lengths carry NUL bytes. */
  CHECK_OK(cgram_vocab_from_tokens(binary, lengths, 2, NULL, 0, NULL, 0, &vocab));
  CHECK_OK(cgram_vocab_token_bytes(vocab, 0, &bytes, &length));
  CHECK(length == 3 && memcmp(bytes, "a\0b", 3) == 0);
  cgram_vocab_free(vocab);
  vocab = NULL;

  /* Files: a missing one, a malformed one, a JSON token list with an EOS override. */
  CHECK_STATUS(cgram_vocab_load("/nonexistent/tokenizer.json", NULL, 0, &vocab), CGRAM_ERROR_VOCABULARY);
  CHECK(contains(cgram_last_error(), "/nonexistent/tokenizer.json"));
  CHECK(vocab == NULL);
  CHECK_INVALID(cgram_vocab_load(NULL, NULL, 0, &vocab));
  CHECK_INVALID(cgram_vocab_load("x", NULL, 0, NULL));
  CHECK_INVALID(cgram_vocab_load("x", NULL, 2, &vocab));
  path_in(path, sizeof path, tmp_dir, "list.json");
  CHECK(write_file(path, "[\"a\", \"b\", {\"text\": \"<end>\", \"special\": true}]"));
  {
    const uint32_t override_eos = 2;
    uint32_t ids[2];
    size_t count = 0;
    CHECK_OK(cgram_vocab_load(path, &override_eos, 1, &vocab));
    CHECK(cgram_vocab_size(vocab) == 3);
    CHECK_OK(cgram_vocab_eos_ids(vocab, ids, 2, &count));
    CHECK(count == 1 && ids[0] == 2);
    cgram_vocab_free(vocab);
    vocab = NULL;
    CHECK_STATUS(cgram_vocab_load(path, &bad_eos, 1, &vocab), CGRAM_ERROR_VOCABULARY);
  }
  path_in(path, sizeof path, tmp_dir, "broken.json");
  CHECK(write_file(path, "{\"model\": 12"));
  CHECK_STATUS(cgram_vocab_load(path, NULL, 0, &vocab), CGRAM_ERROR_VOCABULARY);

  /* From memory. */
  {
    static const char list[] = "[\"x\", \"y\", \"</s>\"]";
    CHECK_OK(cgram_vocab_from_memory(list, sizeof list - 1, "list", NULL, &eos, 1, &vocab));
    CHECK(cgram_vocab_size(vocab) == 3);
    cgram_vocab_free(vocab);
    vocab = NULL;
    CHECK_STATUS(cgram_vocab_from_memory("   ", 3, NULL, NULL, NULL, 0, &vocab), CGRAM_ERROR_VOCABULARY);
    CHECK_STATUS(cgram_vocab_from_memory("[1, 2", 5, "bad", NULL, NULL, 0, &vocab), CGRAM_ERROR_VOCABULARY);
    CHECK(contains(cgram_last_error(), "bad"));
    CHECK_INVALID(cgram_vocab_from_memory(NULL, 3, "x", NULL, NULL, 0, &vocab));
    CHECK_INVALID(cgram_vocab_from_memory(list, sizeof list - 1, "x", NULL, NULL, 0, NULL));
    CHECK_INVALID(cgram_vocab_from_memory(list, sizeof list - 1, "x", NULL, NULL, 1, &vocab));
    CHECK(vocab == NULL);
  }

  CHECK_INVALID(cgram_vocab_bundled(NULL, 0, NULL));
  CHECK_INVALID(cgram_vocab_bundled(NULL, 3, &vocab));
  CHECK_STATUS(cgram_vocab_bundled(&bad_special, 0, &vocab), CGRAM_OK); /* n_eos == 0: ignored */
  cgram_vocab_free(vocab);
  vocab = NULL;
  {
    const uint32_t huge = 40000;
    CHECK_STATUS(cgram_vocab_bundled(&huge, 1, &vocab), CGRAM_ERROR_VOCABULARY);
  }
}

/* start ::= 'ab' | 'ac' : every mask worked out by hand. */
static void test_exact_masks(cgram_tier tier) {
  cgram_vocab* vocab = tiny_vocab();
  cgram_grammar* grammar = compile_text(vocab, "start ::= 'ab' | 'ac' ;", tier);
  cgram_matcher *m = NULL, *copy = NULL;
  bool flag = false;
  uint32_t t;
  if (!grammar) {
    cgram_vocab_free(vocab);
    return;
  }
  CHECK(strcmp(cgram_grammar_tier(grammar), tier == CGRAM_TIER_JIT ? "jit" : "table") == 0);
  CHECK(cgram_grammar_mask_words(grammar) == 1);
  CHECK_OK(cgram_matcher_new(grammar, &m));
  CHECK(cgram_matcher_mask_words(m) == 1);

  /* Start: a, ab, ac. */
  CHECK(mask_of(m) == (BIT(A) | BIT(AB) | BIT(AC)));
  for (t = 0; t < TINY_SIZE; ++t) {
    CHECK_OK(cgram_matcher_is_allowed(m, t, &flag));
    CHECK((uint32_t)flag == ((mask_of(m) >> t) & 1));
  }
  CHECK_OK(cgram_matcher_can_end(m, &flag));
  CHECK(!flag);
  CHECK(advance(m, X) == CGRAM_ADVANCE_REJECTED);
  CHECK(advance(m, B) == CGRAM_ADVANCE_REJECTED);
  CHECK(advance(m, EOS) == CGRAM_ADVANCE_REJECTED);
  CHECK(cgram_matcher_tokens_accepted(m) == 0);

  /* After "a": exactly b and c. */
  CHECK(advance(m, A) == CGRAM_ADVANCE_ONGOING);
  CHECK(mask_of(m) == (BIT(B) | BIT(C)));
  CHECK(cgram_matcher_tokens_accepted(m) == 1);
  CHECK_OK(cgram_matcher_clone(m, &copy));

  /* After "ab": only the end. */
  CHECK(advance(m, B) == CGRAM_ADVANCE_ONGOING);
  CHECK(mask_of(m) == BIT(EOS));
  CHECK_OK(cgram_matcher_can_end(m, &flag));
  CHECK(flag);
  CHECK(!cgram_matcher_is_finished(m));

  /* The clone went its own way. */
  CHECK(mask_of(copy) == (BIT(B) | BIT(C)));
  CHECK(advance(copy, C) == CGRAM_ADVANCE_ONGOING);
  CHECK(mask_of(copy) == BIT(EOS));
  CHECK(cgram_matcher_tokens_accepted(copy) == 2);

  /* The end, and what a finished matcher says. */
  CHECK(advance(m, EOS) == CGRAM_ADVANCE_FINISHED);
  CHECK(cgram_matcher_is_finished(m));
  CHECK(cgram_matcher_tokens_accepted(m) == 3);
  CHECK(mask_of(m) == 0);
  CHECK_OK(cgram_matcher_is_allowed(m, EOS, &flag));
  CHECK(!flag);
  CHECK_OK(cgram_matcher_can_end(m, &flag));
  CHECK(!flag);
  {
    cgram_advance_result result = CGRAM_ADVANCE_ONGOING;
    float logits[TINY_SIZE] = {0};
    size_t count = 7;
    char forced[4];
    CHECK_STATUS(cgram_matcher_advance(m, A, &result), CGRAM_ERROR_STATE);
    CHECK(contains(cgram_last_error(), "finished"));
    CHECK_STATUS(cgram_matcher_advance(m, EOS, &result), CGRAM_ERROR_STATE);
    CHECK_STATUS(cgram_matcher_modify_possible_logits(m, A, logits, TINY_SIZE, &result), CGRAM_ERROR_STATE);
    CHECK(result == CGRAM_ADVANCE_ONGOING); /* untouched */
    CHECK(logits[A] == 0.0f);
    CHECK_OK(cgram_matcher_forced_text(m, forced, 4, &count));
    CHECK(count == 0);
    CHECK_OK(cgram_matcher_update_logits(m, logits, TINY_SIZE));
    for (t = 0; t < TINY_SIZE; ++t) CHECK(isinf(logits[t]) && logits[t] < 0);
  }

  /* Rollback: the end, then "b". */
  CHECK_INVALID(cgram_matcher_rollback(m, 4));
  CHECK_INVALID(cgram_matcher_rollback(m, SIZE_MAX));
  CHECK(cgram_matcher_tokens_accepted(m) == 3);
  CHECK_OK(cgram_matcher_rollback(m, 1));
  CHECK(!cgram_matcher_is_finished(m));
  CHECK(mask_of(m) == BIT(EOS));
  CHECK_OK(cgram_matcher_rollback(m, 1));
  CHECK(mask_of(m) == (BIT(B) | BIT(C)));
  CHECK_OK(cgram_matcher_rollback(m, 0));
  CHECK(cgram_matcher_tokens_accepted(m) == 1);
  CHECK_OK(cgram_matcher_reset(m));
  CHECK(cgram_matcher_tokens_accepted(m) == 0);
  CHECK(mask_of(m) == (BIT(A) | BIT(AB) | BIT(AC)));
  CHECK_INVALID(cgram_matcher_rollback(m, 1));

  /* Logits: n == size, padded past the size, too short. */
  {
    float logits[TINY_SIZE + 2];
    cgram_advance_result result = CGRAM_ADVANCE_FINISHED;
    for (t = 0; t < TINY_SIZE + 2; ++t) logits[t] = 1.0f;
    CHECK_OK(cgram_matcher_update_logits(m, logits, TINY_SIZE + 2));
    for (t = 0; t < TINY_SIZE + 2; ++t)
      CHECK((t == A || t == AB || t == AC) ? logits[t] == 1.0f : (isinf(logits[t]) && logits[t] < 0));
    CHECK_INVALID(cgram_matcher_update_logits(m, logits, TINY_SIZE - 1));
    CHECK_INVALID(cgram_matcher_update_logits(m, logits, 0));
    CHECK_INVALID(cgram_matcher_update_logits(m, NULL, TINY_SIZE));
    CHECK_INVALID(cgram_matcher_update_logits(NULL, logits, TINY_SIZE));

    /* A rejected token leaves the logits alone. */
    for (t = 0; t < TINY_SIZE; ++t) logits[t] = 2.0f;
    CHECK_OK(cgram_matcher_modify_possible_logits(m, X, logits, TINY_SIZE, &result));
    CHECK(result == CGRAM_ADVANCE_REJECTED);
    for (t = 0; t < TINY_SIZE; ++t) CHECK(logits[t] == 2.0f);
    CHECK_OK(cgram_matcher_modify_possible_logits(m, A, logits, TINY_SIZE, &result));
    CHECK(result == CGRAM_ADVANCE_ONGOING);
    for (t = 0; t < TINY_SIZE; ++t)
      CHECK((t == B || t == C) ? logits[t] == 2.0f : (isinf(logits[t]) && logits[t] < 0));
    CHECK_INVALID(cgram_matcher_modify_possible_logits(m, B, logits, TINY_SIZE - 1, &result));
    CHECK_INVALID(cgram_matcher_modify_possible_logits(m, B, NULL, TINY_SIZE, &result));
    CHECK_INVALID(cgram_matcher_modify_possible_logits(m, B, logits, TINY_SIZE, NULL));
    CHECK_INVALID(cgram_matcher_modify_possible_logits(m, TINY_SIZE, logits, TINY_SIZE, &result));
    CHECK_INVALID(cgram_matcher_modify_possible_logits(m, UINT32_MAX, logits, TINY_SIZE, &result));
    CHECK_INVALID(cgram_matcher_modify_possible_logits(NULL, B, logits, TINY_SIZE, &result));
    CHECK(cgram_matcher_tokens_accepted(m) == 1); /* none of those advanced */
  }

  /* Bad token ids, short and NULL buffers, NULL everything. */
  {
    cgram_advance_result result;
    uint32_t words[2] = {0xAAAAAAAAu, 0x55555555u};
    CHECK_INVALID(cgram_matcher_advance(m, TINY_SIZE, &result));
    CHECK(contains(cgram_last_error(), "not in the vocabulary"));
    CHECK_INVALID(cgram_matcher_advance(m, UINT32_MAX, &result));
    CHECK_INVALID(cgram_matcher_advance(m, A, NULL));
    CHECK_INVALID(cgram_matcher_advance(NULL, A, &result));
    CHECK_INVALID(cgram_matcher_is_allowed(m, TINY_SIZE, &flag));
    CHECK_INVALID(cgram_matcher_is_allowed(m, UINT32_MAX, &flag));
    CHECK_INVALID(cgram_matcher_is_allowed(m, A, NULL));
    CHECK_INVALID(cgram_matcher_is_allowed(NULL, A, &flag));
    CHECK_INVALID(cgram_matcher_fill_mask(m, words, 0));
    CHECK(contains(cgram_last_error(), "needs 1 words"));
    CHECK_INVALID(cgram_matcher_fill_mask(m, NULL, 1));
    CHECK_INVALID(cgram_matcher_fill_mask(NULL, words, 1));
    /* Longer is fine; only mask_words words are written. */
    CHECK_OK(cgram_matcher_fill_mask(m, words, 2));
    CHECK(words[0] == (BIT(B) | BIT(C)) && words[1] == 0x55555555u);
    CHECK_INVALID(cgram_matcher_can_end(m, NULL));
    CHECK_INVALID(cgram_matcher_can_end(NULL, &flag));
    CHECK_INVALID(cgram_matcher_rollback(NULL, 0));
    CHECK_INVALID(cgram_matcher_reset(NULL));
    CHECK_INVALID(cgram_matcher_new(NULL, &copy));
    CHECK_INVALID(cgram_matcher_new(grammar, NULL));
    CHECK_INVALID(cgram_matcher_clone(NULL, &copy));
    CHECK_INVALID(cgram_matcher_clone(m, NULL));
    CHECK(!cgram_matcher_is_finished(NULL));
    CHECK(cgram_matcher_tokens_accepted(NULL) == 0);
    CHECK(cgram_matcher_mask_words(NULL) == 0);
    CHECK(cgram_grammar_tier(NULL) == NULL);
    CHECK(cgram_grammar_mask_words(NULL) == 0);
  }

  /* The grammar's vocabulary outlives every other handle on it. */
  {
    cgram_vocab* again = NULL;
    CHECK_OK(cgram_grammar_vocab(grammar, &again));
    CHECK(cgram_vocab_size(again) == TINY_SIZE);
    CHECK_INVALID(cgram_grammar_vocab(NULL, &again));
    CHECK_INVALID(cgram_grammar_vocab(grammar, NULL));
    cgram_vocab_free(vocab);
    cgram_grammar_free(grammar);
    /* m and copy still hold the grammar. */
    CHECK(mask_of(copy) == BIT(EOS));
    CHECK(cgram_vocab_size(again) == TINY_SIZE);
    cgram_vocab_free(again);
  }
  cgram_matcher_free(m);
  cgram_matcher_free(copy);
  cgram_matcher_free(NULL);
}

/* The dangling else: a recursive rule with an optional tail. After "aax"
   the text is complete (both ifs without else) and an else may follow. */
static void test_right_nullable(cgram_tier tier) {
  cgram_vocab* vocab = tiny_vocab();
  cgram_grammar* grammar = compile_text(vocab, "start ::= s ; s ::= 'a' s [ 'b' s ] | 'x' ;", tier);
  cgram_matcher* m = NULL;
  bool flag = false;
  if (!grammar) {
    cgram_vocab_free(vocab);
    return;
  }
  CHECK_OK(cgram_matcher_new(grammar, &m));
  CHECK(advance(m, A) == CGRAM_ADVANCE_ONGOING);
  CHECK(advance(m, A) == CGRAM_ADVANCE_ONGOING);
  CHECK(advance(m, X) == CGRAM_ADVANCE_ONGOING);
  CHECK_OK(cgram_matcher_can_end(m, &flag));
  CHECK(flag);
  CHECK(mask_of(m) == (BIT(B) | BIT(EOS)));
  CHECK(advance(m, B) == CGRAM_ADVANCE_ONGOING);
  CHECK(advance(m, X) == CGRAM_ADVANCE_ONGOING);
  CHECK(mask_of(m) == (BIT(B) | BIT(EOS)));
  CHECK(advance(m, B) == CGRAM_ADVANCE_ONGOING);
  CHECK(advance(m, X) == CGRAM_ADVANCE_ONGOING);
  CHECK(mask_of(m) == BIT(EOS));
  CHECK(advance(m, EOS) == CGRAM_ADVANCE_FINISHED);
  cgram_matcher_free(m);
  cgram_grammar_free(grammar);
  cgram_vocab_free(vocab);
}

static void test_forced_text(void) {
  cgram_vocab* vocab = tiny_vocab();
  cgram_grammar* grammar = compile_text(vocab, "start ::= 'abx' ;", CGRAM_TIER_TABLE);
  cgram_matcher* m = NULL;
  char forced[8] = {0};
  uint32_t tokens[4] = {99, 99, 99, 99};
  size_t length = 99, count = 99, rollback = 99;
  if (!grammar) {
    cgram_vocab_free(vocab);
    return;
  }
  CHECK_OK(cgram_matcher_new(grammar, &m));
  /* Whatever the tokenization, the text is "abx". */
  CHECK_OK(cgram_matcher_forced_text(m, forced, 8, &length));
  CHECK(length == 3 && memcmp(forced, "abx", 3) == 0);
  CHECK_OK(cgram_matcher_forced_text(m, forced, 2, &length));
  CHECK(length == 2 && memcmp(forced, "ab", 2) == 0);
  CHECK(advance(m, AB) == CGRAM_ADVANCE_ONGOING);
  CHECK_OK(cgram_matcher_forced_text(m, forced, 8, &length));
  CHECK(length == 1 && forced[0] == 'x');
  CHECK_OK(cgram_matcher_forced_text(m, NULL, 0, &length));
  CHECK(length == 0);
  CHECK(cgram_matcher_tokens_accepted(m) == 1); /* looking ahead moves nothing */
  /* A plain token list has no encoder: jump-forward says so. */
  CHECK_STATUS(cgram_matcher_jump_forward(m, tokens, 4, &count, &rollback), CGRAM_ERROR_VOCABULARY);
  CHECK(contains(cgram_last_error(), "no encoder"));
  CHECK_INVALID(cgram_matcher_forced_text(m, NULL, 4, &length));
  CHECK_INVALID(cgram_matcher_forced_text(m, forced, 4, NULL));
  CHECK_INVALID(cgram_matcher_forced_text(NULL, forced, 4, &length));
  CHECK_INVALID(cgram_matcher_jump_forward(m, NULL, 4, &count, &rollback));
  CHECK_INVALID(cgram_matcher_jump_forward(m, tokens, 4, NULL, &rollback));
  CHECK_INVALID(cgram_matcher_jump_forward(m, tokens, 4, &count, NULL));
  cgram_matcher_free(m);
  cgram_grammar_free(grammar);
  cgram_vocab_free(vocab);
}

static void test_jump_forward(void) {
  cgram_vocab* vocab = NULL;
  cgram_grammar* grammar = NULL;
  cgram_matcher* m = NULL;
  uint32_t tokens[64];
  size_t count = 99, rollback = 99, i = 0, spelled = 0, length = 0;
  const char* bytes = NULL;
  CHECK_OK(cgram_vocab_bundled(NULL, 0, &vocab));
  if (!vocab) return;
  grammar = compile_text(vocab, "start ::= '{\"name\": \"' #'[a-z]+' '\", \"kind\": \"record\"}' ;", CGRAM_TIER_TABLE);
  if (!grammar) {
    cgram_vocab_free(vocab);
    return;
  }
  CHECK_OK(cgram_matcher_new(grammar, &m));
  /* At the start, `{"name": "` is forced: all its tokens but the last. */
  CHECK_OK(cgram_matcher_jump_forward(m, tokens, 64, &count, &rollback));
  CHECK(rollback == 0 && count > 0);
  for (i = 0; i < count; ++i) {
    CHECK_OK(cgram_vocab_token_bytes(vocab, tokens[i], &bytes, &length));
    spelled += length;
    CHECK(advance(m, tokens[i]) == CGRAM_ADVANCE_ONGOING);
  }
  CHECK(spelled > 0 && spelled < 10);
  CHECK_STATUS(cgram_matcher_jump_forward(m, NULL, 0, &count, &rollback), CGRAM_OK); /* nothing more is forced */
  CHECK(count == 0);
  cgram_matcher_free(m);
  cgram_grammar_free(grammar);
  cgram_vocab_free(vocab);
}

static void test_canonical(void) {
  cgram_vocab* list = tiny_vocab();
  cgram_vocab* vocab = NULL;
  cgram_compile_options options;
  cgram_grammar* grammar = NULL;
  cgram_matcher* m = NULL;
  cgram_advance_result r;
  const char* text = "start ::= #'[a-z]+' ;";
  cgram_compile_options_init(&options);
  CHECK(!options.canonical);
  options.canonical = true;
  /* A plain token list has no canonical encoding. */
  CHECK_STATUS(cgram_grammar_compile(list, text, strlen(text), &options, &grammar, NULL), CGRAM_ERROR_COMPILE);
  CHECK(contains(cgram_last_error(), "canonical mode needs a merge-based vocabulary"));
  CHECK_OK(cgram_vocab_bundled(NULL, 0, &vocab));
  CHECK_OK(cgram_grammar_compile(vocab, text, strlen(text), &options, &grammar, NULL));
  if (grammar) {
    /* After an "h", no token spelling "e" is allowed: the tokenizer writes
     * "he" as one token (which is allowed at the start). */
    size_t n = cgram_vocab_size(vocab), h_ids = 0, e_ids = 0;
    uint32_t id;
    bool he_allowed = false, after_h = false;
    const char* bytes = NULL;
    size_t length = 0;
    CHECK_OK(cgram_matcher_new(grammar, &m));
    for (id = 0; id < n; ++id) {
      CHECK_OK(cgram_vocab_token_bytes(vocab, id, &bytes, &length));
      if (length == 2 && memcmp(bytes, "he", 2) == 0) CHECK_OK(cgram_matcher_is_allowed(m, id, &he_allowed));
    }
    CHECK(he_allowed);
    for (id = 0; id < n && !after_h; ++id) {
      CHECK_OK(cgram_vocab_token_bytes(vocab, id, &bytes, &length));
      if (length != 1 || bytes[0] != 'h') continue;
      ++h_ids;
      CHECK_OK(cgram_matcher_advance(m, id, &r));
      after_h = r == CGRAM_ADVANCE_ONGOING;
    }
    CHECK(after_h && h_ids >= 1);
    for (id = 0; id < n; ++id) {
      CHECK_OK(cgram_vocab_token_bytes(vocab, id, &bytes, &length));
      if (length != 1 || bytes[0] != 'e') continue;
      ++e_ids;
      CHECK_OK(cgram_matcher_advance(m, id, &r));
      CHECK(r == CGRAM_ADVANCE_REJECTED);
    }
    CHECK(e_ids >= 1);
    cgram_matcher_free(m);
  }
  cgram_grammar_free(grammar);
  cgram_vocab_free(vocab);
  cgram_vocab_free(list);
}

/* The grammar's memo of masks: its budget is an option, 8 MiB by default,
 * 0 off; a cache, so every mask is the same either way. */
static void test_mask_memo_option(void) {
  static const char text[] = "start ::= 'a' start 'b' | 'c' ;";
  static const uint32_t tokens[] = {A, A, A, C, B, B, B};
  cgram_vocab* vocab = tiny_vocab();
  cgram_compile_options options;
  cgram_grammar* with = NULL;
  cgram_grammar* without = NULL;
  cgram_matcher* m1 = NULL;
  cgram_matcher* m2 = NULL;
  size_t i;
  cgram_compile_options_init(&options);
  CHECK(options.mask_memo_bytes == (size_t)8 << 20);
  CHECK(options.background_index);
  CHECK_OK(cgram_grammar_compile(vocab, text, strlen(text), &options, &with, NULL));
  options.mask_memo_bytes = 0;
  options.background_index = false; /* the same masks, the entries built by the masks */
  CHECK_OK(cgram_grammar_compile(vocab, text, strlen(text), &options, &without, NULL));
  if (with && without) {
    CHECK_OK(cgram_matcher_new(with, &m1));
    CHECK_OK(cgram_matcher_new(without, &m2));
    for (i = 0; i < sizeof tokens / sizeof tokens[0]; ++i) {
      const uint32_t expected = tokens[i] == A || tokens[i] == C ? (BIT(A) | BIT(C) | BIT(AC)) : 0;
      uint32_t a = mask_of(m1), b = mask_of(m2);
      CHECK(a == b);
      if (i < 4) CHECK((a & ~BIT(EOS)) == expected);
      CHECK(advance(m1, tokens[i]) != CGRAM_ADVANCE_REJECTED);
      CHECK(advance(m2, tokens[i]) != CGRAM_ADVANCE_REJECTED);
    }
    CHECK(mask_of(m1) == mask_of(m2));
    cgram_matcher_free(m1);
    cgram_matcher_free(m2);
  }
  cgram_grammar_free(with);
  cgram_grammar_free(without);
  cgram_vocab_free(vocab);
}

/* A list of tools compiled as the grammar of a reply (llama3 format); an
   unknown format is refused. */
static void test_tools(void) {
  static const char* const tokens[] = {"{\"name\": ", "\"f\"", ", \"parameters\": ", "{}", "}", "hi", "</s>"};
  enum { HEAD, NAME, PARAMS, EMPTY, CLOSE, HI, END, N_TOKENS };
  static const char tools[] = "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", "
                              "\"additionalProperties\": false}}]";
  static const uint32_t reply[] = {HI, HEAD, NAME, PARAMS, EMPTY, CLOSE, END};
  const uint32_t eos = END;
  cgram_vocab* vocab = NULL;
  cgram_compile_options options;
  cgram_grammar* grammar = NULL;
  cgram_matcher* m = NULL;
  size_t accepted = 0;
  CHECK_OK(cgram_vocab_from_tokens(tokens, NULL, N_TOKENS, &eos, 1, NULL, 0, &vocab));
  cgram_compile_options_init(&options);
  CHECK(options.tool_format == NULL);
  options.tool_format = "llama3";
  CHECK_OK(cgram_grammar_compile(vocab, tools, strlen(tools), &options, &grammar, NULL));
  if (grammar) {
    CHECK_OK(cgram_matcher_new(grammar, &m));
    CHECK_OK(cgram_matcher_validate_tokens(m, reply, sizeof reply / sizeof reply[0], &accepted));
    CHECK(accepted == sizeof reply / sizeof reply[0]);
    cgram_matcher_free(m);
    cgram_grammar_free(grammar);
    grammar = NULL;
  }
  options.tool_format = "gemma";
  CHECK(cgram_grammar_compile(vocab, tools, strlen(tools), &options, &grammar, NULL) == CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cgram_last_error(), "tool_format") != NULL);
  cgram_vocab_free(vocab);
}

/* A tool list compiled one tool at a time (tool_cut): the same masks as the
   whole grammar along a random walk that prefers tokens spanning a name's
   end, in one mixed batch fill; no save, no matcher options. */
static void test_tool_cut(void) {
  enum { N_BYTES = 95, N_TOKENS = N_BYTES + 7 };
  static const char* const extra[] = {"\"f\", \"arguments\": {", "\", \"", "g\", \"arguments\": {\"a\": 1}}",
                                      "<tool_call>", "</tool_call>", "{\"name\": \"", "</s>"};
  static char bytes[N_BYTES][2];
  const char* tokens[N_TOKENS];
  static const char tools[] = "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {}}},"
                              " {\"name\": \"g\", \"parameters\": {\"type\": \"object\", \"properties\": "
                              "{\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}]";
  const uint32_t eos = N_TOKENS - 1;
  cgram_vocab* vocab = NULL;
  cgram_compile_options options;
  cgram_grammar *whole = NULL, *cut = NULL, *refused = NULL;
  cgram_matcher *a = NULL, *b = NULL;
  cgram_matcher_options matcher_options;
  cgram_thread_pool* pool = NULL;
  uint32_t rows[2 * 4];
  uint64_t seed = 12345;
  int i, step, calls = 0;
  for (i = 0; i < N_BYTES; ++i) {
    bytes[i][0] = (char)(' ' + i);
    bytes[i][1] = '\0';
    tokens[i] = bytes[i];
  }
  for (i = 0; i < 7; ++i) tokens[N_BYTES + i] = extra[i];
  CHECK_OK(cgram_vocab_from_tokens(tokens, NULL, N_TOKENS, &eos, 1, NULL, 0, &vocab));
  cgram_compile_options_init(&options);
  CHECK(!options.tool_cut);
  options.tool_format = "hermes";
  CHECK_OK(cgram_grammar_compile(vocab, tools, strlen(tools), &options, &whole, NULL));
  options.tool_cut = true;
  CHECK_OK(cgram_grammar_compile(vocab, tools, strlen(tools), &options, &cut, NULL));
  CHECK_OK(cgram_thread_pool_new(2, &pool));
  if (whole && cut && pool) {
    CHECK(cgram_grammar_mask_words(cut) == 4);
    CHECK(cgram_save(cut, "never.so") == CGRAM_ERROR_INVALID_ARGUMENT);
    cgram_matcher_options_init(&matcher_options);
    matcher_options.max_rollback_tokens = 4;
    CHECK(cgram_matcher_new_with_options(cut, &matcher_options, &b) == CGRAM_ERROR_INVALID_ARGUMENT);
    CHECK_OK(cgram_matcher_new(whole, &a));
    CHECK_OK(cgram_matcher_new(cut, &b));
    for (step = 0; step < 60 && a && b; ++step) {
      cgram_matcher* both[2];
      uint32_t allowed[N_TOKENS];
      size_t n_allowed = 0, t;
      cgram_advance_result ra, rb;
      both[0] = a;
      both[1] = b;
      CHECK_OK(cgram_fill_bitmask(pool, both, NULL, 2, rows, 2, 4));
      CHECK(memcmp(rows, rows + 4, sizeof(uint32_t) * 4) == 0);
      for (t = 0; t + 1 < N_TOKENS; ++t)
        if (rows[t / 32] >> (t % 32) & 1) allowed[n_allowed++] = (uint32_t)t;
      if (n_allowed == 0) break;
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      t = allowed[(seed >> 33) % n_allowed];
      if ((seed >> 40) % 4 != 0) { /* a longer token, three times in four */
        size_t n_long = 0;
        uint32_t longer[7];
        for (i = 0; i < (int)n_allowed; ++i)
          if (allowed[i] >= N_BYTES) longer[n_long++] = allowed[i];
        if (n_long > 0) t = longer[(seed >> 45) % n_long];
      }
      CHECK_OK(cgram_matcher_advance(a, (uint32_t)t, &ra));
      CHECK_OK(cgram_matcher_advance(b, (uint32_t)t, &rb));
      CHECK(ra == rb);
      calls += t == N_BYTES || t == N_BYTES + 2; /* a token that ends a name and goes on */
    }
    CHECK(cgram_matcher_tokens_accepted(b) == cgram_matcher_tokens_accepted(a));
    CHECK(calls > 0);
    CHECK_OK(cgram_matcher_rollback(b, 3));
    CHECK_OK(cgram_matcher_rollback(a, 3));
    CHECK_OK(cgram_matcher_fill_mask(a, rows, 4));
    CHECK_OK(cgram_matcher_fill_mask(b, rows + 4, 4));
    CHECK(memcmp(rows, rows + 4, sizeof(uint32_t) * 4) == 0);
  }
  options.canonical = true;
  CHECK(cgram_grammar_compile(vocab, tools, strlen(tools), &options, &refused, NULL) == CGRAM_ERROR_INVALID_ARGUMENT);
  CHECK(refused == NULL);
  cgram_matcher_free(a);
  cgram_matcher_free(b);
  cgram_thread_pool_free(pool);
  cgram_grammar_free(whole);
  cgram_grammar_free(cut);
  cgram_vocab_free(vocab);
}

/* A JSON Schema (by its .json filename) with members in any order. */
static void test_any_property_order(void) {
  static const char* const tokens[] = {"{", "}", "\"", "a", "b", ":", ",", "1", "</s>"};
  enum { OPEN, CLOSE, QUOTE, LA, LB, COLON, COMMA, ONE, END, N_TOKENS };
  static const char schema[] =
      "{\"type\": \"object\", \"properties\": {\"a\": {\"const\": 1}, \"b\": {\"const\": 1}},"
      " \"required\": [\"a\", \"b\"], \"additionalProperties\": false}";
  /* {"b":1,"a":1} */
  static const uint32_t b_first[] = {OPEN, QUOTE, LB, QUOTE, COLON, ONE, COMMA, QUOTE, LA, QUOTE, COLON, ONE, CLOSE, END};
  const uint32_t eos = END;
  cgram_vocab* vocab = NULL;
  cgram_compile_options options;
  cgram_grammar *in_order = NULL, *any_order = NULL;
  cgram_matcher *m1 = NULL, *m2 = NULL;
  size_t accepted = 0;
  CHECK_OK(cgram_vocab_from_tokens(tokens, NULL, N_TOKENS, &eos, 1, NULL, 0, &vocab));
  cgram_compile_options_init(&options);
  CHECK(!options.any_property_order);
  options.filename = "schema.json";
  CHECK_OK(cgram_grammar_compile(vocab, schema, strlen(schema), &options, &in_order, NULL));
  options.any_property_order = true;
  CHECK_OK(cgram_grammar_compile(vocab, schema, strlen(schema), &options, &any_order, NULL));
  if (in_order && any_order) {
    CHECK_OK(cgram_matcher_new(in_order, &m1));
    CHECK_OK(cgram_matcher_new(any_order, &m2));
    CHECK_OK(cgram_matcher_validate_tokens(m1, b_first, sizeof b_first / sizeof b_first[0], &accepted));
    CHECK(accepted == 2); /* {" then b: "b" is not the schema's first member */
    CHECK_OK(cgram_matcher_validate_tokens(m2, b_first, sizeof b_first / sizeof b_first[0], &accepted));
    CHECK(accepted == sizeof b_first / sizeof b_first[0]);
    cgram_matcher_free(m1);
    cgram_matcher_free(m2);
  }
  cgram_grammar_free(in_order);
  cgram_grammar_free(any_order);
  cgram_vocab_free(vocab);
}

static void test_grammar_errors(void) {
  cgram_vocab* vocab = tiny_vocab();
  cgram_grammar* grammar = NULL;
  cgram_compile_options options;
  char* diagnostics = (char*)"stale";
  static const char bad[] = "start ::= vaule ;\nvalue ::= 'v' ;\n";
  static const char good[] = "start ::= 'a' ;";

  cgram_compile_options_init(&options);
  options.filename = "broken.cgram";
  CHECK_STATUS(cgram_grammar_compile(vocab, bad, strlen(bad), &options, &grammar, &diagnostics), CGRAM_ERROR_GRAMMAR);
  CHECK(grammar == NULL);
  CHECK(contains(diagnostics, "error"));
  CHECK(contains(diagnostics, "broken.cgram:1:11"));
  CHECK(contains(diagnostics, "vaule"));
  CHECK(contains(cgram_last_error(), "error"));
  cgram_string_free(diagnostics);
  /* No diagnostics wanted: the message still says it. */
  CHECK_STATUS(cgram_grammar_compile(vocab, bad, strlen(bad), NULL, &grammar, NULL), CGRAM_ERROR_GRAMMAR);
  CHECK(contains(cgram_last_error(), "grammar.cgram:1:11: error"));
  CHECK_STATUS(cgram_grammar_compile(vocab, "start ::= ", 10, NULL, &grammar, &diagnostics), CGRAM_ERROR_GRAMMAR);
  CHECK(contains(diagnostics, "error"));
  cgram_string_free(diagnostics);
  /* The length counts, not a NUL: only "start ::= 'a' ;" is read here. */
  CHECK_OK(cgram_grammar_compile(vocab, "start ::= 'a' ; garbage", 15, NULL, &grammar, NULL));
  cgram_grammar_free(grammar);
  grammar = NULL;

  /* Start rule. */
  options.start_rule = "nosuch";
  CHECK_STATUS(cgram_grammar_compile(vocab, good, strlen(good), &options, &grammar, &diagnostics), CGRAM_ERROR_GRAMMAR);
  CHECK(contains(diagnostics, "nosuch"));
  cgram_string_free(diagnostics);
  options.start_rule = "value";
  CHECK_OK(cgram_grammar_compile(vocab, "start ::= value 'b' ; value ::= 'a' ;", 37, &options, &grammar, NULL));
  if (grammar) {
    cgram_matcher* m = NULL;
    CHECK_OK(cgram_matcher_new(grammar, &m));
    CHECK(m && mask_of(m) == (BIT(A)));
    CHECK(m && advance(m, A) == CGRAM_ADVANCE_ONGOING);
    CHECK(m && mask_of(m) == BIT(EOS));
    cgram_matcher_free(m);
  }
  cgram_grammar_free(grammar);
  grammar = NULL;

  /* Misuse. */
  cgram_compile_options_init(&options);
  CHECK_INVALID(cgram_grammar_compile(NULL, good, strlen(good), &options, &grammar, &diagnostics));
  CHECK(diagnostics == NULL); /* always set, so that it can always be freed */
  CHECK_INVALID(cgram_grammar_compile(vocab, NULL, 3, &options, &grammar, &diagnostics));
  CHECK_INVALID(cgram_grammar_compile(vocab, good, strlen(good), &options, NULL, &diagnostics));
  options.struct_size = 3;
  CHECK_INVALID(cgram_grammar_compile(vocab, good, strlen(good), &options, &grammar, NULL));
  CHECK(contains(cgram_last_error(), "cgram_compile_options_init"));
  cgram_compile_options_init(&options);
  options.tier = (cgram_tier)7;
  CHECK_INVALID(cgram_grammar_compile(vocab, good, strlen(good), &options, &grammar, NULL));
  CHECK(grammar == NULL);
  cgram_compile_options_init(NULL);

  /* Eager index. */
  cgram_compile_options_init(&options);
  options.eager_index = true;
  CHECK_OK(cgram_grammar_compile(vocab, good, strlen(good), &options, &grammar, NULL));
  cgram_grammar_free(grammar);
  cgram_vocab_free(vocab);
}

/* The first text token whose bytes are `text`, or UINT32_MAX. */
static uint32_t find_token(const cgram_vocab* vocab, const char* text) {
  size_t n = cgram_vocab_size(vocab), length = 0;
  uint32_t id;
  for (id = 0; id < n; ++id) {
    const char* bytes = NULL;
    bool special = true;
    if (cgram_vocab_token_bytes(vocab, id, &bytes, &length) != CGRAM_OK) return UINT32_MAX;
    if (cgram_vocab_is_special(vocab, id, &special) != CGRAM_OK) return UINT32_MAX;
    if (!special && length == strlen(text) && memcmp(bytes, text, length) == 0) return id;
  }
  return UINT32_MAX;
}

static int masks_equal(cgram_matcher* a, cgram_matcher* b, size_t words) {
  uint32_t* x = calloc(words, sizeof *x);
  uint32_t* y = calloc(words, sizeof *y);
  int same = x && y && cgram_matcher_fill_mask(a, x, words) == CGRAM_OK &&
             cgram_matcher_fill_mask(b, y, words) == CGRAM_OK && memcmp(x, y, words * sizeof *x) == 0;
  free(x);
  free(y);
  return same;
}

static void test_aot(void) {
  cgram_vocab *bundled = NULL, *tiny = tiny_vocab();
  cgram_grammar *compiled = NULL, *loaded = NULL, *wrong = NULL;
  cgram_matcher *a = NULL, *b = NULL;
  char object[4096], not_object[4096], unwritable[4096];
  static const char text[] = "start ::= 'ab' | 'ac' ;";
  uint32_t ta, tb;
  size_t words;

  CHECK_OK(cgram_vocab_bundled(NULL, 0, &bundled));
  CHECK(cgram_vocab_size(bundled) == 32064);
  compiled = compile_text(bundled, text, CGRAM_TIER_TABLE);
  if (!compiled) goto done;
  path_in(object, sizeof object, tmp_dir, "tiny.so");
  CHECK_OK(cgram_save(compiled, object));
  CHECK_INVALID(cgram_save(NULL, object));
  CHECK_INVALID(cgram_save(compiled, NULL));
  path_in(unwritable, sizeof unwritable, tmp_dir, "no/such/dir/x.so");
  CHECK_STATUS(cgram_save(compiled, unwritable), CGRAM_ERROR_COMPILE);

  CHECK_OK(cgram_load(object, bundled, &loaded));
  if (!loaded) goto done;
  CHECK(strcmp(cgram_grammar_tier(loaded), "aot") == 0);
  words = cgram_grammar_mask_words(loaded);
  CHECK(words == 1002);

  /* The same masks as the grammar it was made from, step by step. */
  ta = find_token(bundled, "a");
  tb = find_token(bundled, "b");
  CHECK(ta != UINT32_MAX && tb != UINT32_MAX);
  CHECK_OK(cgram_matcher_new(compiled, &a));
  CHECK_OK(cgram_matcher_new(loaded, &b));
  if (a && b && ta != UINT32_MAX && tb != UINT32_MAX) {
    bool end = false;
    CHECK(masks_equal(a, b, words));
    CHECK(advance(a, ta) == CGRAM_ADVANCE_ONGOING);
    CHECK(advance(b, ta) == CGRAM_ADVANCE_ONGOING);
    CHECK(masks_equal(a, b, words));
    CHECK(advance(a, tb) == CGRAM_ADVANCE_ONGOING);
    CHECK(advance(b, tb) == CGRAM_ADVANCE_ONGOING);
    CHECK(masks_equal(a, b, words));
    CHECK_OK(cgram_matcher_can_end(b, &end));
    CHECK(end);
    /* A long buffer: the word after the mask is never written. */
    {
      uint32_t* buffer = malloc((words + 1) * sizeof *buffer);
      if (buffer) {
        buffer[words] = 0x12345678u;
        CHECK_OK(cgram_matcher_fill_mask(b, buffer, words + 1));
        CHECK(buffer[words] == 0x12345678u);
        CHECK_INVALID(cgram_matcher_fill_mask(b, buffer, words - 1));
        free(buffer);
      }
    }
  }

  /* Refusals: another vocabulary, not an object, no file, NULLs. */
  CHECK_STATUS(cgram_load(object, tiny, &wrong), CGRAM_ERROR_LOAD);
  CHECK(contains(cgram_last_error(), "vocabulary"));
  CHECK(wrong == NULL);
  path_in(not_object, sizeof not_object, tmp_dir, "not-an-object.so");
  CHECK(write_file(not_object, "start ::= 'a' ;\n"));
  CHECK_STATUS(cgram_load(not_object, bundled, &wrong), CGRAM_ERROR_LOAD);
  CHECK(contains(cgram_last_error(), "not a cgram object"));
  CHECK_STATUS(cgram_load("/nonexistent/g.so", bundled, &wrong), CGRAM_ERROR_LOAD);
  CHECK(wrong == NULL);
  CHECK_INVALID(cgram_load(NULL, bundled, &wrong));
  CHECK_INVALID(cgram_load(object, NULL, &wrong));
  CHECK_INVALID(cgram_load(object, bundled, NULL));

done:
  cgram_matcher_free(a);
  cgram_matcher_free(b);
  cgram_grammar_free(compiled);
  cgram_grammar_free(loaded);
  cgram_vocab_free(bundled);
  cgram_vocab_free(tiny);
}

/* Matchers at different points of a JSON document: the batch gives each the
 * mask it gives alone, on the table tier and the JIT. */
/* What servers call: draft validation, bitmask rows wider than the
 * vocabulary, batch fills over (matcher, row) pairs, several ends of
 * sequence, bounded rollback. */
static void test_serving(void) {
  cgram_vocab *vocab = tiny_vocab(), *more = NULL;
  cgram_grammar *grammar = NULL, *words_grammar = NULL;
  cgram_matcher *m = NULL, *n = NULL, *bounded = NULL;
  cgram_thread_pool* pool = NULL;
  cgram_matcher_options options;
  uint32_t eos[4];
  size_t count = 0, accepted = 99, i;
  uint32_t bitmask[3 * 3];
  const uint32_t draft[] = {A, B, EOS, A};
  const uint32_t wrong[] = {A, X, B};
  const uint32_t extra_eos[] = {X};
  if (!vocab) return;

  /* Several ends of sequence: X becomes one too (and is no longer text). */
  CHECK_OK(cgram_vocab_with_eos(vocab, extra_eos, 1, &more));
  CHECK_OK(cgram_vocab_eos_ids(more, eos, 4, &count));
  CHECK(count == 2 && eos[0] == X && eos[1] == EOS);
  CHECK_INVALID(cgram_vocab_with_eos(NULL, extra_eos, 1, &more));
  CHECK_INVALID(cgram_vocab_with_eos(vocab, NULL, 1, &more));
  {
    const uint32_t outside[] = {TINY_SIZE};
    cgram_vocab* none = NULL;
    CHECK_STATUS(cgram_vocab_with_eos(vocab, outside, 1, &none), CGRAM_ERROR_VOCABULARY);
    CHECK(contains(cgram_last_error(), "end-of-sequence id 7 is not in the vocabulary"));
    CHECK(none == NULL);
  }
  grammar = compile_text(more, "start ::= 'ab' | 'ac' ;", CGRAM_TIER_TABLE);
  if (!grammar) goto done;
  CHECK_OK(cgram_matcher_new(grammar, &m));
  CHECK_OK(cgram_matcher_new(grammar, &n));
  if (!m || !n) goto done;

  /* validate_tokens: a, b, end; nothing after the end; nothing changes. */
  CHECK_OK(cgram_matcher_validate_tokens(m, draft, 4, &accepted));
  CHECK(accepted == 3);
  CHECK(cgram_matcher_tokens_accepted(m) == 0);
  CHECK(mask_of(m) == (BIT(A) | BIT(AB) | BIT(AC)));
  CHECK_OK(cgram_matcher_validate_tokens(m, wrong, 3, &accepted));
  CHECK(accepted == 1);
  CHECK_OK(cgram_matcher_validate_tokens(m, NULL, 0, &accepted));
  CHECK(accepted == 0);
  CHECK_INVALID(cgram_matcher_validate_tokens(m, NULL, 2, &accepted));
  CHECK_INVALID(cgram_matcher_validate_tokens(m, draft, 4, NULL));
  CHECK_INVALID(cgram_matcher_validate_tokens(NULL, draft, 4, &accepted));
  /* After "ab" both ends of sequence are allowed, and each one finishes. */
  CHECK(advance(n, AB) == CGRAM_ADVANCE_ONGOING);
  CHECK(mask_of(n) == (BIT(X) | BIT(EOS)));
  CHECK_OK(cgram_matcher_validate_tokens(n, extra_eos, 1, &accepted));
  CHECK(accepted == 1);
  CHECK(advance(n, X) == CGRAM_ADVANCE_FINISHED);

  /* A bitmask of 3 rows of 3 words: a model with 96 logits for 7 ids. */
  for (i = 0; i < 9; ++i) bitmask[i] = 0xFFFFFFFFu;
  CHECK_OK(cgram_matcher_fill_bitmask(m, bitmask, 3, 3, 1));
  CHECK(bitmask[3] == (BIT(A) | BIT(AB) | BIT(AC)) && bitmask[4] == 0 && bitmask[5] == 0);
  CHECK(bitmask[0] == 0xFFFFFFFFu && bitmask[8] == 0xFFFFFFFFu);
  CHECK_INVALID(cgram_matcher_fill_bitmask(m, bitmask, 3, 3, 3));
  CHECK(contains(cgram_last_error(), "row 3 is outside the bitmask (3 rows)"));
  CHECK_INVALID(cgram_matcher_fill_bitmask(m, bitmask, 3, 0, 0));
  CHECK_INVALID(cgram_matcher_fill_bitmask(m, NULL, 3, 3, 0));
  CHECK_INVALID(cgram_matcher_fill_bitmask(NULL, bitmask, 3, 3, 0));
  CHECK_INVALID(cgram_matcher_fill_bitmask(m, bitmask, SIZE_MAX, SIZE_MAX, 0));

  /* The batch: any rows, grammars of one vocabulary or several. */
  words_grammar = compile_text(vocab, "start ::= ( 'a' | 'b' )* ;", CGRAM_TIER_TABLE);
  CHECK_OK(cgram_thread_pool_new(2, &pool));
  cgram_matcher_options_init(&options);
  CHECK(options.struct_size == sizeof options && options.max_rollback_tokens == SIZE_MAX);
  if (!words_grammar || !pool) goto done;
  CHECK_OK(cgram_matcher_new_with_options(words_grammar, NULL, &bounded));
  if (!bounded) goto done;
  {
    cgram_matcher* pair[2];
    size_t rows[2] = {2, 0};
    pair[0] = m;
    pair[1] = bounded;
    for (i = 0; i < 9; ++i) bitmask[i] = 0xFFFFFFFFu;
    CHECK_OK(cgram_fill_bitmask(pool, pair, rows, 2, bitmask, 3, 3));
    CHECK(bitmask[6] == (BIT(A) | BIT(AB) | BIT(AC)) && bitmask[7] == 0);
    CHECK(bitmask[0] == (BIT(A) | BIT(B) | BIT(AB) | BIT(EOS)) && bitmask[1] == 0 && bitmask[2] == 0);
    CHECK(bitmask[3] == 0xFFFFFFFFu);
    rows[1] = 2;
    CHECK_INVALID(cgram_fill_bitmask(pool, pair, rows, 2, bitmask, 3, 3));
    CHECK(contains(cgram_last_error(), "row 2 is given twice"));
    rows[1] = 3;
    CHECK_INVALID(cgram_fill_bitmask(pool, pair, rows, 2, bitmask, 3, 3));
    pair[1] = m;
    rows[1] = 1;
    CHECK_INVALID(cgram_fill_bitmask(pool, pair, rows, 2, bitmask, 3, 3));
    CHECK(contains(cgram_last_error(), "given twice"));
    CHECK_OK(cgram_fill_bitmask(pool, pair, NULL, 0, NULL, 0, 0));
    CHECK_INVALID(cgram_fill_bitmask(pool, pair, NULL, 1, NULL, 3, 3));
    pair[1] = NULL;
    CHECK_INVALID(cgram_fill_bitmask(pool, pair, rows, 2, bitmask, 3, 3));
  }
  cgram_matcher_free(bounded);
  bounded = NULL;

  /* Bounded rollback: 4 tokens at most, whatever the length of the text. */
  options.max_rollback_tokens = 4;
  CHECK_OK(cgram_matcher_new_with_options(words_grammar, &options, &bounded));
  if (!bounded) goto done;
  for (i = 0; i < 500; ++i) CHECK(advance(bounded, i % 3 ? A : AB) == CGRAM_ADVANCE_ONGOING);
  CHECK(cgram_matcher_tokens_accepted(bounded) == 500);
  CHECK(cgram_matcher_rollback_depth(bounded) == 4);
  CHECK_INVALID(cgram_matcher_rollback(bounded, 5));
  CHECK(contains(cgram_last_error(), "keeps the last 4 (max_rollback_tokens)"));
  CHECK_OK(cgram_matcher_rollback(bounded, 4));
  CHECK(cgram_matcher_tokens_accepted(bounded) == 496);
  CHECK(cgram_matcher_rollback_depth(bounded) == 0);
  CHECK_INVALID(cgram_matcher_rollback(bounded, 1));
  CHECK(cgram_matcher_rollback_depth(NULL) == 0);
  options.struct_size = 3;
  CHECK_INVALID(cgram_matcher_new_with_options(words_grammar, &options, &n));
  CHECK(contains(cgram_last_error(), "struct_size"));

  /* The sequence's work budget: an ambiguous grammar's walk ends with
   * CGRAM_ERROR_LIMIT (after the budget, not after the machine's memory). */
  cgram_matcher_options_init(&options);
  CHECK(options.max_work_per_byte == 0);
  {
    const char* text = "start ::= s ; s ::= s s | 'a' | '' ;";
    cgram_grammar* ambiguous = NULL;
    char* warnings = NULL;
    cgram_matcher* walk = NULL;
    cgram_status status = CGRAM_OK;
    cgram_advance_result result = CGRAM_ADVANCE_ONGOING;
    CHECK_OK(cgram_grammar_compile(vocab, text, strlen(text), NULL, &ambiguous, &warnings));
    CHECK(warnings && contains(warnings, "rule 's' is ambiguous"));
    cgram_string_free(warnings);
    if (ambiguous) CHECK_OK(cgram_matcher_new_with_options(ambiguous, &options, &walk));
    for (i = 0; walk && i < 5000 && status == CGRAM_OK && result == CGRAM_ADVANCE_ONGOING; ++i)
      status = cgram_matcher_advance(walk, A, &result);
    CHECK(status == CGRAM_ERROR_LIMIT);
    CHECK(contains(cgram_last_error(), "max_work_per_byte"));
    cgram_matcher_free(walk);
    cgram_grammar_free(ambiguous);
  }

done:
  cgram_thread_pool_free(pool);
  cgram_matcher_free(bounded);
  cgram_matcher_free(m);
  cgram_matcher_free(n);
  cgram_grammar_free(grammar);
  cgram_grammar_free(words_grammar);
  cgram_vocab_free(more);
  cgram_vocab_free(vocab);
}

static void test_batch(void) {
  /* {"a": [1, 2]} in the bundled vocabulary (cgram mask --json gives them). */
  static const uint32_t doc[] = {6377, 29874, 1115, 518, 29896, 29892, 29871, 29906, 12258};
  enum { N = 6, DOC = sizeof doc / sizeof doc[0] };
  cgram_vocab *bundled = NULL, *tiny = tiny_vocab();
  cgram_grammar *json = NULL, *jit = NULL, *small = NULL;
  cgram_thread_pool* pool = NULL;
  cgram_matcher* matchers[N] = {0};
  cgram_matcher* other = NULL;
  char path[4096];
  char* text = NULL;
  size_t length = 0, words = 0, i, j;
  uint32_t *batch = NULL, *single = NULL;

  path_in(path, sizeof path, examples_dir, "json.cgram");
  text = read_file(path, &length);
  CHECK(text != NULL);
  CHECK_OK(cgram_vocab_bundled(NULL, 0, &bundled));
  if (!text || !bundled) goto done;
  json = compile_text(bundled, text, CGRAM_TIER_TABLE);
  jit = compile_text(bundled, text, CGRAM_TIER_JIT);
  if (!json || !jit) goto done;
  CHECK(strcmp(cgram_grammar_tier(jit), "jit") == 0);
  words = cgram_grammar_mask_words(json);
  batch = calloc(N * words, sizeof *batch);
  single = calloc(words, sizeof *single);
  if (!batch || !single) goto done;

  /* Matcher i has read i * 2 tokens of the document (the last one all of it). */
  for (i = 0; i < N; ++i) {
    CHECK_OK(cgram_matcher_new(json, &matchers[i]));
    if (!matchers[i]) goto done;
    for (j = 0; j < DOC && j < i * 2; ++j) CHECK(advance(matchers[i], doc[j]) == CGRAM_ADVANCE_ONGOING);
  }
  CHECK_OK(cgram_thread_pool_new(3, &pool));
  if (!pool) goto done;
  CHECK_OK(cgram_fill_masks(pool, matchers, N, batch, N * words));
  for (i = 0; i < N; ++i) {
    CHECK_OK(cgram_matcher_fill_mask(matchers[i], single, words));
    CHECK(memcmp(batch + i * words, single, words * sizeof *single) == 0);
  }
  /* The JIT's masks are the table's, step by step along the document. */
  {
    cgram_matcher *t = NULL, *k = NULL;
    CHECK_OK(cgram_matcher_new(json, &t));
    CHECK_OK(cgram_matcher_new(jit, &k));
    for (j = 0; t && k && j < DOC; ++j) {
      CHECK(masks_equal(t, k, words));
      CHECK(advance(t, doc[j]) == CGRAM_ADVANCE_ONGOING);
      CHECK(advance(k, doc[j]) == CGRAM_ADVANCE_ONGOING);
    }
    CHECK(t && k && masks_equal(t, k, words));
    {
      bool end = false;
      CHECK(k && cgram_matcher_can_end(k, &end) == CGRAM_OK && end);
    }
    cgram_matcher_free(t);
    cgram_matcher_free(k);
  }

  /* Misuse. */
  CHECK_OK(cgram_fill_masks(pool, NULL, 0, NULL, 0));
  CHECK_INVALID(cgram_fill_masks(NULL, matchers, N, batch, N * words));
  CHECK_INVALID(cgram_fill_masks(pool, NULL, N, batch, N * words));
  CHECK_INVALID(cgram_fill_masks(pool, matchers, N, NULL, N * words));
  CHECK_INVALID(cgram_fill_masks(pool, matchers, N, batch, N * words - 1));
  CHECK(contains(cgram_last_error(), "n_words_total"));
  CHECK_INVALID(cgram_fill_masks(pool, matchers, N, batch, 0));
  {
    cgram_matcher* twice[2];
    cgram_matcher* with_null[2];
    cgram_matcher* mixed[2];
    twice[0] = matchers[0];
    twice[1] = matchers[0];
    CHECK_INVALID(cgram_fill_masks(pool, twice, 2, batch, 2 * words));
    CHECK(contains(cgram_last_error(), "twice"));
    with_null[0] = matchers[0];
    with_null[1] = NULL;
    CHECK_INVALID(cgram_fill_masks(pool, with_null, 2, batch, 2 * words));
    small = compile_text(tiny, "start ::= 'a' ;", CGRAM_TIER_TABLE);
    if (small) {
      CHECK_OK(cgram_matcher_new(small, &other));
      mixed[0] = matchers[0];
      mixed[1] = other;
      CHECK_INVALID(cgram_fill_masks(pool, mixed, 2, batch, 2 * words));
    }
  }
  CHECK_INVALID(cgram_thread_pool_new(2, NULL));
  CHECK_INVALID(cgram_thread_pool_new(SIZE_MAX, &pool));
  {
    cgram_thread_pool* everyone = NULL;
    CHECK_OK(cgram_thread_pool_new(0, &everyone));
    CHECK_OK(cgram_fill_masks(everyone, matchers, N, batch, N * words));
    cgram_thread_pool_free(everyone);
  }
  cgram_thread_pool_free(NULL);

done:
  for (i = 0; i < N; ++i) cgram_matcher_free(matchers[i]);
  cgram_matcher_free(other);
  cgram_thread_pool_free(pool);
  cgram_grammar_free(json);
  cgram_grammar_free(jit);
  cgram_grammar_free(small);
  cgram_vocab_free(bundled);
  cgram_vocab_free(tiny);
  free(batch);
  free(single);
  free(text);
}

/* One grammar shared by threads, each with its own matcher (the lazy token
 * index fills itself under them), and each thread's own error message. */
enum { THREADS = 4 };
struct walk {
  const cgram_grammar* grammar;
  const uint32_t* doc;
  size_t doc_length;
  int index;
  uint32_t* final_mask; /* mask_words words */
  int ok;
};

static void* walk_document(void* arg) {
  struct walk* w = arg;
  cgram_matcher* m = NULL;
  cgram_advance_result result;
  size_t words = cgram_grammar_mask_words(w->grammar), j;
  char expected[64];
  int round;
  w->ok = 0;
  if (cgram_matcher_new(w->grammar, &m) != CGRAM_OK) return NULL;
  w->ok = 1;
  for (round = 0; round < 20 && w->ok; ++round) {
    for (j = 0; j < w->doc_length && w->ok; ++j) {
      w->ok = cgram_matcher_fill_mask(m, w->final_mask, words) == CGRAM_OK &&
              cgram_matcher_advance(m, w->doc[j], &result) == CGRAM_OK && result == CGRAM_ADVANCE_ONGOING;
      /* A failure of this thread's own, with a message only it could have. */
      snprintf(expected, sizeof expected, "cannot roll back %d tokens", 1000 + w->index);
      w->ok = w->ok && cgram_matcher_rollback(m, (size_t)(1000 + w->index)) == CGRAM_ERROR_INVALID_ARGUMENT &&
              strstr(cgram_last_error(), expected) != NULL;
    }
    w->ok = w->ok && cgram_matcher_fill_mask(m, w->final_mask, words) == CGRAM_OK;
    if (round + 1 < 20) w->ok = w->ok && cgram_matcher_reset(m) == CGRAM_OK;
  }
  cgram_matcher_free(m);
  return NULL;
}

static void test_threads(void) {
  static const uint32_t doc[] = {6377, 29874, 1115, 518, 29896, 29892, 29871, 29906, 12258};
  cgram_vocab* bundled = NULL;
  cgram_grammar* json = NULL;
  cgram_matcher* reference = NULL;
  pthread_t threads[THREADS];
  struct walk walks[THREADS];
  uint32_t* masks = NULL;
  char path[4096];
  char* text = NULL;
  size_t length = 0, words, i, j;

  path_in(path, sizeof path, examples_dir, "json.cgram");
  text = read_file(path, &length);
  CHECK_OK(cgram_vocab_bundled(NULL, 0, &bundled));
  if (!text || !bundled) goto done;
  json = compile_text(bundled, text, CGRAM_TIER_TABLE); /* lazy index: filled by the threads */
  if (!json) goto done;
  words = cgram_grammar_mask_words(json);
  masks = calloc((THREADS + 1) * words, sizeof *masks);
  if (!masks) goto done;
  for (i = 0; i < THREADS; ++i) {
    walks[i].grammar = json;
    walks[i].doc = doc;
    walks[i].doc_length = sizeof doc / sizeof doc[0];
    walks[i].index = (int)i;
    walks[i].final_mask = masks + i * words;
    walks[i].ok = 0;
    CHECK(pthread_create(&threads[i], NULL, walk_document, &walks[i]) == 0);
  }
  for (i = 0; i < THREADS; ++i) CHECK(pthread_join(threads[i], NULL) == 0);
  CHECK_OK(cgram_matcher_new(json, &reference));
  for (j = 0; reference && j < sizeof doc / sizeof doc[0]; ++j) CHECK(advance(reference, doc[j]) == CGRAM_ADVANCE_ONGOING);
  CHECK_OK(cgram_matcher_fill_mask(reference, masks + THREADS * words, words));
  for (i = 0; i < THREADS; ++i) {
    CHECK(walks[i].ok);
    CHECK(memcmp(walks[i].final_mask, masks + THREADS * words, words * sizeof *masks) == 0);
  }

done:
  cgram_matcher_free(reference);
  cgram_grammar_free(json);
  cgram_vocab_free(bundled);
  free(masks);
  free(text);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: capi_test TMPDIR EXAMPLES_DIR\n");
    return 2;
  }
  tmp_dir = argv[1];
  examples_dir = argv[2];

  test_versions();
  test_tiny_vocabulary();
  test_vocabulary_misuse();
  test_exact_masks(CGRAM_TIER_TABLE);
  test_exact_masks(CGRAM_TIER_JIT);
  test_right_nullable(CGRAM_TIER_TABLE);
  test_right_nullable(CGRAM_TIER_JIT);
  test_forced_text();
  test_jump_forward();
  test_canonical();
  test_mask_memo_option();
  test_any_property_order();
  test_tools();
  test_tool_cut();
  test_grammar_errors();
  test_aot();
  test_batch();
  test_serving();
  test_threads();

  printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}

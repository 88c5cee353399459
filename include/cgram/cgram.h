/*
 * cgram.h: the C API of cgram (libcgram.so).
 *
 * cgram compiles a grammar for one tokenizer vocabulary into a matcher that
 * gives the exact set of allowed next tokens at every decoding step.
 *
 *   cgram_vocab     a tokenizer vocabulary (token bytes, end-of-sequence ids)
 *   cgram_grammar   a grammar compiled for one vocabulary (from text, or an
 *                   AOT object written by `cgram compile` / cgram_save)
 *   cgram_matcher   the state of one sequence: advance, masks, rollback
 *   cgram_thread_pool  threads that fill the masks of many matchers at once
 *
 * C11 and C++ both include this header.
 *
 * ERRORS. Every call that can fail returns a cgram_status; CGRAM_OK (0) is
 * success. On failure, cgram_last_error() gives a message that says what was
 * wrong. The message is per thread: it describes the last failing call made
 * on this thread, and stays valid until the next failing call on this
 * thread (successful calls leave it alone). Out-parameters are left
 * untouched on failure unless said otherwise. No call aborts or lets an
 * exception through, whatever its arguments (a pointer that is neither
 * NULL nor a live handle of the right type is the one thing that cannot be
 * checked). Every argument is checked before any work is done: NULL
 * handles, NULL buffers, buffer sizes, token ids, rollback depths.
 *
 * OWNERSHIP. Every handle a call gives out is owned by the caller and freed
 * with its cgram_*_free function; freeing NULL is a no-op. Handles share
 * what they are built on: a grammar keeps its vocabulary alive, a matcher
 * keeps its grammar alive, so they may be freed in any order. Strings the
 * library gives out as `char*` (diagnostics) are freed with
 * cgram_string_free; `const char*` results (versions, messages, token bytes)
 * belong to the library and are never freed by the caller.
 *
 * THREADS. Vocabularies and compiled grammars are immutable: one handle may
 * be used from any number of threads at once (a grammar's lazily built
 * token index fills itself safely). A matcher is used by one thread at a
 * time (give each sequence its own, or cgram_matcher_clone). A thread pool
 * may be called from several threads; the calls take turns.
 */
#ifndef CGRAM_H
#define CGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version of this header, of libcgram.so and of AOT objects. A
 * program built against this header should check that cgram_abi_version()
 * returns the same number. */
#define CGRAM_ABI_VERSION 8

/* ------------------------------------------------------------------------
 * Status codes and errors
 * ------------------------------------------------------------------------ */

typedef enum cgram_status {
  CGRAM_OK = 0,
  CGRAM_ERROR_INVALID_ARGUMENT = 1, /* NULL pointer, short buffer, bad id or size */
  CGRAM_ERROR_VOCABULARY = 2,       /* the vocabulary cannot be read or is malformed */
  CGRAM_ERROR_GRAMMAR = 3,          /* the grammar text has errors (see the diagnostics) */
  CGRAM_ERROR_COMPILE = 4,          /* compiling, JIT or writing an AOT object failed */
  CGRAM_ERROR_LOAD = 5,             /* an AOT object was refused (not one, another vocabulary, ...) */
  CGRAM_ERROR_STATE = 6,            /* the call does not fit the matcher's state (finished) */
  CGRAM_ERROR_BUFFER_TOO_SMALL = 7, /* the result did not fit; the count says how much is needed */
  CGRAM_ERROR_OUT_OF_MEMORY = 8,
  CGRAM_ERROR_INTERNAL = 9,         /* a bug in cgram; the message says what */
  CGRAM_ERROR_LIMIT = 10            /* a matcher hit a work or memory limit (a pathologically
                                       ambiguous grammar): it rejects every token and allows
                                       nothing until reset or rolled back; the message says which */
} cgram_status;

/* The message of the last failing call on this thread ("" when none).
 * Never NULL; valid until the next failing call on this thread. */
const char* cgram_last_error(void);

/* A constant name for a status ("CGRAM_OK", ...); "unknown status" otherwise. */
const char* cgram_status_name(cgram_status status);

/* Frees a string the library gave out (diagnostics). NULL is a no-op. */
void cgram_string_free(char* string);

/* ------------------------------------------------------------------------
 * Versions
 * ------------------------------------------------------------------------ */

/* cgram's version, "MAJOR.MINOR.PATCH". */
const char* cgram_version(void);
/* The library's ABI version; equal to CGRAM_ABI_VERSION when the header
 * and the library match. */
uint32_t cgram_abi_version(void);

/* ------------------------------------------------------------------------
 * Vocabularies
 *
 * Every loader takes an optional end-of-sequence override: when n_eos > 0,
 * the ids eos_ids[0..n_eos) replace the end-of-sequence ids found in the
 * tokenizer's data (each must be below the vocabulary's size). When
 * n_eos == 0, eos_ids is ignored and may be NULL.
 * ------------------------------------------------------------------------ */

typedef struct cgram_vocab cgram_vocab;

/* A vocabulary file; the format is detected from the content: a Hugging
 * Face tokenizer.json (its tokenizer_config.json beside it names the
 * end-of-sequence token), a tiktoken file, a GGUF file or a JSON token list. */
cgram_status cgram_vocab_load(const char* path, const uint32_t* eos_ids, size_t n_eos, cgram_vocab** out);

/* The same formats from memory. `name` (may be NULL) appears in messages;
 * `config_json` (may be NULL, NUL-terminated) is the text of a
 * tokenizer_config.json for a tokenizer.json. The bytes are copied. */
cgram_status cgram_vocab_from_memory(const void* data, size_t length, const char* name, const char* config_json,
                                     const uint32_t* eos_ids, size_t n_eos, cgram_vocab** out);

/* The vocabulary compiled into cgram (Phi-3, 32,064 ids). */
cgram_status cgram_vocab_bundled(const uint32_t* eos_ids, size_t n_eos, cgram_vocab** out);

/* A plain list: token i has the bytes tokens[i][0..lengths[i]); with
 * lengths == NULL each token is a NUL-terminated string. `special` lists
 * ids that are never text (may be NULL when n_special == 0). Here
 * eos_ids is the list's own end-of-sequence ids (n_eos == 0: none). A
 * token with no bytes is never text either. */
cgram_status cgram_vocab_from_tokens(const char* const* tokens, const size_t* lengths, size_t n_tokens,
                                     const uint32_t* eos_ids, size_t n_eos, const uint32_t* special,
                                     size_t n_special, cgram_vocab** out);

/* A new vocabulary: `vocab` with eos_ids[0..n_eos) added to its
 * end-of-sequence ids (a model that ends with several tokens, such as Llama
 * 3.1 Instruct's <|eot_id|>, <|eom_id|> and <|end_of_text|>). Each becomes
 * special: never text. cgram_vocab_load already adds the ids a Hugging Face
 * generation_config.json beside a tokenizer.json names (unless eos_ids
 * override them). */
cgram_status cgram_vocab_with_eos(const cgram_vocab* vocab, const uint32_t* eos_ids, size_t n_eos, cgram_vocab** out);

void cgram_vocab_free(cgram_vocab* vocab);

/* The number of token ids (0 for NULL). */
size_t cgram_vocab_size(const cgram_vocab* vocab);

/* The end-of-sequence ids, ascending. *count gets their number; up to
 * `capacity` of them go to `ids` (NULL when capacity == 0).
 * CGRAM_ERROR_BUFFER_TOO_SMALL when *count > capacity. */
cgram_status cgram_vocab_eos_ids(const cgram_vocab* vocab, uint32_t* ids, size_t capacity, size_t* count);

/* The exact bytes of a token (not NUL-terminated; *length may be 0). They
 * belong to the vocabulary and live as long as it does. */
cgram_status cgram_vocab_token_bytes(const cgram_vocab* vocab, uint32_t id, const char** bytes, size_t* length);

/* Whether a token is special (end of sequence, control, no bytes): never text. */
cgram_status cgram_vocab_is_special(const cgram_vocab* vocab, uint32_t id, bool* special);

/* ------------------------------------------------------------------------
 * Compiled grammars
 * ------------------------------------------------------------------------ */

typedef struct cgram_grammar cgram_grammar;

typedef enum cgram_tier {
  CGRAM_TIER_TABLE = 0, /* the matcher reads the tables (no code generation) */
  CGRAM_TIER_JIT = 1    /* native kernels compiled now, in process, by LLVM */
} cgram_tier;

typedef struct cgram_compile_options {
  size_t struct_size;     /* sizeof(cgram_compile_options): set by cgram_compile_options_init */
  const char* filename;   /* for diagnostics, and the format by its extension: .json a JSON Schema,
                             .gbnf llama.cpp's GBNF, .lark Lark, anything else .cgram; NULL: "grammar.cgram" */
  const char* start_rule; /* NULL: "start" */
  bool eager_index;       /* build the whole token index now rather than on first use */
  cgram_tier tier;
  bool canonical;         /* a token only where the tokenizer itself would write it there
                             (merge-based vocabularies; docs/SERVING.md) */
  size_t max_memory_bytes; /* the memory parsing and compiling may take; past it, CGRAM_ERROR_GRAMMAR
                              or CGRAM_ERROR_COMPILE names the stage that reached it (docs/LIMITS.md).
                              0: the default, 1 GiB */
  size_t mask_memo_bytes;  /* the grammar's memo of masks, shared by its matchers (docs/LIMITS.md):
                              a cache, so it changes speed, never a mask. 0 turns it off;
                              cgram_compile_options_init sets the default, 8 MiB */
  bool any_property_order; /* a JSON Schema (a filename ending in .json): object members in any order,
                              each at most once, the required ones all there (docs/JSON_SCHEMA.md);
                              false: the schema's order */
  const char* tool_format; /* NULL: `source` is a grammar. "hermes", "llama3", "qwen", "mistral" or
                              "json-array": `source` is a JSON list of OpenAI-style tools, compiled as the
                              grammar of a reply that calls them in that format (docs/TOOLS.md) */
  bool tool_cut;           /* with tool_format: compile one tool at a time, the reply up to a call's
                              name now and each tool's arguments when a call to it is written (docs/TOOLS.md,
                              "Compiled one tool at a time"): the first mask of a list of hundreds of tools
                              in tens of milliseconds, the same masks. The table tier only, not canonical;
                              cgram_save refuses such a grammar, its matchers take no options and offer no
                              jump-forward */
  bool background_index;   /* with a lazy index (eager_index false): once the grammar has made its first
                              mask, build the rest of its token index on a thread of its own, so that later
                              masks do not (docs/LIMITS.md); false: each entry is built by the first mask
                              that needs it. cgram_compile_options_init sets true */
} cgram_compile_options;

/* Fills the defaults: no filename, rule "start", lazy index built in the background after the first mask,
 * table tier, not canonical, 1 GiB, schema order, a memo of masks of 8 MiB. */
void cgram_compile_options_init(cgram_compile_options* options);

/* Compiles `source` (source_length bytes, need not be NUL-terminated) for
 * `vocab`. `options` may be NULL (defaults).
 *
 * `diagnostics` may be NULL. Otherwise *diagnostics is always set, whatever
 * the status: NULL when there is nothing to say, or the rendered
 * diagnostics (clang style: "file:line:col: error: message", the source
 * line and a caret), a NUL-terminated string the caller frees with
 * cgram_string_free. Warnings come with CGRAM_OK; errors with
 * CGRAM_ERROR_GRAMMAR, and cgram_last_error() then gives the same text. */
cgram_status cgram_grammar_compile(const cgram_vocab* vocab, const char* source, size_t source_length,
                                   const cgram_compile_options* options, cgram_grammar** out, char** diagnostics);

void cgram_grammar_free(cgram_grammar* grammar);

/* Which code the matchers run: "table", "jit" or "aot" (NULL for NULL). */
const char* cgram_grammar_tier(const cgram_grammar* grammar);

/* uint32_t words in one mask: (vocabulary size + 31) / 32 (0 for NULL). */
size_t cgram_grammar_mask_words(const cgram_grammar* grammar);

/* A new handle on the grammar's vocabulary (free it with cgram_vocab_free). */
cgram_status cgram_grammar_vocab(const cgram_grammar* grammar, cgram_vocab** out);

/* Writes the grammar as an AOT shared object (its whole token index is
 * built first), the same file `cgram compile` writes. CGRAM_ERROR_COMPILE
 * on failure. Needs a linker (ld.lld-19 or the system compiler). */
cgram_status cgram_save(const cgram_grammar* grammar, const char* path);

/* Loads an AOT object for `vocab`, with no compile cost. Everything is
 * checked before use: CGRAM_ERROR_LOAD for a file that is not a cgram
 * object, was made by another cgram or ABI version, is damaged, or was
 * compiled for another vocabulary. */
cgram_status cgram_load(const char* path, const cgram_vocab* vocab, cgram_grammar** out);

/* ------------------------------------------------------------------------
 * Matchers
 *
 * Token ids must be below the vocabulary's size (CGRAM_ERROR_INVALID_ARGUMENT
 * otherwise). Mask bit t % 32 of word t / 32 is set when token t is allowed.
 * ------------------------------------------------------------------------ */

typedef struct cgram_matcher cgram_matcher;

typedef enum cgram_advance_result {
  CGRAM_ADVANCE_ONGOING = 0,  /* accepted; the sequence goes on */
  CGRAM_ADVANCE_FINISHED = 1, /* accepted an end-of-sequence token: the matcher is finished */
  CGRAM_ADVANCE_REJECTED = 2  /* not allowed here; the state is unchanged */
} cgram_advance_result;

cgram_status cgram_matcher_new(const cgram_grammar* grammar, cgram_matcher** out);

typedef struct cgram_matcher_options {
  size_t struct_size;          /* sizeof(cgram_matcher_options): set by cgram_matcher_options_init */
  size_t max_rollback_tokens;  /* the most tokens a rollback may undo; older history is dropped, so
                                  memory stays bounded over any length of text. SIZE_MAX: no bound */
  size_t max_work_per_byte;    /* the sequence's work budget: the parser may spend this much more for
                                  each byte of text accepted (docs/LIMITS.md), which ends an ambiguous
                                  grammar's sequence with CGRAM_ERROR_LIMIT in bounded time.
                                  0: the default, 32768; SIZE_MAX: no bound over the sequence */
} cgram_matcher_options;

/* Fills the defaults: no bound on rollback, the default work budget. */
void cgram_matcher_options_init(cgram_matcher_options* options);

/* A matcher with options (NULL: the defaults, as cgram_matcher_new). */
cgram_status cgram_matcher_new_with_options(const cgram_grammar* grammar, const cgram_matcher_options* options,
                                            cgram_matcher** out);
/* An independent copy of the state (for beam search, speculation). */
cgram_status cgram_matcher_clone(const cgram_matcher* matcher, cgram_matcher** out);
void cgram_matcher_free(cgram_matcher* matcher);

/* Accepts `token` when the grammar allows it. A token that is not allowed
 * is not an error: CGRAM_OK with *result = CGRAM_ADVANCE_REJECTED.
 * CGRAM_ERROR_STATE when the matcher is finished. */
cgram_status cgram_matcher_advance(cgram_matcher* matcher, uint32_t token, cgram_advance_result* result);

/* How many of tokens[0..n_tokens), in order, cgram_matcher_advance would
 * accept from here (*accepted; an end-of-sequence token counts, nothing
 * after it does). Nothing changes: how a server checks a speculative
 * draft. A token id outside the vocabulary stops the count (it is not an
 * error here). */
cgram_status cgram_matcher_validate_tokens(cgram_matcher* matcher, const uint32_t* tokens, size_t n_tokens,
                                           size_t* accepted);

/* The allowed next tokens as a bitmask; n_words >= cgram_matcher_mask_words.
 * Only the first mask_words words are written. A finished matcher allows
 * nothing (all zeros). */
cgram_status cgram_matcher_fill_mask(cgram_matcher* matcher, uint32_t* words, size_t n_words);

/* Row `row` of a server's bitmask: n_rows rows of row_words words each,
 * row after row (the (batch, ceil(V / 32)) int32 tensor of vLLM, SGLang
 * and TensorRT-LLM; V is the model's logit count, which may pass the
 * tokenizer's ids). row_words >= cgram_matcher_mask_words; the row's words
 * past the mask are cleared, so a model's padding ids are never allowed. A
 * row whose tokens are all allowed costs about one copy of the row. */
cgram_status cgram_matcher_fill_bitmask(cgram_matcher* matcher, uint32_t* bitmask, size_t n_rows, size_t row_words,
                                        size_t row);

/* Whether `token` is allowed next (false when finished). */
cgram_status cgram_matcher_is_allowed(cgram_matcher* matcher, uint32_t token, bool* allowed);

/* The bytes that must come next whatever the tokenization: the longest
 * common prefix of every way the text can go on to a complete sentence (at
 * most `capacity` of them, into `bytes`, NULL when capacity == 0; not
 * NUL-terminated: the text may hold NUL). *length gets how many were
 * written. Nothing changes. */
cgram_status cgram_matcher_forced_text(cgram_matcher* matcher, char* bytes, size_t capacity, size_t* length);

/* Jump-forward with token healing: take back *rollback tokens, then accept
 * the *count tokens written to `tokens` (NULL when capacity == 0). They are
 * the vocabulary's own encoding of the taken-back tokens' bytes and the
 * forced text (its last token left out unless the text must end there),
 * and the grammar accepts them. *count == 0 when nothing is gained.
 * Nothing changes. CGRAM_ERROR_BUFFER_TOO_SMALL (with *count the number
 * needed) when they do not fit; CGRAM_ERROR_VOCABULARY when the vocabulary
 * has no encoder (a plain token list). */
cgram_status cgram_matcher_jump_forward(cgram_matcher* matcher, uint32_t* tokens, size_t capacity, size_t* count,
                                        size_t* rollback);

/* Undoes the last n accepted tokens (an end of sequence included);
 * CGRAM_ERROR_INVALID_ARGUMENT when n > cgram_matcher_rollback_depth (more
 * than were accepted, or past the max_rollback_tokens the matcher was made
 * with: the message says which). Nothing is undone then. */
cgram_status cgram_matcher_rollback(cgram_matcher* matcher, size_t n);

/* How many tokens a rollback can undo now: every accepted one, or at most
 * max_rollback_tokens (0 for NULL). */
size_t cgram_matcher_rollback_depth(const cgram_matcher* matcher);

/* Back to the start of a sequence. */
cgram_status cgram_matcher_reset(cgram_matcher* matcher);

/* Whether an end-of-sequence token is allowed now (false when finished). */
cgram_status cgram_matcher_can_end(cgram_matcher* matcher, bool* can_end);

/* false for NULL. */
bool cgram_matcher_is_finished(const cgram_matcher* matcher);
/* Tokens accepted since the start (0 for NULL). */
size_t cgram_matcher_tokens_accepted(const cgram_matcher* matcher);
/* uint32_t words in one mask (0 for NULL). */
size_t cgram_matcher_mask_words(const cgram_matcher* matcher);

/* Logits: n_logits >= the vocabulary's size (a model's logits are often
 * padded past the tokenizer's ids; those extra entries are always set to
 * -inf). */

/* advance(token); when that gives CGRAM_ADVANCE_ONGOING, sets the logits of
 * the tokens the new state disallows to -inf. The logits are untouched for
 * any other result. CGRAM_ERROR_STATE when the matcher is finished. */
cgram_status cgram_matcher_modify_possible_logits(cgram_matcher* matcher, uint32_t token, float* logits,
                                                  size_t n_logits, cgram_advance_result* result);

/* Sets the logits of the tokens the current state disallows to -inf. */
cgram_status cgram_matcher_update_logits(cgram_matcher* matcher, float* logits, size_t n_logits);

/* ------------------------------------------------------------------------
 * Masks for many matchers at once
 * ------------------------------------------------------------------------ */

typedef struct cgram_thread_pool cgram_thread_pool;

/* `threads` threads in all, the calling thread included (0: one per core). */
cgram_status cgram_thread_pool_new(size_t threads, cgram_thread_pool** out);
void cgram_thread_pool_free(cgram_thread_pool* pool);

/* Row i of `masks` (words [i * w, (i + 1) * w), w = mask words) gets the mask
 * of matchers[i]. Every matcher must have the same mask size and appear
 * once; n_words_total >= count * w. count == 0 does nothing. */
cgram_status cgram_fill_masks(cgram_thread_pool* pool, cgram_matcher* const* matchers, size_t count, uint32_t* masks,
                              size_t n_words_total);

/* Row rows[i] of the bitmask (n_rows rows of row_words words, as
 * cgram_matcher_fill_bitmask) gets matchers[i]'s mask, for i < count, on
 * the pool; rows == NULL: row i. Matchers may have different grammars
 * (row_words must fit each one's mask); each matcher and each row appears
 * once. Everything is checked before anything is written. A matcher that
 * hit a limit gets a clear row and CGRAM_ERROR_LIMIT names it (the other
 * rows are filled). */
cgram_status cgram_fill_bitmask(cgram_thread_pool* pool, cgram_matcher* const* matchers, const size_t* rows,
                                size_t count, uint32_t* bitmask, size_t n_rows, size_t row_words);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CGRAM_H */

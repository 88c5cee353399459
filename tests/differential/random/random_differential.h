#pragma once
// The random-grammar differential: random grammars (grammar_generator.h) and
// random texts, the matcher against the reference recognizer
// (tests/oracle), on
//  - whole texts, as `cgram match` reads them (complete / prefix / rejected,
//    and the offset of a rejection);
//  - token sequences, for two vocabularies (a byte-level one made here, and
//    the bundled SentencePiece one): each token accepted or refused as the
//    oracle says, and the whole mask (end of sequence included) at some
//    steps, and along short random walks that follow the oracle's masks.
// Texts are sampled sentences, their prefixes (some ending inside a
// character), mutations of them and random strings of the grammar's letters.
//
// Every disagreement is shrunk (delta debugging over the grammar's tree and
// the text or tokens) and reported with a reproducer. A query the engine
// refuses (a work limit) is counted, not compared.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "matcher.h"
#include "text_match.h"
#include "vocabulary.h"

namespace cgram::test::random {

struct DifferentialOptions {
  size_t sentences = 6;      // sampled sentences per grammar (each with prefixes and mutations)
  size_t max_text_bytes = 200;
  size_t token_texts = 3;    // token sequences per grammar and vocabulary
  size_t masks = 2;          // full masks compared per token sequence (byte-level vocabulary)
  size_t bundled_masks = 1;  // full masks compared per grammar on the bundled vocabulary
  size_t walk_steps = 4;     // steps of one random walk per grammar (byte-level vocabulary)
  bool bundled = true;       // also the bundled vocabulary
  bool shrink = true;        // minimise disagreements
  double slow_ms = 100;      // answers slower than this are listed (GrammarReport::slow)
  size_t max_work_per_call = 0;  // the matchers' EngineLimits::max_work_per_call (0: the default)
  size_t match_work_per_byte = kDefaultMatchWorkPerByte;  // cgram match's --max-work-per-byte
};

struct Disagreement {
  std::string kind;     // "verdict", "token", "mask", "walk"
  std::string grammar;  // the (minimised) grammar's source
  std::string what;     // what each side said
  std::string text;     // the text, or the tokens' bytes
  std::vector<std::string> tokens;  // the token sequence (token and mask kinds)
  std::string vocabulary;           // "bytes" or "bundled" (token and mask kinds)
  std::vector<size_t> mask_at;      // the steps whose masks were compared (a cache may matter)
  std::string reproducer() const;   // a .cgram file with the case in a comment
};

struct GrammarReport {
  uint64_t seed = 0;
  std::string shape;
  std::string source;
  bool parsed = false;
  std::string parse_error;
  size_t verdict_checks = 0;  // texts compared as wholes
  size_t token_checks = 0;    // tokens accepted or refused, compared
  size_t mask_checks = 0;     // whole masks compared
  size_t mask_pairs = 0;      // (mask, token) pairs in them
  size_t queries = 0;         // engine answers asked for (verdicts, tokens, masks)
  size_t refusals = 0;        // of which the engine refused (a work limit)
  size_t memo_hits = 0;       // masks the grammar's memo answered (compiled/mask_memo.h)
  size_t memo_lookups = 0;    // masks that asked it
  double slowest_ms = 0;      // the engine's slowest answer
  std::string slowest;        // which one it was
  std::vector<std::string> slow;     // answers over DifferentialOptions::slow_ms, described
  std::vector<std::string> refused;  // refused answers, described
  std::vector<Disagreement> disagreements;
};

// The shared state of a run: the vocabularies (made once).
class Differential {
 public:
  explicit Differential(DifferentialOptions options);
  GrammarReport check(uint64_t seed);
  // The same checks on a given grammar (for tests and reproducers).
  GrammarReport check_source(const std::string& source, uint64_t seed, const std::string& shape = "given");

  // Re-runs the one query a reproducer (Disagreement::reproducer) saved;
  // true when the engine and the oracle agree on it now. `out` says what
  // each answered, or why the file could not be replayed (then false).
  bool replay(const std::string& reproducer, std::string& out);

  const std::shared_ptr<const Vocabulary>& byte_vocabulary() const { return bytes_; }

 private:
  MatcherOptions matcher_options() const;
  DifferentialOptions options_;
  std::shared_ptr<const Vocabulary> bytes_;
  std::shared_ptr<const Vocabulary> bundled_;
};

// A byte-level vocabulary: every single byte, pairs and triples of the
// generator's letters, pieces of multi-byte characters, and an end of
// sequence.
std::shared_ptr<const Vocabulary> make_byte_vocabulary();

}  // namespace cgram::test::random

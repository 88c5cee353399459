#pragma once
// The tokenizers' own canonical encodings (BPE), used to tokenize documents
// for the differential tests and the benchmark, and prefixes for `cgram
// mask`: byte-level BPE with merges (GPT-2, Llama 3, DeepSeek), tiktoken
// ranks, and SentencePiece (scores for GGUF "llama" vocabularies, merges with
// byte fallback for tokenizer.json). Pre-tokenization regexes run on ICU, for
// exact Unicode categories.
//
// The tokens returned always spell exactly the text's bytes (after the
// SentencePiece dummy-prefix space, when one is added): invalid UTF-8 and
// cut characters become byte tokens, and a byte the vocabulary has no token
// for is an error, never dropped. Every result is checked before it is
// returned. BPE merging takes O(n log n) in the length of a piece.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "error.h"
#include "vocabulary.h"

namespace cgram {

class PieceAutomaton;

struct EncoderOptions {
  // ICU's limits on the pre-tokenizer regex, for each piece of text it
  // splits. Time is in ICU's units (about 10,000 matching steps, a fraction
  // of a millisecond each): `regex_time_limit` plus one unit for every
  // `regex_chars_per_time_unit` characters. The real tokenizers' patterns
  // use about one unit per 2,700 characters; a backtracking pattern such as
  // `(a|a)+c` reaches the limit within a fraction of a second.
  int32_t regex_time_limit = 1000;
  int32_t regex_chars_per_time_unit = 64;
  // The backtracking stack, in bytes per character (at least ICU's default
  // of 8 MiB): a run of 300,000 spaces needs about 10 MiB.
  int32_t regex_stack_bytes_per_char = 64;
};

using EncodeResult = Result<std::vector<uint32_t>>;

class Encoder {
 public:
  static Result<std::unique_ptr<Encoder>> create(std::shared_ptr<const Vocabulary> vocab,
                                                 const EncoderOptions& options = {});
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  // The tokens of `text`, or why there are none: "the vocabulary cannot
  // spell byte 0xNN at offset N", or a pre-tokenizer regex past its limits.
  EncodeResult try_encode(std::string_view text) const;
  // The same for text that continues a sequence (a model's output after its
  // prompt): no SentencePiece dummy-prefix space is added, so the tokens'
  // bytes are exactly the text.
  EncodeResult try_encode_continuation(std::string_view text) const;

  // For texts the caller knows the vocabulary spells (tests, benchmarks of
  // full vocabularies): the tokens, or an empty vector where try_encode
  // gives an error.
  std::vector<uint32_t> encode(std::string_view text) const;
  std::vector<uint32_t> encode_continuation(std::string_view text) const;

  // --- For canonical mode's pair decisions (vocab/canonical.h) ---------

  // How the merges build one token from its bytes, encoded alone as one
  // piece. A symbol is a run of units as the merges see it (through the
  // byte-level table, '▁' for spaces); the lowest key merges first.
  struct EdgeSymbol {
    std::string work;
    double made;      // key of the merge that made it; -inf for a unit
    double consumed;  // key of the merge that joins it to the rest; +inf for the token itself
    // No merge of a higher key is made while it is on the edge: the
    // largest key of the merge that consumes it and of those that make its
    // partner there (equal to `consumed` where merges are monotone).
    double gone_by;
  };
  struct Derivation {
    bool merges_give_token = false;  // merging the units gives exactly the token
    bool piece_gives_token = false;  // encoding the bytes as one piece does (merges, or a whole-piece rule)
    bool monotone = true;            // no merge has a lower key than a merge that made one of its parts
    // The symbols at the token's left and right edges, from the first or
    // last unit up to the token (only when merges_give_token).
    std::vector<EdgeSymbol> left, right;
  };
  Derivation derive(uint32_t token) const;
  // The tokens merging alone makes of `bytes` as one piece, as inside a
  // longer piece (no pre-tokenizer, no whole-piece rule); empty where it
  // cannot spell them.
  std::vector<uint32_t> merge_piece(std::string_view bytes) const;
  // Every pair of symbols that may merge, with its key: a superset of what
  // merging can meet (every split of every token for tiktoken and
  // SentencePiece scores, the merge list otherwise).
  void for_each_merge(const std::function<void(std::string_view left, std::string_view right, double key)>& f) const;

  // How text is cut into pieces before merging. WholeText: one piece per
  // valid UTF-8 run (SentencePiece). OneRegex: a single regex with no
  // anchors or look-behind, so where the first piece ends can be found
  // with ICU's hitEnd (PieceFinder). Other: several regexes.
  enum class PieceRule { WholeText, OneRegex, Other };
  PieceRule piece_rule() const;
  // Whether a piece that is a token is written as that token without
  // merging (tiktoken, and byte-level BPE with ignore_merges).
  bool takes_whole_pieces() const;

  struct FirstPiece {
    size_t length;  // bytes
    bool open;      // more text after the text could change where it ends
  };
  // Not thread-safe: one per thread (it holds an ICU matcher, and the
  // piece automaton's states made so far).
  class PieceFinder {
   public:
    ~PieceFinder();
    // Where the first piece of `text` (valid UTF-8) ends; nullopt when the
    // regex fails (its limits). The piece automaton answers where it can
    // (vocab/tokenizer/piece_automaton.h), ICU where it cannot.
    std::optional<FirstPiece> first(std::string_view text);
    // ICU's answer alone: the reference the automaton's answers equal.
    std::optional<FirstPiece> icu_first(std::string_view text);
    // Null where the pattern is outside what the automaton models.
    const PieceAutomaton* automaton() const;
    struct Impl;
    explicit PieceFinder(std::unique_ptr<Impl> impl);

   private:
    std::unique_ptr<Impl> impl_;
  };
  // Null unless piece_rule() is OneRegex.
  std::unique_ptr<PieceFinder> piece_finder() const;
  // A finder for any one regex (ICU syntax), for the tests.
  static Result<std::unique_ptr<PieceFinder>> piece_finder_for(std::string_view pattern,
                                                               const EncoderOptions& options = {});

  struct State;
  explicit Encoder(std::unique_ptr<State> state);

 private:
  EncodeResult encode_impl(std::string_view text, bool dummy_prefix) const;
  std::unique_ptr<State> state_;
};

}  // namespace cgram

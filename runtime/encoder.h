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
#include <memory>
#include <string_view>
#include <variant>
#include <vector>

#include "vocabulary.h"

namespace cgram {

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

using EncodeResult = std::variant<std::vector<uint32_t>, VocabularyError>;

class Encoder {
 public:
  static std::variant<std::unique_ptr<Encoder>, VocabularyError> create(std::shared_ptr<const Vocabulary> vocab,
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

  struct State;
  explicit Encoder(std::unique_ptr<State> state);

 private:
  EncodeResult encode_impl(std::string_view text, bool dummy_prefix) const;
  std::unique_ptr<State> state_;
};

}  // namespace cgram

#pragma once
// The tokenizers' own canonical encodings (BPE), used to tokenize documents
// for the differential tests and the benchmark: byte-level BPE with merges
// (GPT-2, Llama 3, DeepSeek), tiktoken ranks, and SentencePiece (scores for
// GGUF "llama" vocabularies, merges with byte fallback for tokenizer.json).
// Pre-tokenization regexes run on ICU, for exact Unicode categories.
#include <memory>
#include <string_view>
#include <variant>
#include <vector>

#include "vocabulary.h"

namespace cgram {

class Encoder {
 public:
  static std::variant<std::unique_ptr<Encoder>, VocabularyError> create(std::shared_ptr<const Vocabulary> vocab);
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  std::vector<uint32_t> encode(std::string_view text) const;
  // The same for text that continues a sequence (a model's output after its
  // prompt): no SentencePiece dummy-prefix space is added, so the tokens'
  // bytes are exactly the text.
  std::vector<uint32_t> encode_continuation(std::string_view text) const;

  struct State;
  explicit Encoder(std::unique_ptr<State> state);

 private:
  std::vector<uint32_t> encode_impl(std::string_view text, bool dummy_prefix) const;
  std::unique_ptr<State> state_;
};

}  // namespace cgram

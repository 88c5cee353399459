#pragma once
// Canonical (proper) tokenization: a token may follow another only where the
// tokenizer itself would write the two that way.
//
// A BPE model was trained on its tokenizer's own encodings. An exact mask
// also allows other spellings of the same text ('"' then 'a' where the
// tokenizer writes '"a'), which skew the model and waste steps. In
// canonical mode (CompileOptions::canonical) a token t may follow the last
// accepted token p only when
//   - the tokenizer encodes t's bytes as t alone, and
//   - it encodes p's bytes followed by t's as exactly p, t;
// for BPE, a sequence whose adjacent pairs are all canonical is the
// canonical encoding of its text (docs/SERVING.md, "Canonical tokenization",
// says what is guaranteed and how it is tested).
//
// The pairs are decided by the vocabulary's own encoder and remembered per
// previous token (a bitset of the tokens checked and one of those allowed),
// for a bounded number of previous tokens. Thread-safe.
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "vocabulary.h"

namespace cgram {

class Encoder;

class CanonicalPairs {
 public:
  static constexpr uint32_t kStart = UINT32_MAX;  // no token there
  // Previous tokens whose pairs are remembered (least recently used goes).
  static constexpr size_t kDefaultCachedTokens = 512;

  // Only merge-based vocabularies (byte-level BPE, tiktoken, SentencePiece)
  // have a canonical encoding; a plain token list is refused.
  static std::variant<std::unique_ptr<CanonicalPairs>, std::string> create(std::shared_ptr<const Vocabulary> vocab,
                                                                          const Encoder& encoder,
                                                                          size_t cached_tokens = kDefaultCachedTokens);

  // Whether text token `next` may follow `prev`, itself after `before`
  // (kStart where there is no such token).
  bool allows(uint32_t before, uint32_t prev, uint32_t next) const;
  // Whether the text may end after `before`, `prev`.
  bool may_end(uint32_t before, uint32_t prev) const;
  // Clears in `words` (a mask) the text tokens that may not follow; the
  // end-of-sequence and special bits are left alone.
  void filter(uint32_t before, uint32_t prev, std::span<uint32_t> words) const;
  size_t memory_bytes() const;

  struct Key {
    explicit Key() = default;
  };
  CanonicalPairs(Key, std::shared_ptr<const Vocabulary> vocab, const Encoder& encoder, size_t cached_tokens);

 private:
  // How a pair is written: as the two tokens at the end of a text, or only
  // before some text (a pre-tokenizer that looks ahead: Llama 3 writes two
  // spaces before a digit as ' ', ' ' but at the end as '  '), or never.
  enum class Pair : uint8_t { Canonical, BeforeSomeText, Never };
  struct Row {
    std::vector<uint32_t> checked, allowed, before_text;  // mask words
  };
  // Whether the encoder writes `tokens`' bytes followed by `after` starting
  // with exactly `tokens`.
  bool written_as(std::span<const uint32_t> tokens, std::string_view after) const;
  Pair classify(uint32_t prev, uint32_t next) const;
  // The text that may follow `tokens` and change how the encoder writes
  // them (none when only the end of the text could).
  std::span<const std::string_view> probes_after(std::span<const uint32_t> tokens) const;
  bool self_canonical(uint32_t token) const;  // under the lock
  Row& row_for(uint32_t prev) const;          // under the lock
  Pair pair(uint32_t prev, uint32_t next) const;  // under the lock
  Pair pair_in(Row& row, uint32_t prev, uint32_t next) const;  // `row` is prev's
  // With `before`, `prev` written so only before some text: the three
  // together, next being (or coming before) that text.
  bool triple_ok(uint32_t before, uint32_t prev, uint32_t next, Pair next_pair) const;
  bool is_text(uint32_t token) const { return token < vocab_->size() && !vocab_->is_special(token); }

  std::shared_ptr<const Vocabulary> vocab_;
  const Encoder& encoder_;
  size_t cached_tokens_;
  size_t words_;
  bool looks_ahead_;  // the vocabulary has a pre-tokenizer
  mutable std::mutex mutex_;
  mutable std::vector<uint32_t> self_checked_, self_ok_;
  mutable std::list<uint32_t> recent_;  // most recent first
  mutable std::unordered_map<uint32_t, std::pair<Row, std::list<uint32_t>::iterator>> rows_;
};

}  // namespace cgram

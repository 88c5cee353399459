#include "canonical.h"

#include <bit>

#include "encoder.h"

namespace cgram {
namespace {
bool bit(std::span<const uint32_t> words, uint32_t t) { return words[t / 32] >> (t % 32) & 1; }
void set(std::span<uint32_t> words, uint32_t t) { words[t / 32] |= 1u << (t % 32); }
}  // namespace

std::variant<std::unique_ptr<CanonicalPairs>, std::string> CanonicalPairs::create(
    std::shared_ptr<const Vocabulary> vocab, const Encoder& encoder, size_t cached_tokens) {
  if (vocab->kind() == TokenizerKind::List)
    return std::string("canonical mode needs a merge-based vocabulary (byte-level BPE, tiktoken or SentencePiece); ") +
           vocab->name() + " is a plain token list";
  return std::make_unique<CanonicalPairs>(Key{}, std::move(vocab), encoder, std::max<size_t>(cached_tokens, 1));
}

CanonicalPairs::CanonicalPairs(Key, std::shared_ptr<const Vocabulary> vocab, const Encoder& encoder,
                               size_t cached_tokens)
    : vocab_(std::move(vocab)),
      encoder_(encoder),
      cached_tokens_(cached_tokens),
      words_((vocab_->size() + 31) / 32),
      self_checked_(words_, 0),
      self_ok_(words_, 0) {}

bool CanonicalPairs::pair_is_canonical(uint32_t prev, uint32_t next) const {
  std::string text(vocab_->bytes(prev));
  text += vocab_->bytes(next);
  auto encoded = encoder_.try_encode_continuation(text);
  const auto* tokens = std::get_if<std::vector<uint32_t>>(&encoded);
  return tokens && tokens->size() == 2 && (*tokens)[0] == prev && (*tokens)[1] == next;
}

bool CanonicalPairs::self_canonical(uint32_t token) const {
  if (!bit(self_checked_, token)) {
    set(self_checked_, token);
    auto encoded = encoder_.try_encode_continuation(vocab_->bytes(token));
    const auto* tokens = std::get_if<std::vector<uint32_t>>(&encoded);
    if (tokens && tokens->size() == 1 && (*tokens)[0] == token) set(self_ok_, token);
  }
  return bit(self_ok_, token);
}

CanonicalPairs::Row& CanonicalPairs::row_for(uint32_t prev) const {
  if (auto it = rows_.find(prev); it != rows_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second.second);
    return it->second.first;
  }
  if (rows_.size() >= cached_tokens_) {
    rows_.erase(recent_.back());
    recent_.pop_back();
  }
  recent_.push_front(prev);
  auto& entry = rows_[prev];
  entry.first.checked.assign(words_, 0);
  entry.first.allowed.assign(words_, 0);
  entry.second = recent_.begin();
  return entry.first;
}

bool CanonicalPairs::decide(Row& row, uint32_t prev, uint32_t next) const {
  if (!bit(row.checked, next)) {
    set(row.checked, next);
    if (self_canonical(next) && pair_is_canonical(prev, next)) set(row.allowed, next);
  }
  return bit(row.allowed, next);
}

bool CanonicalPairs::allows(uint32_t prev, uint32_t next) const {
  if (next >= vocab_->size() || vocab_->is_special(next)) return false;
  std::lock_guard lock(mutex_);
  if (prev == kStart || prev >= vocab_->size() || vocab_->is_special(prev)) return self_canonical(next);
  return decide(row_for(prev), prev, next);
}

void CanonicalPairs::filter(uint32_t prev, std::span<uint32_t> words) const {
  std::lock_guard lock(mutex_);
  const bool start = prev == kStart || prev >= vocab_->size() || vocab_->is_special(prev);
  Row* row = start ? nullptr : &row_for(prev);
  const size_t n = std::min(words.size(), words_);
  for (size_t w = 0; w < n; ++w) {
    for (uint32_t bits = words[w]; bits; bits &= bits - 1) {
      const auto t = static_cast<uint32_t>(w * 32 + std::countr_zero(bits));
      if (t >= vocab_->size() || vocab_->is_special(t)) continue;
      if (!(start ? self_canonical(t) : decide(*row, prev, t))) words[w] &= ~(1u << (t % 32));
    }
  }
}

size_t CanonicalPairs::memory_bytes() const {
  std::lock_guard lock(mutex_);
  return (self_checked_.size() * 2 + rows_.size() * words_ * 2) * sizeof(uint32_t);
}

}  // namespace cgram

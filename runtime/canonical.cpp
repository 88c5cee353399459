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
      looks_ahead_(vocab_->kind() != TokenizerKind::SentencePiece),
      self_checked_(words_, 0),
      self_ok_(words_, 0) {}

bool CanonicalPairs::written_as(std::span<const uint32_t> tokens, std::string_view after) const {
  std::string text;
  for (uint32_t t : tokens) text += vocab_->bytes(t);
  text += after;
  auto encoded = encoder_.try_encode_continuation(text);
  const auto* got = std::get_if<std::vector<uint32_t>>(&encoded);
  return got && got->size() >= tokens.size() && std::equal(tokens.begin(), tokens.end(), got->begin()) &&
         (!after.empty() || got->size() == tokens.size());
}

namespace {
// Text that may come after a pair that ends with white space, one of each
// kind a pre-tokenizer tells apart (letters, digits, spaces, line breaks,
// punctuation, quotes, a letter outside ASCII).
constexpr std::string_view kAfterSpace[] = {"a", "A", "0", " ", "\n", ".", "(", "\"", "'", "\xC3\xA9"};
// Bytes that finish a character cut after its first one, two or three
// bytes (each lead byte's allowed second bytes are among them).
constexpr std::string_view kFinishing[] = {"\x80",         "\x90",         "\xA0",        "\x80\x80",
                                           "\x90\x80",     "\xA0\x80",     "\x80\x80\x80", "\x90\x80\x80"};

// Whether `text` ends inside a UTF-8 character (a lead byte whose
// continuation bytes are not all there).
bool ends_inside_character(std::string_view text) {
  size_t continuation = 0;
  for (size_t i = text.size(); i > 0 && continuation < 4; --i) {
    const auto b = static_cast<uint8_t>(text[i - 1]);
    if ((b & 0xC0) == 0x80) {
      ++continuation;
      continue;
    }
    const size_t needed = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    return continuation < needed;
  }
  return false;
}
}  // namespace

std::span<const std::string_view> CanonicalPairs::probes_after(std::span<const uint32_t> tokens) const {
  // Only what the encoder does at the end of a text can make the text after
  // a pair matter: a pre-tokenizer's look-ahead over white space, and a
  // character cut by the end (its bytes become byte tokens there). With
  // merges alone, more text on the right never undoes a merge across the
  // pair, so SentencePiece (no pre-tokenizer, cut characters already byte
  // tokens) needs none.
  if (!looks_ahead_) return {};
  const std::string_view last = vocab_->bytes(tokens.back());
  if (last.empty()) return {};
  std::string tail;
  for (uint32_t t : tokens.last(std::min<size_t>(tokens.size(), 2))) tail += vocab_->bytes(t);
  if (ends_inside_character(tail)) return kFinishing;
  const char c = last.back();
  if (c == ' ' || c == '\n' || c == '\t' || c == '\r') return kAfterSpace;
  return {};
}

CanonicalPairs::Pair CanonicalPairs::classify(uint32_t prev, uint32_t next) const {
  const uint32_t pair[] = {prev, next};
  const std::span<const std::string_view> probes = probes_after(pair);
  // A pair that ends inside a character is judged with the text after it
  // (at the end, the cut character is written as bytes, whatever follows).
  const bool cut = probes.data() == std::data(kFinishing);
  if (written_as(pair, "")) return cut ? Pair::BeforeSomeText : Pair::Canonical;
  for (std::string_view probe : probes)
    if (written_as(pair, probe)) return Pair::BeforeSomeText;
  return Pair::Never;
}

bool CanonicalPairs::self_canonical(uint32_t token) const {
  if (!bit(self_checked_, token)) {
    set(self_checked_, token);
    const uint32_t one[] = {token};
    bool ok = written_as(one, "");
    for (std::string_view probe : probes_after(one)) {
      if (ok) break;
      ok = written_as(one, probe);
    }
    if (ok) set(self_ok_, token);
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
  entry.first.before_text.assign(words_, 0);
  entry.second = recent_.begin();
  return entry.first;
}

CanonicalPairs::Pair CanonicalPairs::pair(uint32_t prev, uint32_t next) const {
  return pair_in(row_for(prev), prev, next);
}

CanonicalPairs::Pair CanonicalPairs::pair_in(Row& row, uint32_t prev, uint32_t next) const {
  if (!bit(row.checked, next)) {
    set(row.checked, next);
    const Pair p = self_canonical(next) ? classify(prev, next) : Pair::Never;
    if (p != Pair::Never) set(row.allowed, next);
    if (p == Pair::BeforeSomeText) set(row.before_text, next);
  }
  if (!bit(row.allowed, next)) return Pair::Never;
  return bit(row.before_text, next) ? Pair::BeforeSomeText : Pair::Canonical;
}

bool CanonicalPairs::triple_ok(uint32_t before, uint32_t prev, uint32_t next, Pair next_pair) const {
  const uint32_t three[] = {before, prev, next};
  if (written_as(three, "")) return true;
  if (next_pair == Pair::BeforeSomeText)
    for (std::string_view probe : probes_after(three))
      if (written_as(three, probe)) return true;
  return false;
}

bool CanonicalPairs::allows(uint32_t before, uint32_t prev, uint32_t next) const {
  if (!is_text(next)) return false;
  std::lock_guard lock(mutex_);
  if (!is_text(prev)) return self_canonical(next);
  const Pair p = pair(prev, next);
  if (p == Pair::Never) return false;
  if (is_text(before) && pair(before, prev) == Pair::BeforeSomeText) return triple_ok(before, prev, next, p);
  return true;
}

bool CanonicalPairs::may_end(uint32_t before, uint32_t prev) const {
  if (!is_text(prev)) return true;  // no token
  std::lock_guard lock(mutex_);
  if (!is_text(before)) {  // one token: written alone at the end of the text
    const uint32_t one[] = {prev};
    return written_as(one, "");
  }
  return pair(before, prev) == Pair::Canonical;
}

void CanonicalPairs::filter(uint32_t before, uint32_t prev, std::span<uint32_t> words) const {
  std::lock_guard lock(mutex_);
  const bool start = !is_text(prev);
  const bool needs_three = !start && is_text(before) && pair(before, prev) == Pair::BeforeSomeText;
  // Looked up once (after `before`'s row, which may push out another).
  Row* row = start ? nullptr : &row_for(prev);
  const size_t n = std::min(words.size(), words_);
  for (size_t w = 0; w < n; ++w) {
    for (uint32_t bits = words[w]; bits; bits &= bits - 1) {
      const auto t = static_cast<uint32_t>(w * 32 + std::countr_zero(bits));
      if (!is_text(t)) continue;
      bool ok;
      if (start) {
        ok = self_canonical(t);
      } else {
        const Pair p = pair_in(*row, prev, t);
        ok = p != Pair::Never && (!needs_three || triple_ok(before, prev, t, p));
      }
      if (!ok) words[w] &= ~(1u << (t % 32));
    }
  }
}

size_t CanonicalPairs::memory_bytes() const {
  std::lock_guard lock(mutex_);
  return (self_checked_.size() * 2 + rows_.size() * words_ * 3) * sizeof(uint32_t);
}

}  // namespace cgram

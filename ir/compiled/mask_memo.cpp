#include "mask_memo.h"

#include <algorithm>

#include "mask_words.h"

namespace cgram {

namespace {
constexpr size_t kSlotBytes = 16;
// The trie's share of the budget: one entry (its answer, and two slots) per
// this many bytes. Paths are a few dozen symbols, mostly shared.
constexpr size_t kBytesPerEntry = 256;
// A mask with at most this share of non-zero words is kept as (index, word)
// pairs: smaller, and faster to OR.
constexpr size_t kSparseDivisor = 4;
// Blocks of 16 words with a fixed count, which the compiler vectorizes at
// -O2 (a plain loop over the words runs at a word a cycle: a microsecond
// per mask of Llama 3).
uint32_t count_nonzero(std::span<const uint32_t> words) {
  uint32_t n = 0;
  size_t w = 0;
  for (; w + 16 <= words.size(); w += 16) {
    uint32_t block = 0;
    for (size_t j = 0; j < 16; ++j) block += words[w + j] != 0 ? 1u : 0u;
    n += block;
  }
  for (; w < words.size(); ++w) n += words[w] != 0 ? 1u : 0u;
  return n;
}
// The words of `mask` with bits outside `base`, or UINT32_MAX where `base`
// has a bit the mask lacks; in blocks as count_nonzero.
uint32_t count_outside(std::span<const uint32_t> mask, const uint32_t* base) {
  uint32_t n = 0, stray = 0;
  size_t w = 0;
  for (; w + 16 <= mask.size(); w += 16) {
    uint32_t block = 0, block_stray = 0;
    for (size_t j = 0; j < 16; ++j) {
      block += (mask[w + j] & ~base[w + j]) != 0 ? 1u : 0u;
      block_stray |= base[w + j] & ~mask[w + j];
    }
    n += block;
    stray |= block_stray;
  }
  for (; w < mask.size(); ++w) {
    n += (mask[w] & ~base[w]) != 0 ? 1u : 0u;
    stray |= base[w] & ~mask[w];
  }
  return stray != 0 ? UINT32_MAX : n;
}
}  // namespace

MaskMemo::MaskMemo(size_t mask_words, size_t budget_bytes)
    : mask_words_(std::max<size_t>(mask_words, 1)), chunk_words_(std::max<size_t>(mask_words_ * 2, 1 << 14)) {
  if (budget_bytes < mask_words_ * 4 + kBytesPerEntry) return;  // too small to keep one mask: off
  const size_t max_entries = budget_bytes / kBytesPerEntry;
  const size_t trie_bytes = max_entries * (4 + 2 * kSlotBytes);
  max_words_ = budget_bytes > trie_bytes ? (budget_bytes - trie_bytes) / 4 : 0;
  if (max_words_ < mask_words_) max_words_ = 0;
  else trie_ = PathTrie(max_entries);  // from 4 KB, doubling without stopping a token (path_trie.h)
}

bool MaskMemo::or_into(uint32_t entry, std::span<uint32_t> words) const {
  const uint32_t m = trie_.answer(entry);
  if (m == kNone) return false;
  const Kept& kept = kept_[m];
  const uint32_t* at = chunks_[kept.chunk].get() + kept.offset;
  if (!kept.sparse) {
    or_words(words, std::span<const uint32_t>(at, mask_words_));
    return true;
  }
  if (kept.base) or_words(words, std::span<const uint32_t>(kept.base, mask_words_));
  for (uint32_t i = 0; i < kept.size; i += 2) words[at[i]] |= at[i + 1];
  return true;
}

std::pair<const uint32_t*, uint32_t> MaskMemo::best_base(std::span<const uint32_t> mask,
                                                         std::span<const uint32_t* const> bases) const {
  std::pair<const uint32_t*, uint32_t> best{nullptr, UINT32_MAX};
  for (const uint32_t* base : bases)
    if (const uint32_t n = count_outside(mask, base); n < best.second) best = {base, n};
  return best;
}

void MaskMemo::clear() {
  trie_.clear();
  kept_.clear();
  words_used_ = 0;
  chunk_at_ = 0;
  chunk_fill_ = 0;
  ++restarts_;
}

void MaskMemo::forget() {
  {
    std::unique_lock lock(mutex_);
    clear();
  }
  keep_work_averages({});
}

MaskMemo::WorkAverages MaskMemo::work_averages() const {
  std::lock_guard lock(averages_mutex_);
  return averages_;
}

void MaskMemo::keep_work_averages(const WorkAverages& averages) {
  std::lock_guard lock(averages_mutex_);
  averages_ = averages;
}

uint32_t* MaskMemo::room_for(size_t words, Kept& kept) {
  // Chunks are never moved, and are kept when the memo starts again: a
  // warm memo allocates nothing. A chunk is not cleared when made (each
  // mask is written whole before it is read), so its pages are first
  // touched by the masks that fill them, not all at once.
  if (chunk_at_ < chunks_.size() && chunk_fill_ + words + 2 > chunk_words_) ++chunk_at_, chunk_fill_ = 0;
  if (chunk_at_ == chunks_.size()) chunks_.push_back(std::make_unique_for_overwrite<uint32_t[]>(chunk_words_));
  kept.chunk = static_cast<uint32_t>(chunk_at_);
  kept.offset = static_cast<uint32_t>(chunk_fill_);
  kept.size = static_cast<uint32_t>(words);
  chunk_fill_ += words;
  words_used_ += words;
  return chunks_[chunk_at_].get() + kept.offset;
}

void MaskMemo::insert(std::span<const uint32_t> path, std::span<const uint32_t> mask,
                      std::span<const uint32_t* const> bases) {
  if (!enabled() || path.empty() || mask.size() != mask_words_) return;
  const uint32_t nonzero = count_nonzero(mask);
  const auto [base, outside] = nonzero > mask_words_ / kSparseDivisor ? best_base(mask, bases)
                                                                      : std::pair<const uint32_t*, uint32_t>{};
  const bool based = base && outside <= mask_words_ / kSparseDivisor;
  const bool sparse = based || nonzero <= mask_words_ / kSparseDivisor;
  const size_t words = based ? 2 * outside : sparse ? 2 * nonzero : mask_words_;
  std::unique_lock lock(mutex_);
  if (words_used_ + words > max_words_ || !trie_.fits(path.size())) clear();
  if (!trie_.fits(path.size())) return;  // longer than the whole bound
  const uint32_t entry = trie_.make_path(path);
  if (trie_.answer(entry) != kNone) return;  // another thread kept it first
  Kept kept;
  kept.sparse = sparse;
  kept.base = based ? base : nullptr;
  uint32_t* out = room_for(words, kept);
  if (sparse) {
    // No branch per word (whether a word is zero is not predictable): each
    // word is written, and the place moves on past the non-zero ones; the
    // pair after the last lands in the two words of slack room_for leaves.
    size_t at = 0;
    for (uint32_t w = 0; w < mask_words_; ++w) {
      const uint32_t bits = based ? mask[w] & ~base[w] : mask[w];
      out[at] = w;
      out[at + 1] = bits;
      at += bits != 0 ? 2 : 0;
    }
  } else {
    std::copy(mask.begin(), mask.end(), out);
  }
  trie_.set_answer(entry, static_cast<uint32_t>(kept_.size()));
  kept_.push_back(kept);
}

MaskMemo::Stats MaskMemo::stats() const {
  std::shared_lock lock(mutex_);
  return {hits_.load(std::memory_order_relaxed), misses_.load(std::memory_order_relaxed), kept_.size(), restarts_,
          words_used_ * 4};
}

}  // namespace cgram

#include "mask_memo.h"

#include <algorithm>

namespace cgram {

namespace {
// A path is a few dozen symbols; each mask's path shares most of them with
// others. The trie gets this many entries per mask kept.
constexpr size_t kEntriesPerMask = 32;
constexpr size_t kSlotBytes = 16;
}  // namespace

MaskMemo::MaskMemo(size_t mask_words, size_t budget_bytes) : mask_words_(std::max<size_t>(mask_words, 1)) {
  // Per mask: its words, and its share of the trie (entries, their
  // answers, and twice as many slots).
  const size_t per_mask = mask_words_ * 4 + kEntriesPerMask * (4 + 2 * kSlotBytes);
  max_masks_ = budget_bytes / per_mask;
  max_entries_ = max_masks_ * kEntriesPerMask;
}

uint32_t MaskMemo::child(uint32_t parent, uint32_t symbol) const {
  if (slots_.empty()) return kNone;
  const uint64_t k = key(parent, symbol);
  for (size_t i = slot_of(k);; i = (i + 1) & (slots_.size() - 1)) {
    if (slots_[i].entry == kNone) return kNone;
    if (slots_[i].key == k) return slots_[i].entry;
  }
}

std::span<const uint32_t> MaskMemo::mask(uint32_t entry) const {
  const uint32_t m = answers_[entry];
  if (m == kNone) return {};
  return {masks_.data() + size_t{m} * mask_words_, mask_words_};
}

void MaskMemo::grow_for(size_t entries) {
  // The table starts small (most grammars keep few masks) and doubles to
  // stay at most half full.
  size_t want = std::max<size_t>(slots_.size(), 1024);
  while (want < 2 * entries) want *= 2;
  if (want == slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(want, Slot{});
  for (const Slot& s : old) {
    if (s.entry == kNone) continue;
    size_t i = slot_of(s.key);
    while (slots_[i].entry != kNone) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = s;
  }
}

void MaskMemo::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  answers_.clear();
  mask_count_ = 0;
  ++restarts_;
}

void MaskMemo::insert(std::span<const uint32_t> path, std::span<const uint32_t> mask) {
  if (!enabled() || path.empty() || path.size() > max_entries_ || mask.size() != mask_words_) return;
  std::unique_lock lock(mutex_);
  if (mask_count_ == max_masks_ || answers_.size() + path.size() > max_entries_) clear();
  grow_for(answers_.size() + path.size());
  uint32_t parent = kRoot;
  for (uint32_t symbol : path) {
    const uint64_t k = key(parent, symbol);
    size_t i = slot_of(k);
    while (slots_[i].entry != kNone && slots_[i].key != k) i = (i + 1) & (slots_.size() - 1);
    if (slots_[i].entry == kNone) {
      slots_[i] = {k, static_cast<uint32_t>(answers_.size())};
      answers_.push_back(kNone);
    }
    parent = slots_[i].entry;
  }
  if (answers_[parent] != kNone) return;  // another thread kept it first
  answers_[parent] = static_cast<uint32_t>(mask_count_);
  masks_.resize((mask_count_ + 1) * mask_words_);
  std::copy(mask.begin(), mask.end(), masks_.begin() + static_cast<std::ptrdiff_t>(mask_count_ * mask_words_));
  ++mask_count_;
}

void MaskMemo::forget() {
  std::unique_lock lock(mutex_);
  clear();
}

MaskMemo::Stats MaskMemo::stats() const {
  std::shared_lock lock(mutex_);
  return {hits_.load(std::memory_order_relaxed), misses_.load(std::memory_order_relaxed), mask_count_, restarts_};
}

}  // namespace cgram

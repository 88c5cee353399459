#pragma once
// A set of token ids as the token index keeps it: mask words (one bit per
// id of the vocabulary) when it is large, its sorted ids when it is small.
//
// Most lexer states keep few tokens inside them (half of C's keep fewer
// than a hundred of Llama 3's 128,256), and a 16 KB bitset for each made
// the index most of a compiled grammar's memory: llama.cpp-style JSON has
// 3,469 entries (`cgram check --dump token-index`), 55 MB of bitsets. A set of ids costs 4 bytes an id and
// is ORed id by id, so it is kept only while it is small enough that the OR
// stays under that of the words (kSparseShare of them). Large sets repeat
// (a counted string's states mostly keep the same tokens inside): their
// words are shared, one copy per distinct set (TokenIndex::share).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace cgram {

class TokenSet {
 public:
  // Ids while there are at most mask_words / kSparseShare of them.
  static constexpr size_t kSparseShare = 8;

  TokenSet() = default;
  // From mask words (mask_words of them).
  static TokenSet from_words(std::vector<uint32_t> words) {
    TokenSet s;
    // Counted only as far as the limit, over the non-zero words: most words
    // of a small set are zero, and std::popcount is a library call on a
    // baseline x86-64 build (13 % of an eager index's build went to it).
    const size_t limit = words.size() / kSparseShare;
    size_t count = 0;
    for (uint32_t w : words)
      if (w != 0 && (count += static_cast<size_t>(std::popcount(w))) > limit) break;
    if (count > limit) {
      s.words_ = std::make_shared<const std::vector<uint32_t>>(std::move(words));
      return s;
    }
    for (uint32_t w = 0; w < static_cast<uint32_t>(words.size()); ++w)
      for (uint32_t bits = words[w]; bits; bits &= bits - 1) s.ids_.push_back(w * 32 + static_cast<uint32_t>(std::countr_zero(bits)));
    return s;
  }
  // From distinct ids, for a vocabulary of mask_words words: sorted where
  // they are few enough to be kept as ids, in any order otherwise.
  static TokenSet from_ids(std::vector<uint32_t> ids, size_t mask_words) {
    TokenSet s;
    if (ids.size() * kSparseShare <= mask_words) {
      s.ids_ = std::move(ids);
      s.ids_.shrink_to_fit();
      return s;
    }
    std::vector<uint32_t> words(mask_words, 0u);
    for (uint32_t id : ids) words[id / 32] |= 1u << (id % 32);
    s.words_ = std::make_shared<const std::vector<uint32_t>>(std::move(words));
    return s;
  }
  // As saved: one of the two is empty.
  static TokenSet from_parts(std::vector<uint32_t> ids, std::vector<uint32_t> words) {
    TokenSet s;
    s.ids_ = std::move(ids);
    if (!words.empty()) s.words_ = std::make_shared<const std::vector<uint32_t>>(std::move(words));
    return s;
  }

  bool dense() const { return words_ != nullptr; }
  std::span<const uint32_t> words() const {  // dense sets
    return words_ ? std::span<const uint32_t>(*words_) : std::span<const uint32_t>();
  }
  // The words of a dense set, to be shared with equal sets
  // (TokenIndex::share: one copy of each distinct set).
  const std::shared_ptr<const std::vector<uint32_t>>& shared_words() const { return words_; }
  void share_words(std::shared_ptr<const std::vector<uint32_t>> same) { words_ = std::move(same); }
  std::span<const uint32_t> ids() const { return ids_; }      // sparse sets
  void or_into(std::span<uint32_t> words) const {
    const std::span<const uint32_t> own = this->words();
    for (size_t w = 0; w < own.size(); ++w) words[w] |= own[w];
    for (uint32_t id : ids_) words[id / 32] |= 1u << (id % 32);
  }
  bool contains(uint32_t id) const {
    if (dense()) return id / 32 < words_->size() && ((*words_)[id / 32] >> (id % 32) & 1);
    return std::binary_search(ids_.begin(), ids_.end(), id);
  }
  size_t count() const {
    size_t n = ids_.size();
    for (uint32_t w : words()) n += static_cast<size_t>(std::popcount(w));
    return n;
  }
  // The ids only: dense words are counted where they are shared from.
  size_t sparse_bytes() const { return ids_.capacity() * sizeof(uint32_t); }
  size_t memory_bytes() const { return sparse_bytes() + (words_ ? words_->capacity() * sizeof(uint32_t) : 0); }
  bool operator==(const TokenSet& o) const {
    return ids_ == o.ids_ && dense() == o.dense() && (!dense() || *words_ == *o.words_);
  }

 private:
  std::vector<uint32_t> ids_;
  std::shared_ptr<const std::vector<uint32_t>> words_;
};

}  // namespace cgram

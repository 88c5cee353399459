#pragma once
// Count-based speculative drafts (after Domino): the next token, counted per
// state of the lexer and parser, from the sequences accepted so far. Where
// one token has followed a state often enough, it is proposed as a draft
// for a speculative-decoding step; the model then verifies the drafts in one
// forward pass. Structure written by a grammar (keys, punctuation, the
// shape of a record) is what such counts predict well.
//
// Memory is bounded: a fixed table of buckets (DraftOptions::buckets, 64
// bytes each), each holding one state's few most frequent next tokens.
// States that collide share a bucket: the newcomer takes it once the old
// state's counts have decayed. Thread-safe: many matchers may record and
// propose at once.
#include <array>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <vector>

#include "matcher.h"

namespace cgram {

struct DraftOptions {
  size_t buckets = size_t{1} << 16;  // 4 MiB
  // A draft token must be at least this share of its state's next tokens...
  double threshold = 0.6;
  // ...and have followed the state at least this many times.
  uint32_t min_count = 2;
  // Stack levels in the state (Engine::context_key).
  int context_depth = 2;
};

class DraftModel {
 public:
  explicit DraftModel(const DraftOptions& options = {});

  // `token` came next from the state `matcher` is in.
  void record(const Matcher& matcher, uint32_t token);
  // A whole accepted sequence, replayed from the start (it stops at the
  // first token the grammar rejects).
  void learn(const std::shared_ptr<const CompiledGrammar>& grammar, std::span<const uint32_t> tokens);
  // Up to `k` draft tokens from `matcher`'s state: each the most frequent
  // next token of the state the drafts before it lead to, while it passes
  // the threshold and the grammar accepts it (drafts never break the
  // grammar). End of sequence is never drafted. The matcher is left as it
  // was.
  std::vector<uint32_t> propose(Matcher& matcher, size_t k) const;
  size_t memory_bytes() const { return buckets_.size() * sizeof(Bucket); }

 private:
  struct Entry {
    uint32_t token = 0, count = 0;
  };
  struct Bucket {
    uint64_t key = 0;
    uint32_t total = 0;
    std::array<Entry, 6> entries{};
  };
  Bucket& bucket_for(uint64_t key) { return buckets_[key % buckets_.size()]; }
  const Bucket& bucket_for(uint64_t key) const { return buckets_[key % buckets_.size()]; }
  static void add(Bucket& b, uint32_t token);

  DraftOptions options_;
  std::vector<Bucket> buckets_;
  mutable std::shared_mutex mutex_;
};

}  // namespace cgram

#pragma once
// Masks remembered by what they read, shared by every matcher of a compiled
// grammar.
//
// A mask depends on the readings of the text: per head, the lexeme in
// progress and the parse stack under it. It reads the stack only as deep as
// its reductions pop, and code grammars come back to the same tops of stack
// again and again (after each statement's `;`, inside each call's argument
// list), in one text and across the texts a server constrains with one
// grammar. So a mask is kept under a path: the heads' lexical part, then
// the stack graph under them, level by level from the top, as deep as the
// mask's work read (engine/remembered_masks.cpp makes the path and records
// the depth). A lookup follows the current stacks down the same trie until
// it meets a kept mask (a hit) or a symbol the trie does not have (a miss). Two texts
// that agree on every state the work read get the same mask, since the work
// reads nothing else; so an answer never lies on the way to another, and
// the first met is the one.
//
// Bounded: past its budget of bytes the memo empties and starts again (it
// is a cache, never a source). Safe from many threads: lookups share a
// lock, inserts take it alone. The trie is support/path_trie.h, grown as
// masks come.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <vector>

#include "path_trie.h"

namespace cgram {

// The default budget (CompileOptions::mask_memo_bytes, docs/LIMITS.md):
// about 480 masks of a 128k-token vocabulary.
inline constexpr size_t kDefaultMaskMemoBytes = size_t{8} << 20;

class MaskMemo {
 public:
  static constexpr uint32_t kNone = PathTrie::kNone;
  static constexpr uint32_t kRoot = PathTrie::kRoot;  // the parent of a path's first symbol

  // budget_bytes: the masks and the trie together; 0 turns the memo off.
  MaskMemo(size_t mask_words, size_t budget_bytes);
  MaskMemo(const MaskMemo&) = delete;
  MaskMemo& operator=(const MaskMemo&) = delete;

  bool enabled() const { return max_words_ > 0; }

  // A lookup, under the shared lock for as long as it lives.
  class Reader {
   public:
    explicit Reader(const MaskMemo& memo) : memo_(memo), lock_(memo.mutex_) {}
    // The entry below `parent` (kRoot: a path's start) for `symbol`, or kNone.
    uint32_t child(uint32_t parent, uint32_t symbol) const { return memo_.trie_.child(parent, symbol); }
    // ORs the mask kept at an entry into `words`; false where the answer
    // lies deeper.
    bool or_into(uint32_t entry, std::span<uint32_t> words) const { return memo_.or_into(entry, words); }

   private:
    const MaskMemo& memo_;
    std::shared_lock<std::shared_mutex> lock_;
  };
  Reader read() const { return Reader(*this); }

  // Keeps `mask` under `path`. A path of another length than the memo holds
  // for its prefix is the caller's error (the first answer met would win).
  // `bases`: whole-vocabulary sets (mask_words words each) that live as long
  // as the memo (the grammar's token index), of which the mask may hold one
  // or more. A mask that is one of them plus a few words is kept as a
  // pointer to it and those words: most of a JSON string's mask is the
  // string's own set, and a copy of it was 16 KB of fresh pages a mask.
  void insert(std::span<const uint32_t> path, std::span<const uint32_t> mask,
              std::span<const uint32_t* const> bases = {});

  // Empties the memo, and forgets the work averages (a benchmark that wants
  // each text cold, as for a grammar just compiled).
  void forget();

  // What the matchers' work has cost on average (EngineLimits' units): a
  // mask, a deferred walk, and the crossings after a node, per LR state.
  // The memo is asked only where that is worth a lookup. A matcher starts
  // from what the last ones left here, so that a request's first masks are
  // asked too, instead of waiting for its own averages to grow (Python's
  // first mask, 350-450 µs, was made anew for every request).
  struct WorkAverages {
    int64_t mask = 0, walk = 0;
    std::vector<int64_t> cross_by_state;
  };
  WorkAverages work_averages() const;
  void keep_work_averages(const WorkAverages& averages);

  struct Stats {
    uint64_t hits = 0, misses = 0, masks = 0, restarts = 0;
    uint64_t mask_bytes = 0;  // what the masks kept take
  };
  Stats stats() const;
  void count_lookup(bool hit) const { (hit ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed); }

 private:
  // Where a mask is: dense (mask_words_ words) or sparse ((index, word)
  // pairs, `size` words in all), the sparse pairs ORed over `base` where
  // there is one.
  struct Kept {
    uint32_t chunk = 0, offset = 0, size = 0;
    bool sparse = false;
    const uint32_t* base = nullptr;
  };
  // The base that leaves the fewest words of `mask` outside it (null: none
  // is inside the mask), and how many.
  std::pair<const uint32_t*, uint32_t> best_base(std::span<const uint32_t> mask,
                                                 std::span<const uint32_t* const> bases) const;
  bool or_into(uint32_t entry, std::span<uint32_t> words) const;
  void clear();
  uint32_t* room_for(size_t words, Kept& kept);

  size_t mask_words_;
  size_t chunk_words_;
  size_t max_words_ = 0;    // words of masks kept before the memo starts again
  mutable std::shared_mutex mutex_;
  // Answers: a mask's number in kept_. The table grows with the masks
  // kept, its doublings spread over the inserts (support/path_trie.h): a
  // whole rehash once cost a C mask 250 µs, and a table of the whole
  // budget from the start cost a fault per entry of the first masks kept.
  PathTrie trie_{0};
  std::vector<Kept> kept_;
  std::vector<std::unique_ptr<uint32_t[]>> chunks_;  // chunk_words_ each; filled in order
  size_t chunk_at_ = 0, chunk_fill_ = 0, words_used_ = 0;
  uint64_t restarts_ = 0;
  mutable std::atomic<uint64_t> hits_{0}, misses_{0};
  mutable std::mutex averages_mutex_;  // apart from mutex_: lookups never wait for it
  WorkAverages averages_;
};

}  // namespace cgram

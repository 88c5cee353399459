// The grammar's memo of masks (compiled/mask_memo.h): a trie of paths where
// the first mask met on the way is the one, bounded, shared by threads.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "mask_memo.h"

using namespace cgram;

namespace {
// The mask for a path, as the engine looks it up: symbol by symbol, the
// first kept mask on the way.
std::vector<uint32_t> look_up(const MaskMemo& memo, const std::vector<uint32_t>& path, size_t words = 0) {
  const MaskMemo::Reader reader = memo.read();
  uint32_t entry = MaskMemo::kRoot;
  for (uint32_t symbol : path) {
    if ((entry = reader.child(entry, symbol)) == MaskMemo::kNone) return {};
    std::vector<uint32_t> mask(words ? words : 2, 0u);
    if (reader.or_into(entry, mask)) return mask;
  }
  return {};
}
}  // namespace

TEST_CASE("mask memo: a mask holds for every path that agrees on the symbols it was kept under", "[memo-unit]") {
  MaskMemo memo(2, 1 << 20);
  REQUIRE(memo.enabled());
  memo.insert(std::vector<uint32_t>{1, 7, 3}, std::vector<uint32_t>{0xF0, 1});
  memo.insert(std::vector<uint32_t>{1, 7, 4}, std::vector<uint32_t>{0x0F, 2});
  memo.insert(std::vector<uint32_t>{2, 9}, std::vector<uint32_t>{5, 5});
  CHECK(look_up(memo, {1, 7, 3, 100}) == std::vector<uint32_t>{0xF0, 1});
  CHECK(look_up(memo, {1, 7, 4}) == std::vector<uint32_t>{0x0F, 2});
  CHECK(look_up(memo, {1, 7, 5}).empty());  // never kept below 7
  CHECK(look_up(memo, {1, 7}).empty());     // the mask lies deeper
  CHECK(look_up(memo, {2, 9, 1}) == std::vector<uint32_t>{5, 5});
  // Kept twice (two threads recorded the same mask): the first stays.
  memo.insert(std::vector<uint32_t>{2, 9}, std::vector<uint32_t>{6, 6});
  CHECK(look_up(memo, {2, 9}) == std::vector<uint32_t>{5, 5});
  CHECK(memo.stats().masks == 3);
  // A mask of another size is not kept.
  memo.insert(std::vector<uint32_t>{3}, std::vector<uint32_t>{1, 2, 3});
  CHECK(look_up(memo, {3}).empty());
  memo.forget();
  CHECK(look_up(memo, {1, 7, 3}).empty());
  CHECK(memo.stats().masks == 0);
}

TEST_CASE("mask memo: past its budget it starts again empty; a budget of 0 turns it off", "[memo-unit]") {
  // Room for two dense masks of 1,000 words (the trie takes a seventh of the budget).
  MaskMemo memo(1000, 9400);
  for (uint32_t i = 0; i < 5; ++i) memo.insert(std::vector<uint32_t>{i}, std::vector<uint32_t>(1000, i + 1));
  const MaskMemo::Stats stats = memo.stats();
  CHECK(stats.masks == 1);
  CHECK(stats.restarts == 2);
  CHECK(look_up(memo, {4}, 1000) == std::vector<uint32_t>(1000, 5));  // the last one kept is there
  CHECK(look_up(memo, {0}, 1000).empty());

  MaskMemo off(1000, 0);
  CHECK_FALSE(off.enabled());
  off.insert(std::vector<uint32_t>{1}, std::vector<uint32_t>(1000, 1));
  CHECK(look_up(off, {1}).empty());
}

TEST_CASE("mask memo: the work averages a matcher leaves outlive budget restarts, not forget()", "[memo-unit]") {
  MaskMemo memo(1000, 9400);
  CHECK(memo.work_averages().mask == 0);
  memo.keep_work_averages({120, 70, {1, 2, 3}});
  for (uint32_t i = 0; i < 5; ++i) memo.insert(std::vector<uint32_t>{i}, std::vector<uint32_t>(1000, i + 1));
  REQUIRE(memo.stats().restarts > 0);  // a cache starting again keeps what the work costs
  const MaskMemo::WorkAverages kept = memo.work_averages();
  CHECK(kept.mask == 120);
  CHECK(kept.walk == 70);
  CHECK(kept.cross_by_state == std::vector<int64_t>{1, 2, 3});
  memo.forget();  // as for a grammar just compiled
  CHECK(memo.work_averages().mask == 0);
  CHECK(memo.work_averages().cross_by_state.empty());
}

TEST_CASE("mask memo: a mask with few words set is kept as pairs, and ORs the same", "[memo-unit]") {
  MaskMemo memo(1000, 1 << 20);
  std::vector<uint32_t> sparse(1000, 0u), dense(1000, 0xFFFFu);
  sparse[0] = 1, sparse[500] = 0x80000000u, sparse[999] = 7;
  memo.insert(std::vector<uint32_t>{1}, sparse);
  CHECK(memo.stats().mask_bytes == 3 * 2 * 4);
  memo.insert(std::vector<uint32_t>{2}, dense);
  CHECK(memo.stats().mask_bytes == 3 * 2 * 4 + 1000 * 4);
  CHECK(look_up(memo, {1}, 1000) == sparse);
  CHECK(look_up(memo, {2}, 1000) == dense);
  // ORed into words already set, not copied over them.
  const MaskMemo::Reader reader = memo.read();
  std::vector<uint32_t> words(1000, 0u);
  words[1] = 2;
  REQUIRE(reader.or_into(reader.child(MaskMemo::kRoot, 1), words));
  CHECK(words[0] == 1);
  CHECK(words[1] == 2);
  CHECK(words[500] == 0x80000000u);
}

TEST_CASE("mask memo: threads that look up and keep at once each see whole masks", "[memo-unit]") {
  // Small budget: the memo restarts often while others read it.
  constexpr size_t kWords = 64;
  MaskMemo memo(kWords, 12000);  // about 40 dense masks
  std::vector<std::thread> threads;
  std::atomic<int> torn{0};
  for (uint32_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 3000; ++i) {
        const uint32_t key = (i * 7 + t) % 200;
        const std::vector<uint32_t> path{key % 5, key, key + 1};
        if (i % 3 == 0) memo.insert(path, std::vector<uint32_t>(kWords, key));
        std::vector<uint32_t> got = look_up(memo, path, kWords);
        // Either not there, or exactly the mask kept for this path.
        if (!got.empty() && got != std::vector<uint32_t>(kWords, key)) ++torn;
      }
    });
  for (std::thread& th : threads) th.join();
  CHECK(torn == 0);
  CHECK(memo.stats().restarts > 0);
}

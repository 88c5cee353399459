// The memo of answers by stack states (engine/stack_memo.h): a trie from the
// top state down, where the first answer met on the way is the one.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <vector>

#include "path_trie.h"
#include "stack_memo.h"

using namespace cgram;

namespace {
// The answer for a stack given top first, as the engine looks it up.
uint32_t look_up(const StackMemo& memo, const std::vector<uint32_t>& stack) {
  uint32_t entry = StackMemo::kRoot;
  for (uint32_t state : stack) {
    entry = memo.child(entry, state);
    if (entry == StackMemo::kNone) return StackMemo::kNone;
    if (memo.answer(entry) != StackMemo::kNone) return memo.answer(entry);
  }
  return StackMemo::kNone;
}
}  // namespace

TEST_CASE("stack memo: an answer holds for every stack that agrees on the states it read", "[engine-unit]") {
  StackMemo memo;
  memo.insert(std::vector<uint32_t>{7, 3}, 1);   // read the top and one below
  memo.insert(std::vector<uint32_t>{7, 4}, 2);   // same top, another state below
  memo.insert(std::vector<uint32_t>{9}, 3);      // read the top only
  memo.insert(std::vector<uint32_t>{8, StackMemo::kBottom}, 4);  // read past the bottom
  CHECK(look_up(memo, {7, 3, 100, 5}) == 1);
  CHECK(look_up(memo, {7, 4}) == 2);
  CHECK(look_up(memo, {7, 5}) == StackMemo::kNone);  // never seen below 7
  CHECK(look_up(memo, {7}) == StackMemo::kNone);     // the answer lies deeper
  CHECK(look_up(memo, {9, 1, 2}) == 3);
  CHECK(look_up(memo, {8, StackMemo::kBottom}) == 4);
  CHECK(look_up(memo, {8, 1}) == StackMemo::kNone);  // a deeper stack is another stack
  CHECK(memo.entries() == 6);
}

TEST_CASE("stack memo: past its bound it starts again empty", "[engine-unit]") {
  StackMemo memo(4);
  memo.insert(std::vector<uint32_t>{1, 2}, 10);
  memo.insert(std::vector<uint32_t>{1, 3}, 11);
  CHECK(memo.entries() == 3);
  memo.insert(std::vector<uint32_t>{5, 6}, 12);  // 3 + 2 > 4: cleared first
  CHECK(memo.entries() == 2);
  CHECK(look_up(memo, {1, 2}) == StackMemo::kNone);
  CHECK(look_up(memo, {5, 6}) == 12);
}

TEST_CASE("path trie: entries stay found while the table doubles in steps, and in copies made mid-way",
          "[engine-unit]") {
  // A reference map from each path prefix to its entry, against the trie as
  // it grows from one page through many doublings: during each doubling a
  // lookup reads the next table and the old one, and a copy taken then must
  // hold every entry once.
  std::mt19937 rng(7);
  PathTrie trie(size_t{1} << 20);
  std::map<std::vector<uint32_t>, uint32_t> made;  // prefix -> entry
  std::vector<std::vector<uint32_t>> paths;
  const auto check_all = [&](const PathTrie& t) {
    for (const auto& [prefix, entry] : made) {
      uint32_t e = PathTrie::kRoot;
      for (uint32_t s : prefix) e = t.child(e, s);
      if (e != entry) FAIL("prefix of length " << prefix.size() << " found as " << e << ", made as " << entry);
    }
  };
  size_t checks = 0;
  for (int i = 0; i < 6000; ++i) {
    std::vector<uint32_t> path;
    // Share prefixes with earlier paths now and then, as memo keys do.
    if (!paths.empty() && rng() % 2) {
      const auto& base = paths[rng() % paths.size()];
      path.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(rng() % (base.size() + 1)));
    }
    for (size_t n = 1 + rng() % 12; n > 0; --n) path.push_back(rng() % 50);
    REQUIRE(trie.fits(path.size()));
    const uint32_t end = trie.make_path(path);
    trie.set_answer(end, static_cast<uint32_t>(i));
    for (size_t k = 1; k <= path.size(); ++k) {
      const std::vector<uint32_t> prefix(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(k));
      const auto [at, fresh] = made.emplace(prefix, static_cast<uint32_t>(made.size()));
      if (k == path.size()) CHECK(at->second == end);
      (void)fresh;
    }
    paths.push_back(path);
    CHECK(trie.entries() == made.size());
    if (i % 500 == 250) {  // some of these fall inside a doubling
      check_all(trie);
      const PathTrie copy(trie);
      check_all(copy);
      CHECK(copy.entries() == trie.entries());
      ++checks;
    }
  }
  check_all(trie);
  CHECK(checks == 12);
  trie.clear();
  CHECK(trie.entries() == 0);
  CHECK(trie.child(PathTrie::kRoot, paths[0][0]) == PathTrie::kNone);
  const uint32_t again = trie.make_path(paths[0]);
  CHECK(trie.answer(again) == PathTrie::kNone);
  CHECK(trie.entries() == paths[0].size());
}

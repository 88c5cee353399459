// The memo of answers by stack states (engine/stack_memo.h): a trie from the
// top state down, where the first answer met on the way is the one.
#include <catch2/catch.hpp>

#include <vector>

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

// The engine's memo of lexeme ends by the stack states they read
// (engine/end_memo.h) on its own: a delta found by following its path,
// equal deltas kept once, and a bound past which it starts again.
#include <catch2/catch.hpp>

#include <vector>

#include "end_memo.h"

using namespace cgram;

namespace {
// The delta kept under `path` (the terminal, then states top first), if a
// walk down that path meets one.
const EndMemo::Delta* end_memo_lookup(const EndMemo& memo, const std::vector<uint32_t>& path) {
  uint32_t entry = StackMemo::kRoot;
  for (uint32_t symbol : path) {
    entry = memo.child(entry, symbol);
    if (entry == StackMemo::kNone) return nullptr;
    if (const uint32_t id = memo.answer(entry); id != StackMemo::kNone) return &memo.delta(id);
  }
  return nullptr;
}
}  // namespace

TEST_CASE("end memo: a delta found down its path, not above it, not under another terminal", "[engine-unit]") {
  EndMemo memo;
  const EndMemo::Delta pop_two{2, {7, 9}};
  memo.insert(std::vector<uint32_t>{4, 10, 11, 12}, pop_two);  // terminal 4, states 10, 11, 12 read
  const EndMemo::Delta* found = end_memo_lookup(memo, {4, 10, 11, 12, 99});
  REQUIRE(found != nullptr);
  CHECK(*found == pop_two);
  CHECK(end_memo_lookup(memo, {4, 10, 11}) == nullptr);      // a stack that agrees only on fewer levels
  CHECK(end_memo_lookup(memo, {4, 10, 13, 12}) == nullptr);  // another state read
  CHECK(end_memo_lookup(memo, {5, 10, 11, 12}) == nullptr);  // another terminal
  CHECK(end_memo_lookup(memo, {4, 10, 11, StackMemo::kBottom}) == nullptr);
}

TEST_CASE("end memo: equal deltas kept once; past its bound it starts again", "[engine-unit]") {
  EndMemo memo;
  const EndMemo::Delta shift_only{0, {3}};
  memo.insert(std::vector<uint32_t>{1, 20}, shift_only);
  memo.insert(std::vector<uint32_t>{2, 21, StackMemo::kBottom}, shift_only);
  CHECK(memo.delta_count() == 1);
  REQUIRE(end_memo_lookup(memo, {2, 21, StackMemo::kBottom}) != nullptr);
  CHECK(*end_memo_lookup(memo, {1, 20}) == shift_only);
  for (uint32_t n = 0; n < EndMemo::kMaxDeltas; ++n) memo.insert(std::vector<uint32_t>{3, n}, EndMemo::Delta{1, {n}});
  CHECK(memo.delta_count() <= EndMemo::kMaxDeltas);
  CHECK(end_memo_lookup(memo, {1, 20}) == nullptr);  // dropped when it started again
  const EndMemo::Delta* last = end_memo_lookup(memo, {3, EndMemo::kMaxDeltas - 1});
  REQUIRE(last != nullptr);
  CHECK(last->pushed == std::vector<uint32_t>{EndMemo::kMaxDeltas - 1});
}

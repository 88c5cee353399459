// Per-node marks cleared by a new pass (engine/node_marks.h): a pass sees
// none of the last one's marks, new nodes start unmarked, and a wrap of the
// pass counter clears every mark instead of letting an old one match.
#include <catch2/catch.hpp>

#include <cstdint>

#include "node_marks.h"

using namespace cgram;

TEST_CASE("node marks: a new pass sees no mark of the last, and a node is marked once per pass", "[engine-unit]") {
  NodeMarks<> marks;
  marks.cover(4);
  const uint32_t first = marks.next_pass();
  CHECK(marks.mark(2, first));
  CHECK_FALSE(marks.mark(2, first));
  CHECK(marks.mark(3, first));
  const uint32_t second = marks.next_pass();
  CHECK(second != first);
  CHECK(marks.mark(2, second));
  marks.cover(8);  // nodes made since: unmarked, the old ones keep theirs
  CHECK(marks[7] == 0);
  CHECK(marks[2] == second);
  CHECK(marks[3] == first);
}

TEST_CASE("node marks: when the counter wraps, every mark is cleared", "[engine-unit]") {
  NodeMarks<> marks(UINT32_MAX - 2);
  marks.cover(2);
  CHECK(marks.mark(0, 1));  // a mark left by pass 1, 2^32 passes ago
  CHECK(marks.next_pass() == UINT32_MAX - 1);
  CHECK(marks.next_pass() == UINT32_MAX);
  CHECK(marks.mark(1, UINT32_MAX));
  const uint32_t wrapped = marks.next_pass();
  CHECK(wrapped == 1);
  CHECK(marks[0] == 0);  // node 0's mark of pass 1 did not survive to match the new pass 1
  CHECK(marks[1] == 0);
  CHECK(marks.mark(0, wrapped));
}

TEST_CASE("node marks: a wide mark keeps the pass in its high half and the caller's bits below", "[engine-unit]") {
  NodeMarks<uint64_t> scope;
  scope.cover(3);
  const uint32_t closure = scope.next_pass();
  uint64_t& m = scope[1];
  if (m >> 32 != closure) m = uint64_t{closure} << 32;
  m |= uint64_t{1} << 5;
  CHECK(scope[1] >> 32 == closure);
  CHECK((scope[1] & (uint64_t{1} << 5)) != 0);
  const uint32_t next = scope.next_pass();
  CHECK(scope[1] >> 32 != next);  // stale: the next closure starts it afresh
}

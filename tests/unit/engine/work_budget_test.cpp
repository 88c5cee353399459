// The engine's work budgets on their own (engine/work_budget.h): the limit
// of one call, the sequence's allowance amortised over the bytes it has
// accepted, a rollback taking back what undone bytes granted, and the
// message that names the bound passed.
#include <catch2/catch.hpp>

#include "work_budget.h"

using namespace cgram;

namespace {
WorkBudget::Bounds bounds(size_t per_call, size_t per_byte, size_t slack) { return {per_call, per_byte, slack}; }
}  // namespace

TEST_CASE("work budget: one call may do max_work_per_call, and the next starts afresh", "[engine-unit]") {
  WorkBudget b(bounds(100, 0, 0));
  b.start_sequence();  // max_work_per_byte 0: no bound over the sequence
  b.begin_call();
  b.charge(60);
  b.charge(40);
  CHECK_FALSE(b.exhausted());  // at the limit, not past it
  CHECK(b.done() == 100);
  b.begin_call();
  CHECK(b.done() == 0);
  b.charge(100);
  CHECK_FALSE(b.exhausted());
  CHECK(b.peak() == 100);
  b.charge(1);
  REQUIRE(b.exhausted());
  CHECK(b.why() ==
        "the parser did more than 100 steps of work for one token: the grammar is too ambiguous here "
        "(EngineLimits::max_work_per_call)");
  CHECK(b.peak() == 101);
  b.clear_exhausted();
  CHECK_FALSE(b.exhausted());
}

TEST_CASE("work budget: a sequence may spend its slack and max_work_per_byte more per byte accepted",
          "[engine-unit]") {
  WorkBudget b(bounds(1000, 10, 50));
  b.start_sequence();
  b.begin_call();
  b.charge(50);  // the slack, spent
  b.begin_call();
  CHECK_FALSE(b.exhausted());
  b.charge(1);  // nothing left, although the call's own limit is far
  REQUIRE(b.exhausted());
  CHECK(b.why() ==
        "the parser did more than 50 steps of work over this sequence, the budget of the text it has read (50 + 10 "
        "per byte, EngineLimits::sequence_work_slack and max_work_per_byte): the grammar is too ambiguous here, and "
        "its work grows with the text");
  // Three bytes accepted: 30 more for the calls after them.
  b.clear_exhausted();
  b.start_sequence();
  b.grant_bytes(3);
  CHECK(b.allowance() == 80);
  b.begin_call();
  b.charge(80);
  CHECK_FALSE(b.exhausted());
  b.begin_call();
  b.charge(1);
  CHECK(b.exhausted());
}

TEST_CASE("work budget: a rollback takes back the bytes' grant, never the work done", "[engine-unit]") {
  WorkBudget b(bounds(1000, 10, 0));
  b.start_sequence();
  const size_t before = b.allowance();
  b.grant_bytes(5);
  b.begin_call();
  b.charge(40);
  b.restore_allowance(before);  // the five bytes undone
  b.begin_call();               // the 40 stay spent: the allowance is 0
  b.charge(1);
  CHECK(b.exhausted());
}

TEST_CASE("work budget: huge grants saturate, the first reason given stays, a caller's limit replaces the call's",
          "[engine-unit]") {
  WorkBudget b(bounds(100, size_t{1} << 40, 0));
  b.start_sequence();
  b.grant_bytes(size_t{1} << 40);  // past SIZE_MAX: saturates, does not wrap
  CHECK(b.allowance() == SIZE_MAX - 1);
  b.exhaust("more than 2 readings of the text after one token (EngineLimits::max_heads)");
  b.charge(1000);
  CHECK(b.why() == "more than 2 readings of the text after one token (EngineLimits::max_heads)");
  b.clear_exhausted();
  b.set_call_limit(5000);  // cgram match's end of text: the whole text's budget
  b.begin_call();
  b.charge(4000);
  CHECK_FALSE(b.exhausted());
  b.charge(1001);
  CHECK(b.exhausted());
}

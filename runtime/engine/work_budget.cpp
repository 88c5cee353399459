#include "work_budget.h"

#include <algorithm>

#include <fmt/format.h>

namespace cgram {

void WorkBudget::begin_call() {
  peak_ = std::max(peak_, done_);
  spent_ += done_;
  done_ = 0;
  const size_t left = allowance_ > spent_ ? allowance_ - spent_ : 0;
  call_limit_ = std::min(bounds_.max_work_per_call, left);
}

void WorkBudget::start_sequence() {
  spent_ = 0;
  done_ = 0;
  allowance_ = bounds_.max_work_per_byte ? bounds_.sequence_work_slack : SIZE_MAX;
}

void WorkBudget::grant_bytes(size_t bytes) {
  if (allowance_ == SIZE_MAX) return;
  const size_t per_byte = std::max<size_t>(bounds_.max_work_per_byte, 1);
  const size_t more = bytes > SIZE_MAX / per_byte ? SIZE_MAX : bytes * per_byte;
  allowance_ = more > SIZE_MAX - 1 - allowance_ ? SIZE_MAX - 1 : allowance_ + more;
}

void WorkBudget::exhaust_work() {
  if (call_limit_ < bounds_.max_work_per_call) {
    exhaust(fmt::format("the parser did more than {} steps of work over this sequence, the budget of the text it "
                        "has read ({} + {} per byte, EngineLimits::sequence_work_slack and max_work_per_byte): the "
                        "grammar is too ambiguous here, and its work grows with the text",
                        allowance_, bounds_.sequence_work_slack, bounds_.max_work_per_byte));
    return;
  }
  exhaust(fmt::format("the parser did more than {} steps of work for one token: the grammar is too ambiguous "
                      "here (EngineLimits::max_work_per_call)",
                      bounds_.max_work_per_call));
}

}  // namespace cgram

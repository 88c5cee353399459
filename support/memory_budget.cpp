#include "memory_budget.h"

#include <fmt/format.h>

namespace cgram {
namespace {
thread_local MemoryBudget* current_budget = nullptr;
thread_local const char* current_stage = nullptr;
thread_local const char* unwound_stage = nullptr;  // the first stage an exception left
}  // namespace

std::string describe_bytes(size_t bytes) {
  if (bytes >= (size_t{1} << 30) && bytes % (size_t{1} << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (size_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  return fmt::format("{} bytes", bytes);
}

std::string MemoryLimitReached::message(const char* option) const {
  return fmt::format("compiling this grammar needs more than {} of memory (the limit, {}); it was reached while {}",
                     describe_bytes(limit_), option, stage_);
}

void MemoryBudget::charge(size_t bytes, const char* stage) {
  used_ = bytes > SIZE_MAX - used_ ? SIZE_MAX : used_ + bytes;
  if (used_ > limit_) throw MemoryLimitReached(limit_, stage);
}

MemoryBudgetScope::MemoryBudgetScope(MemoryBudget& budget) : previous_(current_budget) {
  current_budget = &budget;
  unwound_stage = nullptr;
}
MemoryBudgetScope::~MemoryBudgetScope() { current_budget = previous_; }

MemoryStage::MemoryStage(const char* name)
    : previous_(current_stage), uncaught_(std::uncaught_exceptions()) {
  current_stage = name;
}
MemoryStage::~MemoryStage() {
  if (std::uncaught_exceptions() > uncaught_ && !unwound_stage) unwound_stage = current_stage;
  current_stage = previous_;
}

const char* failed_memory_stage() { return unwound_stage ? unwound_stage : "compiling"; }

void charge_memory(size_t bytes) {
  if (current_budget) current_budget->charge(bytes, current_stage ? current_stage : "compiling");
}

}  // namespace cgram

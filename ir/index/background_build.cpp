#include "background_build.h"

#include <unistd.h>

#include <exception>
#include <system_error>

#include "memory_budget.h"
#include "token_index.h"

namespace cgram {

BackgroundIndexBuild::~BackgroundIndexBuild() {
  stop_.store(true, std::memory_order_release);
  wait();
}

void BackgroundIndexBuild::start(const TokenIndex& index, size_t memory_limit) {
  if (started() || index.complete()) return;
  std::lock_guard lock(mutex_);
  if (started()) return;
  try {
    thread_ = std::make_unique<std::thread>([this, &index, memory_limit] { run(index, memory_limit); });
    owner_pid_ = static_cast<long>(getpid());
  } catch (const std::system_error&) {
    stopped_early_.store(true, std::memory_order_release);  // no thread: the masks build the entries
  }
  started_.store(true, std::memory_order_release);
}

void BackgroundIndexBuild::wait() {
  std::lock_guard lock(mutex_);
  if (!thread_ || !thread_->joinable()) return;
  if (static_cast<long>(getpid()) != owner_pid_) {
    // A forked child: the thread is the parent's, and joining it here is
    // undefined. Its handle is dropped unjoined (a std::thread destroyed
    // joinable would end the process).
    static_cast<void>(thread_.release());
    return;
  }
  thread_->join();
}

void BackgroundIndexBuild::run(const TokenIndex& index, size_t memory_limit) {
  // The entries are charged as an eager compile charges them, against a
  // budget of their own: what the masks built already is not counted.
  MemoryBudget budget(memory_limit);
  MemoryBudgetScope scope(budget);
  MemoryStage stage("building the token index");
  try {
    index.build_all(&stop_);
  } catch (const std::exception&) {  // the budget (MemoryLimitReached) or no memory: the masks build what is left
    stopped_early_.store(true, std::memory_order_release);
  }
  if (stop_.load(std::memory_order_acquire) && !index.complete()) stopped_early_.store(true, std::memory_order_release);
}

}  // namespace cgram

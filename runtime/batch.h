#pragma once
// Masks for many matchers at once, on a pool of threads. Each matcher is
// touched by one thread only; the compiled grammar they share is immutable
// (its index fills itself under a per-entry once-flag).
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "matcher.h"

namespace cgram {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads = std::thread::hardware_concurrency());
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs job(i) for i in [0, count) and waits for all of them.
  void run(size_t count, const std::function<void(size_t)>& job);
  size_t size() const { return workers_.size() + 1; }

 private:
  void work();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t count_ = 0, next_ = 0, finished_ = 0, generation_ = 0;
  bool stop_ = false;
};

// Row i of `masks` (mask_words() words each) gets matchers[i]'s mask.
// False, with nothing written, when `masks` is shorter than one row per
// matcher, a matcher is null or appears twice, or the matchers' rows differ
// in width; false
// too when some matcher has an error (its row is then all clear).
bool fill_masks(std::span<Matcher* const> matchers, std::span<uint32_t> masks, ThreadPool& pool);

}  // namespace cgram

#pragma once
// Masks for many matchers at once, on a pool of threads. Each matcher is
// touched by one thread only; the compiled grammar they share is immutable
// (its index fills itself under a per-entry once-flag).
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <span>
#include <thread>
#include <vector>

#include "error.h"
#include "matcher.h"

namespace cgram {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads = std::thread::hardware_concurrency());
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs job(i) for i in [0, count) and waits for all of them. An
  // exception in a job is caught on its thread (where it would end the
  // process), and the first is rethrown here once every job has ended.
  void run(size_t count, const std::function<void(size_t)>& job);
  size_t size() const { return workers_.size() + 1; }

 private:
  void work();
  static std::exception_ptr run_job(const std::function<void(size_t)>& job, size_t i);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t count_ = 0, next_ = 0, finished_ = 0, generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;  // the first job's exception in the current run
};

// Row i of `masks` (mask_words() words each) gets matchers[i]'s mask.
// False, with nothing written, when `masks` is shorter than one row per
// matcher, a matcher is null or appears twice, or the matchers' rows differ
// in width; false
// too when some matcher has an error (its row is then all clear).
bool fill_masks(std::span<Matcher* const> matchers, std::span<uint32_t> masks, ThreadPool& pool);

// A server's bitmask: `rows` rows of `row_words` words, row after row (the
// (batch, ceil(model vocabulary / 32)) int32 tensor vLLM, SGLang and
// TensorRT-LLM allocate). row_words follows the model's logits, which may
// be wider than the tokenizer's ids: words past a matcher's mask are cleared.
struct Bitmask {
  std::span<uint32_t> words;
  size_t row_words = 0;
  size_t rows() const { return row_words ? words.size() / row_words : 0; }
  std::span<uint32_t> row(size_t i) const { return words.subspan(i * row_words, row_words); }
};

// One matcher's row in a batch fill.
struct MatcherRow {
  Matcher* matcher = nullptr;
  size_t row = 0;
};

// What a batch fill checks of one matcher of any kind (calls/tool_calls.h
// has another): which it is, its mask's words, and the row it writes.
struct RowClaim {
  const void* matcher = nullptr;
  size_t mask_words = 0;
  size_t row = 0;
};
// The checks fill_bitmask makes before any work (below); the error says
// which claim fails.
Result<void> check_bitmask_rows(std::span<const RowClaim> claims, const Bitmask& bitmask);

// Each pair's matcher fills its row of `bitmask` (Matcher::fill_row), on the
// pool. Everything is checked first, and nothing is written when a check
// fails: a null matcher, one given twice or a row given twice, a row past
// the bitmask, rows narrower than a matcher's mask. The error says which.
// A matcher stopped by a limit leaves its row clear; that is not an error
// here (its error() says why). An exception in a fill (out of memory) is
// rethrown on the calling thread (ThreadPool::run).
Result<void> fill_bitmask(std::span<const MatcherRow> pairs, const Bitmask& bitmask, ThreadPool& pool);

}  // namespace cgram

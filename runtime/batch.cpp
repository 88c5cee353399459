#include "batch.h"

#include <algorithm>
#include <system_error>

namespace cgram {

ThreadPool::ThreadPool(size_t threads) {
  // The calling thread is one of them. When the system refuses a thread,
  // the pool makes do with those it has (size() says how many).
  for (size_t i = 1; i < std::max<size_t>(threads, 1); ++i) {
    try {
      workers_.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::work() {
  size_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    while (next_ < count_) {
      size_t i = next_++;
      lock.unlock();
      (*job_)(i);
      lock.lock();
      if (++finished_ == count_) done_.notify_all();
    }
  }
}

void ThreadPool::run(size_t count, const std::function<void(size_t)>& job) {
  if (count == 0) return;
  std::unique_lock lock(mutex_);
  job_ = &job;
  count_ = count;
  next_ = 0;
  finished_ = 0;
  ++generation_;
  wake_.notify_all();
  // The calling thread works too.
  while (next_ < count_) {
    size_t i = next_++;
    lock.unlock();
    job(i);
    lock.lock();
    ++finished_;
  }
  done_.wait(lock, [&] { return finished_ == count_; });
  job_ = nullptr;
  count_ = 0;
}

bool fill_masks(std::span<Matcher* const> matchers, std::span<uint32_t> masks, ThreadPool& pool) {
  if (matchers.empty()) return true;
  if (!matchers[0]) return false;
  const size_t words = matchers[0]->mask_words();
  for (const Matcher* m : matchers)
    if (!m || m->mask_words() != words) return false;
  if (words != 0 && masks.size() / words < matchers.size()) return false;
  // Two threads must never work on one matcher.
  std::vector<const Matcher*> sorted(matchers.begin(), matchers.end());
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return false;
  std::vector<char> filled(matchers.size(), 0);
  pool.run(matchers.size(), [&](size_t i) { filled[i] = matchers[i]->fill_mask(masks.subspan(i * words, words)); });
  return std::all_of(filled.begin(), filled.end(), [](char ok) { return ok != 0; });
}

}  // namespace cgram

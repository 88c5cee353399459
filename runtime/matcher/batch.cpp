#include "batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <system_error>
#include <utility>

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
      std::exception_ptr failed = run_job(*job_, i);
      lock.lock();
      if (failed && !error_) error_ = failed;
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
    std::exception_ptr failed = run_job(job, i);
    lock.lock();
    if (failed && !error_) error_ = failed;
    ++finished_;
  }
  done_.wait(lock, [&] { return finished_ == count_; });
  job_ = nullptr;
  count_ = 0;
  if (std::exception_ptr failed = std::exchange(error_, nullptr)) std::rethrow_exception(failed);
}

std::exception_ptr ThreadPool::run_job(const std::function<void(size_t)>& job, size_t i) {
  try {
    job(i);
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
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

Result<void> check_bitmask_rows(std::span<const RowClaim> claims, const Bitmask& bitmask) {
  auto misuse = [](std::string message) { return Error{ErrorCode::InvalidInput, std::move(message)}; };
  if (claims.empty()) return {};
  if (bitmask.row_words == 0) return misuse("the bitmask's rows have no words");
  if (bitmask.words.size() % bitmask.row_words != 0)
    return misuse(fmt::format("the bitmask has {} words, not a whole number of rows of {}", bitmask.words.size(),
                              bitmask.row_words));
  for (size_t i = 0; i < claims.size(); ++i) {
    const RowClaim& c = claims[i];
    if (!c.matcher) return misuse(fmt::format("matcher {} is null", i));
    if (c.row >= bitmask.rows())
      return misuse(fmt::format("row {} (pair {}) is outside the bitmask ({} rows)", c.row, i, bitmask.rows()));
    if (c.mask_words > bitmask.row_words)
      return misuse(fmt::format("pair {}: a row has {} words; the matcher's vocabulary needs {}", i, bitmask.row_words,
                                c.mask_words));
  }
  // Two threads must never work on one matcher, nor write one row.
  std::vector<const void*> matchers;
  std::vector<size_t> rows;
  for (const RowClaim& c : claims) matchers.push_back(c.matcher), rows.push_back(c.row);
  std::sort(matchers.begin(), matchers.end());
  if (std::adjacent_find(matchers.begin(), matchers.end()) != matchers.end()) return misuse("a matcher is given twice");
  std::sort(rows.begin(), rows.end());
  if (auto twice = std::adjacent_find(rows.begin(), rows.end()); twice != rows.end())
    return misuse(fmt::format("row {} is given twice", *twice));
  return {};
}

Result<void> fill_bitmask(std::span<const MatcherRow> pairs, const Bitmask& bitmask, ThreadPool& pool) {
  std::vector<RowClaim> claims;
  claims.reserve(pairs.size());
  for (const MatcherRow& p : pairs) claims.push_back({p.matcher, p.matcher ? p.matcher->mask_words() : 0, p.row});
  if (auto checked = check_bitmask_rows(claims, bitmask); !checked) return checked;
  pool.run(pairs.size(), [&](size_t i) { pairs[i].matcher->fill_row(bitmask.row(pairs[i].row)); });
  return {};
}

}  // namespace cgram

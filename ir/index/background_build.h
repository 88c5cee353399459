#pragma once
// The rest of a lazy token index, built off the mask path. A lazy index
// builds each lexer state's entry when a mask first meets it: on llama.cpp's
// JSON grammar that made the p99 mask 4x the eager index's, entry after
// entry met mid-document. Once a grammar has made its first mask (its
// request has paid for that), one thread per grammar builds every entry
// left, shared by all the grammar's matchers; a mask that meets an entry
// still being built waits for it, which is no longer than building it.
//
// The build is bounded by the compile's memory budget: past it, the build
// stops and the entries left are built by the masks, as before. Any failure
// (no thread, no memory) does the same: it changes speed, never a mask.
// Destroying the owner stops the build at its next entry and waits for it.
//
// fork(): a child forked while a build runs has no build thread, and may
// find an entry locked by it for ever. A process that forks after a
// grammar's first mask waits for its index first (CompiledGrammar::
// wait_for_index) or turns the build off (docs/LIMITS.md); a child never
// joins its parent's thread (its handle is left, not joined).
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>

namespace cgram {

class TokenIndex;

class BackgroundIndexBuild {
 public:
  BackgroundIndexBuild() = default;
  BackgroundIndexBuild(const BackgroundIndexBuild&) = delete;
  BackgroundIndexBuild& operator=(const BackgroundIndexBuild&) = delete;
  ~BackgroundIndexBuild();

  // Starts building `index`'s entries left, once (later calls return at
  // once); `memory_limit` bounds what the build may add.
  void start(const TokenIndex& index, size_t memory_limit);
  bool started() const { return started_.load(std::memory_order_acquire); }
  // Waits until the build has ended (every entry built, or stopped); at
  // once when none was started. For tests and for a caller that wants the
  // whole index before timing.
  void wait();
  // Whether the build stopped before it was done (the memory budget, no
  // thread), and the entries left are built by the masks.
  bool stopped_early() const { return stopped_early_.load(std::memory_order_acquire); }

 private:
  void run(const TokenIndex& index, size_t memory_limit);

  std::atomic<bool> started_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopped_early_{false};
  std::mutex mutex_;  // start and wait
  std::unique_ptr<std::thread> thread_;
  long owner_pid_ = 0;  // the process that started the thread
};

}  // namespace cgram

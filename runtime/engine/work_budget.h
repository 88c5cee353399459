#pragma once
// The engine's work, counted against its bounds (docs/LIMITS.md): units of
// work (stack nodes and edges made, reduction paths walked, readings
// carried over a byte) in one public call, and over a whole sequence,
// amortised by the bytes it has accepted. Once a bound is passed the budget
// is exhausted, with a message naming the bound; the engine then stops, and
// what the call made must not be used (the matcher rolls it back). One of
// the engine's parts (engine.h): the engine charges, this decides.
#include <cstddef>
#include <cstdint>
#include <string>

namespace cgram {

class WorkBudget {
 public:
  struct Bounds {
    size_t max_work_per_call = size_t{1} << 24;
    // Per byte accepted, and the slack before the first (0: no bound over
    // the sequence, only per call).
    size_t max_work_per_byte = size_t{1} << 15;
    size_t sequence_work_slack = size_t{1} << 24;
  };
  explicit WorkBudget(const Bounds& bounds) : bounds_(bounds) {}

  // Work done now; past the call's limit the budget is exhausted.
  void charge(size_t units) {
    done_ += units;
    if (done_ > call_limit_ && why_.empty()) exhaust_work();
  }
  // Every public call starts here: the last call's work is spent from the
  // sequence, and this call may do what is left, at most max_work_per_call.
  void begin_call();
  // The work of the current call so far.
  size_t done() const { return done_; }
  // The most work one call has done (how close a grammar comes to the limit).
  size_t peak() const { return peak_ > done_ ? peak_ : done_; }
  // A new sequence: its slack, and nothing spent.
  void start_sequence();
  // The bytes of an accepted token: max_work_per_byte more for each.
  void grant_bytes(size_t bytes);
  // What the sequence may spend in all (SIZE_MAX: no bound), for a rollback
  // to take back what the undone bytes granted; the work done stays spent.
  size_t allowance() const { return allowance_; }
  void restore_allowance(size_t allowance) { allowance_ = allowance; }
  // For a caller whose calls differ in size (cgram match gives the end of
  // the text the budget of the whole text, each byte that of one byte).
  void set_call_limit(size_t max_work_per_call) { bounds_.max_work_per_call = max_work_per_call; }

  bool exhausted() const { return !why_.empty(); }
  const std::string& why() const { return why_; }  // empty unless exhausted
  // Stops the engine for a reason of the caller's (another limit); the
  // first reason given stays.
  void exhaust(std::string why) {
    if (why_.empty()) why_ = std::move(why);
  }
  void clear_exhausted() { why_.clear(); }

 private:
  void exhaust_work();
  Bounds bounds_;
  size_t done_ = 0;                       // in the current call
  size_t peak_ = 0;                       // over the earlier calls
  size_t call_limit_ = size_t{1} << 24;   // max_work_per_call, or what the sequence has left
  size_t spent_ = 0;                      // by the earlier calls of this sequence
  size_t allowance_ = SIZE_MAX;           // slack + per byte × bytes accepted
  std::string why_;
};

}  // namespace cgram

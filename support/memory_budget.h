#pragma once
// One memory budget for a compile: grammar text, GBNF or JSON Schema →
// checked grammar → compiled grammar. The stages charge what they build
// (tokens and trees, automata, tables, translations, the token index) as
// they build it, so a hostile grammar is stopped where its memory goes,
// not after the process has run out. The temporaries of one step (one
// regex's subset construction, say) are bounded by that step's own limits
// (docs/LIMITS.md) and are not charged.
//
// The budget belongs to the thread that compiles: an entry point installs
// one with MemoryBudgetScope, the stages call charge_memory, and when the
// limit is passed charge_memory throws MemoryLimitReached, which the entry
// point (and only it) turns into an error value. Without a scope, charges
// cost nothing and never throw.
#include <cstddef>
#include <exception>
#include <string>

namespace cgram {

inline constexpr size_t kDefaultCompileMemoryBytes = size_t{1} << 30;  // 1 GiB

// "1 GiB", "256 MiB", "1234 bytes": for messages.
std::string describe_bytes(size_t bytes);

// Thrown by charge_memory inside the library; the entry points catch it.
class MemoryLimitReached : public std::exception {
 public:
  MemoryLimitReached(size_t limit, const char* stage) : limit_(limit), stage_(stage) {}
  const char* what() const noexcept override { return "the compile's memory budget is spent"; }
  size_t limit() const { return limit_; }
  const char* stage() const { return stage_; }
  // "compiling needs more than 1 GiB of memory (the limit) while lowering
  // terminals to automata; raise max_memory_bytes or simplify the grammar"
  std::string message(const char* option) const;

 private:
  size_t limit_;
  const char* stage_;
};

// What a compile has charged, and its limit.
class MemoryBudget {
 public:
  explicit MemoryBudget(size_t limit_bytes = kDefaultCompileMemoryBytes) : limit_(limit_bytes) {}
  size_t limit() const { return limit_; }
  size_t used() const { return used_; }
  // Adds `bytes`; throws MemoryLimitReached (naming `stage`) past the limit.
  void charge(size_t bytes, const char* stage);

 private:
  size_t limit_;
  size_t used_ = 0;
};

// Installs `budget` as this thread's budget until destroyed (the previous
// one, if any, comes back).
class MemoryBudgetScope {
 public:
  explicit MemoryBudgetScope(MemoryBudget& budget);
  ~MemoryBudgetScope();
  MemoryBudgetScope(const MemoryBudgetScope&) = delete;
  MemoryBudgetScope& operator=(const MemoryBudgetScope&) = delete;

 private:
  MemoryBudget* previous_;
};

// Names the stage that charges are made in, until destroyed ("parsing the
// grammar", "building the LR automaton"): the error says where the budget
// ran out.
class MemoryStage {
 public:
  explicit MemoryStage(const char* name);
  ~MemoryStage();
  MemoryStage(const MemoryStage&) = delete;
  MemoryStage& operator=(const MemoryStage&) = delete;

 private:
  const char* previous_;
  int uncaught_;  // exceptions in flight when the stage began
};

// Charges this thread's budget (nothing without one): throws
// MemoryLimitReached past its limit.
void charge_memory(size_t bytes);
// In a handler of std::bad_alloc: the innermost stage the exception left
// ("compiling" when it left none), since the budget's scope was installed.
const char* failed_memory_stage();

}  // namespace cgram

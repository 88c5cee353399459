#pragma once
// The one way from grammar text to a compiled grammar: parse (any format),
// compile for a vocabulary, and pick the tier that answers the matcher's
// lookups. The C API, Python, the command line and the server example all
// compile through a Compiler; nothing else strings the stages together.
//
// A Compiler may also cache and tier up in the background, as a long-running
// server wants: grammars are cached by their text, vocabulary and options
// (the whole text is in the key: a hash alone could be made to collide, and
// serve one client another's grammar); a grammar asked for with
// Tier::Background is served at once by the tables while its kernels are
// compiled by the JIT on the Compiler's own threads, and every matcher of
// that grammar switches to them when they are ready (masks are bit-identical
// before and after).
//
// The cache is bounded by bytes and evicts the least recently used grammar.
// Evicted grammars stay alive while matchers still hold them; their code is
// freed (resource tracker) when the last one goes. All calls are
// thread-safe.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "compiled_grammar.h"
#include "grammar.h"
#include "kernel_jit.h"

namespace cgram {

// Which code answers a compiled grammar's lookups (compiled/kernels.h).
enum class Tier {
  Table,       // the tables themselves
  Jit,         // kernels compiled by the JIT before compile() returns
  Background,  // the tables now, the JIT's kernels once a background thread has them
};
// "table", "jit" or "background"; nothing for another name.
std::optional<Tier> tier_named(std::string_view name);
const char* tier_name(Tier tier);

struct CompileRequest {
  std::string_view text;
  std::string_view filename = "grammar.cgram";  // for diagnostics
  ParseOptions parse;                           // format, start rule, schema layout, limits
  CompileOptions compile;                       // eager index, canonical, limits
  Tier tier = Tier::Table;
};

// Where the time went (milliseconds); zero for what a cached grammar skipped.
struct CompileTimes {
  double parse_ms = 0;
  double compile_ms = 0;  // lowering, tables, index (CompiledGrammar::compile)
  jit::KernelTimings jit;  // Tier::Jit: IR, optimisation, native code
  double jit_ms() const { return jit.ir_ms + jit.optimize_ms + jit.native_ms; }
};

struct CompileOutcome {
  enum class Failure { None, Grammar, Compile, Jit };
  std::shared_ptr<const CompiledGrammar> grammar;  // null on failure
  Failure failure = Failure::None;
  // Failure::Grammar: the rendered diagnostics; otherwise what went wrong
  // (a limit, the memory budget, the JIT).
  std::string message;
  // The kind of failure (Failure::Grammar: InvalidInput), for a caller that
  // maps it to its own status (the C API: CGRAM_ERROR_OUT_OF_MEMORY).
  ErrorCode code = ErrorCode::InvalidInput;
  // The grammar's diagnostics, warnings included (null for a grammar that
  // came in parsed), and the text they point into, kept alive with them.
  std::shared_ptr<const Diagnostics> diagnostics;
  std::shared_ptr<const SourceFile> source;
  CompileTimes times;
  bool ok() const { return grammar != nullptr; }
};

struct CompilerOptions {
  // Cache budget: tables, index and code of the grammars kept (0: no cache).
  size_t cache_bytes = 0;
  // Background JIT threads for Tier::Background (0: such grammars stay on
  // the table tier).
  size_t jit_threads = 0;
};

struct CompilerStats {
  size_t entries = 0, bytes = 0;
  size_t hits = 0, misses = 0, evictions = 0;
  size_t jit_compiled = 0, jit_failed = 0;
  double jit_ms_total = 0;
};

class Compiler {
 public:
  explicit Compiler(const CompilerOptions& options = {});
  ~Compiler();
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  // The compiled grammar, from the cache or compiled now. Never throws: out
  // of memory and every other failure come back in the outcome.
  CompileOutcome compile(const CompileRequest& request, const std::shared_ptr<const Vocabulary>& vocab);
  // The same for a grammar already parsed (Python's two-step API, a
  // benchmark that compiles one grammar many times); never cached.
  CompileOutcome compile(const std::shared_ptr<const Grammar>& grammar, const std::shared_ptr<const Vocabulary>& vocab,
                         const CompileOptions& options, Tier tier);
  // Waits until no background JIT compilation is queued or running.
  void wait_idle();
  CompilerStats stats() const;

  struct Entry;

 private:
  CompileOutcome compile_uncached(const CompileRequest& request, const std::shared_ptr<const Vocabulary>& vocab);
  // Uncached, and queued for the background JIT when it asks for it.
  CompileOutcome compile_apart(const CompileRequest& request, const std::shared_ptr<const Vocabulary>& vocab);
  CompileOutcome compile_parsed(const std::shared_ptr<const Grammar>& grammar,
                                const std::shared_ptr<const Vocabulary>& vocab, const CompileOptions& options,
                                Tier tier, CompileOutcome outcome);
  void queue_background(const std::shared_ptr<const CompiledGrammar>& grammar, const std::shared_ptr<Entry>& entry);
  void worker();
  void touch(const std::string* key, Entry& entry);
  void evict_locked();

  CompilerOptions options_;
  std::shared_ptr<jit::KernelJit> background_jit_;  // null without jit_threads (or when the JIT cannot start)
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_;
  std::list<const std::string*> lru_;  // the keys of entries_ (stable while listed), most recent first
  std::deque<std::pair<std::weak_ptr<const CompiledGrammar>, std::weak_ptr<Entry>>> queue_;
  size_t busy_ = 0;
  bool stop_ = false;
  CompilerStats stats_;
  std::vector<std::thread> workers_;
};

}  // namespace cgram

#pragma once
// The compile service of a long-running server: grammars arrive as text, are
// compiled once and cached by (grammar text hash, vocabulary fingerprint,
// options). A new grammar is served at once by the table tier; its kernels
// are compiled by the JIT on the service's own threads, and every matcher
// of that grammar switches to them when they are ready (tier-up; masks are
// bit-identical before and after).
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
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "compiled_grammar.h"
#include "kernel_jit.h"

namespace cgram::jit {

struct ServiceOptions {
  size_t max_bytes = size_t(512) << 20;  // cache budget: tables, index and code
  size_t compile_threads = 1;            // background JIT threads (0: no JIT tier)
  CompileOptions compile;                // for every grammar (eager index or not)
};

struct GrammarRequest {
  std::string_view text;
  std::string_view name = "<grammar>";  // for diagnostics
  std::string start = "start";
};

struct ServiceStats {
  size_t entries = 0, bytes = 0;
  size_t hits = 0, misses = 0, evictions = 0;
  size_t jit_compiled = 0, jit_failed = 0;
  double jit_ms_total = 0;
};

class CompileService {
 public:
  static std::variant<std::unique_ptr<CompileService>, JitError> create(const ServiceOptions& options = {});
  ~CompileService();
  CompileService(const CompileService&) = delete;
  CompileService& operator=(const CompileService&) = delete;

  // The compiled grammar, from the cache or compiled now. Grammar errors
  // come back as the rendered diagnostics.
  CompiledGrammar::Result get(const GrammarRequest& request, const std::shared_ptr<const Vocabulary>& vocab);
  // Waits until no JIT compilation is queued or running.
  void wait_idle();
  ServiceStats stats() const;

  struct Entry;
  struct Private {};
  CompileService(Private, const ServiceOptions& options, std::shared_ptr<KernelJit> jit);

 private:
  void worker();
  void touch(const std::string* key, Entry& entry);
  void evict_locked();

  ServiceOptions options_;
  std::shared_ptr<KernelJit> jit_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_;
  std::list<const std::string*> lru_;  // the keys of entries_ (stable while listed), most recent first
  std::deque<std::pair<std::weak_ptr<const CompiledGrammar>, std::weak_ptr<Entry>>> queue_;
  size_t busy_ = 0;
  bool stop_ = false;
  ServiceStats stats_;
  std::vector<std::thread> workers_;
};

}  // namespace cgram::jit

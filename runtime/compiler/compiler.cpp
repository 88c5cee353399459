#include "compiler.h"

#include <fmt/format.h>

#include <chrono>

namespace cgram {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

CompileOutcome failed(CompileOutcome::Failure failure, Error error, CompileOutcome outcome = {}) {
  outcome.grammar = nullptr;
  outcome.failure = failure;
  outcome.code = error.code;
  outcome.message = std::move(error.message);
  return outcome;
}

// The part of a request that picks its cache entry: the vocabulary, every
// option a request usually varies, and the whole text. The limits are
// compared whole when the entry is found (Compiler::Entry::same_options).
std::string cache_key(const CompileRequest& r, const Vocabulary& vocab) {
  const JsonSchemaOptions& s = r.parse.schema;
  return fmt::format("{:016x}:{}:{}:{}:{}:{}:{}:{}:{}:", vocab.fingerprint(), grammar_format_name(r.parse.format),
                     static_cast<int>(s.whitespace), s.max_whitespace ? int64_t{*s.max_whitespace} : -1,
                     s.strict ? 1 : 0, r.compile.eager_index ? 1 : 0, r.compile.canonical ? 1 : 0,
                     r.parse.start.size(), r.parse.start) +
         std::string(r.text);
}

}  // namespace

std::optional<Tier> tier_named(std::string_view name) {
  if (name == "table") return Tier::Table;
  if (name == "jit") return Tier::Jit;
  if (name == "background") return Tier::Background;
  return std::nullopt;
}

const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::Table: return "table";
    case Tier::Jit: return "jit";
    case Tier::Background: return "background";
  }
  return "table";
}

struct Compiler::Entry {
  ParseOptions parse;
  CompileOptions compile;
  std::once_flag once;
  CompileOutcome outcome;
  size_t bytes = 0;  // counted in stats_.bytes once compiled
  bool counted = false;
  bool queued = false;  // for the background JIT
  std::list<const std::string*>::iterator position;
  bool listed = false;

  bool same_options(const CompileRequest& r) const { return parse == r.parse && compile == r.compile; }
};

Compiler::Compiler(const CompilerOptions& options) : options_(options) {
  if (options_.jit_threads == 0) return;
  // Without a JIT (no native target, say) background grammars stay on the
  // table tier, which gives the same masks.
  auto created = jit::KernelJit::create();
  if (auto* jit = created.if_value()) background_jit_ = *jit;
  for (size_t i = 0; i < options_.jit_threads && background_jit_; ++i) workers_.emplace_back([this] { worker(); });
}

Compiler::~Compiler() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

CompileOutcome Compiler::compile_parsed(const std::shared_ptr<const Grammar>& grammar,
                                        const std::shared_ptr<const Vocabulary>& vocab, const CompileOptions& options,
                                        Tier tier, CompileOutcome outcome) {
  if (!grammar)
    return failed(CompileOutcome::Failure::Compile, {ErrorCode::InvalidInput, "compile: no grammar"},
                  std::move(outcome));
  if (!vocab)
    return failed(CompileOutcome::Failure::Compile, {ErrorCode::InvalidInput, "compile: no vocabulary"},
                  std::move(outcome));
  try {
    const auto start = Clock::now();
    CompileResult compiled = CompiledGrammar::compile(grammar, vocab, options);
    outcome.times.compile_ms = ms_since(start);
    if (auto* error = compiled.if_error()) return failed(CompileOutcome::Failure::Compile, *error, std::move(outcome));
    outcome.grammar = std::move(*compiled);
    if (tier == Tier::Jit) {
      if (auto error = jit::tier_up_now(*outcome.grammar, &outcome.times.jit))
        return failed(CompileOutcome::Failure::Jit, error->in("JIT"), std::move(outcome));
    }
  } catch (const std::bad_alloc&) {
    return failed(CompileOutcome::Failure::Compile, {ErrorCode::OutOfMemory, "compile: out of memory"},
                  std::move(outcome));
  } catch (const std::exception& e) {
    return failed(CompileOutcome::Failure::Compile, {ErrorCode::Internal, std::string("compile: ") + e.what()},
                  std::move(outcome));
  }
  return outcome;
}

CompileOutcome Compiler::compile(const std::shared_ptr<const Grammar>& grammar,
                                 const std::shared_ptr<const Vocabulary>& vocab, const CompileOptions& options,
                                 Tier tier) {
  {
    std::lock_guard lock(mutex_);
    ++stats_.misses;
  }
  CompileOutcome outcome = compile_parsed(grammar, vocab, options, tier, {});
  if (outcome.ok() && tier == Tier::Background) queue_background(outcome.grammar, nullptr);
  return outcome;
}

CompileOutcome Compiler::compile_uncached(const CompileRequest& request, const std::shared_ptr<const Vocabulary>& vocab) {
  CompileOutcome outcome;
  if (!vocab) return failed(CompileOutcome::Failure::Compile, {ErrorCode::InvalidInput, "compile: no vocabulary"});
  try {
    const auto start = Clock::now();
    Grammar::Outcome parsed = Grammar::parse(request.text, request.filename, request.parse);
    outcome.times.parse_ms = ms_since(start);
    auto diagnostics = std::make_shared<Diagnostics>(std::move(parsed.diagnostics));
    outcome.diagnostics = diagnostics;
    outcome.source = parsed.file;
    if (!parsed.ok())
      return failed(CompileOutcome::Failure::Grammar, {ErrorCode::InvalidInput, diagnostics->render(false)},
                    std::move(outcome));
    // The background tier starts as the table tier; the caller queues it.
    const Tier now = request.tier == Tier::Jit ? Tier::Jit : Tier::Table;
    return compile_parsed(parsed.grammar, vocab, request.compile, now, std::move(outcome));
  } catch (const std::bad_alloc&) {
    return failed(CompileOutcome::Failure::Compile, {ErrorCode::OutOfMemory, "compile: out of memory"},
                  std::move(outcome));
  } catch (const std::exception& e) {
    return failed(CompileOutcome::Failure::Compile, {ErrorCode::Internal, std::string("compile: ") + e.what()},
                  std::move(outcome));
  }
}

CompileOutcome Compiler::compile_apart(const CompileRequest& request, const std::shared_ptr<const Vocabulary>& vocab) {
  CompileOutcome outcome = compile_uncached(request, vocab);
  if (outcome.ok() && request.tier == Tier::Background) queue_background(outcome.grammar, nullptr);
  return outcome;
}

void Compiler::touch(const std::string* key, Entry& entry) {
  if (entry.listed) lru_.erase(entry.position);
  lru_.push_front(key);
  entry.position = lru_.begin();
  entry.listed = true;
}

void Compiler::evict_locked() {
  // The most recent entry always stays (one grammar larger than the budget
  // is still served).
  while (stats_.bytes > options_.cache_bytes && lru_.size() > 1) {
    auto it = entries_.find(*lru_.back());
    lru_.pop_back();
    if (it != entries_.end()) {
      if (it->second->counted) stats_.bytes -= it->second->bytes;
      it->second->counted = false;
      entries_.erase(it);
      ++stats_.evictions;
    }
  }
  stats_.entries = entries_.size();
}

CompileOutcome Compiler::compile(const CompileRequest& request, const std::shared_ptr<const Vocabulary>& vocab) {
  if (options_.cache_bytes == 0 || !vocab) {
    {
      std::lock_guard lock(mutex_);
      ++stats_.misses;
    }
    return compile_apart(request, vocab);
  }
  const std::string key = cache_key(request, *vocab);
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(mutex_);
    auto [it, inserted] = entries_.emplace(key, nullptr);
    if (inserted) {
      it->second = std::make_shared<Entry>();
      it->second->parse = request.parse;
      it->second->compile = request.compile;
    }
    // The same text and common options under other limits is compiled
    // apart, not cached (a server normally gives every request the same
    // limits).
    if (inserted || it->second->same_options(request)) {
      entry = it->second;
      touch(&it->first, *entry);
    }
    ++(inserted || !entry ? stats_.misses : stats_.hits);
  }
  if (!entry) return compile_apart(request, vocab);
  bool compiled_here = false;
  std::call_once(entry->once, [&] {
    compiled_here = true;
    entry->outcome = compile_uncached(request, vocab);
  });
  CompileOutcome outcome = entry->outcome;
  if (!compiled_here) outcome.times = {};
  if (compiled_here) {
    std::lock_guard lock(mutex_);
    // Counted unless evicted while it compiled (the tier below still applies).
    if (auto it = entries_.find(key); it != entries_.end() && it->second == entry) {
      entry->bytes = key.size();
      if (outcome.ok()) {
        entry->bytes += outcome.grammar->memory_bytes();
        if (const Kernels* kernels = outcome.grammar->kernels()) entry->bytes += kernels->code_bytes;
      }
      entry->counted = true;
      stats_.bytes += entry->bytes;
      evict_locked();
    }
  }
  if (!outcome.ok()) return outcome;
  if (request.tier == Tier::Jit && !outcome.grammar->kernels()) {
    // Cached for the table tier first; compiled now for this request.
    if (auto error = jit::tier_up_now(*outcome.grammar, &outcome.times.jit))
      return failed(CompileOutcome::Failure::Jit, error->in("JIT"), std::move(outcome));
  }
  if (request.tier == Tier::Background) queue_background(outcome.grammar, entry);
  return outcome;
}

void Compiler::queue_background(const std::shared_ptr<const CompiledGrammar>& grammar,
                                const std::shared_ptr<Entry>& entry) {
  if (!background_jit_ || grammar->kernels()) return;
  std::lock_guard lock(mutex_);
  if (entry) {
    if (entry->queued) return;
    entry->queued = true;
  }
  queue_.emplace_back(grammar, entry);
  wake_.notify_one();
}

void Compiler::worker() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    auto [weak_grammar, weak_entry] = queue_.front();
    queue_.pop_front();
    // Evicted and unused before its turn came: nothing to compile.
    if (std::shared_ptr<const CompiledGrammar> grammar = weak_grammar.lock()) {
      ++busy_;
      lock.unlock();
      jit::KernelTimings timings;
      std::shared_ptr<const Kernels> kernels;
      try {
        auto compiled = background_jit_->compile(*grammar, &timings);
        if (auto* k = compiled.if_value()) {
          kernels = *k;
          grammar->install_kernels(kernels);
        }
      } catch (...) {
        kernels = nullptr;  // out of memory inside LLVM, say: the grammar stays on the table tier
      }
      lock.lock();
      --busy_;
      if (!kernels) {
        ++stats_.jit_failed;
      } else {
        ++stats_.jit_compiled;
        stats_.jit_ms_total += timings.ir_ms + timings.optimize_ms + timings.native_ms;
        if (auto entry = weak_entry.lock(); entry && entry->counted) {
          entry->bytes += kernels->code_bytes;
          stats_.bytes += kernels->code_bytes;
          evict_locked();
        }
      }
    }
    if (queue_.empty() && busy_ == 0) idle_.notify_all();
  }
}

void Compiler::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return (queue_.empty() && busy_ == 0) || workers_.empty(); });
}

CompilerStats Compiler::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace cgram

#include "compile_service.h"

#include <fmt/format.h>

#include <chrono>

#include "binary_io.h"
#include "grammar.h"

namespace cgram::jit {

struct CompileService::Entry {
  std::once_flag once;
  CompiledGrammar::Result result = CompileError{"not compiled"};
  size_t bytes = 0;  // counted in stats_.bytes once compiled
  bool counted = false;
  std::list<const std::string*>::iterator position;
  bool listed = false;
};

CompileService::CompileService(Private, const ServiceOptions& options, std::shared_ptr<KernelJit> jit)
    : options_(options), jit_(std::move(jit)) {
  for (size_t i = 0; i < options_.compile_threads && jit_; ++i) workers_.emplace_back([this] { worker(); });
}

std::variant<std::unique_ptr<CompileService>, JitError> CompileService::create(const ServiceOptions& options) {
  std::shared_ptr<KernelJit> jit;
  if (options.compile_threads > 0) {
    auto created = KernelJit::create();
    if (auto* error = std::get_if<JitError>(&created)) return *error;
    jit = std::get<std::shared_ptr<KernelJit>>(created);
  }
  return std::make_unique<CompileService>(Private{}, options, std::move(jit));
}

CompileService::~CompileService() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void CompileService::touch(const std::string* key, Entry& entry) {
  if (entry.listed) lru_.erase(entry.position);
  lru_.push_front(key);
  entry.position = lru_.begin();
  entry.listed = true;
}

void CompileService::evict_locked() {
  // The most recent entry always stays (one grammar larger than the budget
  // is still served).
  while (stats_.bytes > options_.max_bytes && lru_.size() > 1) {
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

CompiledGrammar::Result CompileService::get(const GrammarRequest& request, const std::shared_ptr<const Vocabulary>& vocab) {
  if (!vocab) return CompileError{"compile: no vocabulary"};
  // The whole text is in the key (a hash alone could be made to collide,
  // and serve one client another's grammar).
  const std::string key = fmt::format("{:016x}:{}:{}:{}", vocab->fingerprint(), options_.compile.eager_index ? 1 : 0,
                                      request.start.size(), request.start) +
                          std::string(request.text);
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(mutex_);
    auto [it, inserted] = entries_.emplace(key, nullptr);
    if (inserted) it->second = std::make_shared<Entry>();
    entry = it->second;
    touch(&it->first, *entry);
    ++(inserted ? stats_.misses : stats_.hits);
  }
  bool compiled_here = false;
  std::call_once(entry->once, [&] {
    compiled_here = true;
    try {
      ParseOptions parse_options;
      parse_options.start = request.start;
      Grammar::Outcome parsed = Grammar::parse(request.text, request.name, parse_options);
      if (!parsed.ok()) {
        entry->result = CompileError{parsed.diagnostics.render()};
        return;
      }
      entry->result = CompiledGrammar::compile(parsed.grammar, vocab, options_.compile);
    } catch (const std::bad_alloc&) {
      entry->result = CompileError{"compile: out of memory"};
    } catch (const std::exception& e) {
      entry->result = CompileError{std::string("compile: ") + e.what()};
    }
  });
  if (compiled_here) {
    std::lock_guard lock(mutex_);
    auto* compiled = std::get_if<std::shared_ptr<const CompiledGrammar>>(&entry->result);
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second != entry) return entry->result;  // evicted while it compiled
    entry->bytes = compiled ? (*compiled)->memory_bytes() + key.size() : key.size();
    entry->counted = true;
    stats_.bytes += entry->bytes;
    if (compiled && jit_) {
      queue_.emplace_back(*compiled, entry);
      wake_.notify_one();
    }
    evict_locked();
  }
  return entry->result;
}

void CompileService::worker() {
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
      KernelTimings timings;
      std::shared_ptr<const Kernels> kernels;
      try {
        auto compiled = jit_->compile(*grammar, &timings);
        if (auto* k = std::get_if<std::shared_ptr<const Kernels>>(&compiled)) {
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

void CompileService::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return (queue_.empty() && busy_ == 0) || workers_.empty(); });
}

ServiceStats CompileService::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace cgram::jit

#pragma once
// cgram-server's requests: one JSON line in, one JSON answer out. Every
// limit a client could push past is a bound here (docs/LIMITS.md,
// "cgram-server"), answered with an error, never by stopping or growing.
// handle() may be called from several threads at once (one per
// connection): the tables are locked only to look up and insert, a
// compile or a batch runs outside the lock, and a sequence is stepped by
// one request at a time.
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>

#include "batch.h"
#include "compiler.h"
#include "matcher.h"

namespace cgram::server {

struct ServerLimits {
  size_t max_line_bytes = size_t{16} << 20;  // one request line
  size_t max_sequences = 10000;              // open at once
  size_t max_grammar_ids = 100000;           // names kept (their texts; the Compiler bounds the compiled data)
};

class RequestServer {
 public:
  RequestServer(std::unique_ptr<Compiler> compiler, std::shared_ptr<const Vocabulary> vocab, size_t threads,
                ServerLimits limits = {});

  // One request line (without its newline) to its answer's JSON text.
  std::string handle_line(std::string_view line);
  // The answer to a line that was over max_line_bytes (and was not kept).
  std::string too_long_answer() const;
  const ServerLimits& limits() const { return limits_; }

  // What a request does, on its parsed JSON.
  nlohmann::json handle(const nlohmann::json& request);

 private:
  struct GrammarText {
    std::string text, start;
  };
  // A sequence: the grammar until its first step (an idle sequence is that
  // pointer), then its matcher. Held by shared_ptr so that a close during
  // another connection's batch leaves that batch a live sequence.
  struct Sequence {
    std::shared_ptr<const CompiledGrammar> grammar;
    std::unique_ptr<Matcher> matcher;
    bool finished = false;
    std::atomic<bool> busy{false};  // in some request's batch now
  };
  struct Step;

  static nlohmann::json error(std::string message);
  nlohmann::json compile(const nlohmann::json& request);
  nlohmann::json open(const nlohmann::json& request);
  nlohmann::json close(const nlohmann::json& request);
  nlohmann::json batch(const nlohmann::json& request);
  nlohmann::json stats();
  // The refusal when one more grammar id or sequence would pass its cap
  // (the caller holds mutex_); nullopt when there is room or it exists.
  std::optional<nlohmann::json> grammar_ids_full(const std::string& id) const;
  std::optional<nlohmann::json> sequences_full(const std::string& seq) const;
  CompileOutcome get(const std::string& id, const GrammarText& g);
  // A step's token ids, each a whole number below the vocabulary's size.
  std::optional<std::string> read_tokens(const nlohmann::json& step, std::vector<uint32_t>& tokens) const;
  nlohmann::json run_step(Sequence& s, const std::vector<uint32_t>& tokens, bool want_mask);
  // Advances by every token or by none.
  std::optional<std::string> advance_all(Sequence& s, const std::vector<uint32_t>& tokens);

  std::unique_ptr<Compiler> compiler_;
  std::shared_ptr<const Vocabulary> vocab_;
  ServerLimits limits_;
  std::mutex pool_mutex_;  // ThreadPool::run is one batch at a time
  ThreadPool pool_;
  std::mutex mutex_;  // the two maps
  std::unordered_map<std::string, GrammarText> grammars_;
  std::unordered_map<std::string, std::shared_ptr<Sequence>> sequences_;
};

}  // namespace cgram::server

#include "request_server.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>

namespace cgram::server {

using nlohmann::json;

namespace {

size_t resident_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoul(line.c_str() + 6, nullptr, 10);
  return 0;
}

std::string dump(const json& answer) { return answer.dump(-1, ' ', false, json::error_handler_t::replace); }

// Clears a sequence's busy flag when its batch is over, however it ends.
struct BusyRelease {
  std::atomic<bool>* flag = nullptr;
  ~BusyRelease() {
    if (flag) flag->store(false);
  }
};

}  // namespace

struct RequestServer::Step {
  std::shared_ptr<Sequence> sequence;
  std::vector<uint32_t> tokens;
  bool want_mask = false;
  json answer;
};

RequestServer::RequestServer(std::unique_ptr<Compiler> compiler, std::shared_ptr<const Vocabulary> vocab,
                             size_t threads, ServerLimits limits)
    : compiler_(std::move(compiler)), vocab_(std::move(vocab)), limits_(limits), pool_(threads) {}

json RequestServer::error(std::string message) { return {{"ok", false}, {"error", std::move(message)}}; }

std::string RequestServer::too_long_answer() const {
  return dump(error(fmt::format("the request line is over {} bytes (cgram-server --max-line-bytes); it was skipped",
                                limits_.max_line_bytes)));
}

std::string RequestServer::handle_line(std::string_view line) {
  // JSON text holds no NUL; a reader that stopped at one would answer a
  // request the client did not send whole.
  if (const size_t nul = line.find('\0'); nul != std::string_view::npos)
    return dump(error(fmt::format("bad request: a NUL byte at byte {}: a request is one line of JSON text", nul)));
  json answer;
  try {
    const json request = json::parse(line);
    answer = request.is_object() ? handle(request) : error("bad request: a request is a JSON object with an \"op\"");
  } catch (const std::exception& e) {
    answer = error(fmt::format("bad request: {}", e.what()));
  }
  return dump(answer);
}

json RequestServer::handle(const json& request) {
  const std::string op = request.value("op", "");
  if (op == "grammar") return compile(request);
  if (op == "open") return open(request);
  if (op == "batch") return batch(request);
  if (op == "close") return close(request);
  if (op == "stats") return stats();
  return error(fmt::format("unknown op '{}' (grammar, open, batch, close, stats)", op));
}

CompileOutcome RequestServer::get(const std::string& id, const GrammarText& g) {
  // The request holds views: the name must outlive the compile.
  const std::string filename = id.empty() ? std::string("<request>") : id;
  CompileRequest request;
  request.text = g.text;
  request.filename = filename;
  request.parse.start = g.start;
  request.tier = Tier::Background;
  return compiler_->compile(request, vocab_);
}

json RequestServer::compile(const json& request) {
  const std::string id = request.value("id", "");
  GrammarText g{request.value("text", ""), request.value("start", "start")};
  {
    std::lock_guard lock(mutex_);
    if (auto full = grammar_ids_full(id)) return *full;
  }
  CompileOutcome result = get(id, g);
  if (!result.ok()) return error(result.message);
  std::lock_guard lock(mutex_);
  if (auto full = grammar_ids_full(id)) return *full;  // another connection may have taken the last one
  grammars_[id] = std::move(g);
  return {{"ok", true}, {"grammar", id}, {"tier", result.grammar->tier()}};
}

json RequestServer::open(const json& request) {
  const std::string seq = request.value("seq", "");
  GrammarText g;
  std::string id;
  {
    std::lock_guard lock(mutex_);
    auto it = grammars_.find(request.value("grammar", ""));
    if (it == grammars_.end()) return error("unknown grammar id");
    if (auto full = sequences_full(seq)) return *full;
    id = it->first;
    g = it->second;
  }
  // Through the cache each time (a hit, unless it was evicted): the server
  // keeps names and texts, the Compiler bounds the compiled data.
  CompileOutcome result = get(id, g);
  if (!result.ok()) return error(result.message);
  auto sequence = std::make_shared<Sequence>();
  sequence->grammar = std::move(result.grammar);  // the matcher is made at the first step
  std::lock_guard lock(mutex_);
  if (auto full = sequences_full(seq)) return *full;  // checked again: the compile ran outside the lock
  sequences_[seq] = std::move(sequence);
  return {{"ok", true}};
}

std::optional<json> RequestServer::grammar_ids_full(const std::string& id) const {
  if (grammars_.count(id) || grammars_.size() < limits_.max_grammar_ids) return std::nullopt;
  return error(fmt::format("too many grammar ids ({})", limits_.max_grammar_ids));
}

std::optional<json> RequestServer::sequences_full(const std::string& seq) const {
  if (sequences_.count(seq) || sequences_.size() < limits_.max_sequences) return std::nullopt;
  return error(fmt::format("too many open sequences ({}, cgram-server --max-sequences): close some first",
                           limits_.max_sequences));
}

json RequestServer::close(const json& request) {
  std::lock_guard lock(mutex_);
  return {{"ok", sequences_.erase(request.value("seq", "")) == 1}};
}

std::optional<std::string> RequestServer::read_tokens(const json& step, std::vector<uint32_t>& tokens) const {
  if (!step.contains("tokens")) return std::nullopt;
  const json& list = step["tokens"];
  if (!list.is_array()) return "\"tokens\" is a list of token ids";
  for (size_t i = 0; i < list.size(); ++i) {
    const json& id = list[i];
    // 1.7 or 1e30 would become 1 or 0 if converted: only whole numbers count.
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= vocab_->size())
      return fmt::format("tokens[{}] is {}: a token id is a whole number from 0 to {}; none of the step's tokens "
                         "were taken",
                         i, id.is_number() ? dump(id) : std::string(id.type_name()),  // never a deep dump
                         vocab_->size() - 1);
    tokens.push_back(static_cast<uint32_t>(id.get<uint64_t>()));
  }
  return std::nullopt;
}

json RequestServer::batch(const json& request) {
  if (!request.contains("steps") || !request["steps"].is_array()) return error("a batch has a list of \"steps\"");
  const json& steps = request["steps"];
  std::vector<Step> work(steps.size());
  std::vector<BusyRelease> releases(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    if (!s.is_object()) {
      work[i].answer = error("a step is an object with a \"seq\"");
      continue;
    }
    const std::string want = s.value("want", "count");
    if (want != "count" && want != "mask") {
      work[i].answer = error(fmt::format("\"want\" is \"count\" or \"mask\", not \"{}\"", want));
      continue;
    }
    if (auto bad = read_tokens(s, work[i].tokens)) {
      work[i].answer = error(*bad);
      work[i].answer["taken"] = 0;
      continue;
    }
    work[i].want_mask = want == "mask";
    std::shared_ptr<Sequence> found;
    {
      std::lock_guard lock(mutex_);
      auto it = sequences_.find(s.value("seq", ""));
      if (it != sequences_.end()) found = it->second;
    }
    if (!found) {
      work[i].answer = error("unknown sequence");
      continue;
    }
    // Each matcher is touched by one thread: a sequence is in one step of
    // one batch at a time (a repeat, or another connection's batch, is an error).
    if (found->busy.exchange(true)) {
      const bool here = std::any_of(work.begin(), work.begin() + i, [&](const Step& w) { return w.sequence == found; });
      work[i].answer = error(here ? "a sequence appears twice in one batch"
                                  : "the sequence is in another request's batch now");
      continue;
    }
    releases[i].flag = &found->busy;
    work[i].sequence = std::move(found);
  }
  {
    std::lock_guard turn(pool_mutex_);
    pool_.run(work.size(), [&](size_t i) {
      if (!work[i].sequence) return;
      try {  // one step's failure (out of memory, say) is that step's answer, not the batch's
        work[i].answer = run_step(*work[i].sequence, work[i].tokens, work[i].want_mask);
      } catch (const std::exception& e) {
        work[i].answer = error(fmt::format("the step failed: {}", e.what()));
        if (const Matcher* m = work[i].sequence->matcher.get()) work[i].answer["tokens_accepted"] = m->tokens_accepted();
      }
    });
  }
  json answers = json::array();
  for (Step& s : work) answers.push_back(std::move(s.answer));
  return {{"ok", true}, {"steps", std::move(answers)}};
}

std::optional<std::string> RequestServer::advance_all(Sequence& s, const std::vector<uint32_t>& tokens) {
  Matcher& m = *s.matcher;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool was_finished = s.finished;
    const AdvanceResult r = m.advance(tokens[i]);
    if (r != AdvanceResult::Rejected) {
      s.finished = r == AdvanceResult::Finished;
      continue;
    }
    std::string why = was_finished ? fmt::format("tokens[{}] comes after the end of the sequence", i)
                      : m.has_error()
                          ? fmt::format("token {} (tokens[{}]) could not be checked: the matcher stopped at its work "
                                        "limit (docs/LIMITS.md): {}",
                                        tokens[i], i, m.error())
                          : fmt::format("token {} (tokens[{}]) is not allowed", tokens[i], i);
    if (i > 0 && !m.rollback(i)) return fmt::format("{}; the {} tokens before it were taken", why, i);
    if (i > 0) s.finished = false;
    why += "; none of the step's tokens were taken";
    if (m.has_error()) why += ", and the sequence takes no more (the limit holds until it is closed)";
    return why;
  }
  return std::nullopt;
}

json RequestServer::run_step(Sequence& s, const std::vector<uint32_t>& tokens, bool want_mask) {
  if (!s.matcher) s.matcher = std::make_unique<Matcher>(std::move(s.grammar));
  Matcher& m = *s.matcher;
  const size_t before = m.tokens_accepted();
  if (!tokens.empty() && s.finished) {
    json answer = error("the sequence has finished; none of the step's tokens were taken");
    answer["taken"] = 0;
    return answer;
  }
  if (auto refused = advance_all(s, tokens)) {
    json answer = error(*refused);
    answer["taken"] = m.tokens_accepted() - before;
    return answer;
  }
  if (s.finished) return {{"ok", true}, {"finished", true}};
  // One mask buffer per pool thread, reused: an idle sequence holds none,
  // and a step allocates none once its thread is warm.
  thread_local std::vector<uint32_t> words;
  words.resize(m.mask_words());
  const auto start = std::chrono::steady_clock::now();
  const bool filled = m.fill_mask(words);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  if (!filled || m.has_error()) {
    json answer = error(fmt::format("the matcher stopped at its work limit (docs/LIMITS.md): {}", m.error()));
    answer["taken"] = tokens.size();  // the tokens were taken; the mask after them could not be made
    return answer;
  }
  size_t count = 0;
  json ids = json::array();
  for (uint32_t id = 0; id < vocab_->size(); ++id)
    if (words[id / 32] >> (id % 32) & 1) {
      ++count;
      if (want_mask) ids.push_back(id);
    }
  json answer = {{"ok", true}, {"allowed", count}, {"mask_us", us}, {"tier", m.grammar().tier()}};
  if (want_mask) answer["mask"] = std::move(ids);
  return answer;
}

json RequestServer::stats() {
  const CompilerStats s = compiler_->stats();
  size_t sequences = 0, grammars = 0;
  {
    std::lock_guard lock(mutex_);
    sequences = sequences_.size();
    grammars = grammars_.size();
  }
  return {{"ok", true},
          {"cache", {{"entries", s.entries}, {"bytes", s.bytes}, {"hits", s.hits}, {"misses", s.misses},
                     {"evictions", s.evictions}, {"jit_compiled", s.jit_compiled}, {"jit_failed", s.jit_failed}}},
          {"sequences", sequences},
          {"grammar_ids", grammars},
          {"limits", {{"max_line_bytes", limits_.max_line_bytes}, {"max_sequences", limits_.max_sequences},
                      {"max_grammar_ids", limits_.max_grammar_ids}}},
          {"resident_kb", resident_kb()}};
}

}  // namespace cgram::server

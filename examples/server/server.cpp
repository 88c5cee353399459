// cgram-server: a small long-running program that embeds the JIT, the way
// an inference server would. It reads JSON-lines requests on standard input
// (or on a local Unix socket with --socket PATH), compiles grammars through
// the Compiler's cache (table tier at once, JIT kernels in the
// background), keeps one matcher per sequence, and runs the steps of a
// batch on a thread pool. One JSON answer per request line.
//
// Requests:
//   {"op":"grammar","id":"g","text":"start ::= ..."}      compile (cached by text)
//   {"op":"open","seq":"s","grammar":"g"}                   a matcher for a new sequence
//   {"op":"batch","steps":[{"seq":"s","tokens":[1,2],"want":"count"|"mask"}]}
//        each step advances its sequence by the tokens, then answers the
//        allowed count (or the mask as the list of allowed ids) and the
//        microseconds its mask took; steps of distinct sequences run in parallel
//   {"op":"close","seq":"s"}
//   {"op":"stats"}                                         cache and memory figures
#include <fmt/format.h>
#include <csignal>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "batch.h"
#include "compiler.h"
#include "matcher.h"

namespace {

using nlohmann::json;
using namespace cgram;

size_t resident_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  return 0;
}

class Server {
 public:
  Server(std::unique_ptr<Compiler> compiler, std::shared_ptr<const Vocabulary> vocab, size_t threads)
      : compiler_(std::move(compiler)), vocab_(std::move(vocab)), pool_(threads) {}

  json handle(const json& request) {
    const std::string op = request.value("op", "");
    if (op == "grammar") return compile(request);
    if (op == "open") return open(request);
    if (op == "batch") return batch(request);
    if (op == "close") return {{"ok", sequences_.erase(request.value("seq", "")) == 1}};
    if (op == "stats") return stats();
    return error(fmt::format("unknown op '{}' (grammar, open, batch, close, stats)", op));
  }

 private:
  struct Sequence {
    std::unique_ptr<Matcher> matcher;
    bool finished = false;
    std::vector<uint32_t> words;  // its mask, reused at every step
  };

  static json error(std::string message) { return {{"ok", false}, {"error", std::move(message)}}; }

  json compile(const json& request) {
    const std::string id = request.value("id", "");
    const std::string text = request.value("text", "");
    if (!grammars_.count(id) && grammars_.size() >= kMaxGrammarIds) return error("too many grammar ids");
    GrammarText g{text, request.value("start", "start")};
    CompileOutcome result = get(id, g);
    if (!result.ok()) return error(result.message);
    grammars_[id] = std::move(g);
    return {{"ok", true}, {"grammar", id}, {"tier", result.grammar->tier()}};
  }

  json open(const json& request) {
    auto it = grammars_.find(request.value("grammar", ""));
    if (it == grammars_.end()) return error("unknown grammar id");
    // Through the cache each time (a hit, unless it was evicted): the
    // server keeps names and texts, the Compiler bounds the compiled data.
    CompileOutcome result = get(it->first, it->second);
    if (!result.ok()) return error(result.message);
    sequences_[request.value("seq", "")] = Sequence{std::make_unique<Matcher>(std::move(result.grammar)), false, {}};
    return {{"ok", true}};
  }

  struct GrammarText {
    std::string text, start;
  };
  static constexpr size_t kMaxGrammarIds = 100000;

  CompileOutcome get(const std::string& id, const GrammarText& g) {
    CompileRequest request;
    request.text = g.text;
    request.filename = id.empty() ? "<request>" : id;
    request.parse.start = g.start;
    request.tier = Tier::Background;
    return compiler_->compile(request, vocab_);
  }

  json batch(const json& request) {
    const json& steps = request.at("steps");
    struct Step {
      Sequence* sequence = nullptr;
      std::vector<uint32_t> tokens;
      bool want_mask = false;
      json answer;
    };
    std::vector<Step> work(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      auto it = sequences_.find(steps[i].value("seq", ""));
      if (it == sequences_.end()) {
        work[i].answer = error("unknown sequence");
        continue;
      }
      work[i].sequence = &it->second;
      work[i].tokens = steps[i].value("tokens", std::vector<uint32_t>{});
      work[i].want_mask = steps[i].value("want", "count") == "mask";
    }
    // A sequence appears at most once per batch (a client that repeats one
    // gets an error for the repeats): each matcher is touched by one thread.
    std::unordered_map<Sequence*, size_t> seen;
    for (size_t i = 0; i < work.size(); ++i)
      if (work[i].sequence && !seen.emplace(work[i].sequence, i).second) {
        work[i].sequence = nullptr;
        work[i].answer = error("a sequence appears twice in one batch");
      }
    pool_.run(work.size(), [&](size_t i) {
      if (work[i].sequence) work[i].answer = step(*work[i].sequence, work[i].tokens, work[i].want_mask);
    });
    json answers = json::array();
    for (Step& s : work) answers.push_back(std::move(s.answer));
    return {{"ok", true}, {"steps", std::move(answers)}};
  }

  json step(Sequence& s, const std::vector<uint32_t>& tokens, bool want_mask) {
    Matcher& m = *s.matcher;
    for (uint32_t t : tokens) {
      if (s.finished) return error("the sequence has finished");
      if (t >= vocab_->size()) return error(fmt::format("token {} is not in the vocabulary", t));
      const AdvanceResult r = m.advance(t);
      if (r == AdvanceResult::Rejected) return error(fmt::format("token {} is not allowed", t));
      s.finished = r == AdvanceResult::Finished;
    }
    if (s.finished) return {{"ok", true}, {"finished", true}};
    std::vector<uint32_t>& words = s.words;
    words.resize(m.mask_words());
    const auto start = std::chrono::steady_clock::now();
    m.fill_mask(words);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
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

  json stats() {
    const CompilerStats s = compiler_->stats();
    return {{"ok", true},
            {"cache", {{"entries", s.entries}, {"bytes", s.bytes}, {"hits", s.hits}, {"misses", s.misses},
                       {"evictions", s.evictions}, {"jit_compiled", s.jit_compiled}, {"jit_failed", s.jit_failed}}},
            {"sequences", sequences_.size()},
            {"resident_kb", resident_kb()}};
  }

  std::unique_ptr<Compiler> compiler_;
  std::shared_ptr<const Vocabulary> vocab_;
  ThreadPool pool_;
  std::unordered_map<std::string, GrammarText> grammars_;
  std::unordered_map<std::string, Sequence> sequences_;
};

// One request per line in, one answer per line out. A bad line gets an
// error answer; the server goes on.
void serve(Server& server, std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json answer;
    try {
      answer = server.handle(json::parse(line));
    } catch (const std::exception& e) {
      answer = {{"ok", false}, {"error", fmt::format("bad request: {}", e.what())}};
    }
    out << answer.dump(-1, ' ', false, json::error_handler_t::replace) << "\n" << std::flush;
  }
}

// One connection: requests read through one stream, answers written
// through another (a single read-write stdio stream would drop pipelined
// input when it switches to writing).
void serve_connection(Server& server, int fd) {
  FILE* in = fdopen(fd, "r");
  if (!in) {
    close(fd);
    return;
  }
  const int out_fd = dup(fd);
  FILE* out = out_fd >= 0 ? fdopen(out_fd, "w") : nullptr;
  char* buffer = nullptr;
  size_t capacity = 0;
  while (out && getline(&buffer, &capacity, in) > 0) {
    std::stringstream one(buffer), answer;
    serve(server, one, answer);
    if (fputs(answer.str().c_str(), out) < 0 || fflush(out) != 0) break;  // the client went away
  }
  free(buffer);  // allocated by getline(3)
  if (out) fclose(out);
  else if (out_fd >= 0) close(out_fd);
  fclose(in);
}

int serve_socket(Server& server, const std::string& path) {
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up is an error on write, not the end of the server
  const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (listener < 0 || path.size() >= sizeof(address.sun_path)) {
    std::cerr << "cgram-server: cannot create the socket " << path << "\n";
    return 1;
  }
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  unlink(path.c_str());
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(listener, 4) != 0) {
    std::cerr << "cgram-server: cannot listen on " << path << "\n";
    return 1;
  }
  std::cerr << "cgram-server: listening on " << path << "\n";
  while (true) {
    const int fd = accept(listener, nullptr, nullptr);
    if (fd >= 0) serve_connection(server, fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cgram-server: JSON-lines constrained-decoding requests on stdin (or a Unix socket)"};
  std::string vocab_path, socket_path;
  size_t threads = std::thread::hardware_concurrency(), cache_mb = 512, jit_threads = 1;
  app.add_option("--vocab", vocab_path, "Vocabulary (default: the bundled Phi-3)");
  app.add_option("--socket", socket_path, "Serve on this Unix socket instead of stdin/stdout");
  app.add_option("--threads", threads, "Threads for batch steps")->capture_default_str();
  app.add_option("--cache-mb", cache_mb, "Compiled-grammar cache budget (0: no cache)")->capture_default_str();
  app.add_option("--jit-threads", jit_threads, "Background JIT threads (0: table tier only)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  VocabularyResult vocab = vocab_path.empty() ? Vocabulary::bundled() : Vocabulary::load(vocab_path);
  if (auto* e = vocab.if_error()) {
    std::cerr << "cgram-server: " << e->message << "\n";
    return 1;
  }
  CompilerOptions options;
  options.cache_bytes = cache_mb << 20;
  options.jit_threads = jit_threads;
  Server server(std::make_unique<Compiler>(options), *vocab, std::max<size_t>(threads, 1));
  if (!socket_path.empty()) return serve_socket(server, socket_path);
  serve(server, std::cin, std::cout);
  return 0;
}

// Load test of examples/server: many concurrent sequences over distinct
// grammars, through the server's JSON-lines protocol on a pipe (no network).
//
// The token streams are made here first: each grammar of the benchmark
// suite is compiled in-process and random walks are taken from its masks.
// Then the server is started, the grammars are sent, every sequence is
// opened, and each round sends one batch holding the next token of every
// live sequence. Two waves of sequences run one after the other, to show
// that memory stays bounded when sequences come and go.
//
//   bench_server_load --server build/examples/server/cgram-server --suite bench/suite
//                     [--vocab V] [--sequences 1000] [--grammars 20] [--steps 24]
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "compiler.h"
#include "matcher.h"

extern char** environ;

namespace {

using nlohmann::json;
using namespace cgram;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Grammars of the suite, taken round-robin over the formats so that twenty
// of them span every format.
std::vector<std::pair<std::string, std::string>> suite_grammars(const std::string& suite, size_t count) {
  std::vector<std::vector<fs::path>> by_format;
  std::vector<fs::path> formats;
  for (const auto& e : fs::directory_iterator(suite))
    if (e.is_directory()) formats.push_back(e.path());
  std::sort(formats.begin(), formats.end());
  for (const fs::path& f : formats) {
    std::vector<fs::path> grammars;
    for (const auto& e : fs::directory_iterator(f))
      if (e.path().extension() == ".cgram") grammars.push_back(e.path());
    std::sort(grammars.begin(), grammars.end());
    by_format.push_back(grammars);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t round = 0; out.size() < count; ++round) {
    bool any = false;
    for (size_t f = 0; f < by_format.size() && out.size() < count; ++f)
      if (round < by_format[f].size()) {
        any = true;
        const fs::path& p = by_format[f][round];
        out.emplace_back(p.parent_path().filename().string() + "/" + p.stem().string(), read_file(p));
      }
    if (!any) break;
  }
  return out;
}

// A random walk of at most `steps` tokens (never end of sequence).
std::vector<uint32_t> random_walk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng, size_t steps) {
  Matcher m(g);
  std::vector<uint32_t> words(m.mask_words()), tokens;
  const Vocabulary& vocab = g->vocabulary();
  for (size_t i = 0; i < steps; ++i) {
    m.fill_mask(words);
    std::vector<uint32_t> allowed;
    for (uint32_t id = 0; id < vocab.size(); ++id)
      if ((words[id / 32] >> (id % 32) & 1) && !vocab.is_eos(id)) allowed.push_back(id);
    if (allowed.empty()) break;
    const uint32_t t = allowed[rng() % allowed.size()];
    if (m.advance(t) != AdvanceResult::Ongoing) break;
    tokens.push_back(t);
  }
  return tokens;
}

// The server as a child process on two pipes.
class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& args) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    posix_spawn_file_actions_addclose(&actions, to_child[1]);
    posix_spawn_file_actions_addclose(&actions, from_child[0]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0)
      throw std::runtime_error("cannot start " + args[0]);
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
  }
  ~ServerProcess() {
    fclose(in_);  // end of input: the server exits
    fclose(out_);
    int status;
    waitpid(pid_, &status, 0);
    free(buffer_);  // getline's buffer
  }
  json call(const json& request) {
    const std::string line = request.dump() + "\n";
    fputs(line.c_str(), in_);
    fflush(in_);
    if (getline(&buffer_, &capacity_, out_) <= 0) throw std::runtime_error("the server closed its output");
    return json::parse(buffer_);
  }

 private:
  pid_t pid_ = 0;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
  char* buffer_ = nullptr;
  size_t capacity_ = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100 * (v.size() - 1) + 0.5))];
}

struct Wave {
  size_t masks = 0, errors = 0;
  double seconds = 0;
  std::vector<double> mask_us, batch_ms;
  size_t resident_kb_end = 0, resident_kb_peak = 0;
};

Wave run_wave(ServerProcess& server, const std::vector<std::vector<uint32_t>>& streams,
              const std::vector<size_t>& grammar_of, const std::string& prefix) {
  Wave w;
  for (size_t s = 0; s < streams.size(); ++s) {
    json r = server.call({{"op", "open"}, {"seq", prefix + std::to_string(s)}, {"grammar", fmt::format("g{}", grammar_of[s])}});
    if (!r.value("ok", false)) ++w.errors;
  }
  const auto start = Clock::now();
  size_t longest = 0;
  for (const auto& s : streams) longest = std::max(longest, s.size());
  for (size_t step = 0; step <= longest; ++step) {
    json steps = json::array();
    for (size_t s = 0; s < streams.size(); ++s) {
      if (step > streams[s].size()) continue;
      json tokens = json::array();
      if (step > 0) tokens.push_back(streams[s][step - 1]);
      steps.push_back({{"seq", prefix + std::to_string(s)}, {"tokens", tokens}});
    }
    const auto t0 = Clock::now();
    json answer = server.call({{"op", "batch"}, {"steps", steps}});
    w.batch_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    for (const json& a : answer.at("steps")) {
      if (!a.value("ok", false) || a.value("allowed", 1) == 0) {
        ++w.errors;
        continue;
      }
      if (a.contains("mask_us")) {
        w.mask_us.push_back(a["mask_us"].get<double>());
        ++w.masks;
      }
    }
    if (step % 8 == 0)
      w.resident_kb_peak = std::max<size_t>(w.resident_kb_peak, server.call({{"op", "stats"}})["resident_kb"].get<size_t>());
  }
  w.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (size_t s = 0; s < streams.size(); ++s) server.call({{"op", "close"}, {"seq", prefix + std::to_string(s)}});
  w.resident_kb_end = server.call({{"op", "stats"}})["resident_kb"].get<size_t>();
  w.resident_kb_peak = std::max(w.resident_kb_peak, w.resident_kb_end);
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Load test of cgram-server: concurrent sequences over distinct grammars"};
  std::string server_path, suite, vocab_path;
  size_t sequences = 1000, grammars = 20, steps = 24, threads = std::thread::hardware_concurrency();
  app.add_option("--server", server_path, "The cgram-server program")->required();
  app.add_option("--suite", suite, "The benchmark suite folder (grammars)")->required();
  app.add_option("--vocab", vocab_path, "Vocabulary (default: the bundled Phi-3)");
  app.add_option("--sequences", sequences, "Concurrent sequences per wave")->capture_default_str();
  app.add_option("--grammars", grammars, "Distinct grammars")->capture_default_str();
  app.add_option("--steps", steps, "Tokens per sequence")->capture_default_str();
  app.add_option("--threads", threads, "Server threads")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  VocabularyResult loaded = vocab_path.empty() ? Vocabulary::bundled() : Vocabulary::load(vocab_path);
  if (auto* e = loaded.if_error()) {
    std::cerr << e->message << "\n";
    return 1;
  }
  auto vocab = *loaded;
  const auto chosen = suite_grammars(suite, grammars);
  std::cerr << fmt::format("preparing {} token streams over {} grammars...\n", 2 * sequences, chosen.size());
  std::vector<std::shared_ptr<const CompiledGrammar>> compiled;
  for (const auto& [name, text] : chosen) {
    CompileRequest request;
    request.text = text;
    request.filename = name;
    CompileOutcome outcome = Compiler().compile(request, vocab);
    if (!outcome.ok()) {
      std::cerr << name << ": " << outcome.message << "\n";
      return 1;
    }
    compiled.push_back(std::move(outcome.grammar));
  }
  std::mt19937_64 rng(42);
  std::vector<std::vector<uint32_t>> waves[2];
  std::vector<size_t> grammar_of;
  for (size_t s = 0; s < sequences; ++s) grammar_of.push_back(s % compiled.size());
  for (auto& wave : waves)
    for (size_t s = 0; s < sequences; ++s) wave.push_back(random_walk(compiled[grammar_of[s]], rng, steps));

  std::vector<std::string> args = {server_path, "--threads", std::to_string(threads)};
  if (!vocab_path.empty()) args.insert(args.end(), {"--vocab", vocab_path});
  ServerProcess server(args);
  const auto compile_start = Clock::now();
  for (size_t i = 0; i < chosen.size(); ++i) {
    json r = server.call({{"op", "grammar"}, {"id", fmt::format("g{}", i)}, {"text", chosen[i].second}});
    if (!r.value("ok", false)) {
      std::cerr << "the server refused " << chosen[i].first << ": " << r.dump() << "\n";
      return 1;
    }
  }
  const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - compile_start).count();
  const size_t resident_start = server.call({{"op", "stats"}})["resident_kb"].get<size_t>();
  Wave first = run_wave(server, waves[0], grammar_of, "a");
  Wave second = run_wave(server, waves[1], grammar_of, "b");
  const json stats = server.call({{"op", "stats"}});

  std::cout << fmt::format("cgram-server load test: {} grammars, {} concurrent sequences per wave, {} server threads, "
                           "vocabulary {}\n",
                           chosen.size(), sequences, threads, vocab->name());
  std::cout << fmt::format("grammars compiled (table tier, JIT in the background): {:.0f} ms; resident memory then "
                           "{:.1f} MB\n",
                           compile_ms, resident_start / 1024.0);
  for (const auto& [label, w] : {std::pair<const char*, const Wave&>{"wave 1", first}, {"wave 2", second}})
    std::cout << fmt::format(
        "{}: {} masks in {:.2f} s = {:.0f} masks/s; per mask p50 {:.1f} µs p99 {:.1f} µs; per batch of {} p50 "
        "{:.1f} ms p99 {:.1f} ms; errors {}; resident memory peak {:.1f} MB, after closing {:.1f} MB\n",
        label, w.masks, w.seconds, w.masks / w.seconds, percentile(w.mask_us, 50), percentile(w.mask_us, 99),
        sequences, percentile(w.batch_ms, 50), percentile(w.batch_ms, 99), w.errors, w.resident_kb_peak / 1024.0,
        w.resident_kb_end / 1024.0);
  std::cout << "server cache: " << stats["cache"].dump() << "\n";
  const bool bounded = second.resident_kb_peak <= first.resident_kb_peak * 1.25 + 16 * 1024;
  std::cout << fmt::format("memory {}: the second wave peaks at {:.1f} MB against {:.1f} MB for the first\n",
                           bounded ? "bounded" : "GROWING", second.resident_kb_peak / 1024.0,
                           first.resident_kb_peak / 1024.0);
  return first.errors + second.errors == 0 && bounded ? 0 : 1;
}

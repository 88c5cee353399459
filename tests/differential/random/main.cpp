// random_differential: random grammars and texts, the matcher against the
// reference recognizer (random_differential.h).
//
//   random_differential --seeds 0-299              the quick set (CTest)
//   random_differential --seeds 0-19999 --jobs 2   the long run (ctest -L long)
//   random_differential --grammar G.cgram          every check on one grammar
//   random_differential --replay FILE...           re-run saved reproducers
//
// Exit status: 0 when every answer agreed, 1 on a disagreement (each one
// shrunk and written as a reproducer), 2 on bad arguments.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "grammar_generator.h"
#include "random_differential.h"

using namespace cgram::test::random;

namespace {

struct Totals {
  size_t grammars = 0, parsed = 0, verdicts = 0, tokens = 0, masks = 0, pairs = 0, queries = 0, refusals = 0,
         disagreements = 0, memo_hits = 0, memo_lookups = 0;
  double slowest_ms = 0;
  std::string slowest;
  std::map<std::string, size_t> refusals_by_shape, grammars_by_shape;
  std::vector<std::string> parse_failures;

  void add(const GrammarReport& r) {
    ++grammars;
    ++grammars_by_shape[r.shape];
    if (!r.parsed) {
      if (parse_failures.size() < 5) parse_failures.push_back(fmt::format("seed {}:\n{}{}", r.seed, r.source, r.parse_error));
      return;
    }
    ++parsed;
    verdicts += r.verdict_checks;
    tokens += r.token_checks;
    masks += r.mask_checks;
    pairs += r.mask_pairs;
    queries += r.queries;
    refusals += r.refusals;
    memo_hits += r.memo_hits;
    memo_lookups += r.memo_lookups;
    refusals_by_shape[r.shape] += r.refusals;
    disagreements += r.disagreements.size();
    if (r.slowest_ms > slowest_ms) slowest_ms = r.slowest_ms, slowest = fmt::format("seed {}: {}", r.seed, r.slowest);
  }
};

bool parse_range(const std::string& s, uint64_t& first, uint64_t& last) {
  const auto dash = s.find('-');
  try {
    first = std::stoull(s.substr(0, dash));
    last = dash == std::string::npos ? first : std::stoull(s.substr(dash + 1));
  } catch (...) {
    return false;
  }
  return first <= last;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void print_disagreement(const GrammarReport& r, const Disagreement& d, size_t index, const std::string& dir) {
  const std::string body = d.reproducer();
  fmt::print("\nDISAGREEMENT (seed {}, shape {}, {}): {}\n{}", r.seed, r.shape, d.kind, d.what, body);
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  const std::string path = fmt::format("{}/seed-{}-{}-{}.cgram", dir, r.seed, index, d.kind);
  std::ofstream(path, std::ios::binary) << body;
  fmt::print("reproducer written to {}\n", path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cgram's random-grammar differential: the matcher against the reference recognizer"};
  std::string seeds = "0-99", grammar_file, reproducers;
  std::vector<std::string> replay;
  size_t jobs = 1;
  bool no_bundled = false, no_shrink = false, verbose = false;
  DifferentialOptions options;
  app.add_option("--seeds", seeds, "a seed or a range A-B (one grammar each)");
  app.add_option("--grammar", grammar_file, "check this grammar instead of random ones (with each seed)");
  app.add_option("--replay", replay, "re-run saved reproducers (files or folders of .cgram files)");
  app.add_option("--jobs", jobs, "threads")->check(CLI::Range(1, 64));
  app.add_option("--reproducers", reproducers, "write each disagreement's reproducer to this folder");
  app.add_option("--max-text-bytes", options.max_text_bytes, "longest text");
  app.add_option("--sentences", options.sentences, "sampled sentences per grammar");
  app.add_option("--walk-steps", options.walk_steps, "steps of the random walk per grammar");
  app.add_flag("--no-bundled", no_bundled, "only the byte-level vocabulary");
  app.add_flag("--no-shrink", no_shrink, "report disagreements as found");
  app.add_flag("--verbose", verbose, "a line per grammar");
  bool list_slow = false;
  app.add_flag("--list-slow", list_slow, "list every answer slower than --slow-ms, and every refusal, with its grammar");
  app.add_option("--slow-ms", options.slow_ms, "what --list-slow calls slow");
  app.add_option("--max-work", options.max_work_per_call, "the matchers' work limit per call (EngineLimits)");
  app.add_option("--match-work-per-byte", options.match_work_per_byte, "cgram match's work limit per byte");
  CLI11_PARSE(app, argc, argv);
  options.bundled = !no_bundled;
  options.shrink = !no_shrink;

  if (!replay.empty()) {
    // Files, and the .cgram files of folders, in order.
    std::vector<std::string> files;
    for (const std::string& r : replay) {
      if (!std::filesystem::is_directory(r)) {
        files.push_back(r);
        continue;
      }
      for (const auto& e : std::filesystem::directory_iterator(r))
        if (e.path().extension() == ".cgram") files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    options.bundled = true;
    Differential differential(options);
    size_t failed = 0;
    for (const std::string& f : files) {
      std::string out;
      const bool agree = differential.replay(read(f), out);
      failed += !agree;
      fmt::print("{}: {}\n  {}\n", f, agree ? "agrees" : "DISAGREES", out);
    }
    fmt::print("{} reproducers replayed, {} disagree\n", files.size(), failed);
    return failed || files.empty() ? 1 : 0;
  }

  uint64_t first = 0, last = 0;
  if (!parse_range(seeds, first, last)) {
    fmt::print(stderr, "random_differential: --seeds wants N or A-B, not '{}'\n", seeds);
    return 2;
  }
  const std::string given = grammar_file.empty() ? std::string() : read(grammar_file);
  if (!grammar_file.empty() && given.empty()) {
    fmt::print(stderr, "random_differential: cannot read '{}'\n", grammar_file);
    return 2;
  }
  Differential differential(options);
  Totals totals;
  std::mutex lock;
  std::atomic<uint64_t> next{first};
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&]() {
    for (uint64_t seed; (seed = next++) <= last;) {
      GrammarReport r = given.empty() ? differential.check(seed) : differential.check_source(given, seed);
      std::lock_guard<std::mutex> guard(lock);
      totals.add(r);
      if (verbose)
        fmt::print("seed {} ({}): {} verdicts, {} tokens, {} masks, {} refusals, slowest {:.1f} ms\n", seed, r.shape,
                   r.verdict_checks, r.token_checks, r.mask_checks, r.refusals, r.slowest_ms);
      for (size_t i = 0; i < r.disagreements.size(); ++i) print_disagreement(r, r.disagreements[i], i, reproducers);
      if (list_slow && (!r.slow.empty() || !r.refused.empty())) {
        fmt::print("\nseed {} ({}):\n{}", seed, r.shape, r.source);
        for (const std::string& s : r.slow) fmt::print("  slow: {}\n", s);
        for (const std::string& s : r.refused) fmt::print("  refused: {}\n", s);
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t j = 0; j < jobs; ++j) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  fmt::print("\nrandom differential, seeds {}-{}: {} grammars ({} parsed) in {:.1f} s\n", first, last, totals.grammars,
             totals.parsed, seconds);
  fmt::print("  {} whole texts, {} tokens, {} masks ({} token pairs) compared\n", totals.verdicts, totals.tokens,
             totals.masks, totals.pairs);
  fmt::print("  {} engine answers; {} refused at a work limit ({:.3f} %)\n", totals.queries, totals.refusals,
             totals.queries ? 100.0 * double(totals.refusals) / double(totals.queries) : 0.0);
  for (const auto& [shape, n] : totals.grammars_by_shape)
    if (totals.refusals_by_shape[shape])
      fmt::print("    refusals on {} grammars: {}\n", shape, totals.refusals_by_shape[shape]);
  fmt::print("  masks answered from the grammar's memo: {} of {} that asked it\n", totals.memo_hits,
             totals.memo_lookups);
  fmt::print("  slowest answer: {:.1f} ms ({})\n", totals.slowest_ms, totals.slowest);
  for (const std::string& f : totals.parse_failures) fmt::print("  a grammar that did not parse: {}\n", f);
  fmt::print("  disagreements: {}\n", totals.disagreements);
  // Grammars the generator makes are valid by construction: one that is not
  // is a fault of the generator or of the front end.
  return totals.disagreements || totals.parsed != totals.grammars ? 1 : 0;
}

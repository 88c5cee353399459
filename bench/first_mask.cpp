// Schema (or grammar) → first mask, on the lazy index, where the time goes:
// the median over N runs of each stage, per file, with one vocabulary loaded
// once. For profiling the first-mask latency (perf record -g on one file with
// many runs); figures go to docs/BENCHMARKS.md.
//   bench_first_mask --vocab tokenizer.json [--runs N] [--whitespace compact]
//                    [--property-order any] FILE...
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bench_support.h"
#include "compiler.h"
#include "matcher.h"
#include "vocabulary.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

struct Stages {
  std::vector<double> parse, compile, mask, total;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Schema or grammar → first mask on the lazy index, by stage (medians)"};
  std::string vocab_path, whitespace = "compact", property_order = "any";
  int runs = 20;
  std::vector<std::string> files;
  app.add_option("--vocab", vocab_path, "The vocabulary (tokenizer.json)")->required();
  app.add_option("--runs", runs, "Runs of each file")->check(CLI::Range(1, 100000));
  app.add_option("--whitespace", whitespace, "A JSON Schema's layout: compact or flexible");
  app.add_option("--property-order", property_order, "A JSON Schema's property order: schema or any");
  app.add_option("FILE", files, "Grammars (.cgram, .gbnf) or JSON Schemas (.json)")->required();
  CLI11_PARSE(app, argc, argv);

  const std::shared_ptr<const cgram::Vocabulary> vocab = cgram::bench::load_vocabulary(vocab_path);
  if (!vocab) return 1;
  fmt::print("| file | parse (ms) | compile (ms) | first mask (ms) | total (ms) | runs |\n|---|---|---|---|---|---|\n");
  int status = 0;
  for (const std::string& file : files) {
    const std::optional<std::string> text = cgram::bench::read_text(file);
    if (!text) {
      fmt::print(stderr, "{}: cannot read the file\n", file);
      status = 1;
      continue;
    }
    const cgram::CompileRequest request = cgram::bench::request_for(*text, file, whitespace, property_order);
    Stages stages;
    for (int r = 0; r < runs; ++r) {
      cgram::Compiler compiler;  // no cache: every run compiles
      auto start = Clock::now();
      cgram::CompileOutcome outcome = compiler.compile(request, vocab);
      if (!outcome.ok()) {
        fmt::print(stderr, "{}: {}\n", file, outcome.message);
        status = 1;
        break;
      }
      auto masked = Clock::now();
      {
        cgram::Matcher first(outcome.grammar);
        std::vector<uint32_t> words(first.mask_words());
        first.fill_mask(words);
      }
      stages.mask.push_back(ms_since(masked));
      stages.total.push_back(ms_since(start));
      stages.parse.push_back(outcome.times.parse_ms);
      stages.compile.push_back(outcome.times.compile_ms);
    }
    if (stages.total.empty()) continue;
    fmt::print("| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {} |\n", file, median(stages.parse),
               median(stages.compile), median(stages.mask), median(stages.total), stages.total.size());
  }
  return status;
}

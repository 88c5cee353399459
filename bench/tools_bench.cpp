// Many tools, one grammar: a tool list → the reply grammar (cgram tools),
// compiled for a vocabulary, then masks along a reply document. Per list:
// the compile to first mask cold (the first compile in the process) and warm
// (the median of the next runs), and the masks' p50 / p99 / max along the
// reply, with the compiled grammar's memory. Figures go to
// docs/BENCHMARKS.md ("Many tools, one grammar").
//   bench_tools --vocab tokenizer.json [--format hermes] [--runs N] TOOLS.json REPLY.txt [TOOLS REPLY]...
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bench_support.h"
#include "compiler.h"
#include "matcher.h"
#include "tokenizer/encoder.h"
#include "vocabulary.h"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())))];
}

struct FirstMask {
  std::shared_ptr<const cgram::CompiledGrammar> grammar;
  double parse_ms = 0, compile_ms = 0, total_ms = 0;
};

// The tool list compiled, and its first mask: what a server waits for
// when a request brings the list.
std::optional<FirstMask> first_mask(const cgram::CompileRequest& request,
                                    const std::shared_ptr<const cgram::Vocabulary>& vocab) {
  cgram::Compiler compiler;  // no cache: every run compiles
  const auto start = Clock::now();
  cgram::CompileOutcome outcome = compiler.compile(request, vocab);
  if (!outcome.ok()) {
    fmt::print(stderr, "{}\n", outcome.message);
    return std::nullopt;
  }
  cgram::Matcher matcher(outcome.grammar);
  std::vector<uint32_t> words(matcher.mask_words());
  matcher.fill_mask(words);
  return FirstMask{outcome.grammar, outcome.times.parse_ms, outcome.times.compile_ms, us_since(start) / 1000};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tool lists → reply grammar → first mask and masks along a reply"};
  std::string vocab_path, format = "hermes";
  int runs = 5;
  std::vector<std::string> files;
  app.add_option("--vocab", vocab_path, "The vocabulary (tokenizer.json)")->required();
  app.add_option("--format", format, "The call format: hermes, llama3, qwen, mistral or json-array");
  app.add_option("--runs", runs, "Warm compiles of each list")->check(CLI::Range(1, 1000));
  app.add_option("FILES", files, "Pairs: a tool list (JSON) and a reply document")->required();
  CLI11_PARSE(app, argc, argv);
  if (files.size() % 2) {
    fmt::print(stderr, "give the files in pairs: TOOLS.json REPLY.txt\n");
    return 2;
  }
  const std::shared_ptr<const cgram::Vocabulary> vocab = cgram::bench::load_vocabulary(vocab_path);
  if (!vocab) return 1;
  auto encoder = cgram::Encoder::create(vocab);
  if (!encoder.ok()) return 1;
  fmt::print(
      "| tools | rules | cold: first mask (ms) | warm: parse / lower+index / first mask (ms) | masks | first visit: "
      "mask p50 / p99 / max (µs) | later visits (µs) | memory (MB) |\n|---|---|---|---|---|---|---|---|\n");
  for (size_t f = 0; f + 1 < files.size(); f += 2) {
    const auto tools = cgram::bench::read_text(files[f]);
    const auto reply = cgram::bench::read_text(files[f + 1]);
    if (!tools || !reply) {
      fmt::print(stderr, "cannot read {} or {}\n", files[f], files[f + 1]);
      return 1;
    }
    cgram::CompileRequest request;
    request.text = *tools;
    request.filename = files[f];
    request.parse.format = cgram::GrammarFormat::Tools;
    request.parse.tool_format = cgram::parse_tool_format(format).value_or(cgram::ToolFormat::Hermes);
    const auto cold = first_mask(request, vocab);
    if (!cold) return 1;
    std::vector<double> parse, compile, total;
    std::shared_ptr<const cgram::CompiledGrammar> grammar;
    for (int r = 0; r < runs; ++r) {
      auto warm = first_mask(request, vocab);
      if (!warm) return 1;
      parse.push_back(warm->parse_ms), compile.push_back(warm->compile_ms), total.push_back(warm->total_ms);
      grammar = warm->grammar;
    }
    // Masks along the reply, twice on one grammar: the first visit builds
    // the lazy index's entries and fills the memo, as a server's first
    // request with the list does; the second is every later request.
    std::vector<double> visits[2];
    for (std::vector<double>& masks : visits) {
      cgram::Matcher matcher(grammar);
      std::vector<uint32_t> words(matcher.mask_words());
      for (uint32_t token : (*encoder)->encode_continuation(*reply)) {
        const auto start = Clock::now();
        matcher.fill_mask(words);
        masks.push_back(us_since(start));
        if (!(words[token / 32] >> (token % 32) & 1) || matcher.advance(token) != cgram::AdvanceResult::Ongoing) {
          fmt::print(stderr, "{}: the reply leaves the grammar at token {}\n", files[f + 1], token);
          return 1;
        }
      }
    }
    const size_t rules = grammar->grammar() ? grammar->grammar()->ir().user_rule_count() : 0;
    auto figures = [](const std::vector<double>& masks) {
      return fmt::format("{:.1f} / {:.1f} / {:.1f}", quantile(masks, 0.5), quantile(masks, 0.99), quantile(masks, 1.0));
    };
    fmt::print("| {} | {} | {:.1f} | {:.1f} / {:.1f} / {:.1f} | {} | {} | {} | {:.1f} |\n", files[f], rules,
               cold->total_ms, quantile(parse, 0.5), quantile(compile, 0.5), quantile(total, 0.5), visits[0].size(),
               figures(visits[0]), figures(visits[1]), grammar->memory_bytes() / 1e6);
  }
  return 0;
}

// Many tools, one grammar: a tool list → the reply grammar (cgram tools),
// compiled for a vocabulary, then masks along a reply document. Per list:
// the compile to first mask cold (the first compile in the process) and warm
// (the median of the next runs), and the masks' p50 / p99 / max along the
// reply, with the compiled grammar's memory. Figures go to
// docs/BENCHMARKS.md ("Many tools, one grammar").
// With --cut, the reply is cut at each call's name (calls/tool_calls.h):
// only the cut up to a name is compiled before the first mask, and a tool's
// own cut when a call to it is written; --check then compares every mask
// along the reply with the whole grammar's.
//   bench_tools --vocab tokenizer.json [--format hermes] [--runs N] [--cut [--check]] TOOLS.json REPLY.txt [TOOLS REPLY]...
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <string>
#include <vector>

#include "bench_support.h"
#include "compiler.h"
#include "tool_calls.h"
#include "matcher.h"
#include "tokenizer/encoder.h"
#include "vocabulary.h"

namespace {

using Clock = std::chrono::steady_clock;
using cgram::bench::micros_since;
using cgram::bench::percentile;

std::string figures(const std::vector<double>& masks) {
  return fmt::format("{:.1f} / {:.1f} / {:.1f}", percentile(masks, 0.5), percentile(masks, 0.99), percentile(masks, 1.0));
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
  return FirstMask{outcome.grammar, outcome.times.parse_ms, outcome.times.compile_ms, micros_since(start) / 1000};
}

struct CutFirstMask {
  std::shared_ptr<const cgram::ToolCallsGrammar> grammar;
  double compile_ms = 0, total_ms = 0;
};

std::optional<CutFirstMask> cut_first_mask(const std::string& tools, const std::string& filename,
                                           cgram::ToolFormat format,
                                           const std::shared_ptr<const cgram::Vocabulary>& vocab) {
  const auto start = Clock::now();
  cgram::ToolCallsOptions options;
  options.parse.tool_format = format;
  auto grammar = cgram::ToolCallsGrammar::create(tools, filename, vocab, options);
  if (!grammar) {
    fmt::print(stderr, "{}\n", grammar.error().message);
    return std::nullopt;
  }
  const double compile_ms = micros_since(start) / 1000;
  cgram::ToolCallsMatcher matcher(*grammar);
  std::vector<uint32_t> words(matcher.mask_words());
  matcher.fill_mask(words);
  return CutFirstMask{*grammar, compile_ms, micros_since(start) / 1000};
}

// Masks along the reply, timed; with `whole`, each compared with its mask.
template <class M>
bool masks_along(M& matcher, const std::vector<uint32_t>& tokens, std::vector<double>& times,
                 cgram::Matcher* whole, const std::string& name) {
  std::vector<uint32_t> words(matcher.mask_words()), expected(matcher.mask_words());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t token = tokens[i];
    const auto start = Clock::now();
    matcher.fill_mask(words);
    times.push_back(micros_since(start));
    if (whole) {
      whole->fill_mask(expected);
      if (words != expected) {
        size_t differ = 0;
        for (size_t w = 0; w < words.size(); ++w) differ += std::popcount(words[w] ^ expected[w]);
        fmt::print(stderr, "{}: the cut mask differs from the whole grammar's at token {} ({} tokens)\n", name, i,
                   differ);
        return false;
      }
      whole->advance(token);
    }
    if (!(words[token / 32] >> (token % 32) & 1) || matcher.advance(token) != cgram::AdvanceResult::Ongoing) {
      fmt::print(stderr, "{}: the reply leaves the grammar at token {}\n", name, token);
      return false;
    }
  }
  return true;
}

// One list, cut: the cold first mask, the warm ones, then the masks along
// the reply on a fresh grammar (its first visit compiles the tools called)
// and again on the same one.
bool run_cut(const std::string& tools, const std::string& tools_name, const std::string& reply_name,
             cgram::ToolFormat format, const std::shared_ptr<const cgram::Vocabulary>& vocab,
             const std::vector<uint32_t>& tokens, int runs, bool check) {
  const auto cold = cut_first_mask(tools, tools_name, format, vocab);
  if (!cold) return false;
  std::vector<double> compile, total;
  std::shared_ptr<const cgram::ToolCallsGrammar> grammar;
  for (int r = 0; r < runs; ++r) {
    auto warm = cut_first_mask(tools, tools_name, format, vocab);
    if (!warm) return false;
    compile.push_back(warm->compile_ms), total.push_back(warm->total_ms);
    grammar = warm->grammar;
  }
  std::unique_ptr<cgram::Matcher> whole;
  if (check) {
    cgram::Compiler compiler;
    cgram::CompileRequest request;
    request.text = tools;
    request.filename = tools_name;
    request.parse.format = cgram::GrammarFormat::Tools;
    request.parse.tool_format = format;
    cgram::CompileOutcome outcome = compiler.compile(request, vocab);
    if (!outcome.ok()) {
      fmt::print(stderr, "{}\n", outcome.message);
      return false;
    }
    whole = std::make_unique<cgram::Matcher>(outcome.grammar);
  }
  std::vector<double> visits[2];
  for (int v = 0; v < 2; ++v) {
    cgram::ToolCallsMatcher matcher(grammar);
    if (whole) whole->reset();
    if (!masks_along(matcher, tokens, visits[v], whole.get(), reply_name)) return false;
  }
  if (getenv("DBG_SLOW")) {
    std::string before;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (visits[1][i] > 10) fmt::print(stderr, "slow {:.1f} us at {}: ...{:?} | {:?}\n", visits[1][i], i, before.substr(before.size() > 30 ? before.size() - 30 : 0), std::string(vocab->bytes(tokens[i])));
      before += vocab->bytes(tokens[i]);
    }
  }
  fmt::print("| {} (cut) | {} compiled | {:.1f} | - / {:.1f} / {:.1f} | {} | {} | {} | {:.1f} |\n", tools_name,
             grammar->compiled_tools(), cold->total_ms, percentile(compile, 0.5), percentile(total, 0.5),
             visits[0].size(), figures(visits[0]), figures(visits[1]), grammar->memory_bytes() / 1e6);
  return true;
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
  bool cut = false, check = false;
  app.add_flag("--cut", cut, "Cut the reply at each call's name; compile a tool's cut when a call to it is written");
  app.add_flag("--check", check, "With --cut: compare every mask along the reply with the whole grammar's");
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
  // What a server does once per vocabulary, when it loads it: the trie of
  // its tokens, shared by every grammar, is built before the cold compiles.
  const auto trie_start = Clock::now();
  vocab->trie();
  fmt::print("The vocabulary's trie, built once before the lists: {:.1f} ms\n\n", micros_since(trie_start) / 1000);
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
    const cgram::ToolFormat tool_format = cgram::parse_tool_format(format).value_or(cgram::ToolFormat::Hermes);
    const std::vector<uint32_t> tokens = (*encoder)->encode_continuation(*reply);
    if (cut) {
      if (!run_cut(*tools, files[f], files[f + 1], tool_format, vocab, tokens, runs, check)) return 1;
      continue;
    }
    cgram::CompileRequest request;
    request.text = *tools;
    request.filename = files[f];
    request.parse.format = cgram::GrammarFormat::Tools;
    request.parse.tool_format = tool_format;
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
      if (!masks_along(matcher, tokens, masks, nullptr, files[f + 1])) return 1;
    }
    const size_t rules = grammar->grammar() ? grammar->grammar()->ir().user_rule_count() : 0;
    fmt::print("| {} | {} | {:.1f} | {:.1f} / {:.1f} / {:.1f} | {} | {} | {} | {:.1f} |\n", files[f], rules,
               cold->total_ms, percentile(parse, 0.5), percentile(compile, 0.5), percentile(total, 0.5), visits[0].size(),
               figures(visits[0]), figures(visits[1]), grammar->memory_bytes() / 1e6);
  }
  return 0;
}

// cgram and XGrammar side by side, in one run, on the same token ids: each
// grammar (GBNF, which both read) compiled by both for one vocabulary, then
// random walks the suite does not hold, drawn from cgram's masks, and the
// documents given for it (--docs STEM=DIR: every file of DIR, tokenized by
// cgram's encoder), both matchers advanced by the same tokens. At every step
// both masks are made and timed, and compared over the text tokens: steps
// where one engine allows a token the other refuses are counted by
// direction, and the first of each shown.
// Figures go to docs/BENCHMARKS.md; nothing here is a unit test.
//
// XGrammar is not a dependency: this program is built only when CMake is
// given a checkout of it (-DCGRAM_XGRAMMAR_DIR=…, with dlpack's headers in
// its 3rdparty/dlpack/include), compiled from its sources as its own CMake
// does (C++17, Release).
//   bench_vs_xgrammar --vocab tokenizer.json [--walks N] [--steps S] [--seed K]
//                     [--mask-memo on|off] [--eager-index] [--model-step-ms X]
//                     [--docs STEM=DIR]...
//                     GRAMMAR.gbnf...
#include <CLI/CLI.hpp>
#include <dlpack/dlpack.h>
#include <fmt/format.h>
#include <xgrammar/xgrammar.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "compiled_grammar.h"
#include "compiler.h"
#include "matcher.h"
#include "tokenizer/encoder.h"
#include "vocabulary.h"

namespace {

using Clock = std::chrono::steady_clock;
using cgram::bench::micros_since;
using cgram::bench::percentile;

struct Options {
  size_t walks = 5, steps = 200;
  double model_step_ms = 0;  // untimed, before each step's masks (a forward pass)
  uint64_t seed = 1;
  bool memo = true, eager_index = false;
};

// XGrammar's view of the vocabulary: the same ids, each token's own bytes
// (VocabType::RAW), cgram's special tokens as empty strings (which XGrammar
// counts as special) and its end-of-sequence ids as the stop tokens.
xgrammar::TokenizerInfo xgrammar_vocabulary(const cgram::Vocabulary& vocab) {
  std::vector<std::string> tokens(vocab.size());
  for (uint32_t id = 0; id < vocab.size(); ++id)
    if (!vocab.is_special(id)) tokens[id] = std::string(vocab.bytes(id));
  std::vector<int32_t> stops(vocab.eos_ids().begin(), vocab.eos_ids().end());
  return xgrammar::TokenizerInfo(tokens, xgrammar::VocabType::RAW, static_cast<int>(vocab.size()), stops);
}

struct Row {
  std::string grammar, texts;  // "walks" or "documents"
  double cgram_compile_ms = 0, xgrammar_compile_ms = 0;
  std::vector<double> cgram_us, xgrammar_us;
  size_t only_cgram = 0, only_xgrammar = 0;  // steps where one allows a token the other refuses
  size_t texts_stopped = 0;                  // a token one of them refused (a document), or XGrammar (a walk)
  std::string first_only_cgram, first_only_xgrammar;
};

struct Peers {
  std::shared_ptr<const cgram::Vocabulary> shared_vocab;
  const cgram::Vocabulary& vocab;
  xgrammar::GrammarCompiler& xgrammar;
  const Options& options;
};

// Both masks at one step, timed and compared; the tokens cgram allows go to `allowed`.
class StepPair {
 public:
  StepPair(const Peers& peers, const std::shared_ptr<const cgram::CompiledGrammar>& grammar,
           const xgrammar::CompiledGrammar& compiled)
      : peers_(peers), ours_(grammar), theirs_(compiled), words_(ours_.mask_words(), 0u),
        bits_(static_cast<size_t>(xgrammar::GetBitmaskSize(static_cast<int>(peers.vocab.size()))), 0),
        shape_(static_cast<int64_t>(bits_.size())),
        tensor_{bits_.data(), DLDevice{kDLCPU, 0}, 1, xgrammar::GetBitmaskDLType(), &shape_, nullptr, 0} {}

  void masks(size_t step, Row& row, std::vector<uint32_t>& allowed) {
    if (peers_.options.model_step_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(peers_.options.model_step_ms));
    std::fill(words_.begin(), words_.end(), 0u);
    auto t0 = Clock::now();
    ours_.fill_mask(words_);
    row.cgram_us.push_back(micros_since(t0));
    t0 = Clock::now();
    theirs_.FillNextTokenBitmask(&tensor_);
    row.xgrammar_us.push_back(micros_since(t0));
    allowed.clear();
    bool only_ours = false, only_theirs = false;
    for (uint32_t id = 0; id < peers_.vocab.size(); ++id) {
      if (peers_.vocab.is_special(id)) continue;
      const bool a = words_[id / 32] >> (id % 32) & 1, b = static_cast<uint32_t>(bits_[id / 32]) >> (id % 32) & 1;
      if (a) allowed.push_back(id);
      if (a == b) continue;
      std::string& first = a ? row.first_only_cgram : row.first_only_xgrammar;
      if (first.empty())
        first = fmt::format("step {}: token {} {:?} after {:?}", step, id, std::string(peers_.vocab.bytes(id)),
                            text_.substr(text_.size() - std::min<size_t>(text_.size(), 40)));
      (a ? only_ours : only_theirs) = true;
    }
    row.only_cgram += only_ours;
    row.only_xgrammar += only_theirs;
  }
  bool advance(uint32_t token) {
    text_ += peers_.vocab.bytes(token);
    return ours_.advance(token) != cgram::AdvanceResult::Rejected && theirs_.AcceptToken(static_cast<int32_t>(token));
  }

 private:
  const Peers& peers_;
  cgram::Matcher ours_;
  xgrammar::GrammarMatcher theirs_;
  std::vector<uint32_t> words_;
  std::vector<int32_t> bits_;
  int64_t shape_;
  DLTensor tensor_;
  std::string text_;  // so far, for the differences shown
};

// One walk, the next token drawn from cgram's mask.
void walk(const Peers& peers, const std::shared_ptr<const cgram::CompiledGrammar>& grammar,
          const xgrammar::CompiledGrammar& compiled, std::mt19937_64& random, Row& row) {
  StepPair pair(peers, grammar, compiled);
  std::vector<uint32_t> allowed;
  for (size_t step = 0; step < peers.options.steps; ++step) {
    pair.masks(step, row, allowed);
    if (allowed.empty()) return;  // only the end is left
    if (!pair.advance(allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(random)])) {
      ++row.texts_stopped;
      return;
    }
  }
}

void replay(const Peers& peers, const std::shared_ptr<const cgram::CompiledGrammar>& grammar,
            const xgrammar::CompiledGrammar& compiled, std::span<const uint32_t> tokens, Row& row) {
  StepPair pair(peers, grammar, compiled);
  std::vector<uint32_t> allowed;
  for (size_t step = 0; step < tokens.size(); ++step) {
    pair.masks(step, row, allowed);
    if (!pair.advance(tokens[step])) {
      ++row.texts_stopped;
      return;
    }
  }
}

std::vector<std::vector<uint32_t>> documents_of(const std::shared_ptr<const cgram::Vocabulary>& vocab,
                                                const std::string& stem, const std::vector<std::string>& docs) {
  std::vector<std::vector<uint32_t>> out;
  auto encoder = cgram::Encoder::create(vocab);
  if (encoder.if_error()) return out;
  for (const std::string& spec : docs) {
    if (spec.substr(0, spec.find('=')) != stem) continue;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(spec.substr(spec.find('=') + 1)))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      if (const std::optional<std::string> text = cgram::bench::read_text(f))
        if (auto tokens = (*encoder)->try_encode(*text); !tokens.if_error()) out.push_back(std::move(*tokens));
  }
  return out;
}

std::vector<Row> run_grammar(const Peers& peers, const std::string& path, const std::vector<std::string>& docs) {
  const std::string stem = std::filesystem::path(path).stem().string();
  const std::optional<std::string> text = cgram::bench::read_text(path);
  if (!text) {
    fmt::print(stderr, "{}: cannot read the file\n", path);
    return {};
  }
  cgram::CompileRequest request = cgram::bench::request_for(*text, path, "compact", "any");
  request.compile.eager_index = peers.options.eager_index;
  if (!peers.options.memo) request.compile.mask_memo_bytes = 0;
  cgram::Compiler compiler;
  auto t0 = Clock::now();
  cgram::CompileOutcome outcome = compiler.compile(request, peers.shared_vocab);
  const double cgram_ms = micros_since(t0) / 1000;
  if (!outcome.ok()) {
    fmt::print(stderr, "{}: {}\n", path, outcome.message);
    return {};
  }
  std::vector<Row> rows;
  try {  // XGrammar reports a grammar it does not read by throwing
    t0 = Clock::now();
    xgrammar::CompiledGrammar compiled = peers.xgrammar.CompileGrammar(*text, "root");
    const double xgrammar_ms = micros_since(t0) / 1000;
    rows.push_back(Row{stem, "walks", cgram_ms, xgrammar_ms, {}, {}, 0, 0, 0, {}, {}});
    std::mt19937_64 random(peers.options.seed);
    for (size_t w = 0; w < peers.options.walks; ++w) walk(peers, outcome.grammar, compiled, random, rows.back());
    const auto documents = documents_of(peers.shared_vocab, stem, docs);
    if (!documents.empty()) {
      rows.push_back(Row{stem, fmt::format("{} documents", documents.size()), cgram_ms, xgrammar_ms, {}, {}, 0, 0, 0, {}, {}});
      for (const auto& tokens : documents) replay(peers, outcome.grammar, compiled, tokens, rows.back());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: XGrammar: {}\n", path, e.what());
    rows.clear();
  }
  return rows;
}

std::string spread(const std::vector<double>& us) {
  return fmt::format("{:.1f} / {:.1f} / {:.1f}", percentile(us, 0.5), percentile(us, 0.99), percentile(us, 1.0));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cgram and XGrammar side by side on the same token ids: masks along random walks, compile times"};
  std::string vocab_path, memo = "on";
  std::vector<std::string> grammars, docs;
  Options options;
  app.add_option("--vocab", vocab_path, "The vocabulary (tokenizer.json)")->required();
  app.add_option("--walks", options.walks, "Random walks per grammar");
  app.add_option("--steps", options.steps, "At most this many steps a walk");
  app.add_option("--seed", options.seed, "The walks' seed");
  app.add_option("--mask-memo", memo, "cgram's memo of masks: on (the library's default) or off")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--model-step-ms", options.model_step_ms,
                 "Wait this long, untimed, before each step, as a forward pass does (cgram's lazy index is "
                 "built in the background meanwhile)");
  app.add_flag("--eager-index", options.eager_index, "cgram's whole token index at compile time (default: lazy)");
  app.add_option("--docs", docs, "STEM=DIR: the files of DIR are documents of the grammar named STEM.gbnf")
      ->allow_extra_args(false);  // one value each time: the grammars follow
  app.add_option("GRAMMAR", grammars, "GBNF grammars (root rule `root`)")->required();
  CLI11_PARSE(app, argc, argv);
  options.memo = memo == "on";

  const std::shared_ptr<const cgram::Vocabulary> vocab = cgram::bench::load_vocabulary(vocab_path);
  if (!vocab) return 1;
  // XGrammar's defaults but one thread, as cgram compiles on one.
  xgrammar::GrammarCompiler xgrammar(xgrammar_vocabulary(*vocab), /*max_threads=*/1, /*cache_enabled=*/false);
  const Peers peers{vocab, *vocab, xgrammar, options};
  {
    // The vocabulary's trie, shared by every grammar, is built by the first
    // compile: built here, so that no grammar's compile time holds it (as
    // XGrammar's tokenizer information is built above).
    cgram::CompileRequest warm_up = cgram::bench::request_for("root ::= \"a\"", "warm_up.gbnf", "compact", "any");
    cgram::Compiler().compile(warm_up, vocab);
  }
  fmt::print("| grammar | texts | steps | cgram p50 / p99 / max µs | XGrammar p50 / p99 / max µs | ratio p50 / p99 | "
             "compile ms cgram / XGrammar | steps where only cgram / only XGrammar allows a token | texts stopped |\n"
             "|---|---|---|---|---|---|---|---|---|\n");
  int status = 0;
  for (const std::string& path : grammars) {
    const std::vector<Row> rows = run_grammar(peers, path, docs);
    if (rows.empty()) status = 1;
    for (const Row& row : rows) {
      fmt::print("| {} | {} | {} | {} | {} | {:.3f} / {:.3f} | {:.1f} / {:.1f} | {} / {} | {} |\n", row.grammar,
                 row.texts, row.cgram_us.size(), spread(row.cgram_us), spread(row.xgrammar_us),
                 percentile(row.cgram_us, 0.5) / percentile(row.xgrammar_us, 0.5),
                 percentile(row.cgram_us, 0.99) / percentile(row.xgrammar_us, 0.99), row.cgram_compile_ms,
                 row.xgrammar_compile_ms, row.only_cgram, row.only_xgrammar, row.texts_stopped);
      std::fflush(stdout);
      if (!row.first_only_cgram.empty())
        fmt::print(stderr, "{} ({}): first allowed by cgram alone at {}\n", row.grammar, row.texts, row.first_only_cgram);
      if (!row.first_only_xgrammar.empty())
        fmt::print(stderr, "{} ({}): first allowed by XGrammar alone at {}\n", row.grammar, row.texts,
                   row.first_only_xgrammar);
    }
  }
  return status;
}

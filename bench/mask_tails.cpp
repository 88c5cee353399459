// The tail of the mask latency over a suite of schemas (or grammars) and
// their documents, pooled over every step: each grammar is compiled (eager
// index), then each of its documents is masked step by step once, by a
// fresh matcher, as a server meets a schema's first requests. For profiling
// the slow steps: with --perf-control FIFO, "enable" is written there
// before a grammar's masks and "disable" after them (perf record -D -1
// --control fifo:FIFO), so that the profile holds the masks (and the
// matchers' construction and advances between them) without the compiles;
// --copies K goes over the suite K times for K times the samples. Figures
// go to docs/BENCHMARKS.md.
//   bench_mask_tails --vocab tokenizer.json SUITE [--property-order any]
//                    [--whitespace compact] [--mask-memo off] [--slowest N]
//                    [--copies K] [--visits V [--evict]] [--all-first]
//                    [--perf-control FIFO]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_support.h"
#include "compiled_grammar.h"
#include "compiler.h"
#include "matcher.h"
#include "or_floor.h"
#include "tokenizer/encoder.h"
#include "vocabulary.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Entry {
  std::string name, path, text;
  std::vector<std::shared_ptr<const cgram::CompiledGrammar>> copies;  // --all-first
  std::vector<std::pair<std::string, std::vector<uint32_t>>> documents;  // text, tokens
};

struct Step {
  double us;
  size_t entry, document, step;
};

using cgram::bench::percentile;

// The grammar file of a suite folder: its one .json, .cgram or .gbnf.
std::optional<fs::path> grammar_in(const fs::path& folder) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(folder)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".json" || ext == ".cgram" || ext == ".gbnf")) found.push_back(e.path());
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) return std::nullopt;
  return found.front();
}

std::string shown(std::string_view text) {
  std::string out;
  for (char c : text) out += (c == '\n' ? std::string("\\n") : std::string(1, c));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Mask latency tails over a suite's documents, pooled over every step (eager index)"};
  std::string vocab_path, suite, whitespace = "compact", property_order = "any", mask_memo = "document", fifo;
  size_t slowest = 10, copies = 1, visits = 1;
  bool all_first = false, evict = false;
  app.add_option("--vocab", vocab_path, "The vocabulary (tokenizer.json)")->required();
  app.add_option("SUITE", suite, "A suite folder: NAME/grammar and NAME/docs/* per entry")->required();
  app.add_option("--whitespace", whitespace, "A JSON Schema's layout: compact, pretty or flexible");
  app.add_option("--property-order", property_order, "A JSON Schema's property order: schema or any");
  app.add_option("--mask-memo", mask_memo, "document (each grammar's memo starts empty) or off")
      ->check(CLI::IsMember({"document", "off"}));
  app.add_option("--slowest", slowest, "List the N slowest steps");
  app.add_option("--copies", copies, "Go over the suite K times, each grammar compiled afresh")
      ->check(CLI::Range(1, 100));
  app.add_option("--visits", visits,
                 "Mask each grammar's documents V times, each by a fresh matcher; the visits after the first are "
                 "reported apart (what a grammar's first use costs beyond a matcher's)")
      ->check(CLI::Range(1, 100));
  app.add_flag("--evict", evict, "With --visits: compile the next grammar of the suite before each later visit");
  app.add_flag("--all-first", all_first,
               "Compile every grammar before the first mask (the default compiles each right before its documents, "
               "as a server meeting a new schema)");
  app.add_option("--perf-control", fifo, "A perf control FIFO: 'enable' is written there before the masks, 'disable' after");
  CLI11_PARSE(app, argc, argv);

  const std::shared_ptr<const cgram::Vocabulary> vocab = cgram::bench::load_vocabulary(vocab_path);
  if (!vocab) return 1;
  auto created = cgram::Encoder::create(vocab);
  if (auto* e = created.if_error()) {
    fmt::print(stderr, "{}\n", e->message);
    return 1;
  }
  const std::unique_ptr<cgram::Encoder> encoder = std::move(*created);

  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(suite))
    if (e.is_directory()) folders.push_back(e.path());
  std::sort(folders.begin(), folders.end());

  std::vector<Entry> entries;
  for (const fs::path& folder : folders) {
    const std::optional<fs::path> file = grammar_in(folder);
    const std::optional<std::string> text = file ? cgram::bench::read_text(*file) : std::nullopt;
    if (!text) continue;
    Entry entry{folder.filename().string(), file->string(), *text, {}, {}};
    std::vector<fs::path> docs;
    if (fs::is_directory(folder / "docs"))
      for (const auto& d : fs::directory_iterator(folder / "docs"))
        if (d.is_regular_file()) docs.push_back(d.path());
    std::sort(docs.begin(), docs.end());
    for (const fs::path& d : docs) {
      const std::optional<std::string> doc = cgram::bench::read_text(d);
      if (!doc) continue;
      auto tokens = encoder->try_encode_continuation(*doc);
      if (tokens.if_error()) continue;
      entry.documents.emplace_back(*doc, std::move(*tokens));
    }
    entries.push_back(std::move(entry));
  }

  const auto compile = [&](const Entry& entry) -> std::shared_ptr<const cgram::CompiledGrammar> {
    cgram::CompileRequest request = cgram::bench::request_for(entry.text, entry.path, whitespace, property_order);
    request.compile.eager_index = true;
    if (mask_memo == "off") request.compile.mask_memo_bytes = 0;
    cgram::Compiler compiler;  // no cache: every copy is compiled afresh
    cgram::CompileOutcome outcome = compiler.compile(request, vocab);
    if (!outcome.ok()) fmt::print(stderr, "{}: {}\n", entry.path, outcome.message);
    return outcome.ok() ? outcome.grammar : nullptr;
  };
  std::ofstream control;  // perf's: open for the whole run
  if (!fifo.empty()) control.open(fifo);
  const auto tell_perf = [&](const char* command) {
    if (control.is_open()) control << command << '\n' << std::flush;
  };
  if (all_first)
    for (size_t k = 0; k < copies; ++k)
      for (Entry& e : entries) e.copies.push_back(compile(e));
  std::vector<Step> steps, later;  // first visits, and the visits after
  std::vector<uint32_t> words;
  cgram::MaskMemo::Stats memo;
  size_t compiled = 0;  // grammars masked (a copy that failed to compile is left out)
  size_t replayed = 0, stopped = 0;  // documents masked to their end, and those a mask refused a token of
  for (size_t k = 0; k < copies; ++k)
    for (size_t e = 0; e < entries.size(); ++e) {
      const std::shared_ptr<const cgram::CompiledGrammar> grammar = all_first ? entries[e].copies[k] : compile(entries[e]);
      if (!grammar) continue;
      ++compiled;
      tell_perf("enable");
      for (size_t visit = 0; visit < visits; ++visit) {
        if (visit > 0 && evict) {
          // Another grammar's compile in between pushes this one out of the
          // caches: whether the later visits are faster for warm memory.
          tell_perf("disable");
          compile(entries[(e + 1) % entries.size()]);
          tell_perf("enable");
        }
        for (size_t d = 0; d < entries[e].documents.size(); ++d) {
          cgram::Matcher matcher(grammar);
          words.assign(matcher.mask_words(), 0u);
          const std::vector<uint32_t>& tokens = entries[e].documents[d].second;
          size_t i = 0;
          for (; i < tokens.size(); ++i) {
            const auto t0 = Clock::now();
            matcher.fill_mask(words);
            const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
            if (matcher.has_error() || !(words[tokens[i] / 32] >> (tokens[i] % 32) & 1)) break;
            (visit == 0 ? steps : later).push_back({us, e, d, i});
            matcher.advance(tokens[i]);
          }
          if (visit == 0) ++(i == tokens.size() ? replayed : stopped);
          if (visit == 0 && i < tokens.size())
            fmt::print(stderr, "{}: document {} stopped at token {} of {} (id {}{})\n", entries[e].path, d, i,
                       tokens.size(), tokens[i], matcher.has_error() ? ", the matcher in error" : "");
        }
      }
      tell_perf("disable");
      const cgram::MaskMemo::Stats s = grammar->mask_memo().stats();
      memo.hits += s.hits, memo.misses += s.misses, memo.masks += s.masks, memo.mask_bytes += s.mask_bytes;
    }

  std::vector<double> all;
  for (const Step& s : steps) all.push_back(s.us);
  fmt::print("{} grammars × {} copies, first visits, {} mask steps (µs): p50 {:.2f}  p90 {:.2f}  p99 {:.2f}  p99.9 {:.2f}  max {:.2f}\n",
             entries.size(), copies, steps.size(), percentile(all, 0.5), percentile(all, 0.9), percentile(all, 0.99),
             percentile(all, 0.999), percentile(all, 1.0));
  if (!later.empty()) {
    std::vector<double> again;
    for (const Step& s : later) again.push_back(s.us);
    fmt::print("visits after the first, {} mask steps (µs): p50 {:.2f}  p90 {:.2f}  p99 {:.2f}  p99.9 {:.2f}  max {:.2f}\n",
               again.size(), percentile(again, 0.5), percentile(again, 0.9), percentile(again, 0.99),
               percentile(again, 0.999), percentile(again, 1.0));
  }
  // The unit of the targets, measured now (support/or_floor.h).
  const double floor = cgram::or_floor_us(words.empty() ? (vocab->size() + 31) / 32 : words.size());
  fmt::print("in floors (one OR of a full bitset: {:.3f} µs): p50 {:.1f}  p90 {:.1f}  p99 {:.1f}  p99.9 {:.1f}  max {:.1f}\n",
             floor, percentile(all, 0.5) / floor, percentile(all, 0.9) / floor, percentile(all, 0.99) / floor,
             percentile(all, 0.999) / floor, percentile(all, 1.0) / floor);
  fmt::print("grammars compiled: {} of {}; documents masked to their end: {} of {} ({} stopped where a mask left out "
             "the document's own token)\n",
             compiled, entries.size() * copies, replayed, replayed + stopped, stopped);
  fmt::print("the grammars' memos: {} of {} lookups answered, {} masks kept ({:.1f} KB a grammar)\n", memo.hits,
             memo.hits + memo.misses, memo.masks,
             compiled == 0 ? 0.0 : static_cast<double>(memo.mask_bytes) / 1024.0 / static_cast<double>(compiled));
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.us > b.us; });
  for (size_t i = 0; i < std::min(slowest, steps.size()); ++i) {
    const Step& s = steps[i];
    const auto& tokens = entries[s.entry].documents[s.document].second;
    std::string before;
    for (size_t j = 0; j < s.step; ++j) before += vocab->bytes(tokens[j]);
    if (before.size() > 40) before = before.substr(before.size() - 40);
    fmt::print("  {:8.1f} µs  {} doc {} step {}: after '{}', next '{}'\n", s.us, entries[s.entry].name, s.document,
               s.step, shown(before), shown(vocab->bytes(tokens[s.step])));
  }
  return 0;
}

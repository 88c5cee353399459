// Soak test of the matcher: many live matchers over several threads and
// grammars, random walks with rollback, clone and reset, for millions of
// tokens, checking as it goes and watching resident memory.
//
// Every grammar is compiled once for one vocabulary. Each thread owns its
// share of the matchers and steps them in turn, one token each. A step:
// fill_mask, pick a token uniformly among the set bits, check that
// is_allowed agrees, advance (Ongoing for text, Finished for end of
// sequence). Then, with small probabilities per step: rollback(k) (1 %; k
// up to 8, or one time in four any k <= tokens_accepted()), clone the matcher
// and go on with the clone, dropping the original (0.5 %), or reset (0.05 %).
// After end of sequence the matcher is reset, replaced by a new one (on a
// random grammar), or rolled back. A matcher that
// reaches --max-history accepted tokens is reset: its history (one entry per
// accepted token, kept for rollback) would otherwise grow without bound on a
// walk that never ends, which is not how a matcher is used.
//
// Checks (each failure counts as an error; there must be none):
//  - the chosen token is allowed by is_allowed; advance never rejects it;
//  - every mask is hashed and the hash kept per accepted-token count, so the
//    first mask after a rollback, clone or reset must equal the one seen
//    before at that point of the walk;
//  - every --check-every steps: is_allowed against the mask's bits for a few
//    allowed tokens, a few random ids and the end-of-sequence ids; a
//    disallowed token's advance is Rejected and leaves the mask unchanged;
//  - after end of sequence: the mask is empty and advance rejects.
// A non-finished state with an empty mask is counted as a dead end (reset).
//
// Resident memory (VmRSS, VmHWM from /proc/self/status) is printed after
// compiling, after the matchers are made, at every tenth of the tokens and
// at the end, with malloc's bytes in use (mallinfo2) and the mean walk length
// (tokens_accepted() over the live matchers): the matchers' memory follows
// their walks, which lengthen for the first few thousand steps per matcher
// and then hold steady. Memory is called flat when the end's RSS is within
// 10 % of the RSS at half the tokens; the exit status is 1 when it is not,
// or when there was any error.
//
//   cgram-soak [--threads 8] [--matchers 1000] [--tokens 10000000] [--seed 1]
//              [--vocab V] [--grammars json,csv,...] [--max-history 4096]
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "compiler.h"
#include "matcher.h"

namespace {

using namespace cgram;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Memory {
  size_t rss_kb = 0, hwm_kb = 0;
  size_t heap_kb = 0;  // malloc's bytes in use (every arena), to tell live data from free pages
};

Memory read_memory() {
  std::ifstream in("/proc/self/status");
  Memory m;
  const struct mallinfo2 info = mallinfo2();
  m.heap_kb = (info.uordblks + info.hblkhd) / 1024;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) m.rss_kb = std::stoul(line.substr(6));
    if (line.rfind("VmHWM:", 0) == 0) m.hwm_kb = std::stoul(line.substr(6));
  }
  return m;
}

std::string mb(size_t kb) { return fmt::format("{:.1f} MB", kb / 1024.0); }

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A name (json) means examples/json.cgram of the source tree; anything with
// a slash or ending in .cgram is a path.
fs::path grammar_path(const std::string& name) {
  if (name.find('/') != std::string::npos || name.ends_with(".cgram")) return name;
  return fs::path(CGRAM_SOURCE_DIR) / "examples" / (name + ".cgram");
}

uint32_t hash_mask(std::span<const uint32_t> words) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint32_t w : words) h = (h ^ w) * 0x100000001b3ull + (h >> 29);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

bool bit(std::span<const uint32_t> words, uint32_t id) { return words[id / 32] >> (id % 32) & 1; }

// The n-th set bit (0-based) of the mask.
uint32_t nth_set_bit(std::span<const uint32_t> words, uint64_t n) {
  for (uint32_t w = 0; w < words.size(); ++w) {
    const uint32_t count = static_cast<uint32_t>(std::popcount(words[w]));
    if (n >= count) {
      n -= count;
      continue;
    }
    uint32_t bits = words[w];
    for (; n > 0; --n) bits &= bits - 1;
    return w * 32 + static_cast<uint32_t>(std::countr_zero(bits));
  }
  return UINT32_MAX;
}

struct Settings {
  size_t max_history = 4096;
  uint32_t check_every = 64;
  // Probabilities per step, in millionths.
  uint32_t rollback_ppm = 10000, clone_ppm = 5000, reset_ppm = 500;
};

// A matcher with what the soak knows about its walk.
struct Slot {
  std::unique_ptr<Matcher> matcher;
  size_t grammar = 0;
  // The mask's hash after i accepted tokens; its capacity is reserved for
  // the longest walk once, so that the soak's own memory stays constant.
  std::vector<uint32_t> hashes;
};

struct Counters {
  std::atomic<uint64_t> tokens{0}, steps{0}, errors{0};
  std::atomic<uint64_t> walk_tokens{0};  // tokens_accepted() summed over the thread's matchers
  uint64_t documents = 0, rollbacks = 0, rolled_back_tokens = 0, clones = 0, resets = 0, replaced = 0,
           history_resets = 0, dead_ends = 0, checks = 0, mask_compares = 0, longest_walk = 0,
           live_walk_tokens = 0;
  size_t hash_bytes = 0;
  std::vector<std::string> first_errors;
};

class Worker {
 public:
  Worker(const std::vector<std::shared_ptr<const CompiledGrammar>>& grammars, const Settings& settings,
         uint64_t seed, Counters& counters)
      : grammars_(grammars), settings_(settings), rng_(seed), c_(counters) {
    const Vocabulary& vocab = grammars_[0]->vocabulary();
    vocab_size_ = static_cast<uint32_t>(vocab.size());
    eos_ = vocab.eos_ids();
    words_.resize(grammars_[0]->mask_words());
    again_.resize(words_.size());
  }

  void add_matcher(size_t grammar) {
    Slot s;
    s.grammar = grammar;
    s.matcher = std::make_unique<Matcher>(grammars_[grammar]);
    s.hashes.resize(settings_.max_history + 2);  // touched now, so that RSS counts it from the start
    s.hashes.clear();
    slots_.push_back(std::move(s));
  }

  void run(uint64_t quota) {
    uint64_t done = 0;
    while (done < quota)
      for (Slot& s : slots_) {
        const size_t before = s.matcher->tokens_accepted();
        done += step(s);
        walk_ += s.matcher->tokens_accepted() - before;  // modulo 2^64, so a shorter walk subtracts
        c_.walk_tokens.store(walk_, std::memory_order_relaxed);
        if (done >= quota) break;
      }
    for (const Slot& s : slots_) {
      c_.hash_bytes += s.hashes.capacity() * sizeof(uint32_t);
      c_.live_walk_tokens += s.matcher->tokens_accepted();
    }
  }

 private:
  void error(const Slot& s, const std::string& what) {
    c_.errors.fetch_add(1, std::memory_order_relaxed);
    if (c_.first_errors.size() < 10)
      c_.first_errors.push_back(fmt::format("{} (grammar {}, after {} tokens)", what,
                                            grammars_[s.grammar]->source_name(), s.matcher->tokens_accepted()));
  }
  uint64_t below(uint64_t n) { return rng_() % n; }

  void reset(Slot& s) {
    s.matcher->reset();
    s.hashes.resize(std::min<size_t>(s.hashes.size(), 1));
  }
  void replace(Slot& s) {
    s.grammar = below(grammars_.size());
    s.matcher = std::make_unique<Matcher>(grammars_[s.grammar]);
    s.hashes.clear();
    ++c_.replaced;
  }
  void rollback(Slot& s) {
    const size_t accepted = s.matcher->tokens_accepted();
    if (accepted == 0) return;
    // Mostly a few tokens (as a speculative decoder would), one time in four any number.
    const size_t k = rng_() % 4 ? 1 + below(std::min<size_t>(accepted, 8)) : 1 + below(accepted);
    if (!s.matcher->rollback(k)) error(s, fmt::format("rollback({}) refused", k));
    if (s.matcher->tokens_accepted() != accepted - k) error(s, "tokens_accepted wrong after rollback");
    s.hashes.resize(std::min(s.hashes.size(), s.matcher->tokens_accepted() + 1));
    ++c_.rollbacks;
    c_.rolled_back_tokens += k;
  }
  void clone(Slot& s) {
    // Go on with the clone; the original is dropped.
    std::unique_ptr<Matcher> copy(new Matcher(s.matcher->clone()));
    if (copy->tokens_accepted() != s.matcher->tokens_accepted() || copy->is_finished() != s.matcher->is_finished())
      error(s, "clone differs");
    s.matcher = std::move(copy);
    ++c_.clones;
  }

  // is_allowed against the mask for a few tokens; a disallowed token is
  // rejected and leaves the state as it was.
  void check(Slot& s, uint32_t mask_hash, uint64_t allowed) {
    Matcher& m = *s.matcher;
    ++c_.checks;
    auto agree = [&](uint32_t id) {
      if (m.is_allowed(id) != bit(words_, id))
        error(s, fmt::format("is_allowed({}) = {} but the mask bit is {}", id, !bit(words_, id), bit(words_, id)));
    };
    for (int i = 0; i < 4; ++i) agree(nth_set_bit(words_, below(allowed)));
    for (uint32_t id : eos_) agree(id);
    uint32_t refused = UINT32_MAX;
    for (int i = 0; i < 8; ++i) {
      const uint32_t id = static_cast<uint32_t>(below(vocab_size_));
      agree(id);
      if (!bit(words_, id)) refused = id;
    }
    if (refused == UINT32_MAX) return;
    const size_t accepted = m.tokens_accepted();
    if (m.advance(refused) != AdvanceResult::Rejected) {
      error(s, fmt::format("advance({}) accepted a token the mask refuses", refused));
      reset(s);
      return;
    }
    m.fill_mask(again_);
    ++c_.mask_compares;
    if (m.tokens_accepted() != accepted || hash_mask(again_) != mask_hash)
      error(s, "a rejected advance changed the state");
  }

  // One step of one matcher; returns the tokens accepted (0 or 1).
  uint64_t step(Slot& s) {
    Matcher& m = *s.matcher;
    c_.steps.fetch_add(1, std::memory_order_relaxed);
    m.fill_mask(words_);
    const uint32_t h = hash_mask(words_);
    const size_t accepted = m.tokens_accepted();
    c_.longest_walk = std::max<uint64_t>(c_.longest_walk, accepted);
    if (accepted < s.hashes.size()) {
      ++c_.mask_compares;
      if (s.hashes[accepted] != h) error(s, "the mask differs from the one seen before at this point");
      s.hashes.resize(accepted + 1);
    } else if (accepted == s.hashes.size()) {
      s.hashes.push_back(h);
    } else {
      error(s, "tokens_accepted skipped a step");
      s.hashes.clear();
    }
    uint64_t allowed = 0;
    for (uint32_t w : words_) allowed += static_cast<uint64_t>(std::popcount(w));
    if (allowed == 0) {
      if (m.is_finished()) error(s, "a finished matcher was stepped");
      ++c_.dead_ends;
      reset(s);
      return 0;
    }
    if (++since_check_ >= settings_.check_every) {
      since_check_ = 0;
      check(s, h, allowed);
    }
    const uint32_t token = nth_set_bit(words_, below(allowed));
    if (!m.is_allowed(token)) error(s, fmt::format("is_allowed({}) is false for a token of the mask", token));
    const bool eos = std::find(eos_.begin(), eos_.end(), token) != eos_.end();
    const AdvanceResult r = m.advance(token);
    if (r != (eos ? AdvanceResult::Finished : AdvanceResult::Ongoing)) {
      error(s, fmt::format("advance({}) gave {}", token,
                           r == AdvanceResult::Rejected ? "Rejected" : eos ? "Ongoing" : "Finished"));
      if (r == AdvanceResult::Rejected) {
        reset(s);
        return 0;
      }
    }
    c_.tokens.fetch_add(1, std::memory_order_relaxed);
    if (r == AdvanceResult::Finished) {
      ++c_.documents;
      m.fill_mask(again_);
      if (std::any_of(again_.begin(), again_.end(), [](uint32_t w) { return w != 0; }) ||
          m.advance(token) != AdvanceResult::Rejected || !m.is_finished())
        error(s, "a finished matcher still allows tokens");
      switch (below(3)) {
        case 0: reset(s); ++c_.resets; break;
        case 1: replace(s); break;
        default: rollback(s); break;
      }
      return 1;
    }
    if (m.tokens_accepted() >= settings_.max_history) {
      reset(s);
      ++c_.history_resets;
      return 1;
    }
    const uint32_t roll = static_cast<uint32_t>(below(1000000));
    if (roll < settings_.rollback_ppm) {
      rollback(s);
    } else if (roll < settings_.rollback_ppm + settings_.clone_ppm) {
      clone(s);
    } else if (roll < settings_.rollback_ppm + settings_.clone_ppm + settings_.reset_ppm) {
      reset(s);
      ++c_.resets;
    }
    return 1;
  }

  const std::vector<std::shared_ptr<const CompiledGrammar>>& grammars_;
  const Settings& settings_;
  std::mt19937_64 rng_;
  Counters& c_;
  uint32_t vocab_size_ = 0;
  std::vector<uint32_t> eos_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> words_, again_;
  uint32_t since_check_ = 0;
  uint64_t walk_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Soak test of the matcher: many matchers over many threads, random walks with rollback and clone"};
  size_t threads = 8, matchers = 1000;
  uint64_t tokens = 10'000'000, seed = 1;
  std::string vocab_path, grammar_list = "json,csv,record,markup,arithmetic,chess";
  Settings settings;
  bool eager = false;
  app.add_option("--threads", threads, "Threads (each owns its matchers)")->capture_default_str();
  app.add_option("--matchers", matchers, "Live matchers in all")->capture_default_str();
  app.add_option("--tokens", tokens, "Tokens to accept in all")->capture_default_str();
  app.add_option("--seed", seed, "Random seed")->capture_default_str();
  app.add_option("--vocab", vocab_path, "Vocabulary (default: the bundled Phi-3)");
  app.add_option("--grammars", grammar_list,
                 "Comma-separated grammars: names of examples/*.cgram, or paths")
      ->capture_default_str();
  app.add_option("--max-history", settings.max_history, "Reset a matcher after this many accepted tokens")
      ->capture_default_str();
  app.add_option("--check-every", settings.check_every, "Steps between is_allowed checks (per thread)")
      ->capture_default_str();
  app.add_flag("--eager-index", eager, "Build the whole token index at compile time");
  CLI11_PARSE(app, argc, argv);
  if (threads == 0 || matchers < threads || settings.max_history == 0 || settings.check_every == 0) {
    std::cerr << "need threads >= 1, matchers >= threads, max-history >= 1, check-every >= 1\n";
    return 64;
  }

  const Memory at_launch = read_memory();
  const auto compile_start = Clock::now();
  VocabularyResult loaded = vocab_path.empty() ? Vocabulary::bundled() : Vocabulary::load(vocab_path);
  if (auto* e = loaded.if_error()) {
    std::cerr << e->message << "\n";
    return 1;
  }
  auto vocab = *loaded;
  std::vector<std::shared_ptr<const CompiledGrammar>> compiled;
  std::vector<std::string> names;
  std::stringstream list(grammar_list);
  for (std::string name; std::getline(list, name, ',');) {
    if (name.empty()) continue;
    const fs::path path = grammar_path(name);
    std::string text;
    try {
      text = read_file(path);
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
    const std::string filename = path.filename().string();
    CompileRequest request;
    request.text = text;
    request.filename = filename;
    request.compile.eager_index = eager;
    CompileOutcome outcome = Compiler().compile(request, vocab);
    if (!outcome.ok()) {
      std::cerr << path.string() << ": " << outcome.message << "\n";
      return 1;
    }
    compiled.push_back(std::move(outcome.grammar));
    names.push_back(path.stem().string());
  }
  if (compiled.empty()) {
    std::cerr << "no grammars\n";
    return 64;
  }
  const double compile_s = std::chrono::duration<double>(Clock::now() - compile_start).count();
  const Memory compiled_mem = read_memory();
  auto grammar_bytes = [&] {
    size_t bytes = 0;
    for (const auto& g : compiled) bytes += g->memory_bytes();
    return bytes;
  };
  const size_t grammar_bytes_start = grammar_bytes();

  std::cout << fmt::format("cgram soak: {} threads, {} matchers, {} tokens, seed {}, vocabulary {} ({} ids), {} index, "
                           "max history {}\n",
                           threads, matchers, tokens, seed, vocab->name(), vocab->size(), eager ? "eager" : "lazy",
                           settings.max_history);
  std::cout << fmt::format("grammars: {}\n", fmt::join(names, ", "));
  std::cout << fmt::format("memory at launch: RSS {}; after loading and compiling ({:.2f} s): RSS {}, HWM {}\n",
                           mb(at_launch.rss_kb), compile_s, mb(compiled_mem.rss_kb), mb(compiled_mem.hwm_kb));

  // Each thread owns matchers round-robin over the grammars, and its share of tokens.
  std::vector<std::unique_ptr<Counters>> counters;
  std::vector<std::unique_ptr<Worker>> workers;
  for (size_t t = 0; t < threads; ++t) {
    counters.push_back(std::make_unique<Counters>());
    std::seed_seq seq{seed, static_cast<uint64_t>(t)};
    std::vector<uint64_t> s(1);
    seq.generate(s.begin(), s.end());
    workers.push_back(std::make_unique<Worker>(compiled, settings, s[0], *counters.back()));
  }
  for (size_t i = 0; i < matchers; ++i) workers[i % threads]->add_matcher(i % compiled.size());
  const Memory made = read_memory();
  std::cout << fmt::format("after making the matchers: RSS {}, HWM {}, heap in use {}\n", mb(made.rss_kb),
                           mb(made.hwm_kb), mb(made.heap_kb));

  const auto start = Clock::now();
  std::vector<std::thread> pool;
  std::atomic<size_t> running{threads};
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      workers[t]->run(tokens / threads + (t < tokens % threads ? 1 : 0));
      running.fetch_sub(1);
    });

  // Memory at every tenth of the tokens.
  std::vector<Memory> at_tenth;
  auto totals = [&] {
    uint64_t tok = 0, err = 0, walk = 0;
    for (const auto& c : counters) {
      tok += c->tokens.load(std::memory_order_relaxed);
      err += c->errors.load(std::memory_order_relaxed);
      walk += c->walk_tokens.load(std::memory_order_relaxed);
    }
    return std::tuple{tok, err, walk};
  };
  size_t next_tenth = 1;
  double last_s = 0;
  uint64_t last_tokens = 0;
  while (running.load() > 0 || next_tenth <= 10) {
    const auto [tok, err, walk] = totals();
    const bool over = running.load() == 0;
    if (over || tok >= tokens / 10 * next_tenth) {
      const Memory m = read_memory();
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      at_tenth.push_back(m);
      std::cout << fmt::format("{:3}%: {:>10} tokens, {:7.1f} s, {:8.0f} tokens/s (this tenth {:8.0f}), errors {}, RSS {}, HWM {}, heap in use {}, "
                               "mean walk {:.0f} tokens\n",
                               next_tenth * 10, tok, s, tok / s, (tok - last_tokens) / std::max(s - last_s, 1e-9), err,
                               mb(m.rss_kb), mb(m.hwm_kb), mb(m.heap_kb), double(walk) / matchers)
                << std::flush;
      last_s = s;
      last_tokens = tok;
      ++next_tenth;
      if (over) while (next_tenth <= 10) ++next_tenth;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::thread& t : pool) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const Memory end = read_memory();

  Counters sum;
  uint64_t total_tokens = 0, steps = 0, errors = 0;
  for (const auto& c : counters) {
    total_tokens += c->tokens;
    steps += c->steps;
    errors += c->errors;
    sum.documents += c->documents;
    sum.rollbacks += c->rollbacks;
    sum.rolled_back_tokens += c->rolled_back_tokens;
    sum.clones += c->clones;
    sum.resets += c->resets;
    sum.replaced += c->replaced;
    sum.history_resets += c->history_resets;
    sum.dead_ends += c->dead_ends;
    sum.checks += c->checks;
    sum.mask_compares += c->mask_compares;
    sum.hash_bytes += c->hash_bytes;
    sum.longest_walk = std::max(sum.longest_walk, c->longest_walk);
    sum.live_walk_tokens += c->live_walk_tokens;
    for (const std::string& e : c->first_errors)
      if (sum.first_errors.size() < 10) sum.first_errors.push_back(e);
  }
  std::cout << fmt::format("done: {} tokens ({} steps) in {:.1f} s = {:.0f} tokens/s over {} threads\n", total_tokens,
                           steps, seconds, total_tokens / seconds, threads);
  std::cout << fmt::format(
      "walks: {} documents ended (EOS), {} rollbacks ({} tokens undone), {} clones, {} resets, {} matchers replaced, "
      "{} resets at max history, {} dead ends; longest walk {} tokens, mean walk at the end {:.0f} tokens\n",
      sum.documents, sum.rollbacks, sum.rolled_back_tokens, sum.clones, sum.resets, sum.replaced, sum.history_resets,
      sum.dead_ends, sum.longest_walk, double(sum.live_walk_tokens) / matchers);
  std::cout << fmt::format("checks: {} is_allowed spot checks, {} masks compared with an earlier one; errors {}\n",
                           sum.checks, sum.mask_compares, errors);
  for (const std::string& e : sum.first_errors) std::cout << "  error: " << e << "\n";
  const Memory& mid = at_tenth.size() >= 5 ? at_tenth[4] : made;
  const bool flat = end.rss_kb <= mid.rss_kb + mid.rss_kb / 10;
  std::cout << fmt::format(
      "memory: RSS after compiling {}, after making the matchers {}, at 50% {}, at the end {}; HWM {}; "
      "heap in use at 50% {}, at the end {}; the soak's own mask hashes {}\n",
      mb(compiled_mem.rss_kb), mb(made.rss_kb), mb(mid.rss_kb), mb(end.rss_kb), mb(end.hwm_kb), mb(mid.heap_kb),
      mb(end.heap_kb), mb(sum.hash_bytes / 1024));
  std::cout << fmt::format("memory {}: the end is {:+.1f} % against the midpoint (flat means within 10 %)\n",
                           flat ? "flat" : "GROWING", 100.0 * (double(end.rss_kb) - double(mid.rss_kb)) / mid.rss_kb);
  // Where the memory is: the compiled grammars (their lazy index entries
  // filled in by now), and what the matchers held (dropped, then the heap
  // trimmed so that the freed pages go back).
  workers.clear();
  malloc_trim(0);
  const Memory dropped = read_memory();
  std::cout << fmt::format(
      "compiled grammars: {:.1f} MB after compiling, {:.1f} MB at the end (lazy index entries); RSS after dropping "
      "the matchers and trimming the heap {}\n",
      grammar_bytes_start / 1048576.0, grammar_bytes() / 1048576.0, mb(dropped.rss_kb));
  return errors == 0 && flat ? 0 : 1;
}

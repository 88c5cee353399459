// Threads that share what is built once and on demand: a vocabulary's trie
// and fingerprint, a compiled grammar's lazy token-index entries, the
// batch's pool. Masks must equal those of one thread with the eager index.
// scripts/sanitize.sh runs these (tag [threads]) under ThreadSanitizer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <latch>
#include <stdexcept>
#include <thread>

#include "batch.h"
#include "encoder.h"
#include "helpers.h"
#include "matcher.h"

using namespace cgram;
using namespace cgram::test;

namespace {

// A vocabulary of its own (nothing built yet: no trie, no fingerprint).
std::shared_ptr<const Vocabulary> fresh_vocabulary() {
  auto loaded = Vocabulary::bundled();
  REQUIRE(loaded.ok());
  return (*loaded);
}

std::shared_ptr<const CompiledGrammar> compile_for(const std::shared_ptr<const Grammar>& g,
                                                   const std::shared_ptr<const Vocabulary>& vocab, bool eager) {
  CompileOptions options;
  options.eager_index = eager;
  auto result = CompiledGrammar::compile(g, vocab, options);
  REQUIRE(result.ok());
  return (*result);
}

// Prefixes of documents of two grammars, reaching many lexer states.
const std::vector<std::string>& json_prefixes() {
  static const std::vector<std::string> prefixes = [] {
    std::vector<std::string> out;
    const std::string doc = R"({"name": "cgram", "tags": ["exact", "fast"], "n": -1.5e3, "ok": true, "x": null, "o": {"k": [[], {}]}})";
    for (size_t i = 0; i <= doc.size(); i += 3) out.push_back(doc.substr(0, i));
    return out;
  }();
  return prefixes;
}

struct Case {
  std::vector<uint32_t> tokens;
  std::vector<uint32_t> mask;  // after the tokens, from one thread and the eager index
};

// Each prefix that `reference` accepts, with its mask from one thread.
std::vector<Case> reference_cases(const std::shared_ptr<const CompiledGrammar>& reference) {
  auto created = Encoder::create(reference->vocabulary_ptr());
  REQUIRE(created.ok());
  const Encoder& encoder = *(*created);
  std::vector<Case> cases;
  for (const std::string& text : json_prefixes()) {
    Case c;
    c.tokens = encoder.encode_continuation(text);
    Matcher m(reference);
    bool ok = true;
    for (uint32_t t : c.tokens) ok = ok && m.advance(t) == AdvanceResult::Ongoing;
    if (!ok) continue;  // a prefix cut inside a token the grammar refuses
    c.mask.resize(m.mask_words());
    m.fill_mask(c.mask);
    cases.push_back(std::move(c));
  }
  REQUIRE(cases.size() > 20);
  return cases;
}

// The same with the eager index.
std::vector<Case> reference_cases(const std::shared_ptr<const Grammar>& g) {
  return reference_cases(compile_for(g, fresh_vocabulary(), true));
}

// Runs body(t) for t in [0, count) on as many threads, started together.
template <class Body>
void on_threads_together(int count, Body body) {
  std::latch start(count);
  std::vector<std::thread> threads;
  for (int t = 0; t < count; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      body(t);
    });
  for (auto& t : threads) t.join();
}

// Every case on its own matcher of `compiled`, from case `first` on in
// steps of `stride` (threads that start apart ask for most entries first
// together): the tokens any matcher rejected and the masks unlike the
// reference's are counted.
struct CaseCounts {
  std::atomic<size_t> mismatches{0}, rejected{0};
};
void walk_cases(const std::shared_ptr<const CompiledGrammar>& compiled, const std::vector<Case>& cases, size_t first,
                size_t stride, CaseCounts& counts) {
  std::vector<uint32_t> mask;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[(k * stride + first) % cases.size()];
    Matcher m(compiled);
    for (uint32_t token : c.tokens)
      if (m.advance(token) != AdvanceResult::Ongoing) ++counts.rejected;
    mask.assign(m.mask_words(), 0);
    m.fill_mask(mask);
    if (mask != c.mask) ++counts.mismatches;
  }
}

}  // namespace

TEST_CASE("threads: one vocabulary compiled for by many threads at once (trie and fingerprint built once)",
          "[threads]") {
  auto g = grammar(read_example("json.cgram"));
  auto vocab = fresh_vocabulary();
  constexpr int kThreads = 6;
  std::vector<std::shared_ptr<const CompiledGrammar>> compiled(kThreads);
  std::vector<uint64_t> fingerprints(kThreads);
  on_threads_together(kThreads, [&](int t) {
    if (t % 2) fingerprints[t] = vocab->fingerprint();
    auto result = CompiledGrammar::compile(g, vocab);
    if (auto* c = result.if_value()) compiled[t] = *c;
    if (t % 2 == 0) fingerprints[t] = vocab->fingerprint();
  });
  for (int t = 0; t < kThreads; ++t) {
    REQUIRE(compiled[t]);
    CHECK(fingerprints[t] == fingerprints[0]);
  }
  CHECK(&compiled[0]->trie() == &compiled[kThreads - 1]->trie());
}

TEST_CASE("threads: lazy index entries built by many threads at once give the eager masks", "[threads]") {
  auto g = grammar(read_example("json.cgram"));
  const std::vector<Case> cases = reference_cases(g);
  auto lazy = compile_for(g, fresh_vocabulary(), false);
  constexpr int kThreads = 8;
  CaseCounts counts;
  // Every thread walks every case, from a different one: most entries are
  // first asked for by several threads together.
  on_threads_together(kThreads, [&](int t) { walk_cases(lazy, cases, size_t(t) * 3, 7, counts); });
  CHECK(counts.rejected == 0);
  CHECK(counts.mismatches == 0);
}

TEST_CASE("threads: the rest of a lazy index is built in the background after the first mask, the masks the eager "
          "ones while it builds and after",
          "[threads]") {
  auto g = grammar(read_example("json.cgram"));
  const std::vector<Case> cases = reference_cases(g);
  auto lazy = compile_for(g, fresh_vocabulary(), false);
  const BackgroundIndexBuild& build = lazy->background_index_build();
  CHECK_FALSE(build.started());  // compiling starts nothing: the request pays for its first mask only
  CHECK_FALSE(lazy->index().complete());
  CaseCounts counts;
  {
    Matcher first(lazy);
    std::vector<uint32_t> mask(first.mask_words());
    first.fill_mask(mask);
  }
  CHECK(build.started());
  // While the build goes on, most likely.
  on_threads_together(3, [&](int t) { walk_cases(lazy, cases, size_t(t) * 11, 5, counts); });
  lazy->wait_for_index();
  CHECK(lazy->index().complete());
  CHECK_FALSE(build.stopped_early());
  walk_cases(lazy, cases, 0, 5, counts);
  CHECK(counts.rejected == 0);
  CHECK(counts.mismatches == 0);
}

TEST_CASE("threads: a grammar destroyed while its index is built in the background stops the build", "[threads]") {
  auto g = grammar(read_example("c_subset.cgram"));
  for (int round = 0; round < 3; ++round) {
    auto lazy = compile_for(g, fresh_vocabulary(), false);
    Matcher m(lazy);
    std::vector<uint32_t> mask(m.mask_words());
    m.fill_mask(mask);
    CHECK(lazy->background_index_build().started());
  }  // each grammar goes here with its build most likely still running: it must stop, not crash or hang
}

TEST_CASE("threads: background_index off leaves the entries to the masks", "[threads]") {
  CompileOptions options;
  options.background_index = false;
  auto result = CompiledGrammar::compile(grammar(read_example("json.cgram")), fresh_vocabulary(), options);
  REQUIRE(result.ok());
  const auto& lazy = *result;
  Matcher m(lazy);
  std::vector<uint32_t> mask(m.mask_words());
  m.fill_mask(mask);
  CHECK_FALSE(lazy->background_index_build().started());
  lazy->wait_for_index();  // none to wait for
  CHECK_FALSE(lazy->index().complete());
}

TEST_CASE("threads: masks kept in the grammar's memo by many threads at once give the masks worked out alone",
          "[threads]") {
  // The reference: one thread, no memo. Then eight threads share one
  // grammar whose memo is small enough to start again many times while
  // others read it, and keep every mask (however cheap).
  auto g = grammar(read_example("json.cgram"));
  auto vocab = fresh_vocabulary();
  CompileOptions no_memo;
  no_memo.eager_index = true;
  no_memo.mask_memo_bytes = 0;
  auto plain = CompiledGrammar::compile(g, vocab, no_memo);
  REQUIRE(plain.ok());
  const std::vector<Case> cases = reference_cases(*plain);
  CompileOptions small_memo;
  small_memo.mask_memo_bytes = 64 << 10;
  auto shared = CompiledGrammar::compile(g, vocab, small_memo);
  REQUIRE(shared.ok());
  MatcherOptions keep_all;
  keep_all.limits.mask_memo_min_work = 0;
  keep_all.limits.cross_memo_min_work = 0;
  keep_all.limits.walk_memo_min_work = 0;
  constexpr int kThreads = 8;
  std::atomic<size_t> mismatches{0}, rejected{0};
  on_threads_together(kThreads, [&](int t) {
    std::vector<uint32_t> mask;
    for (size_t k = 0; k < 3 * cases.size(); ++k) {
      const Case& c = cases[(k * 5 + size_t(t) * 7) % cases.size()];
      Matcher m(*shared, keep_all);
      // Masks along the way too: each prefix of the case is a context.
      for (uint32_t token : c.tokens) {
        mask.assign(m.mask_words(), 0);
        m.fill_mask(mask);
        if (!(mask[token / 32] >> (token % 32) & 1)) ++mismatches;
        if (m.advance(token) != AdvanceResult::Ongoing) ++rejected;
      }
      mask.assign(m.mask_words(), 0);
      m.fill_mask(mask);
      if (mask != c.mask) ++mismatches;
    }
  });
  CHECK(rejected == 0);
  CHECK(mismatches == 0);
  const MaskMemo::Stats stats = (*shared)->mask_memo().stats();
  CHECK(stats.hits > 0);
  CHECK(stats.restarts > 0);
}

TEST_CASE("threads: the batch on a pool builds lazy entries and gives the eager masks", "[threads][batch]") {
  auto g = grammar(read_example("json.cgram"));
  const std::vector<Case> cases = reference_cases(g);
  auto lazy = compile_for(g, fresh_vocabulary(), false);
  ThreadPool pool(4);
  const size_t words = lazy->mask_words();
  // Twice: the first batch builds the entries, the second reads them.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::unique_ptr<Matcher>> matchers;
    std::vector<Matcher*> pointers;
    for (int copy = 0; copy < 2; ++copy)
      for (const Case& c : cases) {
        matchers.push_back(std::make_unique<Matcher>(lazy));
        for (uint32_t token : c.tokens) REQUIRE(matchers.back()->advance(token) == AdvanceResult::Ongoing);
        pointers.push_back(matchers.back().get());
      }
    std::vector<uint32_t> batch(words * pointers.size());
    fill_masks(pointers, batch, pool);
    size_t mismatches = 0;
    for (size_t i = 0; i < pointers.size(); ++i)
      if (!std::equal(batch.begin() + ptrdiff_t(i * words), batch.begin() + ptrdiff_t((i + 1) * words),
                      cases[i % cases.size()].mask.begin()))
        ++mismatches;
    CHECK(mismatches == 0);
  }
}

TEST_CASE("threads: an exception in a pool job comes back to the caller once every job has ended", "[threads][batch]") {
  ThreadPool pool(3);
  for (int round = 0; round < 3; ++round) {
    std::atomic<size_t> ran{0};
    CHECK_THROWS_WITH(pool.run(64,
                               [&](size_t i) {
                                 ++ran;
                                 if (i % 10 == 3) throw std::runtime_error("job failed");
                               }),
                      "job failed");
    CHECK(ran == 64);  // the other jobs all ran
    // The pool goes on working, and a run without failures throws nothing.
    std::atomic<size_t> sum{0};
    pool.run(100, [&](size_t i) { sum += i; });
    CHECK(sum == 4950);
  }
}

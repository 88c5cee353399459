#include "differential.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "matcher.h"
#include "utf8.h"

namespace cgram::test {
namespace {

// Whether the bytes are whole UTF-8 characters (by the front end's decoder).
bool whole_characters(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();)
    if (!decode_utf8(bytes, i)) return false;
  return true;
}

// Compares one step; returns the oracle's mask.
std::vector<uint32_t> compare(Matcher& matcher, OracleMasker& oracle, const std::vector<uint32_t>& history,
                              WalkStats& stats) {
  const Vocabulary& vocab = matcher.grammar().vocabulary();
  std::vector<uint32_t> mine(matcher.mask_words());
  matcher.fill_mask(mine);
  std::vector<uint32_t> want = oracle.mask(history);
  ++stats.steps;
  stats.pairs += vocab.size();
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    bool a = mine[id / 32] >> (id % 32) & 1, b = want[id / 32] >> (id % 32) & 1;
    if (a == b) continue;
    if (stats.mismatches++ == 0) {
      std::string text;
      for (uint32_t h : history) text += vocab.bytes(h);
      stats.first_mismatch = fmt::format("after '{}' ({} tokens): token {} '{}' matcher {} oracle {}", text,
                                         history.size(), id, vocab.display(id), a ? "allows" : "forbids",
                                         b ? "allows" : "forbids");
    }
  }
  return want;
}

}  // namespace

WalkStats walk_document(const std::shared_ptr<const CompiledGrammar>& grammar, OracleMasker& oracle,
                        const std::vector<uint32_t>& tokens) {
  WalkStats stats;
  Matcher matcher(grammar);
  std::vector<uint32_t> history;
  for (uint32_t token : tokens) {
    std::vector<uint32_t> want = compare(matcher, oracle, history, stats);
    if (!(want[token / 32] >> (token % 32) & 1)) return stats;  // the document leaves the language here
    if (matcher.advance(token) != AdvanceResult::Ongoing) {
      ++stats.mismatches;
      if (stats.first_mismatch.empty()) stats.first_mismatch = fmt::format("advance({}) refused an allowed token", token);
      return stats;
    }
    history.push_back(token);
  }
  compare(matcher, oracle, history, stats);
  return stats;
}

WalkStats walk_random(const std::shared_ptr<const CompiledGrammar>& grammar, OracleMasker& oracle, uint64_t seed,
                      size_t max_steps, bool favour_partial_characters) {
  WalkStats stats;
  Matcher matcher(grammar);
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> history;
  const Vocabulary& vocab = grammar->vocabulary();
  for (size_t step = 0; step < max_steps; ++step) {
    std::vector<uint32_t> want = compare(matcher, oracle, history, stats);
    std::vector<uint32_t> allowed;
    for (uint32_t id = 0; id < vocab.size(); ++id)
      if (want[id / 32] >> (id % 32) & 1) allowed.push_back(id);
    if (allowed.empty()) break;
    // Mostly uniform, but steering away from runs of whitespace and towards
    // ending late in the walk, so that walks cover the grammar and finish.
    auto blank = [&](uint32_t id) {
      std::string_view b = vocab.bytes(id);
      return !b.empty() && b.find_first_not_of(" \t\r\n") == std::string_view::npos;
    };
    std::vector<uint32_t> preferred;
    for (uint32_t id : allowed)
      if (!blank(id) && !vocab.is_eos(id)) preferred.push_back(id);
    bool can_stop = vocab.is_eos(allowed.back()) || std::any_of(allowed.begin(), allowed.end(), [&](uint32_t id) { return vocab.is_eos(id); });
    std::vector<uint32_t> partial;
    if (favour_partial_characters)
      for (uint32_t id : allowed)
        if (!vocab.is_eos(id) && !whole_characters(vocab.bytes(id))) partial.push_back(id);
    const std::vector<uint32_t>& pool = !partial.empty() && rng() % 2 == 0   ? partial
                                        : !preferred.empty() && rng() % 5 != 0 ? preferred
                                                                               : allowed;
    uint32_t token = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
    if (can_stop && step > max_steps / 2 && rng() % 3 == 0) token = vocab.eos_ids().front();
    AdvanceResult r = matcher.advance(token);
    if (std::getenv("CGRAM_TRACE")) fmt::print(stderr, "step {}: {} allowed, took {} '{}'\n", step, allowed.size(), token, vocab.display(token));
    if (r == AdvanceResult::Finished) {
      stats.finished = true;
      break;
    }
    if (r != AdvanceResult::Ongoing) {
      ++stats.mismatches;
      if (stats.first_mismatch.empty()) stats.first_mismatch = fmt::format("advance({}) refused an allowed token", token);
      break;
    }
    history.push_back(token);
    stats.text += vocab.bytes(token);
  }
  return stats;
}

}  // namespace cgram::test

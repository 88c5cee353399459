// Questions about where the text stands: whether any! may start, the one
// next byte, the forced text (jump-forward), the context key (drafts).
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "engine.h"
#include "mask_words.h"
#include "utf8_dfa.h"

namespace cgram {

bool Engine::any_may_start(const std::vector<Head>& heads) {
  if (!any_terminal_) return false;
  ScratchPool<Head>::Lease between(head_scratch_);
  heads_between_lexemes(heads, *between);
  return std::any_of(between->begin(), between->end(), [&](const Head& h) {
    const auto& can = shiftable(h.node);
    note_shift_reads(h.node, *any_terminal_);
    return std::binary_search(can.begin(), can.end(), *any_terminal_);
  });
}

std::optional<uint8_t> Engine::only_next_byte(const std::vector<Head>& heads, bool first_of_token,
                                              std::vector<Head>& next, bool& several) {
  several = false;
  std::optional<uint8_t> only;
  ScratchPool<Head>::Lease stepped(head_scratch_);
  for (int b = 0; b < 256 && !budget_.exhausted(); ++b) {
    step_byte(heads, static_cast<uint8_t>(b), first_of_token, *stepped);
    keep_viable(*stepped);
    if (stepped->empty()) continue;
    if (only) {
      several = true;
      return std::nullopt;
    }
    only = static_cast<uint8_t>(b);
    next.assign(stepped->begin(), stepped->end());
  }
  return only;
}

Engine::Forced Engine::forced_text(const std::vector<Head>& heads, size_t limit) {
  begin_call();
  const Mark start = mark();
  Forced forced;
  ScratchPool<Head>::Lease current(head_scratch_);
  ScratchPool<Head>::Lease next(head_scratch_);
  current->assign(heads.begin(), heads.end());
  while (!budget_.exhausted() && !current->empty()) {
    const bool complete = can_end(*current);
    if (any_may_start(*current)) break;
    if (complete || forced.text.size() >= limit) {
      // Complete here: the bytes end the text when nothing may follow.
      bool several = false;
      if (complete && !only_next_byte(*current, forced.text.empty(), *next, several) && !several)
        forced.ends = !budget_.exhausted();
      break;
    }
    bool several = false;
    const auto byte = only_next_byte(*current, forced.text.empty(), *next, several);
    if (!byte) break;
    forced.text.push_back(static_cast<char>(*byte));
    current->swap(*next);
  }
  truncate(start);
  if (budget_.exhausted()) return {};
  return forced;
}

namespace {
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}
}  // namespace

uint64_t Engine::context_key(const std::vector<Head>& heads, int depth) const {
  std::vector<uint64_t>& readings = key_scratch_;  // no allocation once warm
  readings.clear();
  for (const Head& h : heads) {
    uint64_t k = mix(mix(mix(mix(1, h.terminal), h.state), h.pending), h.no_restart);
    // The stack's top levels: the node's state, then the smallest state among
    // its parents (a node may have several), and so on.
    uint32_t node = h.node;
    for (int level = 0; level < depth && node != UINT32_MAX; ++level) {
      k = mix(k, graph_.node(node).state);
      uint32_t next = UINT32_MAX, best = UINT32_MAX;
      for (uint32_t e = graph_.node(node).first_edge; e != StackGraph::kNoEdge; e = graph_.edge(e).next)
        if (graph_.node(graph_.edge(e).parent).state < best) {
          best = graph_.node(graph_.edge(e).parent).state;
          next = graph_.edge(e).parent;
        }
      node = next;
    }
    readings.push_back(k);
  }
  std::sort(readings.begin(), readings.end());
  readings.erase(std::unique(readings.begin(), readings.end()), readings.end());
  uint64_t key = 0x51ed27;
  for (uint64_t r : readings) key = mix(key, r);
  return key;
}

}  // namespace cgram

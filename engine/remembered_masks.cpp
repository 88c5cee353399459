// Masks served from the grammar's memo (compiled/mask_memo.h), and the
// recording that lets a mask be kept there.
//
// The key. A mask is the union over heads of what each head allows, and a
// head's part depends on its lexical state (terminal, DFA state, what its
// except! lexeme has touched) and on its stack: the part of the stack graph
// under it that the reductions pop through, and nothing else. The key is
// therefore the heads' lexical parts, then a walk of the graph from the
// heads' nodes, level by level (a level: the nodes first met one edge below
// the level above), down to the deepest level the mask's work read: per
// node of a level its number of parents and their places in the walk, and
// the states of the nodes met for the first time. A level that is one node
// on one new parent, as on most stacks, is one symbol: the parent's state,
// marked. Two graphs that agree on this walk as deep as the work read give
// the same mask: the work reads states and edges, and the walk describes
// every state and edge it could read there. Only answers that depend on
// nothing else are kept: no pending except! occurrences (their ids are this
// engine's own), no any! (its sets read the stack another way), no GPU sink.
//
// The recording. Every read of a node older than the mask goes through the
// reductions' path walk or the shiftable memo's walk down a stack
// (note_read): it says the node's parents were read, so the key needs the
// level below it (the node's first level in the walk: its parents are the
// same wherever it is met). Answers kept on older nodes by earlier calls
// were made with reads this mask does not see: while recording, such an
// answer is worked out again (once per mask), so that its reads are seen. A
// read past the walk's bounds (kMemoMaxDepth levels, kMemoMaxNodes nodes)
// makes the mask one that is not kept.
//
// Worth it. A lookup and the OR of a whole mask cost about half a
// microsecond, and recording adds copies; a grammar whose masks come from a
// few index sets (chess, CSV, JSON values) is faster without. The engine
// keeps a running average of the work its masks take (stack nodes, edges,
// reduction paths: EngineLimits' units) and asks the memo only while it is
// at least EngineLimits::mask_memo_min_work, and keeps only masks that
// took that much.
#include <algorithm>

#include "engine.h"
#include "mask_words.h"

namespace cgram {

bool Engine::memo_applies(const std::vector<Head>& heads) const {
  if (!g_.mask_memo().enabled() || mask_work_average_ < static_cast<int64_t>(limits_.mask_memo_min_work) ||
      any_terminal_ || !exhausted_.empty() || heads.empty() || heads.size() > kMemoMaxHeads)
    return false;
  return std::all_of(heads.begin(), heads.end(), [](const Head& h) { return h.pending == 0; });
}

namespace {
uint32_t key_lexeme_tokens(const ir::LexicalGrammar& lex, const Head& h) {
  // Only an except!(S, n) lexeme's count changes what may follow.
  if (h.terminal == Head::kBetween) return 0;
  const ir::LexTerminal& t = lex.terminals[h.terminal];
  return t.kind == ir::LexTerminal::Kind::Except && lex.excepts[t.except_index].max_tokens ? h.lexeme_tokens : 0;
}
}  // namespace

bool Engine::remembered_mask(const std::vector<Head>& heads, std::span<uint32_t> words) {
  ++recording_.epoch;  // a new walk: every mark of an earlier mask is stale
  if (memo_marks_.size() < nodes_.size()) memo_marks_.resize(nodes_.size());
  memo_nodes_.clear();
  memo_level_ends_.clear();
  memo_path_.clear();
  memo_path_ends_.clear();
  // The heads' lexical parts, each with its node's place on level 0.
  memo_path_.push_back(static_cast<uint32_t>(heads.size()));
  for (const Head& h : heads) {
    MemoMark& m = memo_marks_[h.node];
    if (m.epoch != recording_.epoch) {
      m = {recording_.epoch, static_cast<uint32_t>(memo_nodes_.size()), 0, m.verified};
      memo_nodes_.push_back(h.node);
    }
    memo_path_.insert(memo_path_.end(), {h.terminal, h.state, key_lexeme_tokens(lex_, h), h.no_restart, m.index});
  }
  memo_level_ends_.push_back(static_cast<uint32_t>(memo_nodes_.size()));
  for (uint32_t x : memo_nodes_) memo_path_.push_back(nodes_[x].state);
  memo_path_ends_.push_back(static_cast<uint32_t>(memo_path_.size()));
  const MaskMemo& memo = g_.mask_memo();
  const MaskMemo::Reader reader = memo.read();
  uint32_t entry = MaskMemo::kRoot;
  size_t at = 0;
  for (uint32_t level = 0;; ++level) {
    for (; at < memo_path_ends_[level]; ++at)
      if ((entry = reader.child(entry, memo_path_[at])) == MaskMemo::kNone) {
        memo.count_lookup(false);
        return false;
      }
    if (reader.or_into(entry, words)) {
      memo.count_lookup(true);
      return true;
    }
    if (!extend_memo_walk()) {
      memo.count_lookup(false);
      return false;
    }
  }
}

bool Engine::extend_memo_walk() {
  const size_t level = memo_level_ends_.size() - 1;
  if (memo_path_ends_.size() != memo_level_ends_.size() || level >= kMemoMaxDepth) return false;
  const uint32_t begin = level == 0 ? 0 : memo_level_ends_[level - 1], end = memo_level_ends_[level];
  const auto discover = [&](uint32_t node) -> const MemoMark* {
    MemoMark& m = memo_marks_[node];
    if (m.epoch != recording_.epoch) {
      if (memo_nodes_.size() == kMemoMaxNodes) return nullptr;
      m = {recording_.epoch, static_cast<uint32_t>(memo_nodes_.size()), static_cast<uint32_t>(level + 1), m.verified};
      memo_nodes_.push_back(node);
    }
    return &m;
  };
  // The common level: one node with one parent not met before, written as
  // one symbol (its state, marked): a linear stack costs a symbol a level.
  if (end - begin == 1 && nodes_[memo_nodes_[begin]].degree == 1) {
    const uint32_t parent = edges_[nodes_[memo_nodes_[begin]].first_edge].parent;
    if (memo_marks_[parent].epoch != recording_.epoch) {
      if (!discover(parent)) return false;
      memo_path_.push_back(kMemoLinearLevel | nodes_[parent].state);
      memo_level_ends_.push_back(static_cast<uint32_t>(memo_nodes_.size()));
      memo_path_ends_.push_back(static_cast<uint32_t>(memo_path_.size()));
      return true;
    }
  }
  // Any other: per node its number of parents and their places in the walk,
  // then the states of the nodes met for the first time.
  for (uint32_t i = begin; i < end; ++i) {
    const uint32_t x = memo_nodes_[i];
    memo_path_.push_back(nodes_[x].degree);
    for (uint32_t e = nodes_[x].first_edge; e != kNoEdge; e = edges_[e].next) {
      const MemoMark* m = discover(edges_[e].parent);
      if (!m) return false;  // a level left half described is never used: its end is not recorded
      memo_path_.push_back(m->index);
    }
  }
  memo_level_ends_.push_back(static_cast<uint32_t>(memo_nodes_.size()));
  for (uint32_t i = end; i < memo_nodes_.size(); ++i) memo_path_.push_back(nodes_[memo_nodes_[i]].state);
  memo_path_ends_.push_back(static_cast<uint32_t>(memo_path_.size()));
  return true;
}

void Engine::record_mask(const std::vector<Head>& heads, std::span<uint32_t> words, bool words_are_zero) {
  // remembered_mask left the stack walk of this mask in memo_nodes_ and memo_marks_.
  recording_.active = true;
  recording_.valid = true;
  recording_.base = static_cast<uint32_t>(nodes_.size());
  recording_.depth = 0;
  // The mask alone, to be kept: in place when the caller cleared `words`.
  std::span<uint32_t> mask = words;
  if (!words_are_zero) {
    memo_words_.assign(words.size(), 0u);
    mask = memo_words_;
  }
  compute_text_tokens(heads, mask);
  recording_.active = false;
  if (!words_are_zero) or_words(words, mask);
  note_mask_work(work_done_);
  if (!recording_.valid || !exhausted_.empty() || work_done_ < limits_.mask_memo_min_work) return;
  while (memo_path_ends_.size() <= recording_.depth)
    if (!extend_memo_walk()) return;
  g_.mask_memo().insert(std::span<const uint32_t>(memo_path_.data(), memo_path_ends_[recording_.depth]), mask);
}

void Engine::note_mask_work(size_t work) {
  const auto w = static_cast<int64_t>(std::min<size_t>(work, 1u << 20));
  mask_work_average_ += (w - mask_work_average_) / 8;
}

void Engine::note_older_read(uint32_t node) {
  // The node's parents were read: the key must describe its level's edges.
  const MemoMark& m = memo_marks_[node];
  while (m.epoch != recording_.epoch)
    if (!extend_memo_walk()) {
      recording_.valid = false;
      return;
    }
  recording_.depth = std::max(recording_.depth, m.level + 1);
  if (recording_.depth > kMemoMaxDepth) recording_.valid = false;
}

}  // namespace cgram

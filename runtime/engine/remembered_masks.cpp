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

namespace {
// An average against a limit that may be SIZE_MAX (never).
bool at_least(int64_t average, size_t limit) { return average >= 0 && static_cast<size_t>(average) >= limit; }
}  // namespace

bool Engine::memo_applies(const std::vector<Head>& heads) const {
  if (!g_.mask_memo().enabled() || !at_least(mask_work_average_, limits_.mask_memo_min_work) ||
      any_terminal_ || budget_.exhausted() || heads.empty() || heads.size() > kMemoMaxHeads)
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
  start_key(mask_rec_);
  mask_rec_.path.push_back(static_cast<uint32_t>(heads.size()));
  key_heads(mask_rec_, heads);
  close_first_level(mask_rec_);
  return look_up(mask_rec_, words) >= 0;
}

void Engine::start_key(Recording& r) {
  // A new walk: every mark of an earlier one is stale. When the counter
  // wraps (crossings and walks take one each, tens a mask), marks from 2^32
  // lookups ago would look current: they are cleared instead.
  if (++r.epoch == 0) {
    std::fill(r.marks.begin(), r.marks.end(), MemoMark{});
    r.epoch = 1;
  }
  if (r.marks.size() < graph_.node_count()) r.marks.resize(graph_.node_count());
  r.nodes.clear();
  r.level_ends.clear();
  r.path.clear();
  r.path_ends.clear();
}

void Engine::key_heads(Recording& r, std::span<const Head> heads) {
  // Each head's lexical part, with its node's place on level 0.
  for (const Head& h : heads) {
    MemoMark& m = r.marks[h.node];
    if (m.epoch != r.epoch) {
      m = {r.epoch, static_cast<uint32_t>(r.nodes.size()), 0, m.verified};
      r.nodes.push_back(h.node);
    }
    // A counted lexeme's mask depends on its count only near the bound: the
    // key has the window's state (LexTerminal::index_state).
    const uint32_t state = h.terminal == Head::kBetween ? h.state : lex_.terminals[h.terminal].index_state(h.state);
    r.path.insert(r.path.end(), {h.terminal, state, key_lexeme_tokens(lex_, h), h.no_restart, m.index});
  }
}

void Engine::close_first_level(Recording& r) {
  r.level_ends.push_back(static_cast<uint32_t>(r.nodes.size()));
  for (uint32_t x : r.nodes) r.path.push_back(graph_.node(x).state);
  r.path_ends.push_back(static_cast<uint32_t>(r.path.size()));
}

int32_t Engine::look_up(Recording& r, std::span<uint32_t> words) {
  const MaskMemo& memo = g_.mask_memo();
  const MaskMemo::Reader reader = memo.read();
  uint32_t entry = MaskMemo::kRoot;
  size_t at = 0;
  for (uint32_t level = 0;; ++level) {
    for (; at < r.path_ends[level]; ++at)
      if ((entry = reader.child(entry, r.path[at])) == MaskMemo::kNone) {
        memo.count_lookup(false);
        return -1;
      }
    if (reader.or_into(entry, words)) {
      memo.count_lookup(true);
      return static_cast<int32_t>(level);
    }
    if (!extend_key_walk(r)) {
      memo.count_lookup(false);
      return -1;
    }
  }
}

bool Engine::extend_key_walk(Recording& r) {
  const size_t level = r.level_ends.size() - 1;
  if (r.path_ends.size() != r.level_ends.size() || level >= kMemoMaxDepth) return false;
  const uint32_t begin = level == 0 ? 0 : r.level_ends[level - 1], end = r.level_ends[level];
  const auto discover = [&](uint32_t node) -> const MemoMark* {
    MemoMark& m = r.marks[node];
    if (m.epoch != r.epoch) {
      if (r.nodes.size() == kMemoMaxNodes) return nullptr;
      m = {r.epoch, static_cast<uint32_t>(r.nodes.size()), static_cast<uint32_t>(level + 1), m.verified};
      r.nodes.push_back(node);
    }
    return &m;
  };
  // The common level: one node with one parent not met before, written as
  // one symbol (its state, marked): a linear stack costs a symbol a level.
  if (end - begin == 1 && graph_.node(r.nodes[begin]).degree == 1) {
    const uint32_t parent = graph_.edge(graph_.node(r.nodes[begin]).first_edge).parent;
    if (r.marks[parent].epoch != r.epoch) {
      if (!discover(parent)) return false;
      r.path.push_back(kMemoLinearLevel | graph_.node(parent).state);
      r.level_ends.push_back(static_cast<uint32_t>(r.nodes.size()));
      r.path_ends.push_back(static_cast<uint32_t>(r.path.size()));
      return true;
    }
  }
  // Any other: per node its number of parents and their places in the walk,
  // then the states of the nodes met for the first time.
  for (uint32_t i = begin; i < end; ++i) {
    const uint32_t x = r.nodes[i];
    r.path.push_back(graph_.node(x).degree);
    for (uint32_t e = graph_.node(x).first_edge; e != StackGraph::kNoEdge; e = graph_.edge(e).next) {
      const MemoMark* m = discover(graph_.edge(e).parent);
      if (!m) return false;  // a level left half described is never used: its end is not recorded
      r.path.push_back(m->index);
    }
  }
  r.level_ends.push_back(static_cast<uint32_t>(r.nodes.size()));
  for (uint32_t i = end; i < r.nodes.size(); ++i) r.path.push_back(graph_.node(r.nodes[i]).state);
  r.path_ends.push_back(static_cast<uint32_t>(r.path.size()));
  return true;
}

void Engine::record_mask(const std::vector<Head>& heads, std::span<uint32_t> words, bool words_are_zero) {
  // remembered_mask left the stack walk of this mask in mask_rec_.
  begin_recording(mask_rec_);
  // The mask alone, to be kept: in place when the caller cleared `words`.
  std::span<uint32_t> mask = words;
  if (!words_are_zero) {
    memo_words_.assign(words.size(), 0u);
    mask = memo_words_;
  }
  compute_text_tokens(heads, mask);
  if (!words_are_zero) or_words(words, mask);
  note_mask_work(budget_.done());
  // Cheap masks are not kept, but one made cheap by its parts' answers is.
  if (budget_.done() < limits_.mask_memo_min_work && !mask_rec_.used_parts) mask_rec_.valid = false;
  end_recording(mask_rec_, mask);
}

bool Engine::remembered(Recording& r, std::span<uint32_t> words) {
  const int32_t level = look_up(r, words);
  if (level < 0) return false;
  // The recordings around this answer read what it would have read: the
  // parents of every node above the level where it was kept.
  if (level > 0)
    for (uint32_t i = 0; i < r.level_ends[static_cast<size_t>(level) - 1]; ++i) note_read(r.nodes[i]);
  for (Recording* outer : recordings())
    if (outer->active) outer->used_parts = true;
  return true;
}

void Engine::begin_recording(Recording& r) {
  // The key's stack walk, left in `r` by the lookup, goes on from there.
  r.active = true;
  ++recording_count_;
  ++note_stamp_;
  r.valid = true;
  r.used_parts = false;
  r.base = static_cast<uint32_t>(graph_.node_count());
  r.depth = 0;
}

void Engine::end_recording(Recording& r, std::span<const uint32_t> answer) {
  r.active = false;
  --recording_count_;
  ++note_stamp_;
  if (!r.valid || budget_.exhausted()) return;
  while (r.path_ends.size() <= r.depth)
    if (!extend_key_walk(r)) return;
  g_.mask_memo().insert(std::span<const uint32_t>(r.path.data(), r.path_ends[r.depth]), answer, bases());
}

template <class Make, class Note>
void Engine::part_through_memo(Recording& r, uint64_t& looked_up, uint64_t& found, std::span<uint32_t> words,
                               Make make, Note note) {
  ++looked_up;
  if (remembered(r, words)) {
    ++found;
    return;
  }
  begin_recording(r);
  ScratchPool<uint32_t>::Lease answer(node_scratch_);
  answer->assign(words.size(), 0u);
  const size_t work_before = budget_.done();
  make(std::span<uint32_t>(*answer));
  note(budget_.done() - work_before);
  or_words(words, *answer);
  end_recording(r, *answer);
}

bool Engine::walk_memo_applies(const DeferredWalk& top, std::span<const DeferredWalk> joining) const {
  if (!g_.mask_memo().enabled() || !at_least(walk_work_average_, limits_.walk_memo_min_work) || walk_rec_.active ||
      any_terminal_ || sink_ || budget_.exhausted() || g_.trie().subtree_end(top.node) - top.node < kWalkMemoMinNodes)
    return false;
  size_t heads = top.count;
  for (const DeferredWalk& j : joining) heads += j.count;
  if (heads > kWalkMemoMaxHeads) return false;
  const auto nothing_pending = [&](const DeferredWalk& w) {
    return std::all_of(deferred_heads_.begin() + w.first, deferred_heads_.begin() + w.first + w.count,
                       [](const Head& h) { return h.pending == 0; });
  };
  return nothing_pending(top) && std::all_of(joining.begin(), joining.end(), nothing_pending);
}

void Engine::walk_through_memo(const DeferredWalk& top, std::span<const DeferredWalk> joining,
                               std::span<uint32_t> words) {
  // The key: the subtree, then each trie node where readings join with
  // their heads (the top's first), then the stacks under all of them.
  start_key(walk_rec_);
  walk_rec_.path.insert(walk_rec_.path.end(), {kWalkKey, static_cast<uint32_t>(joining.size())});
  for (size_t i = 0; i <= joining.size(); ++i) {
    const DeferredWalk& w = i == 0 ? top : joining[i - 1];
    walk_rec_.path.insert(walk_rec_.path.end(), {w.node, w.count});
    key_heads(walk_rec_, std::span<const Head>(deferred_heads_.data() + w.first, w.count));
  }
  close_first_level(walk_rec_);
  part_through_memo(
      walk_rec_, walks_looked_up_, walks_remembered_, words,
      [&](std::span<uint32_t> answer) {
        ScratchPool<Head>::Lease heads(head_scratch_);
        heads->assign(deferred_heads_.begin() + top.first, deferred_heads_.begin() + top.first + top.count);
        const VocabTrie& trie = g_.trie();
        walk_range(top.node + 1, trie.subtree_end(top.node), trie.depth(top.node), *heads, answer, joining);
      },
      [&](size_t work) { note_work(walk_work_average_, work); });
}

bool Engine::cross_memo_applies(uint32_t v) const {
  const uint32_t state = graph_.node(v).state;
  return g_.mask_memo().enabled() && at_least(cross_work_by_state_[state], limits_.cross_memo_min_work) &&
         !cross_rec_.active && !walk_rec_.active && !any_terminal_ && !sink_ && !budget_.exhausted();
}

void Engine::note_cross_work(uint32_t v, size_t work) {
  // Half the weight to the last: a state seen once is judged at once.
  int64_t& average = cross_work_by_state_[graph_.node(v).state];
  average = (average + static_cast<int64_t>(std::min<size_t>(work, 1u << 20))) / 2;
}

void Engine::cross_from_through_memo(uint32_t v, std::span<const uint32_t> terminals, std::span<uint32_t> words) {
  start_key(cross_rec_);
  cross_rec_.path.insert(cross_rec_.path.end(), {kCrossKey, static_cast<uint32_t>(terminals.size())});
  cross_rec_.path.insert(cross_rec_.path.end(), terminals.begin(), terminals.end());
  key_heads(cross_rec_, std::span<const Head>(std::array{Head{v, Head::kBetween, 0, 0, 0}}));
  close_first_level(cross_rec_);
  part_through_memo(
      cross_rec_, crossings_looked_up_, crossings_remembered_, words,
      [&](std::span<uint32_t> answer) { cross_from(v, terminals, answer, /*walks_here=*/true); },
      [&](size_t work) { note_cross_work(v, work); });
}

void Engine::note_mask_work(size_t work) { note_work(mask_work_average_, work); }

void Engine::note_work(int64_t& average, size_t work) {
  const auto w = static_cast<int64_t>(std::min<size_t>(work, 1u << 20));
  average += (w - average) / 8;
}

void Engine::note_older_read(Recording& r, uint32_t node) {
  // The node's parents were read: the key must describe its level's edges.
  const MemoMark& m = r.marks[node];
  while (m.epoch != r.epoch)
    if (!extend_key_walk(r)) {
      r.valid = false;
      return;
    }
  r.depth = std::max(r.depth, m.level + 1);
  if (r.depth > kMemoMaxDepth) r.valid = false;
}

}  // namespace cgram

// The engine over the graph-structured stack (stack_graph.h): nodes made
// and bounded, marks and compaction, and the reductions (RNGLR, with the
// argument for their completeness), the shiftable sets and the lexeme ends.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "engine.h"
#include "mask_words.h"
#include "utf8_dfa.h"

namespace cgram {

bool Engine::add_scope_edge(uint32_t slot, uint32_t node, uint32_t parent, uint32_t closure) {
  // The scope's nodes were made in this closure, so every edge they have
  // was added here: a mark on the parent per closure and slot says whether
  // it is there, where a hash set would be asked once per path end (an
  // ambiguous grammar's reductions reach the same parents from every edge).
  if (slot >= 32) return add_edge(node, parent);
  uint64_t& mark = scope_parent_of_[parent];
  if (mark >> 32 != closure) mark = uint64_t{closure} << 32;
  const uint64_t bit = uint64_t{1} << slot;
  if (mark & bit) return false;
  mark |= bit;
  push_edge(node, parent);
  return true;
}

uint32_t Engine::new_node(uint32_t state) {
  charge(1);
  if (graph_.elements() >= limits_.max_stack_elements)
    exhaust(fmt::format("the parse stack holds more than {} nodes and edges (EngineLimits::max_stack_elements)",
                        limits_.max_stack_elements));
  const uint32_t node = graph_.add_node(state, table_.terminals_with_actions(state).size());
  visited_.cover(graph_.node_count());
  below_seen_.cover(graph_.node_count());
  below_unique_.cover(graph_.node_count());
  scope_parent_of_.cover(graph_.node_count());
  shiftable_index_.push_back(-1);
  return node;
}

bool Engine::add_edge(uint32_t node, uint32_t parent) {
  if (!graph_.add_edge(node, parent)) return false;
  charge(1);
  return true;
}

void Engine::push_edge(uint32_t node, uint32_t parent) {
  charge(1);
  graph_.push_edge(node, parent);
}

void Engine::truncate(Mark m) {
  budget_.restore_allowance(m.allowance);  // the work already done stays spent
  graph_.truncate({m.nodes, m.edges, m.status});
  shiftable_index_.resize(m.nodes);
}

void Engine::compact(std::span<Head> heads, std::span<Mark* const> marks) {
  ScratchPool<uint32_t>::Lease roots(node_scratch_);
  for (const Head& h : heads) roots->push_back(h.node);
  const StackGraph::Compaction c = graph_.compact(*roots);
  std::vector<int32_t> shiftable_index;
  shiftable_index.reserve(graph_.node_count());
  for (size_t v = 0; v < c.node_to.size(); ++v)
    if (c.node_to[v] != StackGraph::kDropped) shiftable_index.push_back(shiftable_index_[v]);
  shiftable_index_ = std::move(shiftable_index);
  for (Mark* m : marks) {
    const StackGraph::Size moved = c.before({m->nodes, m->edges, m->status});
    *m = {moved.nodes, moved.edges, moved.status, m->allowance};  // the allowance is not an index: it stays
  }
  for (Head& h : heads) h.node = c.node_to[h.node];
  except_masks_.renumber(c.node_to, StackGraph::kDropped);
  // (The end cache checks every node it names by serial, and serials did not change.)
  nodes_below_.clear();  // its sets hold indices
}

// Why the reductions below are complete: the GLR variant and its proof.
//
// The engine is a right-nulled GLR recogniser (RNGLR: Scott and Johnstone,
// "Right Nulled GLR Parsers", TOPLAS 28(4), 2006) over the LALR(1) table of
// the skeleton grammar, one GSS level per lexeme end. A level is built by
// reduce_closure (every reduction the lookahead allows) and then the shift of
// the lexeme's terminal (end_lexeme). Within one call of reduce_closure,
// nodes are merged by LR state (`scope`), so the level is a graph whose size
// is bounded by the table, whatever the ambiguity.
//
// Tomita's algorithm is incomplete when the grammar has ε-productions: a
// reduction whose path starts with an edge made by an ε-reduction in the same
// level (A -> α B• with B => ε, the node for B pushed on the node for α)
// walks that path once, when the edge is made. If the node for α gains
// another parent later in the level (another derivation reaches the same
// state), the paths through the new parent are never walked, because the
// node on top of it is not revisited. The dangling else,
// `s ::= 'i' s e? | 'x'`, is the classic case: after "iix", the inner and the
// outer `s` meet in one node, and the second reduction is lost. Farshi's fix
// redoes every reduction of the level at each new edge; RNGLR avoids that:
//
//  1. The table reduces an item A -> α•β whose rest β is nullable by |α|
//     symbols (lower/lr.h), as if β had been matched empty. So a reduction whose
//     path would start with ε-edges is also found from the node below them,
//     without walking them.
//  2. A reduction of length m > 0 is walked only along paths whose first edge
//     was made by a shift or by a reduction of length > 0: such an edge goes
//     down to an earlier level, whose edges are final. Paths through ε-edges
//     (both ends in this level) are never walked; by 1 they are redundant.
//  3. Each edge is followed once: a new node has its length > 0 reductions
//     walked through the edge that made it, and its ε-reductions done; a new
//     edge into an existing node has the length > 0 reductions walked through
//     it (the node's ε-reductions are done already); an ε-reduction that makes
//     a new node does that node's ε-reductions only.
//
// Completeness (the paper's theorem 1, recast for a recogniser): every stack
// of the LR(1) parser of the same text is a path of the GSS. By induction on
// the reductions of that parser in one level: its reduction by A -> γ pops
// |γ| symbols; let β be the longest nullable tail of γ that the LR parser
// pushed in this level by ε-reductions only. Item A -> α•β, α γ's rest, is in
// the state below β, on the same lookahead, so the right-nulled reduction
// (A, |α|) is in the table there. Its path's first edge, if |α| > 0, was made
// by a shift or a reduction of length > 0 (β was the longest such tail), and
// rule 3 walks every path through every such edge, whenever that edge appears.
// If |α| = 0 it is an ε-reduction, done when its node is made. Both reach the
// same node the LR parser reaches, so the induction goes on. Hidden left
// recursion (A -> B A c, B => ε) is the cycle of ε-edges it makes; merging
// by state closes the cycle and rule 2 never walks it, so it terminates.
// Unit cycles (A -> B, B -> A) add edges to nodes that exist, and stop when
// no edge is new. Soundness is that of LR: every path walked is a stack the
// table permits, so a token is never allowed that no sentence continues.
//
// With LALR lookaheads a right-nulled reduction may fire where the LR(1)
// parser would not; like any LALR reduction that the lookahead over-admits,
// the stacks it makes die at the next shift.
void Engine::reduce_closure(std::span<const uint32_t> tops, uint32_t terminal, bool* accepted,
                            std::vector<uint32_t>& result) {
  with_lookups([&](const auto& look) { reduce_closure_with(look, tops, terminal, accepted, result); });
}

template <class Lookups>
void Engine::reduce_closure_with(const Lookups& look, std::span<const uint32_t> tops, uint32_t terminal, bool* accepted,
                                 std::vector<uint32_t>& result) {
  result.assign(tops.begin(), tops.end());
  // The nodes before this are final: their edges will not change.
  const uint32_t base = static_cast<uint32_t>(graph_.node_count());
  const uint32_t closure = scope_parent_of_.next_pass();
  // Nodes created here, by state (few: a linear search beats a map).
  auto& scope = scope_;
  scope.clear();
  // Work items (rule 3): a node, the only edge its length > 0 paths must
  // start with (kAllPaths: every edge; kNoLongPaths: none), and whether its
  // ε-reductions are still to do.
  auto& work = work_;
  work.clear();
  for (uint32_t v : tops) work.push_back({v, kAllPaths, true});
  while (!work.empty() && !budget_.exhausted()) {
    const ReductionWork item = work.back();
    work.pop_back();
    const uint32_t v = item.node;
    if (closure_trace_)
      closure_trace_->emplace_back(graph_.node(v).state, table_.reduction_list_id(graph_.node(v).state, terminal));
    for (const ir::LrReduction& r : look.reductions(graph_.node(v).state, terminal)) {
      if (r.production == 0) {
        if (accepted) *accepted = true;
        continue;
      }
      const size_t length = r.length;
      if (length == 0 ? !item.empty_reductions : item.via == kNoLongPaths) continue;
      const uint32_t lhs = table_.production(r.production).lhs;
      // Every node `length` edges below v (through `via` first, if given),
      // level by level: the set of nodes at each depth, not every path (a
      // graph-structured stack of an ambiguous grammar has exponentially
      // many paths, and the recursion would be as deep as the production).
      if (length == 0) {
        path_ends_.assign(1, v);
      } else if (item.via != kAllPaths) {
        walk_down(graph_.edge(item.via).parent, length - 1, base);
      } else {
        walk_down(v, length, base);
      }
      for (size_t i = 0; i < path_ends_.size(); ++i) {
        uint32_t u = path_ends_[i];
        uint32_t target = look.lr_go(graph_.node(u).state, lhs);
        if (target == ir::LrTable::kNone) continue;
        auto it = std::find_if(scope.begin(), scope.end(), [&](const auto& e) { return e.first == target; });
        if (it == scope.end()) {
          uint32_t w = new_node(target);
          add_scope_edge(static_cast<uint32_t>(scope.size()), w, u, closure);
          scope.emplace_back(target, w);
          result.push_back(w);
          // An ε-edge (u in this level) is never the start of a path (rule 2).
          work.push_back({w, length == 0 ? kNoLongPaths : graph_.node(w).first_edge, true});
        } else if (add_scope_edge(static_cast<uint32_t>(it - scope.begin()), it->second, u, closure) && length > 0) {
          work.push_back({it->second, graph_.node(it->second).first_edge, false});
        }
      }
    }
  }
}

// Every node exactly `levels` edges below `start`, into path_ends_: level by
// level, each level a set (a graph-structured stack of an ambiguous grammar
// has exponentially many paths, and a recursion would be as deep as the
// production). Below a final node with several parents, from two levels
// on, the set is the one remembered for it (nodes_below_): an ambiguous
// part that could have ended at any of n earlier bytes would otherwise be
// walked over its n² paths from every new edge above it. A recorded answer
// must see every node it reads, so while one is recorded the walk goes
// level by level all the way.
void Engine::walk_down(uint32_t start, size_t levels, uint32_t base) {
  path_ends_.assign(1, start);
  below_found_.clear();
  const bool remembered = recording_count_ == 0;
  uint32_t found_epoch = 0;  // of below_seen_, once a remembered set is met
  const auto add_found = [&](std::span<const uint32_t> nodes) {
    for (uint32_t x : nodes)
      if (below_seen_[x] != found_epoch) below_seen_[x] = found_epoch, below_found_.push_back(x);
  };
  for (size_t level = 0; level < levels && !path_ends_.empty(); ++level) {
    path_next_.clear();
    const uint32_t epoch = visited_.next_pass();
    const size_t left = levels - level;
    size_t walked = 0;
    for (uint32_t node : path_ends_) {
      if (probe_.active && node < probe_.base) probe_parents_read(node);
      note_read(node);
      if (remembered && left >= 2 && left < kMaxBelowDepth && graph_.node(node).degree > 1 && node < base) {
        const std::span<const uint32_t> set = nodes_below_.nodes(below(node, static_cast<uint32_t>(left)));
        if (found_epoch == 0) found_epoch = below_seen_.next_pass();
        add_found(set);
        walked += set.size();
        continue;
      }
      for (uint32_t e = graph_.node(node).first_edge; e != StackGraph::kNoEdge; e = graph_.edge(e).next, ++walked) {
        const uint32_t parent = graph_.edge(e).parent;
        if (visited_[parent] != epoch) visited_[parent] = epoch, path_next_.push_back(parent);
      }
    }
    charge(walked);
    path_ends_.swap(path_next_);
  }
  if (found_epoch == 0) return;
  add_found(path_ends_);
  charge(path_ends_.size());
  path_ends_.swap(below_found_);
}

NodesBelow::Range Engine::below(uint32_t node, uint32_t levels) {
  if (const std::optional<NodesBelow::Range> kept = nodes_below_.find(graph_.node(node).serial, levels)) return *kept;
  ScratchPool<uint32_t>::Lease found(node_scratch_);
  for (uint32_t e = graph_.node(node).first_edge; e != StackGraph::kNoEdge && !budget_.exhausted();
       e = graph_.edge(e).next)
    gather_below(graph_.edge(e).parent, levels - 1, *found);
  // Once each (the sets below the parents overlap), in the order met; the
  // sets gathered within are complete by now, so one epoch serves.
  const uint32_t epoch = below_unique_.next_pass();
  size_t kept = 0;
  for (uint32_t x : *found)
    if (below_unique_[x] != epoch) below_unique_[x] = epoch, (*found)[kept++] = x;
  charge(found->size());
  found->resize(kept);
  // Bounded by the stack it describes: at most a few times its size.
  return nodes_below_.keep(graph_.node(node).serial, levels, *found, 2 * stack_elements());
}

void Engine::gather_below(uint32_t node, uint32_t levels, std::vector<uint32_t>& out) {
  // Down a linear stretch, then the fork's own set (nodes below a final
  // node are final too).
  for (; levels > 0 && graph_.node(node).degree == 1; --levels) {
    charge(1);
    node = graph_.edge(graph_.node(node).first_edge).parent;
  }
  if (levels == 0) {
    out.push_back(node);
  } else if (levels == 1) {
    for (uint32_t e = graph_.node(node).first_edge; e != StackGraph::kNoEdge; e = graph_.edge(e).next)
      out.push_back(graph_.edge(e).parent);
    charge(graph_.node(node).degree);
  } else if (graph_.node(node).degree > 1) {
    const NodesBelow::Range r = below(node, levels);
    const std::span<const uint32_t> set = nodes_below_.nodes(r);
    out.insert(out.end(), set.begin(), set.end());
    charge(set.size());
  }
}

void Engine::end_lexeme(std::span<const uint32_t> tops, uint32_t terminal, std::vector<uint32_t>& out) {
  EndCache::Entry* cached = nullptr;
  if (tops.size() == 1) {
    const uint32_t v = tops[0];
    cached = &end_cache_.slot(graph_.node(v).serial, terminal);
    if (cached->node == v && cached->serial == graph_.node(v).serial && cached->terminal == terminal) {
      // While a mask is recorded, an older node's entry counts only if this
      // mask made it (its results are newer than the mask): its reads were seen.
      bool valid = made_while_recording(v, cached->count > 0 ? cached->results[0] : 0);
      for (uint32_t i = 0; i < cached->count && valid; ++i)
        valid =
            cached->results[i] < graph_.node_count() && graph_.node(cached->results[i]).serial == cached->serials[i];
      if (valid) {
        out.assign(cached->results.begin(), cached->results.begin() + cached->count);
        return;
      }
    }
  }
  if (!probe_.active && tops.size() == 1 && remembered_end(tops[0], terminal, out)) {
    if (cached) remember_in_cache(*cached, tops[0], terminal, out);
    return;
  }
  // Probed (as shiftable() probes) so that the end is remembered by the states it read.
  const bool probing = !probe_.active && tops.size() == 1;
  const uint32_t base = static_cast<uint32_t>(graph_.node_count());
  if (probing) {
    probe_ = {true, true, base, 0};
    probe_chain_.assign(1, tops[0]);
  }
  auto& shifted = shift_scope_;
  shifted.clear();
  with_lookups([&](const auto& look) {
    reduce_closure_with(look, tops, terminal, nullptr, reduced_);
    for (uint32_t x : reduced_) {
      uint32_t target = look.lr_shift(graph_.node(x).state, terminal);
      if (target == ir::LrTable::kNone) continue;
      auto it = std::find_if(shifted.begin(), shifted.end(), [&](const auto& e) { return e.first == target; });
      uint32_t y;
      if (it == shifted.end()) {
        y = new_node(target);
        shifted.emplace_back(target, y);
      } else {
        y = it->second;
      }
      add_edge(y, x);
    }
  });
  out.clear();
  for (auto [state, node] : shifted) out.push_back(node);
  if (probing) {
    probe_.active = false;
    if (probe_.linear && !budget_.exhausted()) remember_end(terminal, base, out);
  }
  if (cached) remember_in_cache(*cached, tops[0], terminal, out);
}

void Engine::remember_in_cache(EndCache::Entry& entry, uint32_t node, uint32_t terminal,
                               const std::vector<uint32_t>& out) {
  if (out.size() > entry.results.size()) return;
  entry.node = node;
  entry.serial = graph_.node(node).serial;
  entry.terminal = terminal;
  entry.count = static_cast<uint32_t>(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    entry.results[i] = out[i];
    entry.serials[i] = graph_.node(out[i]).serial;
  }
}

bool Engine::remembered_end(uint32_t node, uint32_t terminal, std::vector<uint32_t>& out) {
  uint32_t entry = end_memo_.child(StackMemo::kRoot, terminal);
  if (entry == StackMemo::kNone) return false;
  end_chain_.clear();
  uint32_t x = node;
  for (entry = end_memo_.child(entry, graph_.node(x).state); entry != StackMemo::kNone;) {
    end_chain_.push_back(x);
    if (const uint32_t id = end_memo_.answer(entry); id != StackMemo::kNone) {
      // The same pops and pushes on this stack: the levels below the
      // deepest one popped are this stack's own.
      const EndMemo::Delta& delta = end_memo_.delta(id);
      uint32_t at = end_chain_[delta.pops];
      for (uint32_t state : delta.pushed) {
        const uint32_t y = new_node(state);
        push_edge(y, at);
        at = y;
      }
      out.assign(1, at);
      return true;
    }
    if (x == kNoParent || graph_.node(x).degree > 1) return false;  // only linear stacks are remembered
    note_read(x);
    x = graph_.node(x).degree == 0 ? kNoParent : graph_.edge(graph_.node(x).first_edge).parent;
    entry = end_memo_.child(entry, x == kNoParent ? StackMemo::kBottom : graph_.node(x).state);
  }
  return false;
}

void Engine::remember_end(uint32_t terminal, uint32_t base, const std::vector<uint32_t>& out) {
  if (out.size() != 1) return;
  // The stack after the end: fresh nodes, one parent each, down to an older
  // node on the probed chain (the deepest level the reductions popped to).
  // Made in a scratch delta: a copy is kept only when it is new.
  EndMemo::Delta& delta = end_delta_scratch_;
  delta.pushed.clear();
  uint32_t x = out[0];
  for (; x >= base; x = graph_.edge(graph_.node(x).first_edge).parent) {
    if (graph_.node(x).degree != 1) return;
    delta.pushed.push_back(graph_.node(x).state);
  }
  std::reverse(delta.pushed.begin(), delta.pushed.end());
  const auto at = std::find(probe_chain_.begin(), probe_chain_.end(), x);
  if (at == probe_chain_.end()) return;
  delta.pops = static_cast<uint32_t>(at - probe_chain_.begin());
  if (delta.pops > probe_.depth) return;  // its state was not read: cannot happen, but never guess
  probe_states_.assign(1, terminal);
  for (uint32_t level = 0; level <= probe_.depth; ++level)
    probe_states_.push_back(probe_chain_[level] == kNoParent ? StackMemo::kBottom
                                                             : graph_.node(probe_chain_[level]).state);
  end_memo_.insert(probe_states_, delta);
}

// The terminals that can really be shifted from this node after the
// reductions its stacks allow (the table's row can promise more: LALR
// lookaheads are merged). Remembered per node, and across nodes by the
// states the reductions read (stack_memo.h): the fresh nodes a mask makes
// after a lexeme stand on the same stacks mask after mask.
const std::vector<uint32_t>& Engine::shiftable(uint32_t node) {
  if (set_usable(node)) return set_of_reading(shiftable_index_[node]);
  if (const int32_t known = remembered_shiftable(node); known >= 0) {
    shiftable_index_[node] = known;
    mark_verified(node);
    return set_of_reading(known);
  }
  const int32_t fork = probe_.active || split_nesting_ >= kMaxSplitNesting ? -1 : fork_depth(node);
  const uint32_t id = fork >= 0 ? shiftable_by_parents(node, static_cast<uint32_t>(fork)) : work_out_shiftable(node);
  shiftable_index_[node] = static_cast<int32_t>(id);
  mark_verified(node);
  return set_of_reading(static_cast<int32_t>(id));
}

void Engine::note_levels_read(uint32_t node, uint32_t depth) {
  if (recording_count_ == 0 || depth == 0) return;
  NotedLevels& noted = noted_levels_[graph_.node(node).serial % kNotedLevelsSize];
  if (noted.serial == graph_.node(node).serial && noted.stamp == note_stamp_ && noted.depth >= depth) return;
  noted = {graph_.node(node).serial, note_stamp_, depth};
  // A linear stack, as most are: down the chain.
  uint32_t top = node, linear_levels = 0;
  for (; linear_levels < depth && graph_.node(top).degree <= 1; ++linear_levels) {
    note_read(top);
    if (graph_.node(top).degree == 0) return;
    top = graph_.edge(graph_.node(top).first_edge).parent;
  }
  if (linear_levels == depth) return;
  // From the first node with several parents, level by level.
  ScratchPool<uint32_t>::Lease level(node_scratch_), next(node_scratch_);
  level->assign(1, top);
  for (uint32_t l = linear_levels; l < depth && !level->empty(); ++l) {
    next->clear();
    for (uint32_t x : *level) {
      note_read(x);
      for (uint32_t e = graph_.node(x).first_edge; e != StackGraph::kNoEdge; e = graph_.edge(e).next)
        if (std::find(next->begin(), next->end(), graph_.edge(e).parent) == next->end())
          next->push_back(graph_.edge(e).parent);
    }
    std::swap(*level, *next);
  }
}

void Engine::note_shift_reads(uint32_t node, uint32_t terminal) {
  if (recording_count_ == 0 || !depths_known(node)) return;
  const auto& active = table_.terminals_with_actions(graph_.node(node).state);
  const auto pos = std::lower_bound(active.begin(), active.end(), terminal);
  if (pos == active.end() || *pos != terminal) return;  // no action: the state alone says no
  const auto& depths = shiftable_sets_.depths(shiftable_sets_.reading(shiftable_index_[node]).depths);
  note_levels_read(node, depths[static_cast<size_t>(pos - active.begin())]);
}

void Engine::note_set_reads(uint32_t node) {
  if (recording_count_ == 0 || !depths_known(node)) return;
  note_levels_read(node, shiftable_sets_.deepest(shiftable_sets_.reading(shiftable_index_[node]).depths));
}

void Engine::note_byte_reads(uint32_t node, uint8_t byte) {
  if (recording_count_ == 0 || !depths_known(node)) return;
  // The deepest of the terminals the byte can start (kept per depths and byte).
  note_levels_read(
      node, shiftable_sets_.deepest_for_byte(shiftable_sets_.reading(shiftable_index_[node]).depths, byte,
                                             table_.terminals_with_actions(graph_.node(node).state), first_bytes_));
}

int32_t Engine::fork_depth(uint32_t node) const {
  uint32_t x = node;
  for (uint32_t depth = 0; depth <= kMaxForkDepth; ++depth) {
    const uint32_t degree = graph_.node(x).degree;
    if (degree > 1) return degree <= kMaxForkDegree ? static_cast<int32_t>(depth) : -1;
    if (degree == 0) return -1;
    x = graph_.edge(graph_.node(x).first_edge).parent;
  }
  return -1;
}

uint32_t Engine::shiftable_by_parents(uint32_t node, uint32_t fork) {
  // A node stands for its stacks: a terminal can be shifted after the
  // reductions of some stack of it iff it can on some linear stack of it.
  // The memo keeps answers for linear stacks only, so a node whose stack
  // forks `fork` levels down is asked once per parent of the fork: the
  // levels above it copied onto that parent alone (made for the question
  // and dropped again), each a stack the memo can keep.
  ScratchPool<uint32_t>::Lease chain(node_scratch_);
  for (uint32_t x = node, level = 0;; ++level) {
    chain->push_back(x);
    if (level == fork) break;
    x = graph_.edge(graph_.node(x).first_edge).parent;
  }
  // The chain's parents count as read where the copies' are (note_read).
  CopiedChain& copied = copied_[split_nesting_];
  copied = {static_cast<uint32_t>(graph_.node_count()), static_cast<uint32_t>(chain->size()), chain->data()};
  ++split_nesting_;
  ScratchPool<uint32_t>::Lease all(node_scratch_);
  // Per terminal with an action, the deepest any parent's copy read (the
  // copies' levels are the node's); unknown if one copy's is.
  const size_t actions = table_.terminals_with_actions(graph_.node(node).state).size();
  ScratchPool<uint8_t>::Lease depths_lease(depth_pool_);
  std::vector<uint8_t>& depths = *depths_lease;
  depths.assign(actions, 0);
  bool depths_known_here = true;
  uint32_t deepest_known = 0;
  for (uint32_t e = graph_.node(chain->back()).first_edge; e != StackGraph::kNoEdge && !budget_.exhausted();
       e = graph_.edge(e).next) {
    const Mark m = mark();
    copied.begin = static_cast<uint32_t>(m.nodes);
    uint32_t top = graph_.edge(e).parent;
    for (size_t i = chain->size(); i-- > 0;) {
      const uint32_t y = new_node(graph_.node((*chain)[i]).state);
      push_edge(y, top);
      top = y;
    }
    const std::vector<uint32_t>& set = shiftable(top);  // stable: the sets live in a deque
    if (const int32_t d = shiftable_sets_.reading(shiftable_index_[top]).depths; d >= 0) {
      const auto& copy_depths = shiftable_sets_.depths(d);
      for (size_t i = 0; i < actions; ++i) {
        depths[i] = std::max(depths[i], copy_depths[i]);
        deepest_known = std::max<uint32_t>(deepest_known, copy_depths[i]);
      }
    } else {
      depths_known_here = false;  // its reads were noted as it was made
    }
    // Sorted in place: std::inplace_merge would take a buffer from the heap
    // on the mask's path.
    all->insert(all->end(), set.begin(), set.end());
    std::sort(all->begin(), all->end());
    all->erase(std::unique(all->begin(), all->end()), all->end());
    truncate(m);
  }
  --split_nesting_;
  if (depths_known_here && !shiftable_sets_.depths_fit(graph_.node(node).state, depths)) depths_known_here = false;
  // Without depths for all, the set's reads are noted now, as they are
  // for a set whose own are unknown: those of the copies that had depths.
  if (!depths_known_here) note_levels_read(node, deepest_known);
  return shiftable_sets_.intern_reading(shiftable_sets_.intern_set(*all, first_bytes_), graph_.node(node).state,
                                        depths_known_here ? &depths : nullptr);
}

uint32_t Engine::work_out_shiftable(uint32_t node) {
  probe_ = {true, true, static_cast<uint32_t>(graph_.node_count()), 0};
  probe_chain_.assign(1, node);
  std::vector<uint32_t>& result = shiftable_scratch_;
  result.clear();
  // Terminals that reduce alike make the same closure: one closure per way
  // of reducing, not per terminal. A closure reads the table only through
  // the reduction lists of the states it meets, so a terminal whose list is
  // the same as an earlier one's in every state that closure met would make
  // exactly its nodes; only the shift at the end is its own.
  closure_traces_.clear();
  closure_states_.clear();
  traced_.clear();
  const auto& active = table_.terminals_with_actions(graph_.node(node).state);
  // Per terminal, the levels its closure read (the probe's depth over that
  // closure alone); the reads are held meanwhile (note_shift_reads).
  ScratchPool<uint8_t>::Lease depths_lease(depth_pool_);
  std::vector<uint8_t>& depths = *depths_lease;
  depths.assign(active.size(), 0);
  const bool was_holding = std::exchange(holding_reads_, true);
  const size_t held_base = held_reads_.size();
  with_lookups([&](const auto& look) {
    for (size_t i = 0; i < active.size() && !budget_.exhausted(); ++i) {
      const uint32_t t = active[i];
      const auto shifts = [&](uint32_t state) { return look.lr_shift(state, t) != ir::LrTable::kNone; };
      bool can;
      if (look.reductions(graph_.node(node).state, t).empty()) {
        can = shifts(graph_.node(node).state);
      } else {
        const auto same_closure = [&](const TracedClosure& c) {
          return std::all_of(closure_traces_.begin() + c.trace_begin, closure_traces_.begin() + c.trace_end,
                             [&](const auto& met) { return table_.reduction_list_id(met.first, t) == met.second; });
        };
        auto known = std::find_if(traced_.begin(), traced_.end(), same_closure);
        if (known == traced_.end()) {
          const Mark m = mark();
          TracedClosure c{closure_traces_.size(), 0, closure_states_.size(), 0, 0};
          closure_trace_ = &closure_traces_;
          const uint32_t depth_before = std::exchange(probe_.depth, 0);
          reduce_closure_with(look, std::span<const uint32_t>(&node, 1), t, nullptr, closure_scratch_);
          c.depth = probe_.depth;
          probe_.depth = std::max(depth_before, probe_.depth);
          closure_trace_ = nullptr;
          c.trace_end = closure_traces_.size();
          for (uint32_t x : closure_scratch_) closure_states_.push_back(graph_.node(x).state);
          c.states_end = closure_states_.size();
          truncate(m);
          traced_.push_back(c);
          known = traced_.end() - 1;
        }
        can = std::any_of(closure_states_.begin() + known->states_begin, closure_states_.begin() + known->states_end,
                          shifts);
        depths[i] = static_cast<uint8_t>(std::min<uint32_t>(known->depth, 255));
      }
      graph_.status(graph_.node(node).status + i) = can ? 1 : 2;
      if (can) result.push_back(t);
    }
  });
  probe_.active = false;
  holding_reads_ = was_holding;
  // Depths say which nodes were read only on a linear stack (then the
  // levels are the probed chain's, and no depth reaches 255 within
  // kMemoMaxDepth); elsewhere the reads are noted now.
  const bool by_levels =
      probe_.linear && probe_.depth < 255 && shiftable_sets_.depths_fit(graph_.node(node).state, depths);
  // Replayed reads go where reads go now (held again, past held_end, for a
  // set made within another's making); this set's own held ones are dropped.
  const size_t held_end = held_reads_.size();
  if (!by_levels)
    for (size_t i = held_base; i < held_end; ++i) note_read(held_reads_[i]);
  held_reads_.erase(held_reads_.begin() + static_cast<std::ptrdiff_t>(held_base),
                    held_reads_.begin() + static_cast<std::ptrdiff_t>(held_end));
  const uint32_t id = shiftable_sets_.intern_reading(shiftable_sets_.intern_set(result, first_bytes_),
                                                     graph_.node(node).state, by_levels ? &depths : nullptr);
  if (probe_.linear && !budget_.exhausted()) {
    probe_states_.clear();
    for (uint32_t level = 0; level <= probe_.depth; ++level)
      probe_states_.push_back(probe_chain_[level] == kNoParent ? StackMemo::kBottom
                                                               : graph_.node(probe_chain_[level]).state);
    shiftable_memo_.insert(probe_states_, id);
  }
  return id;
}

int32_t Engine::remembered_shiftable(uint32_t node) {
  // The walk down reads as deep as the answer's key, but an answer says
  // per terminal what it read: those reads are noted where it is used.
  uint32_t entry = shiftable_memo_.child(StackMemo::kRoot, graph_.node(node).state);
  uint32_t levels = 0;
  for (uint32_t x = node; entry != StackMemo::kNone; ++levels) {
    if (const uint32_t reading = shiftable_memo_.answer(entry); reading != StackMemo::kNone) {
      // One kept without depths (past ShiftableSets::kMaxDepths): its key's reads.
      if (shiftable_sets_.reading(static_cast<int32_t>(reading)).depths < 0) note_levels_read(node, levels);
      return static_cast<int32_t>(reading);
    }
    if (x == kNoParent || graph_.node(x).degree > 1) return -1;  // only linear stacks are remembered
    x = graph_.node(x).degree == 0 ? kNoParent : graph_.edge(graph_.node(x).first_edge).parent;
    entry = shiftable_memo_.child(entry, x == kNoParent ? StackMemo::kBottom : graph_.node(x).state);
  }
  return -1;
}

void Engine::probe_parents_read(uint32_t node) {
  // Older nodes are met only down the probed node's chain while it is
  // linear: the reductions reach them through it, or through fresh nodes
  // standing on nodes they reached that way.
  const auto at = std::find(probe_chain_.rbegin(), probe_chain_.rend(), node);
  if (at == probe_chain_.rend()) {
    probe_.linear = false;
    return;
  }
  const uint32_t level = static_cast<uint32_t>(probe_chain_.rend() - at - 1);
  probe_.depth = std::max(probe_.depth, level + 1);
  const StackGraph::Node& n = graph_.node(node);
  if (n.degree > 1) probe_.linear = false;
  if (level + 1 == probe_chain_.size())
    probe_chain_.push_back(n.degree == 0 ? kNoParent : graph_.edge(n.first_edge).parent);
}

void Engine::settle_shiftable(uint32_t node) {
  if (set_usable(node)) return;
  if (shiftable_index_[node] >= 0 || !kept_answer_usable(node)) {
    shiftable(node);  // worked out (again), its reads seen
  } else {
    shiftable_index_[node] = remembered_shiftable(node);
  }
}

bool Engine::is_shiftable(uint32_t node, uint32_t terminal) {
  const uint32_t state = graph_.node(node).state;
  const auto& active = table_.terminals_with_actions(state);
  auto pos = std::lower_bound(active.begin(), active.end(), terminal);
  if (pos == active.end() || *pos != terminal) return false;
  const size_t status_at = graph_.node(node).status + static_cast<size_t>(pos - active.begin());
  // A probe must see every read, so it works each answer out again; so does
  // a recorded mask, for an answer an earlier call kept on an older node.
  if (graph_.status(status_at) != 0 && !probe_.active && (depths_known(node) || kept_answer_usable(node))) {
    note_shift_reads(node, terminal);
    return graph_.status(status_at) == 1;
  }
  if (!probe_.active) {
    settle_shiftable(node);
    if (shiftable_index_[node] >= 0) {
      const auto& set = set_of_reading(shiftable_index_[node]);
      const bool can = std::binary_search(set.begin(), set.end(), terminal);
      note_shift_reads(node, terminal);
      graph_.status(status_at) = can ? 1 : 2;
      return can;
    }
  }
  const bool can = with_lookups([&](const auto& look) {
    if (look.reductions(state, terminal).empty()) return look.lr_shift(state, terminal) != ir::LrTable::kNone;
    Mark m = mark();
    reduce_closure_with(look, std::span<const uint32_t>(&node, 1), terminal, nullptr, closure_scratch_);
    bool any = false;
    for (uint32_t x : closure_scratch_)
      any = any || look.lr_shift(graph_.node(x).state, terminal) != ir::LrTable::kNone;
    truncate(m);
    return any;
  });
  // Re-read: truncate() may have shrunk status_ only past this node's entries.
  graph_.status(graph_.node(node).status + (pos - active.begin())) = can ? 1 : 2;
  return can;
}

}  // namespace cgram

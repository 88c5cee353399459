// The mask: every text token some head survives, from the token index where
// it answers and by walking the vocabulary trie where it does not.
//
// What a mask must be. After a text, the heads are every reading of it: a
// stack of the graph-structured stack, the lexeme in progress (terminal and
// DFA state, or none between lexemes), the except! occurrences pending, and
// where a UTF-8 character stands (lexing.cpp keeps this set exact; the
// reductions are complete by the argument above reduce_closure in
// reductions.cpp). A token is allowed iff reading its bytes from some head
// leaves a head from which the text can still be completed. So the mask is
// the union over heads of each head's own mask, and each head may be
// answered by whichever road is cheapest; the roads below all compute that
// same set.
//
// The exact road (walk, walk_range). The trie holds every token by its
// bytes, sharing prefixes. The walk steps the heads one byte per trie edge
// (step_byte_after); the heads after a prefix are exactly the readings of
// the text plus that prefix, so a token is allowed iff the heads at its node
// are not empty and viable. An empty head set prunes the whole subtree:
// nothing extends a text that no reading survives. Lexemes that end before a
// byte end the same way before each sibling, so end_lexemes runs once per
// parent node. Stack nodes made while looking ahead are cut off again
// (truncate to the mark): a mask leaves the engine as it found it. With one
// plain lexeme left, lexer_walk follows the terminal's DFA alone and asks
// the parser only where the lexeme may end.
//
// The index road (fill_text_tokens, mask_between, cross_precomputed). For a
// head inside a lexeme of terminal T in state q, with nothing pending, a
// token's bytes either
//  1. stay inside T's lexeme, which can still end later: allowed whatever the
//     stack, since the parser is consulted only when a lexeme ends. These are
//     StateIndex::inside, one OR (index/token_index.h says how it is built);
//  2. end T's lexeme inside the token (a crossing): the rest of the token is
//     read from the heads after T ends. Those heads do not depend on where in
//     the token T ends (ending T on a node gives the same nodes wherever it
//     happens), so for each next terminal U that can be shifted there, the
//     tokens whose rest stays inside U are one precomputed OR (CrossInto);
//     tokens that also cross U's end are classified the same way by the
//     terminal after U, up to CrossInto::kMaxCrossings ends, so that each
//     terminal sequence costs one parse check (cross_into). Past that depth
//     they are walked from the recorded places where the last lexeme may
//     end; those walks are gathered and made once per trie node, with the
//     heads of every reading that got there, and a node below another's
//     joins the walk above it (walk_deferred);
//  3. start after T has ended before the token (q accepting): the token is
//     read between lexemes, from the nodes after T (mask_between): the
//     terminals shiftable there after reductions, their inside-from-start
//     sets ORed, their crossings as in 2.
// The index cannot answer where the answer depends on the bytes in a way it
// did not record: except! occurrences pending, an except! lexeme (what it
// leaves pending depends on where it ends), a character begun by any!. Those
// heads take the exact road (except_from_index serves the common except!
// case from the index with its crossings walked, for a head inside the
// text and for text that may start between lexemes alike).
//
// The parser's answers that masks ask again and again (which terminals a
// fresh stack node can shift) are remembered by the stack states they read
// (engine/stack_memo.h): the same context costs a lookup the next time.
// Whole masks are remembered the same way, per compiled grammar, by the
// heads' lexical states and the stack graph they read
// (engine/remembered_masks.cpp): a context met before, in this text or in
// another matcher's, costs one lookup and one OR.
//
// any! allows every text token whose UTF-8 leaves a state the rest can
// finish: per-state sets made once per grammar, or the whole list when
// occurrences are pending. Work is charged as it is done (charge): past the
// engine's limits the mask is abandoned and the caller told (exhausted()).
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "engine.h"
#include "mask_words.h"
#include "utf8_dfa.h"

namespace cgram {

void Engine::walk(uint32_t root, const std::vector<Head>& heads, std::span<uint32_t> words) {
  walk_range(root + 1, g_.trie().subtree_end(root), g_.trie().depth(root), heads, words);
}

void Engine::walk_range(uint32_t first, uint32_t end, uint32_t parent_depth, const std::vector<Head>& heads,
                        std::span<uint32_t> words, std::span<const DeferredWalk> joining) {
  if (joining.empty() && lexer_walk_applies(heads)) return lexer_walk(first, end, parent_depth, heads[0], words);
  const VocabTrie& trie = g_.trie();
  // Walks nest (a lexer walk falls back to a walk below a lexeme's end):
  // each nesting level gets its own rows of scratch.
  const size_t depth = trie.max_depth() + 2;
  const size_t base = static_cast<size_t>(walk_depth_) * depth;
  ++walk_depth_;
  if (levels_.size() < base + depth) {
    levels_.resize(base + depth);
    level_marks_.resize(base + depth);
  }
  if (level_ends_.size() < base + depth) {
    level_ends_.resize(base + depth);
    level_ends_of_.resize(base + depth);
    trie_parent_.resize(base + depth);
    ends_marks_.resize(base + depth);
  }
  levels_[base] = heads;
  merge_equal_heads(levels_[base]);  // once here, not before every child
  level_marks_[base] = mark();
  level_ends_of_[base] = UINT32_MAX;
  for (uint32_t node = first; node < end && !budget_.exhausted();) {
    uint32_t d = trie.depth(node) - parent_depth;
    // The lexemes that end before this byte end the same way before each of
    // its siblings: once per parent, kept (below the children's mark) until
    // the walk leaves the parent.
    const uint32_t parent = d == 1 ? UINT32_MAX - 1 : trie_parent_[base + d - 1];
    if (level_ends_of_[base + d - 1] != parent) {
      truncate(level_marks_[base + d - 1]);
      end_lexemes(levels_[base + d - 1], level_ends_[base + d - 1]);
      level_ends_of_[base + d - 1] = parent;
      ends_marks_[base + d - 1] = mark();
    }
    truncate(ends_marks_[base + d - 1]);
    step_byte_after(levels_[base + d - 1], level_ends_[base + d - 1], trie.byte(node), trie.depth(node) == 1,
                    levels_[base + d]);
    // Readings that reach this node another way join here (cross_precomputed).
    while (!joining.empty() && joining.front().node < node) joining = joining.subspan(1);
    if (!joining.empty() && joining.front().node == node) {
      const DeferredWalk& j = joining.front();
      levels_[base + d].insert(levels_[base + d].end(), deferred_heads_.begin() + j.first,
                               deferred_heads_.begin() + j.first + j.count);
      normalize(levels_[base + d]);
      merge_equal_heads(levels_[base + d]);
      joining = joining.subspan(1);
    }
    const bool joined_below = !joining.empty() && joining.front().node < trie.subtree_end(node);
    trie_parent_[base + d] = node;
    level_ends_of_[base + d] = UINT32_MAX;
    level_marks_[base + d] = mark();
    if (levels_[base + d].empty() && !joined_below) {
      node = trie.subtree_end(node);
      continue;
    }
    if (!trie.tokens(node).empty() && !levels_[base + d].empty() && viable(levels_[base + d]))
      for (uint32_t id : trie.tokens(node)) words[id / 32] |= 1u << (id % 32);
    if (!joined_below && lexer_walk_applies(levels_[base + d])) {
      // One plain lexeme left: the rest of this subtree takes the fast road.
      const Head single = levels_[base + d][0];  // a copy: the rows may move below
      lexer_walk(node + 1, trie.subtree_end(node), trie.depth(node), single, words);
      node = trie.subtree_end(node);
      continue;
    }
    ++node;
  }
  truncate(level_marks_[base]);
  --walk_depth_;
}

bool Engine::lexer_walk_applies(const std::vector<Head>& heads) const {
  if (heads.size() != 1) return false;
  const Head& h = heads[0];
  return h.terminal != Head::kBetween && h.pending == 0 &&
         lex_.terminals[h.terminal].kind == ir::LexTerminal::Kind::Bytes;
}

std::bitset<256> Engine::startable_bytes(const std::vector<Head>& heads) {
  std::bitset<256> can_start;
  for (const Head& h : heads) {
    if (h.pending != 0) return can_start.set();
    if (recording_count_ > 0) {
      // A filter before each byte is stepped, which asks exactly: the
      // terminals with an action need no read of the stack.
      for (uint32_t t : table_.terminals_with_actions(graph_.node(h.node).state)) can_start |= first_bytes_[t];
      continue;
    }
    shiftable(h.node);
    can_start |= shiftable_sets_.first_bytes(shiftable_sets_.reading(shiftable_index_[h.node]).set);
  }
  return can_start;
}

void Engine::lexer_walk(uint32_t first, uint32_t end, uint32_t parent_depth, const Head& head,
                        std::span<uint32_t> words) {
  with_lookups([&](const auto& look) { lexer_walk_with(look, first, end, parent_depth, head, words); });
}

template <class Lookups>
void Engine::lexer_walk_with(const Lookups& look, uint32_t first, uint32_t end, uint32_t parent_depth, const Head& head,
                             std::span<uint32_t> words) {
  const VocabTrie& trie = g_.trie();
  // Where the lexeme ends, the parser takes over: the nodes after it, the
  // bytes that can start the next lexeme, and the heads after each such byte
  // are the same at every node below, so each is computed once.
  ScratchPool<Head>::Lease after_lease(head_scratch_);
  std::vector<Head>& after = *after_lease;
  heads_after_lexeme(head, after);
  if (end - first >= TokenIndex::kSubtreeMin) {
    // A large subtree: its tokens are classified once by the index, for
    // this terminal state, and only the lexeme ends need the parser.
    const StateIndex& ix = g_.index().get_subtree(first - 1, head.terminal, lex_.terminals[head.terminal].index_state(head.state));
    or_set(words, ix.inside);
    walk_crossings(ix, after, words);
    return;
  }
  const std::bitset<256> can_start = startable_bytes(after);
  const size_t row = static_cast<size_t>(walk_depth_);
  if (lexer_states_.size() <= row) {
    lexer_states_.resize(row + 1);
    lexer_next_.resize(row + 1);
  }
  std::vector<uint32_t>& at = lexer_states_[row];
  auto& next = lexer_next_[row];  // per byte: heads after the lexeme ends and the byte starts the next
  std::array<int8_t, 256> known{};  // 0 not computed, 1 live, -1 dead
  at.resize(trie.max_depth() + 2);
  at[0] = head.state;
  ++walk_depth_;
  for (uint32_t node = first; node < end;) {
    const uint32_t d = trie.depth(node) - parent_depth;
    const uint32_t q = at[d - 1];
    const uint8_t b = trie.byte(node);
    const uint32_t q2 = look.dfa_next(head.terminal, q, b);
    bool ending_live = false;
    if (look.dfa_accepting(head.terminal, q) && can_start[b] && !after.empty()) {
      if (known[b] == 0) {
        step_byte(after, b, /*first_of_token=*/false, next[b]);
        known[b] = next[b].empty() ? -1 : 1;
      }
      ending_live = known[b] > 0;
    }
    if (ending_live) {
      // Both readings may go on below: one generic walk over the union of
      // their heads, so that ambiguous lexing is merged level by level
      // instead of being explored once per way of reading it.
      if (!trie.tokens(node).empty() && (q2 != ir::Dfa::kDead || viable(next[b])))
        for (uint32_t id : trie.tokens(node)) words[id / 32] |= 1u << (id % 32);
      if (trie.subtree_end(node) > node + 1) {
        ScratchPool<Head>::Lease heads(head_scratch_);
        heads->assign(next[b].begin(), next[b].end());
        if (q2 != ir::Dfa::kDead) {
          heads->push_back({head.node, head.terminal, q2, 0, head.lexeme_tokens});
          normalize(*heads);
        }
        walk_range(node + 1, trie.subtree_end(node), trie.depth(node), *heads, words);
      }
      node = trie.subtree_end(node);
      continue;
    }
    if (q2 == ir::Dfa::kDead) {
      node = trie.subtree_end(node);
      continue;
    }
    for (uint32_t id : trie.tokens(node)) words[id / 32] |= 1u << (id % 32);
    at[d] = q2;
    ++node;
  }
  --walk_depth_;
}

void Engine::walk_crossings(const StateIndex& index, const std::vector<Head>& after, std::span<uint32_t> words) {
  if (!index.crosses() || after.empty()) return;
  const std::bitset<256> can_start = startable_bytes(after);
  const VocabTrie& trie = g_.trie();
  if (crossing_heads_.size() <= static_cast<size_t>(crossing_depth_)) crossing_heads_.emplace_back();
  std::vector<Head>& next = crossing_heads_[crossing_depth_];
  ++crossing_depth_;
  for (int b = 0; b < 256; ++b) {
    std::span<const uint32_t> nodes = index.crossing(static_cast<uint8_t>(b));
    if (nodes.empty() || !can_start[b]) continue;
    // The next lexeme starts with this byte, the same at every such node.
    step_byte(after, static_cast<uint8_t>(b), /*first_of_token=*/false, next);
    if (next.empty()) continue;
    const bool ending_here_viable = viable(next);
    for (uint32_t node : nodes) {
      if (ending_here_viable)
        for (uint32_t id : trie.tokens(node)) words[id / 32] |= 1u << (id % 32);
      if (trie.subtree_end(node) > node + 1) walk_range(node + 1, trie.subtree_end(node), trie.depth(node), next, words);
    }
  }
  --crossing_depth_;
}

void Engine::cross_precomputed(const StateIndex& index, const std::vector<Head>& after, std::span<uint32_t> words) {
  if (!index.crosses() || after.empty()) return;
  // An except! lexeme may start after this one: its pending occurrences
  // depend on the bytes, so those tokens take the walk.
  for (const Head& a : after)
    for (uint32_t t : table_.terminals_with_actions(graph_.node(a.node).state))
      if (lex_.terminals[t].kind == ir::LexTerminal::Kind::Except && is_shiftable(a.node, t))
        return walk_crossings(index, after, words);
  // The walks below the deepest level classified are gathered first and
  // made together: readings that the index keeps apart (a space read as one
  // whitespace terminal or another, a word as a keyword or a name) meet
  // again at their trie node, and a node below another one's joins that
  // walk where it reaches it, as the exact road would have them.
  // Within a whole mask they are gathered until its end (compute_text_tokens):
  // the heads of every reading, of every terminal that may start between
  // lexemes, meet there ("- - -" and "-- -" reach one trie node).
  const size_t base = deferred_walks_.size(), heads_base = deferred_heads_.size();
  cross_into(index.into, after, words);
  if (!gathering_walks_) walk_deferred(base, heads_base, words);
}

void Engine::walk_deferred(size_t base, size_t heads_base, std::span<uint32_t> words) {
  std::sort(deferred_walks_.begin() + static_cast<std::ptrdiff_t>(base), deferred_walks_.end(),
            [](const DeferredWalk& a, const DeferredWalk& b) { return a.node < b.node; });
  // One entry per node, its heads merged (appended past the gathered ones).
  ScratchPool<DeferredWalk>::Lease merged(walk_scratch_);
  ScratchPool<Head>::Lease heads(head_scratch_);
  for (size_t i = base; i < deferred_walks_.size();) {
    const uint32_t x = deferred_walks_[i].node;
    heads->clear();
    for (; i < deferred_walks_.size() && deferred_walks_[i].node == x; ++i) {
      const DeferredWalk w = deferred_walks_[i];
      heads->insert(heads->end(), deferred_heads_.begin() + w.first, deferred_heads_.begin() + w.first + w.count);
    }
    normalize(*heads);
    merged->push_back({x, static_cast<uint32_t>(deferred_heads_.size()), static_cast<uint32_t>(heads->size())});
    deferred_heads_.insert(deferred_heads_.end(), heads->begin(), heads->end());
  }
  const VocabTrie& trie = g_.trie();
  for (size_t i = 0; i < merged->size();) {
    const DeferredWalk top = (*merged)[i];
    const uint32_t end = trie.subtree_end(top.node);
    size_t j = i + 1;
    while (j < merged->size() && (*merged)[j].node < end) ++j;
    const std::span<const DeferredWalk> joining(merged->data() + i + 1, j - i - 1);
    i = j;
    if (walk_memo_applies(top, joining)) {
      // The same walk comes back mask after mask (a run of one operator
      // after each expression): remembered by what it reads of the stacks.
      walk_through_memo(top, joining, words);
      continue;
    }
    heads->assign(deferred_heads_.begin() + top.first, deferred_heads_.begin() + top.first + top.count);
    const size_t work_before = budget_.done();
    walk_range(top.node + 1, end, trie.depth(top.node), *heads, words, joining);
    if (end - top.node >= kWalkMemoMinNodes) note_work(walk_work_average_, budget_.done() - work_before);
  }
  deferred_heads_.resize(heads_base);
  deferred_walks_.resize(base);
}

void Engine::defer_walk(uint32_t node, const std::vector<Head>& heads) {
  deferred_walks_.push_back({node, static_cast<uint32_t>(deferred_heads_.size()), static_cast<uint32_t>(heads.size())});
  deferred_heads_.insert(deferred_heads_.end(), heads.begin(), heads.end());
}

void Engine::cross_into(std::span<const CrossInto> into_list, const std::vector<Head>& after,
                        std::span<uint32_t> words) {
  const VocabTrie& trie = g_.trie();
  ScratchPool<uint32_t>::Lease nodes(node_scratch_);
  ScratchPool<Head>::Lease ended(head_scratch_);
  ScratchPool<Head>::Lease one(head_scratch_);
  ScratchPool<Head>::Lease next(head_scratch_);
  // Nearly every terminal of the set is asked of every head (after an
  // operand, the closing brackets that read deepest among them): the set's
  // reads at once.
  for (const Head& a : after) {
    shiftable(a.node);
    note_set_reads(a.node);
  }
  for (const CrossInto& into : into_list) {
    nodes->clear();
    for (const Head& a : after) {
      const auto& can = shiftable(a.node);
      if (std::binary_search(can.begin(), can.end(), into.terminal)) nodes->push_back(a.node);
    }
    if (nodes->empty()) continue;
    // Tokens whose rest stays inside the next lexeme: one OR.
    or_set(words, into.tokens);
    if (!into.next.empty()) {
      // Tokens that cross the end of that lexeme as well: the same one
      // level down, from the stacks once it has ended (the same wherever in
      // the token it ends).
      ended->clear();
      for (uint32_t n : *nodes) {
        heads_after_lexeme(Head{n, into.terminal, 0, 0, 1}, *one);
        ended->insert(ended->end(), one->begin(), one->end());
      }
      normalize(*ended);
      cross_into(into.next, *ended, words);
    }
    // Past the depth the index classifies: walked from there, once per
    // (state where it ends, byte that starts the one after).
    for (size_t i = 0; i < into.second.size();) {
      const uint32_t state = into.second[i].state;
      const uint8_t byte = trie.byte(into.second[i].node);
      size_t j = i;
      while (j < into.second.size() && into.second[j].state == state && trie.byte(into.second[j].node) == byte) ++j;
      ended->clear();
      for (uint32_t n : *nodes) {
        heads_after_lexeme(Head{n, into.terminal, state, 0, 1}, *one);
        ended->insert(ended->end(), one->begin(), one->end());
      }
      normalize(*ended);
      step_byte(*ended, byte, /*first_of_token=*/false, *next);
      if (!next->empty()) {
        const bool ending_here_viable = viable(*next);
        for (size_t k = i; k < j; ++k) {
          const uint32_t x = into.second[k].node;
          if (ending_here_viable)
            for (uint32_t id : trie.tokens(x)) words[id / 32] |= 1u << (id % 32);
          if (trie.subtree_end(x) > x + 1) defer_walk(x, *next);
        }
      }
      i = j;
    }
  }
}

void Engine::mask_between(const std::vector<uint32_t>& nodes, uint32_t pending, std::span<uint32_t> words,
                          uint32_t no_restart) {
  ScratchPool<Head>::Lease heads(head_scratch_);
  if (pending != 0) {
    for (uint32_t v : nodes) heads->push_back({v, Head::kBetween, 0, pending, 0, no_restart});
    walk(0, *heads, words);
    return;
  }
  const TokenIndex& index = g_.index();
  ScratchPool<uint32_t>::Lease allowed(node_scratch_);
  for (uint32_t v : nodes) {
    const std::vector<uint32_t>* shiftable_here = &shiftable(v);
    note_set_reads(v);
    if (no_restart != Head::kBetween &&
        std::binary_search(shiftable_here->begin(), shiftable_here->end(), no_restart)) {
      allowed->assign(shiftable_here->begin(), shiftable_here->end());
      std::erase(*allowed, no_restart);
      shiftable_here = &*allowed;
    }
    const std::vector<uint32_t>* terminals_here = shiftable_here;
    // except! text may start here. A token that starts it is read as from a
    // head inside its lexeme at the start, no byte of it read yet: that is
    // what except_from_index answers (its mask kept per node, as free text
    // goes on for many tokens). Where it cannot answer (a token limit), or
    // the text could end empty, the exact walk takes this node.
    const auto is_except = [&](uint32_t t) { return lex_.terminals[t].kind == ir::LexTerminal::Kind::Except; };
    if (std::any_of(terminals_here->begin(), terminals_here->end(), is_except)) {
      bool answered = true;
      for (uint32_t t : *terminals_here)
        if (is_except(t)) {
          const uint32_t start = lex_.terminals[t].dfa.start();
          answered = !dfa_accepting(t, start) && except_from_index(Head{v, t, start, 0, 0, no_restart}, words);
          if (!answered || exhausted()) break;
        }
      if (!answered) {
        heads->assign(1, Head{v, Head::kBetween, 0, 0, 0, no_restart});
        walk(0, *heads, words);
        continue;
      }
      if (allowed->data() != terminals_here->data()) allowed->assign(terminals_here->begin(), terminals_here->end());
      std::erase_if(*allowed, is_except);
      terminals_here = &*allowed;
    }
    const std::vector<uint32_t>& terminals = *terminals_here;
    if (const std::vector<uint32_t>* together = index.inside_from_start(terminals, /*now=*/sink_ != nullptr))
      or_set(words, *together);
    else index.inside_from_start_parts(terminals, [&](const TokenSet& inside) { or_set(words, inside); });
    if (std::none_of(terminals.begin(), terminals.end(), [&](uint32_t t) { return start_crosses(t); })) continue;
    if (cross_memo_applies(v)) {
      cross_from_through_memo(v, terminals, words);
    } else {
      const size_t work_before = budget_.done();
      cross_from(v, terminals, words, /*walks_here=*/false);
      note_cross_work(v, budget_.done() - work_before);
    }
  }
}

bool Engine::start_crosses(uint32_t t) {
  if (start_crosses_[t] < 0) {
    const ir::LexTerminal& term = lex_.terminals[t];
    start_crosses_[t] =
        term.kind != ir::LexTerminal::Kind::AnyToken && g_.index().get(t, term.dfa.start()).crosses() ? 1 : 0;
  }
  return start_crosses_[t] > 0;
}

void Engine::cross_from(uint32_t v, std::span<const uint32_t> terminals, std::span<uint32_t> words, bool walks_here) {
  const TokenIndex& index = g_.index();
  ScratchPool<Head>::Lease heads(head_scratch_);
  const size_t base = deferred_walks_.size(), heads_base = deferred_heads_.size();
  const bool gathering = std::exchange(gathering_walks_, gathering_walks_ || walks_here);
  for (uint32_t t : terminals) {
    if (!start_crosses(t)) continue;
    // The lexeme of t ends inside the token: the rest follows the parser.
    const uint32_t start = lex_.terminals[t].dfa.start();
    heads_after_lexeme(Head{v, t, start, 0, 0}, *heads);
    cross_precomputed(index.get(t, start), *heads, words);
  }
  gathering_walks_ = gathering;
  // Walks gathered over this node's terminals ("-" and "--" starting one
  // run meet), made here when the answer is to be kept whole.
  if (walks_here) walk_deferred(base, heads_base, words);
}

bool Engine::except_from_index(const Head& h, std::span<uint32_t> words) {
  if (h.terminal == Head::kBetween || h.pending != 0) return false;
  const ir::LexTerminal& t = lex_.terminals[h.terminal];
  if (t.kind != ir::LexTerminal::Kind::Except || lex_.excepts[t.except_index].max_tokens) return false;
  const StateIndex& ix = g_.index().get(h.terminal, lex_.terminals[h.terminal].index_state(h.state));
  if (sink_) {
    // A GPU fill: the device ORs the set of tokens inside the text, and the
    // host sends only those in which the text ends.
    or_set(words, ix.inside);
    add_except_endings(h, ix, words);
    return true;
  }
  // Free text runs for thousands of tokens on one stack node, so its mask is
  // kept per (node, DFA state): one pass over the words then.
  const std::vector<uint32_t>& mask = except_mask(h, ix, words.size());
  if (exhausted()) return true;
  or_words(words, mask);
  return true;
}

void Engine::add_except_endings(const Head& h, const StateIndex& ix, std::span<uint32_t> words) {
  ScratchPool<Head>::Lease after(head_scratch_);
  ScratchPool<uint32_t>::Lease nodes(node_scratch_);
  if (dfa_accepting(h.terminal, h.state)) {  // the text ends before the token
    heads_after_lexeme(h, *after);
    nodes->clear();
    for (const Head& a : *after) nodes->push_back(a.node);
    mask_between(*nodes, pending_after(h), words, no_restart_after(h.terminal));
  }
  // The text ends inside the token: what may follow depends on where (the
  // occurrences left pending), so crossings are walked per (state where it
  // ended, first byte after), each group once.
  if (ix.crosses()) {
    ScratchPool<Head>::Lease next(head_scratch_);
    const VocabTrie& trie = g_.trie();
    // Walks gathered and made once per trie node, as in cross_precomputed:
    // text that may end before any '-' of "----" reaches each later '-'
    // both ways.
    const size_t base = deferred_walks_.size(), heads_base = deferred_heads_.size();
    for (int b = 0; b < 256; ++b) {
      if (!can_follow(h.terminal, static_cast<uint8_t>(b))) continue;  // no lexeme that may come next starts with it
      const uint32_t begin = ix.cross_begin[b], end = ix.cross_begin[b + 1];
      for (uint32_t i = begin; i < end;) {
        const uint32_t state = ix.cross_states[i];
        uint32_t j = i;
        while (j < end && ix.cross_states[j] == state) ++j;
        heads_after_lexeme(Head{h.node, h.terminal, state, 0, h.lexeme_tokens}, *after);
        step_byte(*after, static_cast<uint8_t>(b), /*first_of_token=*/false, *next);
        if (!next->empty()) {
          const bool ending_here_viable = viable(*next);
          for (uint32_t k = i; k < j; ++k) {
            const uint32_t x = ix.cross_nodes[k];
            if (ending_here_viable)
              for (uint32_t id : trie.tokens(x)) words[id / 32] |= 1u << (id % 32);
            if (trie.subtree_end(x) > x + 1) defer_walk(x, *next);
          }
        }
        i = j;
      }
    }
    walk_deferred(base, heads_base, words);
  }
}

const std::vector<uint32_t>& Engine::except_mask(const Head& h, const StateIndex& ix, size_t n_words) {
  const ExceptMasks::Key key{h.node, graph_.node(h.node).serial, h.terminal, h.state};
  if (const std::vector<uint32_t>* kept = except_masks_.find(key, n_words)) {
    // Its reads were made by an earlier call: a mask recorded now cannot say how deep.
    note_unseen_reads(h.node);
    return *kept;
  }
  // Tokens that stay inside the text: its DFA is trimmed and nothing limits
  // its tokens, so each of them can go on to a complete sentence. Made apart
  // from the kept ones: the endings may start other except! text, whose
  // mask goes through here too.
  ScratchPool<uint32_t>::Lease words(node_scratch_);  // swapped with the slot's: no allocation once warm
  words->assign(n_words, 0u);
  ix.inside.or_into(*words);
  {
    // This mask is kept apart: its walks are made into it, not gathered.
    const bool gathering = std::exchange(gathering_walks_, false);
    add_except_endings(h, ix, *words);
    gathering_walks_ = gathering;
  }
  // Not to be found again unless made without hitting a limit.
  return except_masks_.keep(exhausted() ? std::nullopt : std::optional(key), *words);
}

void Engine::fill_text_tokens(const std::vector<Head>& heads, std::span<uint32_t> words, TokenSetSink* sink,
                              bool words_are_zero) {
  begin_call();
  base_count_ = 0;
  if (!sink && memo_applies(heads)) {
    if (!remembered_mask(heads, words)) record_mask(heads, words, words_are_zero);
  } else {
    sink_ = sink;
    struct ClearSink {
      TokenSetSink*& sink;
      ~ClearSink() { sink = nullptr; }
    } clear_sink{sink_};
    compute_text_tokens(heads, words);
    if (!sink) note_mask_work(budget_.done());
  }
  // The request has paid for its first mask: the entries of the index it
  // has not met yet are built off the mask path from now on.
  g_.index_rest_in_background();
}

void Engine::compute_text_tokens(const std::vector<Head>& heads, std::span<uint32_t> words) {
  const Vocabulary& vocab = g_.vocabulary();
  const Mark start = mark();
  ScratchPool<Head>::Lease after(head_scratch_);
  ScratchPool<uint32_t>::Lease nodes(node_scratch_);
  // any!: every text token, unless a pending except! occurrence forbids it
  // or it leaves a character that nothing after it can finish.
  if (any_terminal_) {
    ScratchPool<Head>::Lease between(head_scratch_);
    heads_between_lexemes(heads, *between);
    for (size_t i = 0; i < between->size();) {
      const uint32_t pending = (*between)[i].pending;
      const uint8_t in_char = static_cast<uint8_t>((*between)[i].state);
      nodes->clear();
      for (; i < between->size() && (*between)[i].pending == pending && (*between)[i].state == in_char; ++i) {
        const uint32_t n = (*between)[i].node;
        const auto& can = shiftable(n);
        note_shift_reads(n, *any_terminal_);
        if (std::binary_search(can.begin(), can.end(), *any_terminal_) && (nodes->empty() || nodes->back() != n))
          nodes->push_back(n);
      }
      if (nodes->empty()) continue;
      if (pending == 0 && in_char == ir::utf8::kBoundary) {
        // The common case, from sets made once per grammar.
        uint8_t viable_states = 0;
        if (any_follows_any(*nodes)) {
          viable_states = any_states_;  // one-byte any! tokens finish any character
        } else {
          for (uint8_t c = 0; c < ir::utf8::kStateCount; ++c)
            if (!g_.any_tokens_ending_in(c).empty() && (c == ir::utf8::kBoundary || viable_after_any(*nodes, c, 0)))
              viable_states |= uint8_t(1u << c);
        }
        // Every text token at once, on the CPU; a GPU fill's sink takes the
        // per-state sets, which its device holds.
        if (viable_states == any_states_ && !sink_) {
          or_words(words, g_.any_tokens());
        } else {
          for (uint8_t c = 0; c < ir::utf8::kStateCount; ++c)
            if (viable_states >> c & 1) or_set(words, g_.any_tokens_ending_in(c));
        }
        if (viable_states == any_states_) {  // every text token: nothing other heads allow can add to it
          truncate(start);
          return;
        }
        continue;
      }
      for (uint32_t id = 0; id < vocab.size(); ++id) {
        if (vocab.is_special(id)) continue;
        const std::string_view bytes = vocab.bytes(id);
        const uint8_t c = ir::utf8::run(in_char, bytes);
        if (c == ir::utf8::kInvalid) continue;
        const auto after = advance_pending(pending, bytes);
        if (after && (c == ir::utf8::kBoundary || viable_after_any(*nodes, c, *after))) words[id / 32] |= 1u << (id % 32);
      }
    }
  }
  const TokenIndex& index = g_.index();
  ScratchPool<Head>::Lease single(head_scratch_);
  const size_t walks_base = deferred_walks_.size(), walk_heads_base = deferred_heads_.size();
  const bool gathering = std::exchange(gathering_walks_, true);
  for (const Head& h : heads) {
    if (except_from_index(h, words)) continue;
    // A pending except! occurrence, an except! lexeme, or a character begun
    // by any!: the exact walk.
    if (h.pending != 0 || (h.terminal == Head::kBetween && h.state != ir::utf8::kBoundary) ||
        (h.terminal != Head::kBetween && lex_.terminals[h.terminal].kind == ir::LexTerminal::Kind::Except)) {
      single->assign(1, h);
      walk(0, *single, words);
      continue;
    }
    if (h.terminal == Head::kBetween) {
      nodes->assign(1, h.node);
      mask_between(*nodes, 0, words, h.no_restart);
      continue;
    }
    const StateIndex& ix = index.get(h.terminal, lex_.terminals[h.terminal].index_state(h.state));
    if (can_continue_into_token(h)) or_set(words, ix.inside);
    bool ends_here = dfa_accepting(h.terminal, h.state);
    if (!ends_here && !ix.crosses()) continue;
    heads_after_lexeme(h, *after);
    if (ends_here) {
      nodes->clear();
      for (const Head& a : *after) nodes->push_back(a.node);
      mask_between(*nodes, pending_after(h), words, no_restart_after(h.terminal));
    }
    if (!can_continue_into_token(h)) continue;
    cross_precomputed(ix, *after, words);
  }
  gathering_walks_ = gathering;
  walk_deferred(walks_base, walk_heads_base, words);
  truncate(start);
}

}  // namespace cgram

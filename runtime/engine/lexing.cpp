// Heads over bytes: lexemes started, stepped and ended, except! occurrences
// pending, viability, tokens stepped, the end of the text.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "engine.h"
#include "mask_words.h"
#include "utf8_dfa.h"

namespace cgram {

std::optional<uint32_t> Engine::checked_pending(uint32_t id) {
  if (id == PendingExcepts::kViolated) return std::nullopt;
  if (id != PendingExcepts::kFull) return id;
  exhaust(fmt::format("more than {} distinct sets of pending except! occurrences (EngineLimits::max_pending_sets)",
                      limits_.max_pending_sets));
  return PendingExcepts::kNothing;  // the call's results are not used
}

bool Engine::can_continue_into_token(const Head& h) const {
  const ir::LexTerminal& t = lex_.terminals[h.terminal];
  if (t.kind != ir::LexTerminal::Kind::Except) return true;
  const auto& max = lex_.excepts[t.except_index].max_tokens;
  return !max || h.lexeme_tokens < *max;
}

void Engine::start_lexemes(uint32_t node, uint32_t pending, uint8_t in_char, uint8_t byte, std::vector<Head>& out,
                           uint32_t no_restart) {
  auto after = pending == 0 ? std::optional<uint32_t>(0) : advance_pending(pending, byte);
  if (!after) return;
  // Once the node's shiftable set is known, only its terminals are tried.
  settle_shiftable(node);
  const bool known = shiftable_index_[node] >= 0;
  if (known) {
    // What this byte's answer read: the terminals it can start.
    if (in_char == ir::utf8::kBoundary) {
      note_byte_reads(node, byte);
    } else {
      note_set_reads(node);
    }
    const uint32_t set = shiftable_sets_.reading(shiftable_index_[node]).set;
    if (in_char == ir::utf8::kBoundary && !shiftable_sets_.first_bytes(set)[byte]) return;
  }
  const std::vector<uint32_t>& candidates =
      known ? set_of_reading(shiftable_index_[node]) : table_.terminals_with_actions(graph_.node(node).state);
  with_lookups([&](const auto& look) {
    for (uint32_t t : candidates) {
      const ir::LexTerminal& term = lex_.terminals[t];
      if (term.kind == ir::LexTerminal::Kind::AnyToken || t == no_restart) continue;
      uint32_t from = term.dfa.start();
      if (in_char != ir::utf8::kBoundary) {
        // Literals and regexes start on a character; except! text may finish one.
        if (term.kind != ir::LexTerminal::Kind::Except) continue;
        from = lex_.excepts[term.except_index].automaton->start_in_char(in_char);
      } else if (!first_bytes_[t][byte]) {
        continue;
      }
      if (!known && !is_shiftable(node, t)) continue;
      uint32_t q = look.dfa_next(t, from, byte);
      if (q != ir::Dfa::kDead) out.push_back({node, t, q, *after, 1});
    }
  });
}

uint8_t Engine::except_char_state(const Head& h) const {
  const ir::ExceptAutomaton& ac = *lex_.excepts[lex_.terminals[h.terminal].except_index].automaton;
  // The lexeme's own start (split off the automaton's, see lower_except) is last.
  return h.state < ac.dfa().size() ? ac.utf8_state(h.state) : ir::utf8::kBoundary;
}

bool Engine::surely_viable(const Head& h) {
  // Every stack can be completed (all rules are productive); what can stand
  // in the way is an unfinished character and a pending except! occurrence
  // that the only continuation would complete.
  if (h.terminal == Head::kBetween) return h.state == ir::utf8::kBoundary && h.pending == 0;
  const ir::LexTerminal& t = lex_.terminals[h.terminal];
  if (t.kind != ir::LexTerminal::Kind::Except) return h.pending == 0;  // its DFA is trimmed
  const auto& max = lex_.excepts[t.except_index].max_tokens;
  // except! text can go on past any pending occurrence to a clean end, with
  // no token limit, or with a token left at a character boundary (the next
  // token can hold any text).
  if (!max) return true;
  if (h.lexeme_tokens < *max && except_char_state(h) == ir::utf8::kBoundary) return true;
  // Otherwise it must end here, and may leave occurrences pending.
  return dfa_accepting(h.terminal, h.state) && pending_after(h) == 0;
}

uint8_t Engine::text_char_state(const std::vector<Head>& heads) const {
  for (const Head& h : heads) {
    if (h.terminal == Head::kBetween) return static_cast<uint8_t>(h.state);
    if (lex_.terminals[h.terminal].kind == ir::LexTerminal::Kind::Except) return except_char_state(h);
  }
  return kUnknownCharState;
}

bool Engine::viable(const std::vector<Head>& heads) {
  if (heads.empty()) return false;
  for (const Head& h : heads)
    if (surely_viable(h)) return true;
  return viable_search(heads, text_char_state(heads), /*free_token=*/false, viable_search_depth_);
}

// The search follows the reference recognizer: the rest of a character the
// text is inside comes as one-byte tokens (each counts against except!
// token limits); past it, the continuation is one token of any text. Bytes
// inside a character do not count against the depth. Bytes that nothing in
// the grammar tells apart are tried once (CompiledGrammar::byte_representatives).
bool Engine::viable_search(const std::vector<Head>& heads, uint8_t char_state, bool free_token, int depth) {
  if (heads.empty()) return false;
  for (const Head& h : heads)
    if (surely_viable(h)) return true;
  if (char_state == kUnknownCharState) char_state = text_char_state(heads);
  const bool in_char = char_state != ir::utf8::kBoundary && char_state != kUnknownCharState;
  // A complete text needs no continuation, whatever is pending.
  if (!in_char && ends_here(heads)) return true;
  if (depth == 0 && !in_char) return false;
  const Mark m = mark();
  ScratchPool<Head>::Lease next(head_scratch_);
  for (uint8_t b : g_.byte_representatives()) {
    uint8_t after = kUnknownCharState;
    if (char_state != kUnknownCharState) {
      after = ir::utf8::step(char_state, b);
      if (after == ir::utf8::kInvalid) continue;
    }
    if (free_token) {
      step_byte(heads, b, /*first_of_token=*/false, *next);
    } else {
      const char byte = static_cast<char>(b);
      step_token_unchecked(heads, std::string_view(&byte, 1), *next);
    }
    const bool found = viable_search(*next, after, free_token || !in_char,
                                     after != ir::utf8::kBoundary && after != kUnknownCharState ? depth : depth - 1);
    truncate(m);
    if (found) return true;
    if (budget_.exhausted()) return false;
  }
  return false;
}

void Engine::keep_viable(std::vector<Head>& heads) {
  // The token is allowed when some reading can be completed. Then every
  // reading is kept, as the reference recognizer keeps every item: one that
  // one-byte tokens could not complete (a character begun near an except!
  // token limit) may be completed by a longer next token.
  if (!viable(heads)) heads.clear();
}

void Engine::normalize(std::vector<Head>& heads) {
  if (heads.size() < 2) return;
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
}

void Engine::end_lexemes(const std::vector<Head>& in, std::vector<Between>& out) {
  out.clear();
  // Lexemes that end before the next byte, grouped by (terminal, pending
  // after it) so that the reductions of heads that agree share one GSS scope.
  ending_.clear();
  for (const Head& h : in) {
    if (h.terminal == Head::kBetween) ending_.push_back({Head::kBetween, h.pending, h.state, h.no_restart, h.node});
    else if (dfa_accepting(h.terminal, h.state))
      ending_.push_back({h.terminal, pending_after(h), ir::utf8::kBoundary, no_restart_after(h.terminal), h.node});
  }
  std::sort(ending_.begin(), ending_.end());
  ending_.erase(std::unique(ending_.begin(), ending_.end()), ending_.end());
  for (size_t i = 0; i < ending_.size() && !budget_.exhausted();) {
    size_t j = i;
    group_.clear();
    while (j < ending_.size() && ending_[j].terminal == ending_[i].terminal && ending_[j].pending == ending_[i].pending &&
           ending_[j].in_char == ending_[i].in_char && ending_[j].no_restart == ending_[i].no_restart)
      group_.push_back(ending_[j++].node);
    const Ending& first = ending_[i];
    if (first.terminal == Head::kBetween) {
      for (uint32_t n : group_) out.push_back({n, first.pending, first.in_char, first.no_restart});
    } else {
      end_lexeme(group_, first.terminal, shifted_nodes_);
      for (uint32_t n : shifted_nodes_) out.push_back({n, first.pending, first.in_char, first.no_restart});
    }
    i = j;
  }
}

void Engine::step_byte_after(const std::vector<Head>& in, const std::vector<Between>& between, uint8_t byte,
                             bool first_of_token, std::vector<Head>& out) {
  out.clear();
  charge(in.size());
  if (budget_.exhausted()) return;
  with_lookups([&](const auto& look) {
    for (const Head& h : in) {
      if (h.terminal == Head::kBetween || (first_of_token && !can_continue_into_token(h))) continue;
      const uint32_t q = look.dfa_next(h.terminal, h.state, byte);
      if (q == ir::Dfa::kDead) continue;
      // Tokens are counted only where a limit reads them: heads of other
      // lexemes that began in different tokens stay equal (merge_equal_heads).
      const uint32_t tokens = h.lexeme_tokens + (first_of_token && counts_tokens_[h.terminal] ? 1u : 0u);
      if (h.pending == 0) {  // the common case, without the call
        out.push_back({h.node, h.terminal, q, 0, tokens});
      } else if (auto p = advance_pending(h.pending, byte)) {
        out.push_back({h.node, h.terminal, q, *p, tokens});
      }
    }
  });
  for (const Between& b : between)
    start_lexemes(b.node, b.pending, static_cast<uint8_t>(b.in_char), byte, out, b.no_restart);
  normalize(out);
  merge_equal_heads(out);
}

void Engine::merge_equal_heads(std::vector<Head>& heads) {
  if (heads.size() < kMergeHeadsMin || budget_.exhausted()) return;
  // Readings that differ only in their stacks, whose tops have one LR
  // state, are one reading of a node with all their parents: the same set
  // of stacks (a node stands for every path below it), lexed from then on
  // once instead of once per stack. Free text after any number of unary
  // operators ("- - --comment") otherwise keeps one reading per split.
  auto& order = merge_order_;
  order.resize(heads.size());
  for (uint32_t i = 0; i < heads.size(); ++i) order[i] = i;
  const auto key = [&](uint32_t i) {
    const Head& h = heads[i];
    return std::tie(h.terminal, h.state, h.pending, h.lexeme_tokens, h.no_restart, graph_.node(h.node).state);
  };
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  bool merged = false;
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && key(order[j]) == key(order[i])) ++j;
    // A node with no parent is the bottom of its stack: a merged node with
    // parents would lose that empty stack (only the start state has none,
    // and no shift or goto leads there, but never rely on it).
    const bool has_bottom =
        std::any_of(order.begin() + static_cast<std::ptrdiff_t>(i), order.begin() + static_cast<std::ptrdiff_t>(j),
                    [&](uint32_t k) { return graph_.node(heads[k].node).degree == 0; });
    if (j - i >= 2 && !has_bottom) {
      // The new node shares the edge list of the one with the most parents
      // (lists are only ever prepended to, and a tail is older than its
      // node), so a reading merged again at every byte costs its new
      // parents only, not a copy of all of them.
      size_t widest = i;
      for (size_t k = i + 1; k < j; ++k)
        if (graph_.node(heads[order[k]].node).degree > graph_.node(heads[order[widest]].node).degree) widest = k;
      const uint32_t tail = heads[order[widest]].node;
      const uint32_t node = new_node(graph_.node(tail).state);
      graph_.share_parents(node, tail);
      note_read(tail);
      const uint32_t epoch = visited_.next_pass();
      // A long list may get a parent twice: harmless, paths are sets.
      if (graph_.node(tail).degree <= StackGraph::kIndexDegree)
        for (uint32_t e = graph_.node(tail).first_edge; e != StackGraph::kNoEdge; e = graph_.edge(e).next)
          visited_[graph_.edge(e).parent] = epoch;
      for (size_t k = i; k < j; ++k) {
        Head& h = heads[order[k]];
        if (h.node != tail) {
          note_read(h.node);
          for (uint32_t e = graph_.node(h.node).first_edge; e != StackGraph::kNoEdge; e = graph_.edge(e).next) {
            const uint32_t parent = graph_.edge(e).parent;
            if (visited_[parent] != epoch) visited_[parent] = epoch, push_edge(node, parent);
          }
        }
        h.node = node;
      }
      merged = true;
    }
    i = j;
  }
  if (merged) normalize(heads);
}

void Engine::step_byte(const std::vector<Head>& in, uint8_t byte, bool first_of_token, std::vector<Head>& out) {
  out.clear();
  if (budget_.exhausted()) return;
  ScratchPool<Between>::Lease between(between_scratch_);
  end_lexemes(in, *between);
  step_byte_after(in, *between, byte, first_of_token, out);
}

void Engine::step_token(const std::vector<Head>& in, std::string_view bytes, std::vector<Head>& out) {
  begin_call();
  step_token_unchecked(in, bytes, out);
  if (budget_.exhausted()) return;
  keep_viable(out);
  if (out.size() > limits_.max_heads)
    exhaust(fmt::format("more than {} readings of the text after one token (EngineLimits::max_heads)", limits_.max_heads));
}

void Engine::step_token_unchecked(const std::vector<Head>& in, std::string_view bytes, std::vector<Head>& out) {
  out.clear();
  if (bytes.empty()) return;
  // any!: the whole token, from any head that can be between lexemes now.
  if (any_terminal_) {
    ScratchPool<Head>::Lease between(head_scratch_);
    heads_between_lexemes(in, *between);
    ScratchPool<uint32_t>::Lease tops(node_scratch_);
    ScratchPool<uint32_t>::Lease shifted(node_scratch_);
    for (size_t i = 0; i < between->size();) {
      const uint32_t pending = (*between)[i].pending;
      const uint32_t in_char = (*between)[i].state;
      tops->clear();
      for (; i < between->size() && (*between)[i].pending == pending && (*between)[i].state == in_char; ++i) {
        uint32_t n = (*between)[i].node;
        const auto& can = shiftable(n);
        note_shift_reads(n, *any_terminal_);
        if (std::binary_search(can.begin(), can.end(), *any_terminal_) && (tops->empty() || tops->back() != n))
          tops->push_back(n);
      }
      auto after = advance_pending(pending, bytes);
      const uint8_t char_after = ir::utf8::run(static_cast<uint8_t>(in_char), bytes);
      if (tops->empty() || !after || char_after == ir::utf8::kInvalid) continue;
      end_lexeme(*tops, *any_terminal_, *shifted);
      for (uint32_t n : *shifted) out.push_back({n, Head::kBetween, char_after, *after, 0});
    }
  }
  ScratchPool<Head>::Lease current(head_scratch_);
  ScratchPool<Head>::Lease next(head_scratch_);
  current->assign(in.begin(), in.end());
  for (size_t i = 0; i < bytes.size() && !current->empty() && !budget_.exhausted(); ++i) {
    step_byte(*current, static_cast<uint8_t>(bytes[i]), i == 0, *next);
    current->swap(*next);
  }
  out.insert(out.end(), current->begin(), current->end());
  normalize(out);
}

bool Engine::can_end(const std::vector<Head>& heads) {
  begin_call();
  return ends_here(heads);
}

bool Engine::ends_here(const std::vector<Head>& heads) {
  Mark m = mark();
  bool accepted = false;
  ScratchPool<Head>::Lease after(head_scratch_);
  ScratchPool<uint32_t>::Lease tops(node_scratch_);
  for (const Head& h : heads) {
    tops->clear();
    if (h.terminal == Head::kBetween) {
      if (h.state == ir::utf8::kBoundary) tops->push_back(h.node);  // never inside a character
    } else if (dfa_accepting(h.terminal, h.state)) {
      heads_after_lexeme(h, *after);
      for (const Head& a : *after) tops->push_back(a.node);
    }
    if (!tops->empty()) reduce_closure(*tops, table_.end_marker(), &accepted, closure_scratch_);
    if (accepted) break;
  }
  truncate(m);
  return accepted;
}

void Engine::heads_after_lexeme(const Head& head, std::vector<Head>& out) {
  out.clear();
  ScratchPool<uint32_t>::Lease nodes(node_scratch_);
  end_lexeme(std::span<const uint32_t>(&head.node, 1), head.terminal, *nodes);
  const uint32_t pending = pending_after(head);
  for (uint32_t n : *nodes) out.push_back({n, Head::kBetween, 0, pending, 0, no_restart_after(head.terminal)});
}

void Engine::heads_between_lexemes(const std::vector<Head>& heads, std::vector<Head>& out) {
  out.clear();
  ScratchPool<Head>::Lease ended(head_scratch_);
  for (const Head& h : heads) {
    if (h.terminal == Head::kBetween) {
      out.push_back(h);
    } else if (dfa_accepting(h.terminal, h.state)) {
      heads_after_lexeme(h, *ended);
      out.insert(out.end(), ended->begin(), ended->end());
    }
  }
  // Grouped by pending occurrences and character state: each group is one GSS scope.
  std::sort(out.begin(), out.end(), [](const Head& a, const Head& b) {
    return std::tie(a.pending, a.state, a.node) < std::tie(b.pending, b.state, b.node);
  });
}

uint32_t Engine::pending_after(const Head& h) {
  const ir::LexTerminal& t = lex_.terminals[h.terminal];
  return t.kind == ir::LexTerminal::Kind::Except ? add_except_pending(h.pending, t.except_index, h.state) : h.pending;
}

bool Engine::any_follows_any(std::span<const uint32_t> tops) {
  const Mark m = mark();
  ScratchPool<uint32_t>::Lease from(node_scratch_), shifted(node_scratch_);
  from->assign(tops.begin(), tops.end());
  // The token, then the three a four-byte character may still need.
  bool result = true;
  for (int more = 0; more < 3 && result; ++more) {
    end_lexeme(*from, *any_terminal_, *shifted);
    std::erase_if(*shifted, [&](uint32_t n) { return !is_shiftable(n, *any_terminal_); });
    result = !shifted->empty();
    std::swap(*from, *shifted);
  }
  truncate(m);
  return result;
}

bool Engine::viable_after_any(std::span<const uint32_t> tops, uint8_t in_char, uint32_t pending) {
  const Mark m = mark();
  ScratchPool<uint32_t>::Lease shifted(node_scratch_);
  ScratchPool<Head>::Lease after(head_scratch_);
  end_lexeme(tops, *any_terminal_, *shifted);
  for (uint32_t n : *shifted) after->push_back({n, Head::kBetween, in_char, pending, 0});
  const bool result = viable(*after);
  truncate(m);
  return result;
}

}  // namespace cgram

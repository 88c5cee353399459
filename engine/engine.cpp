#include "engine.h"
#include "mask_words.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "utf8_dfa.h"

namespace cgram {

namespace {
constexpr uint32_t kViolated = UINT32_MAX;
}

Engine::Engine(const CompiledGrammar& grammar, const EngineLimits& limits)
    : g_(grammar), limits_(limits), lex_(grammar.lexical()), table_(grammar.table()) {
  for (uint32_t t = 0; t < lex_.terminals.size(); ++t) {
    const ir::LexTerminal& term = lex_.terminals[t];
    if (term.kind == ir::LexTerminal::Kind::AnyToken) any_terminal_ = t;
    std::bitset<256> first;
    for (int b = 0; b < 256; ++b)
      first[b] = term.kind == ir::LexTerminal::Kind::AnyToken ||
                 term.dfa.next(term.dfa.start(), static_cast<uint8_t>(b)) != ir::Dfa::kDead;
    first_bytes_.push_back(first);
  }
  for (uint8_t c = 0; c < ir::utf8::kStateCount; ++c)
    if (!grammar.any_tokens_ending_in(c).empty()) any_states_ |= uint8_t(1u << c);
  for (const ir::LexExcept& e : lex_.excepts)
    for (const std::string& s : e.automaton->strings())
      for (char c : s) except_bytes_.set(static_cast<uint8_t>(c));
  size_t longest = 0;
  for (const ir::LexExcept& e : lex_.excepts)
    for (const std::string& str : e.automaton->strings()) longest = std::max(longest, str.size());
  viable_search_depth_ = static_cast<int>(2 * longest + 1);
  pending_sets_.emplace_back();  // id 0: nothing pending
  pending_ids_[{}] = 0;
}

uint32_t Engine::next_visit_epoch() {
  if (++visit_epoch_ == 0) {  // wrapped: no stale mark may equal a new epoch
    std::fill(visited_.begin(), visited_.end(), 0);
    visit_epoch_ = 1;
  }
  return visit_epoch_;
}

void Engine::exhaust_work() {
  if (call_work_limit_ < limits_.max_work_per_call) {
    exhaust(fmt::format("the parser did more than {} steps of work over this sequence, the budget of the text it "
                        "has read ({} + {} per byte, EngineLimits::sequence_work_slack and max_work_per_byte): the "
                        "grammar is too ambiguous here, and its work grows with the text",
                        sequence_allowance_, limits_.sequence_work_slack, limits_.max_work_per_byte));
    return;
  }
  exhaust(fmt::format("the parser did more than {} steps of work for one token: the grammar is too ambiguous "
                      "here (EngineLimits::max_work_per_call)",
                      limits_.max_work_per_call));
}

void Engine::start_sequence() {
  sequence_work_ = 0;
  work_done_ = 0;
  sequence_allowance_ = limits_.max_work_per_byte ? limits_.sequence_work_slack : SIZE_MAX;
}

void Engine::grant_bytes(size_t bytes) {
  if (sequence_allowance_ == SIZE_MAX) return;
  const size_t more = bytes > SIZE_MAX / std::max<size_t>(limits_.max_work_per_byte, 1)
                          ? SIZE_MAX
                          : bytes * limits_.max_work_per_byte;
  sequence_allowance_ = more > SIZE_MAX - 1 - sequence_allowance_ ? SIZE_MAX - 1 : sequence_allowance_ + more;
}

uint32_t Engine::new_node(uint32_t state) {
  charge(1);
  if (nodes_.size() + edges_.size() >= limits_.max_stack_elements)
    exhaust(fmt::format("the parse stack holds more than {} nodes and edges (EngineLimits::max_stack_elements)",
                        limits_.max_stack_elements));
  nodes_.push_back({state, kNoEdge, static_cast<uint32_t>(status_.size()), next_serial_++});
  if (visited_.size() < nodes_.size()) visited_.resize(nodes_.size(), 0);
  status_.resize(status_.size() + table_.terminals_with_actions(state).size(), 0);
  shiftable_index_.push_back(-1);
  return static_cast<uint32_t>(nodes_.size() - 1);
}

bool Engine::add_edge(uint32_t node, uint32_t parent) {
  Node& n = nodes_[node];
  if (n.degree < kIndexDegree) {
    for (uint32_t e = n.first_edge; e != kNoEdge; e = edges_[e].next)
      if (edges_[e].parent == parent) return false;
  } else {
    auto key = [&](uint32_t p) { return uint64_t{n.serial} << 32 | p; };
    if (n.index_epoch != edge_epoch_) {
      // Stale keys (of truncated nodes) are dropped now and then: the set
      // stays within a few times the edges alive.
      if (edge_index_.size() > std::max<size_t>(size_t{1} << 16, 4 * edges_.size())) {
        edge_index_.clear();
        ++edge_epoch_;
      }
      for (uint32_t e = n.first_edge; e != kNoEdge; e = edges_[e].next) edge_index_.insert(key(edges_[e].parent));
      n.index_epoch = edge_epoch_;
    }
    if (!edge_index_.insert(key(parent))) return false;
  }
  charge(1);
  edges_.push_back({parent, n.first_edge});
  n.first_edge = static_cast<uint32_t>(edges_.size() - 1);
  ++n.degree;
  return true;
}

// Edges are only ever added to nodes created in the same reduction or shift
// (its scope), so the nodes before a mark never gain edges after it and a
// truncation is just a resize.
void Engine::truncate(Mark m) {
  sequence_allowance_ = m.allowance;  // the work already done stays spent
  nodes_.resize(m.nodes);
  status_.resize(m.status);
  shiftable_index_.resize(m.nodes);
  edges_.resize(m.edges);
}

void Engine::compact(std::span<Head> heads, std::span<Mark* const> marks) {
  constexpr uint32_t kDead = UINT32_MAX;
  std::vector<uint32_t> node_to(nodes_.size(), kDead);
  std::vector<uint8_t> edge_live(edges_.size(), 0);
  std::vector<uint32_t> stack;
  auto reach = [&](uint32_t v) {
    if (node_to[v] == kDead) node_to[v] = 0, stack.push_back(v);
  };
  for (const Head& h : heads) reach(h.node);
  while (!stack.empty()) {
    const uint32_t v = stack.back();
    stack.pop_back();
    for (uint32_t e = nodes_[v].first_edge; e != kNoEdge; e = edges_[e].next) {
      edge_live[e] = 1;
      reach(edges_[e].parent);
    }
  }
  // How many live nodes, edges and status entries come before each old
  // index: the new indices, and where each mark goes.
  std::vector<uint32_t> nodes_before(nodes_.size() + 1, 0), edges_before(edges_.size() + 1, 0),
      status_before(status_.size() + 1, 0);
  std::vector<uint8_t> status_live(status_.size(), 0);
  for (uint32_t v = 0; v < nodes_.size(); ++v) {
    nodes_before[v + 1] = nodes_before[v] + (node_to[v] != kDead);
    if (node_to[v] == kDead) continue;
    node_to[v] = nodes_before[v];
    const size_t entries = table_.terminals_with_actions(nodes_[v].state).size();
    std::fill_n(status_live.begin() + nodes_[v].status, entries, 1);
  }
  for (size_t e = 0; e < edges_.size(); ++e) edges_before[e + 1] = edges_before[e] + edge_live[e];
  for (size_t i = 0; i < status_.size(); ++i) status_before[i + 1] = status_before[i] + status_live[i];
  auto new_edge = [&](uint32_t e) { return e == kNoEdge ? kNoEdge : edges_before[e]; };
  std::vector<Node> nodes;
  std::vector<int32_t> shiftable_index;
  nodes.reserve(nodes_before.back());
  shiftable_index.reserve(nodes_before.back());
  for (uint32_t v = 0; v < nodes_.size(); ++v) {
    if (node_to[v] == kDead) continue;
    Node n = nodes_[v];
    n.first_edge = new_edge(n.first_edge);
    n.status = status_before[n.status];
    nodes.push_back(n);
    shiftable_index.push_back(shiftable_index_[v]);
  }
  std::vector<Edge> edges;
  edges.reserve(edges_before.back());
  for (size_t e = 0; e < edges_.size(); ++e)
    if (edge_live[e]) edges.push_back({node_to[edges_[e].parent], new_edge(edges_[e].next)});
  std::vector<uint8_t> status;
  status.reserve(status_before.back());
  for (size_t i = 0; i < status_.size(); ++i)
    if (status_live[i]) status.push_back(status_[i]);
  for (Mark* m : marks) *m = {nodes_before[m->nodes], edges_before[m->edges], status_before[m->status]};
  for (Head& h : heads) h.node = node_to[h.node];
  for (ExceptMaskEntry& e : except_mask_cache_)
    e.node = e.node < node_to.size() && node_to[e.node] != kDead ? node_to[e.node] : UINT32_MAX;
  nodes_ = std::move(nodes);
  edges_ = std::move(edges);
  status_ = std::move(status);
  shiftable_index_ = std::move(shiftable_index);
  // Keys hold parents' indices, which moved. (The end cache checks every
  // node it names by serial, and serials did not change.)
  edge_index_.clear();
  ++edge_epoch_;
}

void Engine::refresh_tier() {
  peak_work_ = std::max(peak_work_, work_done_);
  sequence_work_ += work_done_;
  work_done_ = 0;  // every public call starts here, with its own budget
  const size_t left = sequence_allowance_ > sequence_work_ ? sequence_allowance_ - sequence_work_ : 0;
  call_work_limit_ = std::min(limits_.max_work_per_call, left);
  const Kernels* k = g_.kernels();
  k_ = k ? &k->functions : nullptr;
  k_tables_ = k ? k->dfa_tables.data() : nullptr;
}

std::vector<Head> Engine::initial_heads() {
  refresh_tier();
  nodes_.clear();
  edges_.clear();
  status_.clear();
  shiftable_index_.clear();
  return {Head{new_node(0), Head::kBetween, 0, 0, 0}};
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
  result.assign(tops.begin(), tops.end());
  // Nodes created here, by state (few: a linear search beats a map).
  auto& scope = scope_;
  scope.clear();
  // Work items (rule 3): a node, the only edge its length > 0 paths must
  // start with (kAllPaths: every edge; kNoLongPaths: none), and whether its
  // ε-reductions are still to do.
  auto& work = work_;
  work.clear();
  for (uint32_t v : tops) work.push_back({v, kAllPaths, true});
  while (!work.empty() && exhausted_.empty()) {
    const ReductionWork item = work.back();
    work.pop_back();
    const uint32_t v = item.node;
    for (const ir::LrReduction& r : reductions(nodes_[v].state, terminal)) {
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
      path_ends_.clear();
      if (length == 0) {
        path_ends_.push_back(v);
      } else {
        const bool through_one = item.via != kAllPaths;
        path_ends_.push_back(through_one ? edges_[item.via].parent : v);
        for (size_t level = through_one ? 1 : 0; level < length && !path_ends_.empty(); ++level) {
          path_next_.clear();
          const uint32_t epoch = next_visit_epoch();
          size_t walked = 0;
          for (uint32_t node : path_ends_)
            for (uint32_t e = nodes_[node].first_edge; e != kNoEdge; e = edges_[e].next, ++walked) {
              const uint32_t parent = edges_[e].parent;
              if (visited_[parent] != epoch) visited_[parent] = epoch, path_next_.push_back(parent);
            }
          charge(walked);
          path_ends_.swap(path_next_);
        }
      }
      for (size_t i = 0; i < path_ends_.size(); ++i) {
        uint32_t u = path_ends_[i];
        uint32_t target = lr_go(nodes_[u].state, lhs);
        if (target == ir::LrTable::kNone) continue;
        auto it = std::find_if(scope.begin(), scope.end(), [&](const auto& e) { return e.first == target; });
        if (it == scope.end()) {
          uint32_t w = new_node(target);
          add_edge(w, u);
          scope.emplace_back(target, w);
          result.push_back(w);
          // An ε-edge (u in this level) is never the start of a path (rule 2).
          work.push_back({w, length == 0 ? kNoLongPaths : nodes_[w].first_edge, true});
        } else if (add_edge(it->second, u) && length > 0) {
          work.push_back({it->second, nodes_[it->second].first_edge, false});
        }
      }
    }
  }
}

void Engine::end_lexeme(std::span<const uint32_t> tops, uint32_t terminal, std::vector<uint32_t>& out) {
  EndCacheEntry* cached = nullptr;
  if (tops.size() == 1) {
    const uint32_t v = tops[0];
    if (end_cache_.empty()) end_cache_.resize(kEndCacheSize);
    cached = &end_cache_[(uint64_t(nodes_[v].serial) * 0x9E3779B1u ^ terminal * 0x85EBCA77u) % kEndCacheSize];
    if (cached->node == v && cached->serial == nodes_[v].serial && cached->terminal == terminal) {
      bool valid = true;
      for (uint32_t i = 0; i < cached->count && valid; ++i)
        valid = cached->results[i] < nodes_.size() && nodes_[cached->results[i]].serial == cached->serials[i];
      if (valid) {
        out.assign(cached->results.begin(), cached->results.begin() + cached->count);
        return;
      }
    }
  }
  reduce_closure(tops, terminal, nullptr, reduced_);
  auto& shifted = shift_scope_;
  shifted.clear();
  for (uint32_t x : reduced_) {
    uint32_t target = lr_shift(nodes_[x].state, terminal);
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
  out.clear();
  for (auto [state, node] : shifted) out.push_back(node);
  if (cached && out.size() <= cached->results.size()) {
    cached->node = tops[0];
    cached->serial = nodes_[tops[0]].serial;
    cached->terminal = terminal;
    cached->count = static_cast<uint32_t>(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      cached->results[i] = out[i];
      cached->serials[i] = nodes_[out[i]].serial;
    }
  }
}

// The terminals that can really be shifted from this node after the
// reductions its stacks allow (the table's row can promise more: LALR
// lookaheads are merged).
const std::vector<uint32_t>& Engine::shiftable(uint32_t node) {
  if (shiftable_index_[node] >= 0) return shiftable_sets_[shiftable_index_[node]];
  std::vector<uint32_t>& result = shiftable_scratch_;
  result.clear();
  for (uint32_t t : table_.terminals_with_actions(nodes_[node].state))
    if (is_shiftable(node, t)) result.push_back(t);
  auto it = shiftable_ids_.find(result);
  bool inserted = false;
  if (it == shiftable_ids_.end()) {
    it = shiftable_ids_.emplace(result, static_cast<uint32_t>(shiftable_sets_.size())).first;
    inserted = true;
  }
  if (inserted) {
    std::bitset<256> bytes;
    for (uint32_t t : result) bytes |= first_bytes_[t];
    shiftable_first_bytes_.push_back(bytes);
    shiftable_sets_.push_back(result);
  }
  shiftable_index_[node] = static_cast<int32_t>(it->second);
  return shiftable_sets_[it->second];
}

bool Engine::is_shiftable(uint32_t node, uint32_t terminal) {
  const uint32_t state = nodes_[node].state;
  const auto& active = table_.terminals_with_actions(state);
  auto pos = std::lower_bound(active.begin(), active.end(), terminal);
  if (pos == active.end() || *pos != terminal) return false;
  uint8_t& status = status_[nodes_[node].status + (pos - active.begin())];
  if (status != 0) return status == 1;
  bool can;
  if (reductions(state, terminal).empty()) {
    can = lr_shift(state, terminal) != ir::LrTable::kNone;
  } else {
    Mark m = mark();
    reduce_closure(std::span<const uint32_t>(&node, 1), terminal, nullptr, closure_scratch_);
    can = false;
    for (uint32_t x : closure_scratch_) can = can || lr_shift(nodes_[x].state, terminal) != ir::LrTable::kNone;
    truncate(m);
  }
  // Re-read: truncate() may have shrunk status_ only past this node's entries.
  status_[nodes_[node].status + (pos - active.begin())] = can ? 1 : 2;
  return can;
}

uint32_t Engine::intern_pending(std::vector<std::pair<uint32_t, std::string>> set) {
  if (pending_sets_.size() >= limits_.max_pending_sets) {
    exhaust(fmt::format("more than {} distinct sets of pending except! occurrences (EngineLimits::max_pending_sets)",
                        limits_.max_pending_sets));
    return 0;
  }
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  auto [it, inserted] = pending_ids_.emplace(set, static_cast<uint32_t>(pending_sets_.size()));
  if (inserted) pending_sets_.push_back(std::move(set));
  return it->second;
}

std::optional<uint32_t> Engine::advance_pending(uint32_t pending, uint8_t byte) {
  if (pending == 0) return 0;
  uint64_t key = (uint64_t(pending) << 8) | byte;
  if (auto it = pending_steps_.find(key); it != pending_steps_.end())
    return it->second == kViolated ? std::nullopt : std::optional<uint32_t>(it->second);
  std::vector<std::pair<uint32_t, std::string>> next;
  bool violated = false;
  for (const auto& [except, rest] : pending_sets_[pending]) {
    if (static_cast<uint8_t>(rest[0]) != byte) continue;
    if (rest.size() == 1) violated = true;
    else next.emplace_back(except, rest.substr(1));
  }
  uint32_t result = violated ? kViolated : intern_pending(std::move(next));
  pending_steps_[key] = result;
  return violated ? std::nullopt : std::optional<uint32_t>(result);
}

std::optional<uint32_t> Engine::advance_pending(uint32_t pending, std::string_view bytes) {
  for (char c : bytes) {
    if (pending == 0) return 0;
    auto next = advance_pending(pending, static_cast<uint8_t>(c));
    if (!next) return std::nullopt;
    pending = *next;
  }
  return pending;
}

uint32_t Engine::add_except_pending(uint32_t pending, uint32_t except_index, uint32_t ac_state) {
  const ir::ExceptAutomaton& automaton = *lex_.excepts[except_index].automaton;
  // The lexeme's own start (split off, see lower_except) is never where a
  // text ends; a loaded table is not trusted to agree.
  if (ac_state >= automaton.dfa().size() || !automaton.has_pending(ac_state)) return pending;
  const uint64_t key = (uint64_t(pending) << 40) ^ (uint64_t(except_index) << 24) ^ ac_state;
  if (auto it = except_pending_.find(key); it != except_pending_.end()) return it->second;
  const std::vector<std::string> strings = automaton.pending(ac_state);
  std::vector<std::pair<uint32_t, std::string>> set = pending_sets_[pending];
  for (const std::string& s : strings) set.emplace_back(except_index, s);
  const uint32_t id = intern_pending(std::move(set));
  except_pending_.emplace(key, id);
  return id;
}

bool Engine::can_continue_into_token(const Head& h) const {
  const ir::LexTerminal& t = lex_.terminals[h.terminal];
  if (t.kind != ir::LexTerminal::Kind::Except) return true;
  const auto& max = lex_.excepts[t.except_index].max_tokens;
  return !max || h.lexeme_tokens < *max;
}

void Engine::start_lexemes(uint32_t node, uint32_t pending, uint8_t in_char, uint8_t byte, std::vector<Head>& out,
                           uint32_t no_restart) {
  auto after = advance_pending(pending, byte);
  if (!after) return;
  for (uint32_t t : table_.terminals_with_actions(nodes_[node].state)) {
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
    if (!is_shiftable(node, t)) continue;
    uint32_t q = dfa_next(t, from, byte);
    if (q != ir::Dfa::kDead) out.push_back({node, t, q, *after, 1});
  }
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
    if (!exhausted_.empty()) return false;
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
  for (size_t i = 0; i < ending_.size() && exhausted_.empty();) {
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
  if (!exhausted_.empty()) return;
  for (const Head& h : in) {
    if (h.terminal == Head::kBetween || (first_of_token && !can_continue_into_token(h))) continue;
    const uint32_t q = dfa_next(h.terminal, h.state, byte);
    if (q != ir::Dfa::kDead)
      if (auto p = advance_pending(h.pending, byte))
        out.push_back({h.node, h.terminal, q, *p, h.lexeme_tokens + (first_of_token ? 1u : 0u)});
  }
  for (const Between& b : between)
    start_lexemes(b.node, b.pending, static_cast<uint8_t>(b.in_char), byte, out, b.no_restart);
  normalize(out);
}

void Engine::step_byte(const std::vector<Head>& in, uint8_t byte, bool first_of_token, std::vector<Head>& out) {
  out.clear();
  if (!exhausted_.empty()) return;
  ScratchPool<Between>::Lease between(between_scratch_);
  end_lexemes(in, *between);
  step_byte_after(in, *between, byte, first_of_token, out);
}

void Engine::step_token(const std::vector<Head>& in, std::string_view bytes, std::vector<Head>& out) {
  refresh_tier();
  step_token_unchecked(in, bytes, out);
  if (!exhausted_.empty()) return;
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
  for (size_t i = 0; i < bytes.size() && !current->empty() && exhausted_.empty(); ++i) {
    step_byte(*current, static_cast<uint8_t>(bytes[i]), i == 0, *next);
    current->swap(*next);
  }
  out.insert(out.end(), current->begin(), current->end());
  normalize(out);
}

bool Engine::can_end(const std::vector<Head>& heads) {
  refresh_tier();
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

void Engine::walk(uint32_t root, const std::vector<Head>& heads, std::span<uint32_t> words) {
  walk_range(root + 1, g_.trie().subtree_end(root), g_.trie().depth(root), heads, words);
}

void Engine::walk_range(uint32_t first, uint32_t end, uint32_t parent_depth, const std::vector<Head>& heads,
                        std::span<uint32_t> words) {
  if (lexer_walk_applies(heads)) return lexer_walk(first, end, parent_depth, heads[0], words);
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
  level_marks_[base] = mark();
  level_ends_of_[base] = UINT32_MAX;
  for (uint32_t node = first; node < end && exhausted_.empty();) {
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
    trie_parent_[base + d] = node;
    level_ends_of_[base + d] = UINT32_MAX;
    level_marks_[base + d] = mark();
    if (levels_[base + d].empty()) {
      node = trie.subtree_end(node);
      continue;
    }
    if (!trie.tokens(node).empty() && viable(levels_[base + d]))
      for (uint32_t id : trie.tokens(node)) words[id / 32] |= 1u << (id % 32);
    if (lexer_walk_applies(levels_[base + d])) {
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
    shiftable(h.node);
    can_start |= shiftable_first_bytes_[shiftable_index_[h.node]];
  }
  return can_start;
}

void Engine::lexer_walk(uint32_t first, uint32_t end, uint32_t parent_depth, const Head& head,
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
    const StateIndex& ix = g_.index().get_subtree(first - 1, head.terminal, head.state);
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
    const uint32_t q2 = dfa_next(head.terminal, q, b);
    bool ending_live = false;
    if (dfa_accepting(head.terminal, q) && can_start[b] && !after.empty()) {
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
    for (uint32_t t : shiftable(a.node))
      if (lex_.terminals[t].kind == ir::LexTerminal::Kind::Except) return walk_crossings(index, after, words);
  const VocabTrie& trie = g_.trie();
  ScratchPool<uint32_t>::Lease nodes(node_scratch_);
  ScratchPool<Head>::Lease ended(head_scratch_);
  ScratchPool<Head>::Lease one(head_scratch_);
  ScratchPool<Head>::Lease next(head_scratch_);
  for (const CrossInto& into : index.into) {
    nodes->clear();
    for (const Head& a : after) {
      const auto& can = shiftable(a.node);
      if (std::binary_search(can.begin(), can.end(), into.terminal)) nodes->push_back(a.node);
    }
    if (nodes->empty()) continue;
    // Tokens whose rest stays inside the next lexeme: one OR.
    if (!into.words.empty()) or_set(words, into.words);
    for (uint32_t id : into.ids) words[id / 32] |= 1u << (id % 32);
    // Tokens that also cross the end of that lexeme: walked from there, once
    // per (state where it ends, byte that starts the one after).
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
          if (trie.subtree_end(x) > x + 1) walk_range(x + 1, trie.subtree_end(x), trie.depth(x), *next, words);
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
    if (no_restart != Head::kBetween &&
        std::binary_search(shiftable_here->begin(), shiftable_here->end(), no_restart)) {
      allowed->assign(shiftable_here->begin(), shiftable_here->end());
      std::erase(*allowed, no_restart);
      shiftable_here = &*allowed;
    }
    const std::vector<uint32_t>& terminals = *shiftable_here;
    // An except! lexeme leaves pending occurrences that depend on where it
    // ends: such heads take the exact walk.
    bool has_except = std::any_of(terminals.begin(), terminals.end(), [&](uint32_t t) {
      return lex_.terminals[t].kind == ir::LexTerminal::Kind::Except;
    });
    if (has_except) {
      heads->assign(1, Head{v, Head::kBetween, 0, 0, 0, no_restart});
      walk(0, *heads, words);
      continue;
    }
    or_set(words, index.inside_from_start(terminals));
    for (uint32_t t : terminals) {
      const ir::LexTerminal& term = lex_.terminals[t];
      if (term.kind == ir::LexTerminal::Kind::AnyToken) continue;
      const StateIndex& ix = index.get(t, term.dfa.start());
      if (!ix.crosses()) continue;
      // The lexeme of t ends inside the token: the rest follows the parser.
      heads_after_lexeme(Head{v, t, term.dfa.start(), 0, 0}, *heads);
      cross_precomputed(ix, *heads, words);
    }
  }
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

bool Engine::except_from_index(const Head& h, std::span<uint32_t> words) {
  if (h.terminal == Head::kBetween || h.pending != 0) return false;
  const ir::LexTerminal& t = lex_.terminals[h.terminal];
  if (t.kind != ir::LexTerminal::Kind::Except || lex_.excepts[t.except_index].max_tokens) return false;
  const StateIndex& ix = g_.index().get(h.terminal, h.state);
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
            if (trie.subtree_end(x) > x + 1) walk_range(x + 1, trie.subtree_end(x), trie.depth(x), *next, words);
          }
        }
        i = j;
      }
    }
  }
}

const std::vector<uint32_t>& Engine::except_mask(const Head& h, const StateIndex& ix, size_t n_words) {
  for (ExceptMaskEntry& e : except_mask_cache_)
    if (e.node == h.node && e.serial == nodes_[h.node].serial && e.terminal == h.terminal && e.state == h.state &&
        e.words.size() == n_words) {
      e.used = ++except_mask_clock_;
      return e.words;
    }
  // Replace the entry used least recently (entries are few: one per DFA state met on this node).
  if (except_mask_cache_.size() < kExceptMaskEntries) except_mask_cache_.emplace_back();
  ExceptMaskEntry& slot = *std::min_element(except_mask_cache_.begin(), except_mask_cache_.end(),
                                              [](const auto& a, const auto& b) { return a.used < b.used; });
  slot.node = UINT32_MAX;  // not valid until filled without hitting a limit
  slot.used = ++except_mask_clock_;
  // Tokens that stay inside the text: its DFA is trimmed and nothing limits
  // its tokens, so each of them can go on to a complete sentence.
  slot.words.assign(ix.inside.begin(), ix.inside.end());
  slot.words.resize(n_words, 0u);
  add_except_endings(h, ix, slot.words);
  if (!exhausted()) {
    slot.node = h.node;
    slot.serial = nodes_[h.node].serial;
    slot.terminal = h.terminal;
    slot.state = h.state;
  }
  return slot.words;
}

void Engine::fill_text_tokens(const std::vector<Head>& heads, std::span<uint32_t> words, TokenSetSink* sink) {
  refresh_tier();
  sink_ = sink;
  struct ClearSink {
    TokenSetSink*& sink;
    ~ClearSink() { sink = nullptr; }
  } clear_sink{sink_};
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
    const StateIndex& ix = index.get(h.terminal, h.state);
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
  truncate(start);
}

bool Engine::any_may_start(const std::vector<Head>& heads) {
  if (!any_terminal_) return false;
  ScratchPool<Head>::Lease between(head_scratch_);
  heads_between_lexemes(heads, *between);
  return std::any_of(between->begin(), between->end(), [&](const Head& h) {
    const auto& can = shiftable(h.node);
    return std::binary_search(can.begin(), can.end(), *any_terminal_);
  });
}

std::optional<uint8_t> Engine::only_next_byte(const std::vector<Head>& heads, bool first_of_token,
                                              std::vector<Head>& next, bool& several) {
  several = false;
  std::optional<uint8_t> only;
  ScratchPool<Head>::Lease stepped(head_scratch_);
  for (int b = 0; b < 256 && exhausted_.empty(); ++b) {
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
  refresh_tier();
  const Mark start = mark();
  Forced forced;
  ScratchPool<Head>::Lease current(head_scratch_);
  ScratchPool<Head>::Lease next(head_scratch_);
  current->assign(heads.begin(), heads.end());
  while (exhausted_.empty() && !current->empty()) {
    const bool complete = can_end(*current);
    if (any_may_start(*current)) break;
    if (complete || forced.text.size() >= limit) {
      // Complete here: the bytes end the text when nothing may follow.
      bool several = false;
      if (complete && !only_next_byte(*current, forced.text.empty(), *next, several) && !several)
        forced.ends = exhausted_.empty();
      break;
    }
    bool several = false;
    const auto byte = only_next_byte(*current, forced.text.empty(), *next, several);
    if (!byte) break;
    forced.text.push_back(static_cast<char>(*byte));
    current->swap(*next);
  }
  truncate(start);
  if (!exhausted_.empty()) return {};
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
      k = mix(k, nodes_[node].state);
      uint32_t next = UINT32_MAX, best = UINT32_MAX;
      for (uint32_t e = nodes_[node].first_edge; e != kNoEdge; e = edges_[e].next)
        if (nodes_[edges_[e].parent].state < best) {
          best = nodes_[edges_[e].parent].state;
          next = edges_[e].parent;
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

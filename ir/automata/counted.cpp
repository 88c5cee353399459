#include "counted.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <map>

namespace cgram::ir {
namespace {

// The repetition to count: the first bounded one whose iterations past its
// lower bound are more than `above`, reached through concatenations and
// alternations only (under another repetition it would have to start again
// at every outer iteration).
const RegexNode* find_counted(const RegexNode& node, uint32_t above) {
  switch (node.kind) {
    case RegexNode::Kind::Concat:
    case RegexNode::Kind::Alternation:
      for (const RegexNode& child : node.children)
        if (const RegexNode* found = find_counted(child, above)) return found;
      return nullptr;
    case RegexNode::Kind::Repeat:
      if (node.max != kRegexUnbounded && node.max - node.min > above) return &node;
      if (node.max <= 1) return find_counted(node.children[0], above);
      return nullptr;
    default: return nullptr;
  }
}

// The one that must be counted (past the copies' limit), else the first
// that may be.
const RegexNode* find_counted(const RegexNode& regex) {
  if (const RegexNode* must = find_counted(regex, kMaxRegexRepeat)) return must;
  return find_counted(regex, kCountRepeatsAbove);
}

// A repetition above kMaxRegexRepeat other than `counted` (copies of it
// would pass any limit), or null.
const RegexNode* too_large_to_copy(const RegexNode& node, const RegexNode* counted) {
  if (node.kind == RegexNode::Kind::Repeat &&
      (node.min > kMaxRegexRepeat || (&node != counted && node.max != kRegexUnbounded && node.max > kMaxRegexRepeat)))
    return &node;
  for (const RegexNode& child : node.children)
    if (const RegexNode* found = too_large_to_copy(child, counted)) return found;
  return nullptr;
}

// Subsets of (NFA state, whether the next byte starts an iteration) pairs,
// each pair encoded as state * 2 + flag.
class CountedSubsets {
 public:
  CountedSubsets(const Nfa& nfa, const CountedLoop& loop, const AutomatonLimits& limits)
      : nfa_(nfa), loop_(loop), limits_(limits), mark_(nfa.size() * 2, 0) {}

  struct NotCountable {};
  struct TooLarge {};

  // The subset DFA with its start bits (not trimmed, not minimal).
  void build(CountedDfa& out) {
    std::vector<uint32_t> first{nfa_.start * 2};
    closure(first);
    out_ = &out;
    out.loop.set_start(intern(std::move(first)));
    std::array<std::vector<uint32_t>, 256> moved;
    std::array<uint8_t, 256> flags{};
    for (uint32_t d = 0; d < sets_.size(); ++d) {
      for (auto& m : moved) m.clear();
      flags.fill(0);
      for (uint32_t element : sets_[d]) {
        const uint32_t s = element / 2, flag = element % 2;
        for (const Nfa::Edge& e : nfa_.states()[s].edges)
          for (int b = e.lo; b <= e.hi; ++b) {
            moved[b].push_back(e.target * 2);
            flags[b] |= static_cast<uint8_t>(1u << flag);
          }
      }
      for (int b = 0; b < 256; ++b) {
        if (moved[b].empty()) continue;
        // Some readings start an iteration on this byte and others do not:
        // the count would depend on the reading.
        if (flags[b] == 3) throw NotCountable{};
        closure(moved[b]);
        const uint32_t to = intern(std::move(moved[b]));
        out.loop.set(d, static_cast<uint8_t>(b), to);
        if (flags[b] == 2) out.starts[size_t(d) * 4 + b / 64] |= uint64_t{1} << (b % 64);
      }
    }
  }

 private:
  void closure(std::vector<uint32_t>& set) {
    std::vector<uint32_t> stack(set.begin(), set.end());
    for (uint32_t e : set) mark_[e] = 1;
    while (!stack.empty()) {
      const uint32_t element = stack.back();
      stack.pop_back();
      const uint32_t flag = element % 2;
      for (uint32_t t : nfa_.states()[element / 2].epsilon) {
        const uint32_t next = t * 2 + (t == loop_.entry ? 1 : t == loop_.reset ? 0 : flag);
        if (mark_[next]) continue;
        mark_[next] = 1;
        set.push_back(next);
        stack.push_back(next);
      }
    }
    for (uint32_t e : set) mark_[e] = 0;
    std::sort(set.begin(), set.end());
  }

  uint32_t intern(std::vector<uint32_t> set) {
    if (auto it = ids_.find(set); it != ids_.end()) return it->second;
    elements_ += set.size();
    if (sets_.size() >= limits_.max_intermediate_dfa_states || elements_ > limits_.max_subset_elements) throw TooLarge{};
    bool accepting = false;
    for (uint32_t e : set) accepting = accepting || e / 2 == nfa_.accept;
    const uint32_t id = out_->loop.add_state(accepting);
    out_->starts.resize(out_->starts.size() + 4, 0);
    ids_.emplace(set, id);
    sets_.push_back(std::move(set));
    return id;
  }

  const Nfa& nfa_;
  const CountedLoop& loop_;
  const AutomatonLimits& limits_;
  std::vector<uint8_t> mark_;
  std::map<std::vector<uint32_t>, uint32_t> ids_;
  std::vector<std::vector<uint32_t>> sets_;
  size_t elements_ = 0;
  CountedDfa* out_ = nullptr;
};

// The states `seeds` reach along `edges` (by state), the seeds included.
std::vector<bool> reached(std::vector<uint32_t> seeds, const std::vector<std::vector<uint32_t>>& edges) {
  std::vector<bool> seen(edges.size(), false);
  for (uint32_t q : seeds) seen[q] = true;
  while (!seeds.empty()) {
    const uint32_t q = seeds.back();
    seeds.pop_back();
    for (uint32_t p : edges[q])
      if (!seen[p]) seen[p] = true, seeds.push_back(p);
  }
  return seen;
}

// States from which acceptance is reachable, by moves `usable` allows.
std::vector<bool> reaching_acceptance(const Dfa& dfa, auto usable) {
  const size_t n = dfa.size();
  std::vector<std::vector<uint32_t>> from(n);
  for (uint32_t q = 0; q < n; ++q)
    for (int b = 0; b < 256; ++b)
      if (const uint32_t to = dfa.next(q, static_cast<uint8_t>(b)); to != Dfa::kDead && usable(q, b)) from[to].push_back(q);
  std::vector<uint32_t> accepting;
  for (uint32_t q = 0; q < n; ++q)
    if (dfa.accepting(q)) accepting.push_back(q);
  return reached(std::move(accepting), from);
}

// The live states, merged where they accept alike, start iterations on the
// same bytes and move to merged states.
CountedDfa minimal(const CountedDfa& subsets, const std::vector<bool>& live) {
  const Dfa& dfa = subsets.loop;
  const std::vector<uint64_t>& starts = subsets.starts;
  const size_t n = dfa.size();
  // Start bits of live moves only, as each state's class with its accepting.
  std::vector<uint64_t> live_starts(starts.size(), 0);
  std::map<std::array<uint64_t, 5>, uint32_t> ids;
  std::vector<uint32_t> initial(n, 0);
  for (uint32_t q = 0; q < n; ++q) {
    if (!live[q]) continue;
    for (int b = 0; b < 256; ++b)
      if (const uint32_t to = dfa.next(q, static_cast<uint8_t>(b)); to != Dfa::kDead && live[to])
        live_starts[size_t(q) * 4 + b / 64] |= starts[size_t(q) * 4 + b / 64] & (uint64_t{1} << (b % 64));
    const std::array<uint64_t, 5> key{dfa.accepting(q) ? 1u : 0u, live_starts[q * 4], live_starts[q * 4 + 1],
                                      live_starts[q * 4 + 2], live_starts[q * 4 + 3]};
    initial[q] = ids.emplace(key, static_cast<uint32_t>(ids.size())).first->second;
  }
  CountedDfa out;
  out.bound = subsets.bound;
  out.loop = minimize_apart(dfa, initial);
  // Each state's start bits from a state it was merged from: the two
  // automata walked side by side, breadth first.
  out.starts.assign(out.loop.size() * 4, 0);
  std::vector<uint32_t> from(out.loop.size(), Dfa::kDead), queue{out.loop.start()};
  from[out.loop.start()] = dfa.start();
  for (size_t i = 0; i < queue.size(); ++i) {
    const uint32_t q = queue[i], old = from[q];
    for (int w = 0; w < 4; ++w) out.starts[size_t(q) * 4 + w] = live_starts[size_t(old) * 4 + w];
    for (int b = 0; b < 256; ++b) {
      const uint32_t to = out.loop.next(q, static_cast<uint8_t>(b));
      if (to == Dfa::kDead || from[to] != Dfa::kDead) continue;
      from[to] = dfa.next(old, static_cast<uint8_t>(b));
      queue.push_back(to);
    }
  }
  return out;
}

}  // namespace

Result<std::optional<CountedDfa>> compile_counted_regex(const RegexNode& regex, const AutomatonLimits& limits) {
  CountedLoop loop{find_counted(regex)};
  if (too_large_to_copy(regex, loop.node))
    return Error{ErrorCode::Limit,
                 fmt::format("a repetition bound above {} is only allowed on one repetition of a regex, outside "
                             "any other repetition, with a lower bound of at most {}",
                             kMaxRegexRepeat, kMaxRegexRepeat)};
  if (!loop.node) return std::optional<CountedDfa>{};
  const bool must_count = loop.node->max > kMaxRegexRepeat;
  auto not_countable = [&](std::string_view why) -> Result<std::optional<CountedDfa>> {
    if (!must_count) return std::optional<CountedDfa>{};
    return Error{ErrorCode::Limit,
                 fmt::format("a repetition bound above {} needs a repetition the lexer can count, and {}",
                             kMaxRegexRepeat, why)};
  };
  NfaResult nfa = regex_to_counted_nfa(regex, &loop, limits);
  if (auto* e = nfa.if_error()) return *e;
  CountedDfa subsets;
  subsets.bound = loop.node->max - loop.node->min;
  try {
    CountedSubsets(*nfa, loop, limits).build(subsets);
  } catch (const CountedSubsets::NotCountable&) {
    return not_countable(
        "here a byte may either start an iteration or not (an iteration's first byte must tell it apart "
        "from what follows the repetition)");
  } catch (const CountedSubsets::TooLarge&) {
    return Error{ErrorCode::Limit, fmt::format("this regex is too large: its automaton needs more than {} states",
                                               limits.max_intermediate_dfa_states)};
  }
  const std::vector<bool> live = reaching_acceptance(subsets.loop, [](uint32_t, int) { return true; });
  if (subsets.loop.start() == Dfa::kDead || !live[subsets.loop.start()]) return std::optional<CountedDfa>{};
  // Where a lexeme could only end by starting more iterations, the bound
  // would decide whether it can end at all; the window's states (and the
  // index) assume it never does.
  const std::vector<bool> ends_uncounted = reaching_acceptance(
      subsets.loop, [&](uint32_t q, int b) { return !subsets.starts_iteration(q, static_cast<uint8_t>(b)); });
  for (uint32_t q = 0; q < subsets.loop.size(); ++q)
    if (live[q] && !ends_uncounted[q]) return not_countable("here the text can only end after another iteration");
  CountedDfa counted = minimal(subsets, live);
  if (counted.loop.size() > limits.max_dfa_states)
    return Error{ErrorCode::Limit,
                 fmt::format("this regex is too large: its automaton needs more than {} states", limits.max_dfa_states)};
  // The window the index reads, for the longest token a vocabulary may
  // have: within the states all terminals together may have (the
  // vocabulary's own window is smaller: Llama 3's tokens have 128 bytes at
  // most, and the memory budget is charged for it).
  const CountedLexeme widest = CountedLexeme::make(counted, kMaxWindow);
  if (widest.window_states() > limits.max_total_dfa_states)
    return not_countable(fmt::format("its window for tokens of up to {} bytes needs more than {} states (the limit)",
                                     kMaxWindow, limits.max_total_dfa_states));
  // A lexer state is count << bits | state, in 32 bits (one more state for
  // a start split off when the regex matches "").
  const uint32_t bits = counted_state_bits(counted.loop.size() + 1);
  if (bits >= 32 || ((uint64_t{counted.bound} + 1) << bits) >= Dfa::kDead)
    return not_countable(fmt::format("its count and its {} states do not fit in a 32-bit lexer state",
                                     counted.loop.size()));
  return std::optional<CountedDfa>{std::move(counted)};
}

CountedLexeme CountedLexeme::make(CountedDfa automaton, uint32_t longest_token) {
  // The states inside the repetition (reached by starting an iteration, and
  // able to start another) first, in order, then the others: before the
  // repetition the count is 0, after it the count does not matter.
  const Dfa& loop = automaton.loop;
  const size_t n = loop.size();
  std::vector<std::vector<uint32_t>> to(n), from(n);
  std::vector<uint32_t> starts_from, started;
  for (uint32_t q = 0; q < n; ++q)
    for (int b = 0; b < 256; ++b) {
      const uint32_t t = loop.next(q, static_cast<uint8_t>(b));
      if (t == Dfa::kDead) continue;
      to[q].push_back(t);
      from[t].push_back(q);
      if (automaton.starts_iteration(q, static_cast<uint8_t>(b))) starts_from.push_back(q), started.push_back(t);
    }
  const std::vector<bool> after_start = reached(started, to), before_start = reached(starts_from, from);
  std::vector<bool> counting(n);
  for (uint32_t q = 0; q < n; ++q) counting[q] = after_start[q] && before_start[q];
  std::vector<uint32_t> order, position(n);
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t q = 0; q < n; ++q)
      if (counting[q] == (pass == 0)) position[q] = static_cast<uint32_t>(order.size()), order.push_back(q);
  CountedLexeme out;
  out.counting = static_cast<uint32_t>(std::count(counting.begin(), counting.end(), true));
  out.automaton.bound = automaton.bound;
  out.automaton.starts.assign(n * 4, 0);
  for (uint32_t i = 0; i < n; ++i) out.automaton.loop.add_state(loop.accepting(order[i]));
  for (uint32_t i = 0; i < n; ++i) {
    for (int w = 0; w < 4; ++w) out.automaton.starts[i * 4 + w] = automaton.starts[size_t(order[i]) * 4 + w];
    for (int b = 0; b < 256; ++b) {
      const uint32_t to = loop.next(order[i], static_cast<uint8_t>(b));
      out.automaton.loop.set(i, static_cast<uint8_t>(b), to == Dfa::kDead ? Dfa::kDead : position[to]);
    }
  }
  out.automaton.loop.set_start(position[loop.start()]);
  out.window = std::min(automaton.bound, std::max<uint32_t>(longest_token, 1));
  out.shift = counted_state_bits(n);
  return out;
}

Dfa CountedLexeme::window_dfa() const {
  const Dfa& loop = automaton.loop;
  const uint32_t k = static_cast<uint32_t>(loop.size()), c = counting;
  const bool lumps = automaton.bound > window;
  Dfa out;
  out.reserve(k + size_t(window) * c);
  for (uint32_t q = 0; q < k; ++q) out.add_state(loop.accepting(q));
  for (uint32_t level = 1; level <= window; ++level)
    for (uint32_t q = 0; q < c; ++q) out.add_state(loop.accepting(q));
  auto row = [&](uint32_t level, uint32_t q) {
    for (int b = 0; b < 256; ++b) {
      const uint32_t to = loop.next(q, static_cast<uint8_t>(b));
      uint32_t target = to == Dfa::kDead ? Dfa::kDead : window_state_at(level, to);
      if (to != Dfa::kDead && automaton.starts_iteration(q, static_cast<uint8_t>(b))) {
        if (level == window) target = Dfa::kDead;
        else if (level > 0 || !lumps) target = window_state_at(level + 1, to);
      }
      out.set(window_state_at(level, q), static_cast<uint8_t>(b), target);
    }
  };
  for (uint32_t q = 0; q < k; ++q) row(0, q);  // (before the repetition the count is 0)
  for (uint32_t level = 1; level <= window; ++level)
    for (uint32_t q = 0; q < c; ++q) row(level, q);
  out.set_start(loop.start());
  return out;
}

}  // namespace cgram::ir

#include "automata.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <unordered_map>

#include "utf8_ranges.h"

namespace cgram::ir {

uint32_t Nfa::add_state() {
  states_.emplace_back();
  return static_cast<uint32_t>(states_.size() - 1);
}

uint32_t Dfa::add_state(bool accepting) {
  table_.resize(table_.size() + 256, kDead);
  accepting_.push_back(accepting);
  return static_cast<uint32_t>(accepting_.size() - 1);
}

uint32_t Dfa::run(uint32_t state, std::string_view text) const {
  for (char c : text) {
    if (state == kDead) return kDead;
    state = next(state, static_cast<uint8_t>(c));
  }
  return state;
}

bool Dfa::accepts_nonempty() const {
  if (empty_language()) return false;
  for (int b = 0; b < 256; ++b)
    if (next(start_, static_cast<uint8_t>(b)) != kDead) return true;  // live states reach acceptance
  return false;
}

std::vector<bool> Dfa::first_bytes() const {
  std::vector<bool> out(256, false);
  for (int b = 0; b < 256; ++b) out[b] = next(start_, static_cast<uint8_t>(b)) != kDead;
  return out;
}

namespace {

struct Fragment {
  uint32_t start, accept;
};

class NfaBuilder {
 public:
  explicit NfaBuilder(const AutomatonLimits& limits, CountedLoop* counted = nullptr)
      : limits_(limits), counted_(counted) {}

  struct TooLarge {};

  Fragment build(const RegexNode& node) {
    switch (node.kind) {
      case RegexNode::Kind::Empty: {
        Fragment f{state(), state()};
        nfa.add_epsilon(f.start, f.accept);
        return f;
      }
      case RegexNode::Kind::Set: {
        Fragment f{state(), state()};
        for (const Utf8Sequence& seq : utf8_sequences(node.set)) {
          uint32_t at = f.start;
          for (uint8_t i = 0; i < seq.length; ++i) {
            uint32_t to = i + 1 == seq.length ? f.accept : state();
            nfa.add_edge(at, seq.bytes[i].lo, seq.bytes[i].hi, to);
            at = to;
          }
        }
        return f;
      }
      case RegexNode::Kind::Concat: {
        Fragment f = build(node.children[0]);
        for (size_t i = 1; i < node.children.size(); ++i) {
          Fragment g = build(node.children[i]);
          nfa.add_epsilon(f.accept, g.start);
          f.accept = g.accept;
        }
        return f;
      }
      case RegexNode::Kind::Alternation: {
        Fragment f{state(), state()};
        for (const RegexNode& child : node.children) {
          Fragment g = build(child);
          nfa.add_epsilon(f.start, g.start);
          nfa.add_epsilon(g.accept, f.accept);
        }
        return f;
      }
      case RegexNode::Kind::Repeat: return counted_ && &node == counted_->node ? counted_loop(node) : repeat(node);
    }
    return {state(), state()};
  }

  Nfa nfa;

 private:
  uint32_t state() {
    if (nfa.size() >= limits_.max_nfa_states) throw TooLarge{};
    return nfa.add_state();
  }

  Fragment repeat(const RegexNode& node) {
    const RegexNode& child = node.children[0];
    Fragment f{state(), 0};
    uint32_t tail = f.start;
    for (uint32_t i = 0; i < node.min; ++i) {
      Fragment g = build(child);
      nfa.add_epsilon(tail, g.start);
      tail = g.accept;
    }
    if (node.max == kRegexUnbounded) {
      Fragment g = build(child);
      uint32_t end = state();
      nfa.add_epsilon(tail, g.start);
      nfa.add_epsilon(tail, end);
      nfa.add_epsilon(g.accept, g.start);
      nfa.add_epsilon(g.accept, end);
      f.accept = end;
      return f;
    }
    uint32_t end = state();
    for (uint32_t i = node.min; i < node.max; ++i) {
      Fragment g = build(child);
      nfa.add_epsilon(tail, end);
      nfa.add_epsilon(tail, g.start);
      tail = g.accept;
    }
    nfa.add_epsilon(tail, end);
    f.accept = end;
    return f;
  }

  // The lower bound's copies, then one loop that an iteration enters
  // through `entry` and leaves through `reset` (automata/counted.h counts
  // the entries instead of copying the child up to the upper bound).
  Fragment counted_loop(const RegexNode& node) {
    Fragment f{state(), 0};
    uint32_t tail = f.start;
    for (uint32_t i = 0; i < node.min; ++i) {
      Fragment g = build(node.children[0]);
      nfa.add_epsilon(tail, g.start);
      tail = g.accept;
    }
    const uint32_t loop = state(), entry = state(), reset = state(), end = state();
    nfa.add_epsilon(tail, loop);
    nfa.add_epsilon(loop, end);
    nfa.add_epsilon(loop, entry);
    Fragment g = build(node.children[0]);
    nfa.add_epsilon(entry, g.start);
    nfa.add_epsilon(g.accept, reset);
    nfa.add_epsilon(reset, loop);
    counted_->entry = entry;
    counted_->reset = reset;
    f.accept = end;
    return f;
  }

  const AutomatonLimits& limits_;
  CountedLoop* counted_;
};

void epsilon_closure(const Nfa& nfa, std::vector<uint32_t>& set, std::vector<uint8_t>& mark) {
  std::vector<uint32_t> stack(set.begin(), set.end());
  for (uint32_t s : set) mark[s] = 1;
  while (!stack.empty()) {
    uint32_t s = stack.back();
    stack.pop_back();
    for (uint32_t t : nfa.states()[s].epsilon) {
      if (!mark[t]) {
        mark[t] = 1;
        set.push_back(t);
        stack.push_back(t);
      }
    }
  }
  for (uint32_t s : set) mark[s] = 0;
  std::sort(set.begin(), set.end());
}

struct VectorHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    size_t h = 1469598103934665603ull;
    for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
    return h;
  }
};

}  // namespace

NfaResult regex_to_nfa(const RegexNode& regex, const AutomatonLimits& limits) {
  return regex_to_counted_nfa(regex, nullptr, limits);
}

NfaResult regex_to_counted_nfa(const RegexNode& regex, CountedLoop* counted, const AutomatonLimits& limits) {
  NfaBuilder builder(limits, counted);
  try {
    Fragment f = builder.build(regex);
    builder.nfa.start = f.start;
    builder.nfa.accept = f.accept;
  } catch (const NfaBuilder::TooLarge&) {
    return Error{ErrorCode::Limit,
                 fmt::format("this regex is too large: its automaton needs more than {} states (large bounded "
                             "repetitions multiply the size)",
                             limits.max_nfa_states)};
  }
  return std::move(builder.nfa);
}

namespace {

// A DFA whose rows have one column per class of bytes that every edge of its
// NFA treats alike. The subset construction and the minimisation work on it:
// a state costs its classes (a few dozen for text), not 256 targets, and only
// the minimal DFA gets full rows.
struct ClassDfa {
  std::array<uint8_t, 256> class_of{};
  uint32_t width = 0;
  std::vector<uint32_t> next;  // state * width + class
  std::vector<uint8_t> accepting;
  uint32_t start = Dfa::kDead;

  size_t size() const { return accepting.size(); }
  uint32_t add_state(bool accept) {
    next.resize(next.size() + width, Dfa::kDead);
    accepting.push_back(accept);
    return static_cast<uint32_t>(accepting.size() - 1);
  }
};

// The classes: runs of bytes between the ends of the NFA's edges.
void byte_classes(const Nfa& nfa, ClassDfa& out) {
  std::array<bool, 257> cut{};
  cut[0] = true;
  for (const Nfa::State& state : nfa.states())
    for (const Nfa::Edge& e : state.edges) cut[e.lo] = cut[e.hi + 1] = true;
  int cls = -1;
  for (int b = 0; b < 256; ++b) {
    if (cut[b]) ++cls;
    out.class_of[b] = static_cast<uint8_t>(cls);
  }
  out.width = static_cast<uint32_t>(cls + 1);
}

Result<ClassDfa> class_subsets(const Nfa& nfa, const AutomatonLimits& limits, size_t* subset_elements) {
  ClassDfa dfa;
  byte_classes(nfa, dfa);
  std::unordered_map<std::vector<uint32_t>, uint32_t, VectorHash> ids;
  std::vector<std::vector<uint32_t>> sets;
  std::vector<uint8_t> mark(nfa.size(), 0);
  size_t stored = 0;  // NFA states over all subsets kept (their memory and the work to build them)
  struct Report {
    size_t* out;
    const size_t& stored;
    ~Report() {
      if (out) *out = stored;
    }
  } report{subset_elements, stored};
  auto intern = [&](std::vector<uint32_t> set) -> uint32_t {
    auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    stored += set.size();
    bool accepting = std::binary_search(set.begin(), set.end(), nfa.accept);
    uint32_t id = dfa.add_state(accepting);
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    return id;
  };
  std::vector<uint32_t> initial{nfa.start};
  epsilon_closure(nfa, initial, mark);
  dfa.start = intern(std::move(initial));
  // The subset's edges cut the bytes into intervals that every edge covers
  // whole or not at all: each interval's targets are found, closed and
  // looked up once (a character class is a few intervals, not 256 bytes).
  // An interval is a run of whole classes.
  std::vector<Nfa::Edge> edges;
  std::vector<uint16_t> cuts;
  std::vector<uint32_t> raw, previous;
  for (uint32_t d = 0; d < sets.size(); ++d) {
    if (sets.size() > limits.max_dfa_states)
      return Error{ErrorCode::Limit,
                   fmt::format("this regex is too large: its DFA needs more than {} states (bounded repetitions of "
                               "large classes, or alternatives that overlap for a long stretch, multiply the states)",
                               limits.max_dfa_states)};
    if (stored > limits.max_subset_elements)
      return Error{
          ErrorCode::Limit,
          fmt::format(
              "this regex is too large: building its DFA takes more than {} NFA states over all subsets (nested "
              "bounded repetitions multiply them)",
              limits.max_subset_elements)};
    edges.clear();
    cuts.clear();
    for (uint32_t s : sets[d])
      for (const Nfa::Edge& e : nfa.states()[s].edges) {
        edges.push_back(e);
        cuts.push_back(e.lo);
        cuts.push_back(static_cast<uint16_t>(e.hi + 1));
      }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    bool after_previous = false;  // the interval before this one had targets, `previous`
    uint32_t previous_id = Dfa::kDead;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      const uint16_t lo = cuts[i], hi = static_cast<uint16_t>(cuts[i + 1] - 1);
      raw.clear();
      for (const Nfa::Edge& e : edges)
        if (e.lo <= lo && lo <= e.hi) raw.push_back(e.target);
      if (raw.empty()) {
        after_previous = false;
        continue;
      }
      // Next to an interval with the same edges (cut by an edge that
      // starts and ends elsewhere): the same state.
      if (!after_previous || raw != previous) {
        previous = raw;
        std::vector<uint32_t> target = std::move(raw);
        std::sort(target.begin(), target.end());
        target.erase(std::unique(target.begin(), target.end()), target.end());
        epsilon_closure(nfa, target, mark);
        previous_id = intern(std::move(target));
      }
      after_previous = true;
      for (uint32_t c = dfa.class_of[lo]; c <= dfa.class_of[hi]; ++c) dfa.next[size_t(d) * dfa.width + c] = previous_id;
    }
  }
  return dfa;
}

// What the minimisation reads of a DFA: `width` columns that tell states
// apart (every byte's target is one of them), and every byte's target.
struct ClassView {
  const ClassDfa& dfa;
  size_t size() const { return dfa.size(); }
  size_t width() const { return dfa.width; }
  uint32_t column(uint32_t s, size_t i) const { return dfa.next[size_t(s) * dfa.width + i]; }
  uint32_t next(uint32_t s, uint8_t b) const { return column(s, dfa.class_of[b]); }
  bool accepting(uint32_t s) const { return dfa.accepting[s]; }
  uint32_t start() const { return dfa.start; }
};

struct ByteView {
  const Dfa& dfa;
  // Bytes whose columns are the same in every state split alike: one of
  // each group is enough (a character class is one group, not dozens).
  std::vector<uint8_t> bytes = distinct_columns(dfa);
  size_t size() const { return dfa.size(); }
  size_t width() const { return bytes.size(); }
  uint32_t column(uint32_t s, size_t i) const { return dfa.next(s, bytes[i]); }
  uint32_t next(uint32_t s, uint8_t b) const { return dfa.next(s, b); }
  bool accepting(uint32_t s) const { return dfa.accepting(s); }
  uint32_t start() const { return dfa.start(); }
};

template <class View>
Dfa minimize_view(const View& dfa, std::span<const uint32_t> initial = {});

}  // namespace

DfaResult nfa_to_dfa(const Nfa& nfa, const AutomatonLimits& limits, size_t* subset_elements) {
  Result<ClassDfa> classes = class_subsets(nfa, limits, subset_elements);
  if (auto* e = classes.if_error()) return *e;
  Dfa dfa;
  dfa.reserve(classes->size());
  for (uint32_t s = 0; s < classes->size(); ++s) {
    dfa.add_state(classes->accepting[s]);
    for (int b = 0; b < 256; ++b)
      dfa.set(s, static_cast<uint8_t>(b), classes->next[size_t(s) * classes->width + classes->class_of[b]]);
  }
  dfa.set_start(classes->start);
  return dfa;
}

DfaResult nfa_to_minimal_dfa(const Nfa& nfa, const AutomatonLimits& limits, size_t* subset_elements,
                             size_t* subset_states) {
  Result<ClassDfa> classes = class_subsets(nfa, limits, subset_elements);
  if (auto* e = classes.if_error()) return *e;
  if (subset_states) *subset_states = classes->size();
  return minimize_view(ClassView{*classes});
}

std::vector<uint8_t> distinct_columns(const Dfa& dfa) {
  const size_t n = dfa.size();
  const uint32_t* table = dfa.table_data();
  // A hash of each column, then each byte's candidate: the first byte with
  // its hash. Both passes read the table row by row (a column is strided).
  std::vector<uint64_t> hash(256, 0);
  for (size_t s = 0; s < n; ++s)
    for (int b = 0; b < 256; ++b) hash[b] = hash[b] * 0x100000001b3ull + table[s * 256 + b] + 1;
  std::array<uint8_t, 256> order, same_as;
  std::iota(order.begin(), order.end(), uint8_t{0});
  std::stable_sort(order.begin(), order.end(), [&](uint8_t a, uint8_t b) { return hash[a] < hash[b]; });
  for (size_t i = 0; i < 256; ++i)
    same_as[order[i]] = i > 0 && hash[order[i]] == hash[order[i - 1]] ? same_as[order[i - 1]] : order[i];
  // Checked: a byte whose column differs from its candidate's (a hash
  // collision) keeps a group of its own, which is never wrong.
  std::array<bool, 256> differs{};
  for (size_t s = 0; s < n; ++s) {
    const uint32_t* row = table + s * 256;
    for (int b = 0; b < 256; ++b) differs[b] = differs[b] || row[b] != row[same_as[b]];
  }
  std::vector<uint8_t> kept;
  for (int b = 0; b < 256; ++b)
    if (same_as[b] == b || differs[b]) kept.push_back(static_cast<uint8_t>(b));
  return kept;
}

namespace {

// Minimisation's step 2 for a DFA of a finite language (names, keywords,
// bounded repetitions): its live states have no cycle, so a state's class is
// its acceptance (or initial class) and its targets' classes, found bottom-up
// in one pass, O(width · n), against Hopcroft's O(width · n log n) with a
// larger constant (a 400-name trie: 10 ms). Sets cls[s] to 1.. for the live
// states; false, with nothing promised, when a cycle is met.
template <class View>
bool acyclic_classes(const View& dfa, const std::vector<uint8_t>& live, std::span<const uint32_t> initial,
                     std::vector<uint32_t>& cls, size_t& classes) {
  const size_t n = dfa.size(), width = dfa.width();
  std::vector<uint8_t> color(n, 0);  // 0 unseen, 1 on the path, 2 done
  std::vector<uint32_t> post;
  post.reserve(n);
  std::vector<std::pair<uint32_t, uint32_t>> path;  // state, next column to follow
  for (uint32_t root = 0; root < n; ++root) {
    if (!live[root] || color[root]) continue;
    color[root] = 1;
    path.push_back({root, 0});
    while (!path.empty()) {
      const uint32_t s = path.back().first;
      const uint32_t i = path.back().second++;
      if (i == width) {
        color[s] = 2;
        post.push_back(s);
        path.pop_back();
        continue;
      }
      const uint32_t t = dfa.column(s, i);
      if (t == Dfa::kDead || !live[t] || color[t] == 2) continue;
      if (color[t] == 1) return false;
      color[t] = 1;
      path.push_back({t, 0});
    }
  }
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& key) const {
      uint64_t h = 1469598103934665603ull;
      for (uint32_t x : key) h = (h ^ x) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };
  std::unordered_map<std::vector<uint32_t>, uint32_t, KeyHash> class_of_key;
  class_of_key.reserve(post.size());
  std::vector<uint32_t> key(width + 1);
  for (uint32_t s : post) {  // targets first
    key[0] = initial.empty() ? uint32_t{dfa.accepting(s)} : initial[s];
    for (size_t i = 0; i < width; ++i) {
      const uint32_t t = dfa.column(s, i);
      key[i + 1] = t == Dfa::kDead || !live[t] ? 0 : cls[t];
    }
    cls[s] = class_of_key.try_emplace(key, static_cast<uint32_t>(class_of_key.size() + 1)).first->second;
  }
  classes = class_of_key.size();
  return true;
}

// Minimisation's step 2 for any DFA. Sets cls[s] to 1.. for the live
// states; returns the number of classes.
template <class View>
size_t hopcroft_classes(const View& dfa, const std::vector<uint8_t>& live, std::span<const uint32_t> initial,
                        std::vector<uint32_t>& cls) {
  const size_t n = dfa.size(), width = dfa.width();
  // 2. Hopcroft's partition refinement over the live states (O(width·n log n):
  // long chains, as bounded repetitions make, need no round per state).
  // Class 0 is dead; the live classes are numbered from 1.
  std::vector<std::vector<uint32_t>> blocks;
  if (!initial.empty()) {
    std::unordered_map<uint32_t, uint32_t> block_of_class;
    for (uint32_t s = 0; s < n; ++s) {
      if (!live[s]) continue;
      auto [at, fresh] = block_of_class.try_emplace(initial[s], static_cast<uint32_t>(blocks.size()));
      if (fresh) blocks.emplace_back();
      blocks[at->second].push_back(s);
    }
  } else {
    std::vector<uint32_t> accepting, other;
    for (uint32_t s = 0; s < n; ++s)
      if (live[s]) (dfa.accepting(s) ? accepting : other).push_back(s);
    for (auto* b : {&accepting, &other})
      if (!b->empty()) blocks.push_back(std::move(*b));
  }
  std::vector<uint32_t> block_of(n, UINT32_MAX);
  for (uint32_t i = 0; i < blocks.size(); ++i)
    for (uint32_t s : blocks[i]) block_of[s] = i;
  // Predecessors by byte group, live states only: pred[offset[t*width+i] ..] = sources.
  std::vector<uint32_t> offset(size_t(n) * width + 1, 0), pred;
  for (uint32_t s = 0; s < n; ++s)
    if (live[s])
      for (size_t i = 0; i < width; ++i) {
        const uint32_t t = dfa.column(s, i);
        if (t != Dfa::kDead && live[t]) ++offset[size_t(t) * width + i + 1];
      }
  for (size_t i = 1; i < offset.size(); ++i) offset[i] += offset[i - 1];
  pred.resize(offset.back());
  {
    std::vector<uint32_t> fill(offset.begin(), offset.end() - 1);
    for (uint32_t s = 0; s < n; ++s)
      if (live[s])
        for (size_t i = 0; i < width; ++i) {
          const uint32_t t = dfa.column(s, i);
          if (t != Dfa::kDead && live[t]) pred[fill[size_t(t) * width + i]++] = s;
        }
  }
  // Dead is a block of its own that splits too: a live state going to dead
  // on b differs from one going live. Splitting by "goes live into A" for
  // every block A covers it, as long as every block is a splitter once.
  std::vector<uint32_t> work;
  std::vector<bool> in_work;
  for (uint32_t i = 0; i < blocks.size(); ++i) work.push_back(i), in_work.push_back(true);
  std::vector<uint32_t> hits(n, 0), touched, splitter;
  std::vector<uint32_t> count(blocks.size(), 0);  // per block: states hit (reset after each byte)
  while (!work.empty()) {
    const uint32_t a = work.back();
    work.pop_back();
    in_work[a] = false;
    splitter = blocks[a];  // a snapshot: blocks[a] may split below
    for (size_t b = 0; b < width; ++b) {
      // X: the states that go into the splitter on the b-th byte group.
      touched.clear();
      for (uint32_t t : splitter)
        for (size_t k = offset[size_t(t) * width + b]; k < offset[size_t(t) * width + b + 1]; ++k) {
          const uint32_t s = pred[k];
          if (hits[s]++ == 0) {
            if (count[block_of[s]]++ == 0) touched.push_back(block_of[s]);
          }
        }
      for (uint32_t y : touched) {
        const size_t hit = count[y];
        count[y] = 0;
        if (hit == blocks[y].size()) continue;
        std::vector<uint32_t> in, out;
        for (uint32_t s : blocks[y]) (hits[s] ? in : out).push_back(s);
        const uint32_t z = static_cast<uint32_t>(blocks.size());
        blocks[y] = std::move(in);
        blocks.push_back(std::move(out));
        for (uint32_t s : blocks[z]) block_of[s] = z;
        in_work.push_back(false);
        count.push_back(0);
        if (in_work[y]) {
          work.push_back(z), in_work[z] = true;
        } else {
          const uint32_t smaller = blocks[y].size() <= blocks[z].size() ? y : z;
          work.push_back(smaller), in_work[smaller] = true;
        }
      }
      for (uint32_t t : splitter)
        for (size_t k = offset[size_t(t) * width + b]; k < offset[size_t(t) * width + b + 1]; ++k) hits[pred[k]] = 0;
    }
  }
  for (uint32_t i = 0; i < blocks.size(); ++i)
    for (uint32_t s : blocks[i]) cls[s] = i + 1;
  return blocks.size();
}

template <class View>
Dfa minimize_view(const View& dfa, std::span<const uint32_t> initial) {
  const size_t n = dfa.size();
  if (dfa.start() == Dfa::kDead) return Dfa{};
  const size_t width = dfa.width();
  // 1. Live states: those that reach acceptance (reverse reachability over
  // the edges of one byte per group, which reach every target).
  std::vector<uint32_t> reverse_begin(n + 1, 0), reverse;
  for (uint32_t s = 0; s < n; ++s)
    for (size_t i = 0; i < width; ++i)
      if (const uint32_t t = dfa.column(s, i); t != Dfa::kDead) ++reverse_begin[t + 1];
  for (size_t i = 0; i < n; ++i) reverse_begin[i + 1] += reverse_begin[i];
  reverse.resize(reverse_begin[n]);
  {
    std::vector<uint32_t> fill(reverse_begin.begin(), reverse_begin.end() - 1);
    for (uint32_t s = 0; s < n; ++s)
      for (size_t i = 0; i < width; ++i)
        if (const uint32_t t = dfa.column(s, i); t != Dfa::kDead) reverse[fill[t]++] = s;
  }
  std::vector<uint8_t> live(n, 0);
  std::vector<uint32_t> stack;
  for (uint32_t s = 0; s < n; ++s)
    if (dfa.accepting(s)) live[s] = 1, stack.push_back(s);
  while (!stack.empty()) {
    uint32_t s = stack.back();
    stack.pop_back();
    for (uint32_t i = reverse_begin[s]; i < reverse_begin[s + 1]; ++i)
      if (const uint32_t p = reverse[i]; !live[p]) live[p] = 1, stack.push_back(p);
  }
  if (!live[dfa.start()]) return Dfa{};
  std::vector<uint32_t> cls(n, 0);
  size_t classes = 0;
  if (!acyclic_classes(dfa, live, initial, cls, classes)) classes = hopcroft_classes(dfa, live, initial, cls);
  // 3. Emit, numbering classes in BFS order from the start for determinism.
  Dfa out;
  out.reserve(classes);
  std::vector<uint32_t> new_id(classes + 1, Dfa::kDead);
  std::vector<uint32_t> representative(classes + 1, 0);
  for (uint32_t s = n; s-- > 0;)
    if (live[s]) representative[cls[s]] = s;
  std::vector<uint32_t> queue{cls[dfa.start()]};
  new_id[cls[dfa.start()]] = out.add_state(dfa.accepting(dfa.start()));
  for (size_t i = 0; i < queue.size(); ++i) {
    uint32_t c = queue[i];
    uint32_t s = representative[c];
    for (int b = 0; b < 256; ++b) {
      uint32_t t = dfa.next(s, static_cast<uint8_t>(b));
      if (t == Dfa::kDead || !live[t]) continue;
      uint32_t tc = cls[t];
      if (new_id[tc] == Dfa::kDead) {
        new_id[tc] = out.add_state(dfa.accepting(t));
        queue.push_back(tc);
      }
      out.set(new_id[c], static_cast<uint8_t>(b), new_id[tc]);
    }
  }
  out.set_start(0);
  return out;
}

}  // namespace

Dfa minimize(const Dfa& dfa) { return minimize_view(ByteView{dfa}); }

Dfa minimize_apart(const Dfa& dfa, std::span<const uint32_t> initial) { return minimize_view(ByteView{dfa}, initial); }

uint32_t embed_dfa(const Dfa& dfa, Nfa& nfa, uint32_t accept) {
  const uint32_t base = static_cast<uint32_t>(nfa.size());
  for (uint32_t s = 0; s < dfa.size(); ++s) nfa.add_state();
  for (uint32_t s = 0; s < dfa.size(); ++s) {
    for (int b = 0; b < 256;) {
      const uint32_t target = dfa.next(s, static_cast<uint8_t>(b));
      int run = b;
      while (run + 1 < 256 && dfa.next(s, static_cast<uint8_t>(run + 1)) == target) ++run;
      if (target != Dfa::kDead) nfa.add_edge(base + s, static_cast<uint8_t>(b), static_cast<uint8_t>(run), base + target);
      b = run + 1;
    }
    if (dfa.accepting(s)) nfa.add_epsilon(base + s, accept);
  }
  return base + dfa.start();
}

namespace {

// Builds the minimal DFA of a regex bottom-up, minimising every part before
// it is combined, so that the subset construction never sees the copies of
// a bounded repetition all at once. Used when the direct construction
// exceeds the limit: the limit is on the minimal DFA, and the work in
// between has its own, larger budget.
class MinimalBuilder {
 public:
  explicit MinimalBuilder(const AutomatonLimits& limits) : limits_(limits) {}
  struct TooLarge {};

  Dfa build(const RegexNode& node) {
    switch (node.kind) {
      case RegexNode::Kind::Empty:
      case RegexNode::Kind::Set: return direct(node);
      case RegexNode::Kind::Concat: {
        Dfa d = build(node.children[0]);
        for (size_t i = 1; i < node.children.size(); ++i) d = concat(d, build(node.children[i]));
        return d;
      }
      case RegexNode::Kind::Alternation: {
        Dfa d = build(node.children[0]);
        for (size_t i = 1; i < node.children.size(); ++i) {
          const Dfa other = build(node.children[i]);
          d = combine({&d, &other}, false);
        }
        return d;
      }
      case RegexNode::Kind::Repeat: {
        const Dfa child = build(node.children[0]);
        Dfa d = power(child, node.min);
        if (node.max == kRegexUnbounded) return concat(d, star(child));
        return concat(d, power(optional(child), node.max - node.min));
      }
    }
    return Dfa{};
  }

 private:
  Dfa direct(const RegexNode& node) {
    NfaResult nfa = regex_to_nfa(node, limits_);
    if (!nfa.ok()) throw TooLarge{};
    return finish(*nfa);
  }

  Dfa finish(const Nfa& nfa) {
    AutomatonLimits work = limits_;
    work.max_dfa_states = limits_.max_intermediate_dfa_states;
    DfaResult dfa = nfa_to_minimal_dfa(nfa, work);  // a part may be larger than the whole
    if (!dfa.ok()) throw TooLarge{};
    return std::move(*dfa);
  }

  static Dfa empty_string() {
    Dfa d;
    d.set_start(d.add_state(true));
    for (int b = 0; b < 256; ++b) d.set(0, static_cast<uint8_t>(b), Dfa::kDead);
    return d;
  }

  // Sequence (concatenate) or union of the parts.
  Dfa combine(std::initializer_list<const Dfa*> parts, bool sequence) {
    Nfa nfa;
    nfa.start = nfa.add_state();
    nfa.accept = nfa.add_state();
    uint32_t at = nfa.start;
    for (const Dfa* part : parts) {
      if (part->empty_language()) {
        if (sequence) return Dfa{};
        continue;
      }
      const uint32_t end = sequence ? nfa.add_state() : nfa.accept;
      nfa.add_epsilon(sequence ? at : nfa.start, embed_dfa(*part, nfa, end));
      at = end;
    }
    if (sequence) nfa.add_epsilon(at, nfa.accept);
    return finish(nfa);
  }
  Dfa concat(const Dfa& a, const Dfa& b) { return combine({&a, &b}, true); }
  Dfa optional(const Dfa& a) {
    const Dfa e = empty_string();
    return combine({&e, &a}, false);
  }
  Dfa star(const Dfa& a) {
    Nfa nfa;
    nfa.start = nfa.add_state();
    nfa.accept = nfa.start;
    if (!a.empty_language()) nfa.add_epsilon(nfa.start, embed_dfa(a, nfa, nfa.start));
    return finish(nfa);
  }
  // a^n by squaring: the parts stay minimal, and n costs log n steps.
  Dfa power(const Dfa& a, uint32_t n) {
    Dfa result = empty_string(), base = a;
    for (; n > 0; n >>= 1) {
      if (n & 1) result = concat(result, base);
      if (n > 1) base = concat(base, base);
    }
    return result;
  }

  const AutomatonLimits& limits_;
};

}  // namespace

DfaResult compile_regex(const RegexNode& regex, const AutomatonLimits& limits) {
  NfaResult nfa = regex_to_nfa(regex, limits);
  if (auto* e = nfa.if_error()) return *e;
  DfaResult dfa = nfa_to_minimal_dfa(*nfa, limits);
  if (dfa.ok()) return dfa;
  // The subset construction outgrew the limit before minimisation could
  // shrink it: build part by part instead, and judge the minimal DFA.
  try {
    Dfa minimal = MinimalBuilder(limits).build(regex);
    if (minimal.size() <= limits.max_dfa_states) return minimal;
    throw MinimalBuilder::TooLarge{};
  } catch (const MinimalBuilder::TooLarge&) {
    return Error{ErrorCode::Limit,
                 fmt::format("this regex is too large: its minimal DFA needs more than {} states (bounded repetitions "
                             "of large classes, or alternatives that overlap for a long stretch, multiply the states)",
                             limits.max_dfa_states)};
  }
}

Dfa literal_dfa(std::string_view bytes) {
  std::string one(bytes);
  return literals_dfa(std::span<const std::string>(&one, 1));
}

Dfa literals_dfa(std::span<const std::string> literals) {
  // A trie is already a DFA; minimisation merges common suffixes.
  Dfa trie;
  trie.set_start(trie.add_state(false));
  for (const std::string& lit : literals) {
    uint32_t at = trie.start();
    for (char c : lit) {
      uint8_t b = static_cast<uint8_t>(c);
      uint32_t t = trie.next(at, b);
      if (t == Dfa::kDead) {
        t = trie.add_state(false);
        trie.set(at, b, t);
      }
      at = t;
    }
    trie.set_accepting(at, true);
  }
  return minimize(trie);
}

}  // namespace cgram::ir

#include "char_dfa.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "utf8.h"

namespace cgram::json {

namespace {

using ir::CodePointSet;
using ir::RegexNode;

void collect_bounds(const RegexNode& node, std::vector<uint32_t>& bounds) {
  if (node.kind == RegexNode::Kind::Set)
    for (const auto& [lo, hi] : node.set.ranges()) bounds.push_back(lo), bounds.push_back(hi + 1);
  for (const RegexNode& child : node.children) collect_bounds(child, bounds);
}

// A Thompson NFA whose edges read one class of code points.
class ClassNfa {
 public:
  ClassNfa(const std::vector<uint32_t>& bounds, size_t max_states) : bounds_(bounds), max_states_(max_states) {}
  struct TooLarge {};
  struct Fragment {
    uint32_t start, accept;
  };

  Fragment build(const RegexNode& node) {
    switch (node.kind) {
      case RegexNode::Kind::Empty: {
        Fragment f{state(), state()};
        epsilon[f.start].push_back(f.accept);
        return f;
      }
      case RegexNode::Kind::Set: {
        Fragment f{state(), state()};
        for (uint32_t c = 0; c + 1 < bounds_.size(); ++c)
          if (node.set.contains(bounds_[c])) edges[f.start].push_back({c, f.accept});
        return f;
      }
      case RegexNode::Kind::Concat: {
        Fragment f = build(node.children[0]);
        for (size_t i = 1; i < node.children.size(); ++i) {
          const Fragment g = build(node.children[i]);
          epsilon[f.accept].push_back(g.start);
          f.accept = g.accept;
        }
        return f;
      }
      case RegexNode::Kind::Alternation: {
        Fragment f{state(), state()};
        for (const RegexNode& child : node.children) {
          const Fragment g = build(child);
          epsilon[f.start].push_back(g.start);
          epsilon[g.accept].push_back(f.accept);
        }
        return f;
      }
      case RegexNode::Kind::Repeat: return repeat(node);
    }
    return {state(), state()};
  }

  struct Edge {
    uint32_t cls, target;
  };
  std::vector<std::vector<Edge>> edges;
  std::vector<std::vector<uint32_t>> epsilon;

 private:
  uint32_t state() {
    if (edges.size() >= max_states_) throw TooLarge{};
    edges.emplace_back();
    epsilon.emplace_back();
    return static_cast<uint32_t>(edges.size() - 1);
  }

  Fragment repeat(const RegexNode& node) {
    const RegexNode& child = node.children[0];
    Fragment f{state(), 0};
    uint32_t tail = f.start;
    for (uint32_t i = 0; i < node.min; ++i) {
      const Fragment g = build(child);
      epsilon[tail].push_back(g.start);
      tail = g.accept;
    }
    const uint32_t end = state();
    if (node.max == ir::kRegexUnbounded) {
      const Fragment g = build(child);
      epsilon[tail].push_back(g.start);
      epsilon[g.accept].push_back(g.start);
      epsilon[g.accept].push_back(end);
    } else {
      for (uint32_t i = node.min; i < node.max; ++i) {
        const Fragment g = build(child);
        epsilon[tail].push_back(end);
        epsilon[tail].push_back(g.start);
        tail = g.accept;
      }
    }
    epsilon[tail].push_back(end);
    f.accept = end;
    return f;
  }

  const std::vector<uint32_t>& bounds_;
  size_t max_states_;
};

// --- Regex labels for state elimination ----------------------------------------

// A regex as state elimination builds it: RegexNode's shape, with the size in
// nodes (what the limit counts) and the depth in groups kept at every node, so that
// flattening a Concat into a Concat costs only its children.
struct Label {
  RegexNode::Kind kind = RegexNode::Kind::Empty;
  CodePointSet set;
  std::vector<Label> children;
  uint32_t min = 0, max = 0;
  size_t size = 1;
  size_t depth = 1;

  RegexNode node() const {
    RegexNode out;
    out.kind = kind;
    out.set = set;
    out.min = min, out.max = max;
    for (const Label& child : children) out.children.push_back(child.node());
    return out;
  }
};

Label set_label(CodePointSet set) {
  Label l;
  l.kind = RegexNode::Kind::Set;
  l.set = std::move(set);
  return l;
}

Label with_children(RegexNode::Kind kind, std::vector<Label> parts) {
  Label out;
  out.kind = kind;
  // Depth counts the groups the regex's text nests (a sequence adds none).
  const size_t added = kind == RegexNode::Kind::Concat ? 0 : 1;
  for (const Label& part : parts) {
    out.size += part.size;
    out.depth = std::max(out.depth, part.depth + added);
  }
  out.children = std::move(parts);
  return out;
}

bool is_empty_string(const Label& l) { return l.kind == RegexNode::Kind::Empty; }

// `l` as parts of a node of `kind` (a Concat in a Concat is one Concat).
void spread(Label l, RegexNode::Kind kind, std::vector<Label>& parts) {
  if (l.kind != kind) {
    parts.push_back(std::move(l));
    return;
  }
  for (Label& child : l.children) parts.push_back(std::move(child));
}

Label repeat(Label a, uint32_t min, uint32_t max) {
  std::vector<Label> parts;
  parts.push_back(std::move(a));
  Label out = with_children(RegexNode::Kind::Repeat, std::move(parts));
  out.min = min;
  out.max = max;
  return out;
}

// Structural equality, for small labels only (what counting compares).
bool same(const Label& a, const Label& b) {
  if (a.kind != b.kind || a.size != b.size || a.min != b.min || a.max != b.max ||
      a.children.size() != b.children.size())
    return false;
  if (a.kind == RegexNode::Kind::Set && a.set.ranges() != b.set.ranges()) return false;
  for (size_t i = 0; i < a.children.size(); ++i)
    if (!same(a.children[i], b.children[i])) return false;
  return true;
}

// A label as X{min,max}: a repetition's child and bounds, or the label once.
struct Counted {
  const Label* base;
  uint32_t min, max;
};
Counted counted(const Label& l) {
  if (l.kind == RegexNode::Kind::Repeat) return {&l.children[0], l.min, l.max};
  return {&l, 1, 1};
}
constexpr size_t kMaxCountedBase = 16;  // nodes of a base compared for counting

uint32_t add_bounds(uint32_t a, uint32_t b) {
  return a == ir::kRegexUnbounded || b == ir::kRegexUnbounded ? ir::kRegexUnbounded : a + b;
}

// X{a,b} X{c,d} = X{a+c,b+d}: state elimination of a chain of n states
// that read the same class gives X{1,n}, not n nested groups.
std::optional<Label> counted_sequence(const Label& x, const Label& y) {
  const Counted a = counted(x), b = counted(y);
  if (a.base->size > kMaxCountedBase || !same(*a.base, *b.base)) return std::nullopt;
  const uint32_t min = a.min + b.min, max = add_bounds(a.max, b.max);
  if (min > ir::kMaxRegexRepeat || (max != ir::kRegexUnbounded && max > ir::kMaxRegexRepeat)) return std::nullopt;
  return repeat(*a.base, min, max);
}

// A label as a first part and the rest of its sequence.
struct Headed {
  const Label* head;
  std::span<const Label> tail;
};
Headed headed(const Label& l) {
  if (l.kind == RegexNode::Kind::Concat) return {&l.children[0], std::span<const Label>(l.children).subspan(1)};
  return {&l, {}};
}
constexpr size_t kMaxComparedTail = 64;  // nodes of a tail compared for factoring
bool same_sequence(std::span<const Label> a, std::span<const Label> b) {
  if (a.size() != b.size()) return false;
  size_t size = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    size += a[i].size;
    if (size > kMaxComparedTail || !same(a[i], b[i])) return false;
  }
  return true;
}
bool same_sequence(std::span<const Label> a, const Label& b) {
  if (b.kind == RegexNode::Kind::Concat) return same_sequence(a, std::span<const Label>(b.children));
  return a.size() == 1 && a[0].size <= kMaxComparedTail && same(a[0], b);
}

Label sequence(Label head, std::span<const Label> tail) {
  if (tail.empty()) return head;
  std::vector<Label> parts{std::move(head)};
  parts.insert(parts.end(), tail.begin(), tail.end());
  return with_children(RegexNode::Kind::Concat, std::move(parts));
}

// X{a,b}·T | X{c,d}·T = X{min(a,c),max(b,d)}·T where the ranges overlap or
// touch, T the same (or nothing), and T alone read as X{0}·T: a chain of
// states that read X and leave by the same Y gives X{0,n}Y, not n groups.
std::optional<Label> counted_choice(const Label& x, const Label& y) {
  auto touching = [](Counted a, Counted b) {
    auto below = [](uint32_t lo, uint32_t hi) { return hi == ir::kRegexUnbounded || lo <= hi + 1; };
    return below(b.min, a.max) && below(a.min, b.max);
  };
  auto merged = [](Counted a, Counted b) {
    const uint32_t max = a.max == ir::kRegexUnbounded || b.max == ir::kRegexUnbounded ? ir::kRegexUnbounded
                                                                                         : std::max(a.max, b.max);
    return repeat(*a.base, std::min(a.min, b.min), max);
  };
  const Headed hx = headed(x), hy = headed(y);
  const Counted a = counted(*hx.head), b = counted(*hy.head);
  if (a.base->size <= kMaxCountedBase && same(*a.base, *b.base) && touching(a, b) &&
      same_sequence(hx.tail, hy.tail))
    return sequence(merged(a, b), hx.tail);
  // One is the other's tail alone.
  for (auto [longer, shorter, count] : {std::tuple{&hx, &y, a}, std::tuple{&hy, &x, b}})
    if (!longer->tail.empty() && count.base->size <= kMaxCountedBase && count.min <= 1 &&
        same_sequence(longer->tail, *shorter))
      return sequence(repeat(*count.base, 0, count.max), longer->tail);
  return std::nullopt;
}

Label concat(Label a, Label b) {
  if (is_empty_string(a)) return b;
  if (is_empty_string(b)) return a;
  std::vector<Label> parts;
  spread(std::move(a), RegexNode::Kind::Concat, parts);
  spread(std::move(b), RegexNode::Kind::Concat, parts);
  std::vector<Label> joined;
  for (Label& part : parts) {
    if (!joined.empty())
      if (std::optional<Label> both = counted_sequence(joined.back(), part)) {
        joined.back() = std::move(*both);
        continue;
      }
    joined.push_back(std::move(part));
  }
  if (joined.size() == 1) return std::move(joined[0]);
  return with_children(RegexNode::Kind::Concat, std::move(joined));
}

Label star(Label a) {
  if (is_empty_string(a)) return a;
  if (a.kind == RegexNode::Kind::Repeat && a.max == 1) return repeat(std::move(a.children[0]), 0, ir::kRegexUnbounded);
  return repeat(std::move(a), 0, ir::kRegexUnbounded);
}

Label alternate(Label a, Label b) {
  const bool optional = is_empty_string(a) || is_empty_string(b);
  // a's alternatives are merged among themselves already: only b's are
  // compared with them (each put is linear in the alternatives, not quadratic).
  std::vector<Label> merged, added;
  if (!is_empty_string(a)) spread(std::move(a), RegexNode::Kind::Alternation, merged);
  if (!is_empty_string(b)) spread(std::move(b), RegexNode::Kind::Alternation, added);
  if (merged.empty() && added.empty()) return Label{};
  // Sets among the alternatives are one set; counts of one base are one count.
  std::optional<size_t> set_at;
  for (size_t i = 0; i < merged.size() && !set_at; ++i)
    if (merged[i].kind == RegexNode::Kind::Set) set_at = i;
  for (Label& part : added) {
    if (part.kind == RegexNode::Kind::Set && set_at && merged[*set_at].kind == RegexNode::Kind::Set) {
      merged[*set_at].set.add(part.set);
      continue;
    }
    bool joined = false;
    for (Label& earlier : merged)
      if (std::optional<Label> either = counted_choice(earlier, part)) {
        earlier = std::move(*either);
        joined = true;
        break;
      }
    if (joined) continue;
    if (part.kind == RegexNode::Kind::Set) set_at = merged.size();
    merged.push_back(std::move(part));
  }
  Label out = merged.size() == 1 ? std::move(merged[0]) : with_children(RegexNode::Kind::Alternation, std::move(merged));
  if (!optional || (out.kind == RegexNode::Kind::Repeat && out.min == 0)) return out;
  if (out.kind == RegexNode::Kind::Repeat && out.min == 1) {
    out.min = 0;
    return out;
  }
  return repeat(std::move(out), 0, 1);
}

}  // namespace

// --- Building ------------------------------------------------------------------

std::optional<CharDfa> CharDfa::of_regex(const RegexNode& regex, const CharDfaLimits& limits) {
  CharDfa dfa;
  std::vector<uint32_t>& bounds = dfa.bounds_;
  bounds = {0, 0xD800, 0xE000, 0x110000};
  collect_bounds(regex, bounds);
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  ClassNfa nfa(bounds, limits.max_nfa_states);
  ClassNfa::Fragment whole;
  try {
    whole = nfa.build(regex);
  } catch (const ClassNfa::TooLarge&) {
    return std::nullopt;
  }
  auto closure = [&](std::vector<uint32_t> set) {
    std::vector<uint8_t> seen(nfa.edges.size(), 0);
    for (uint32_t s : set) seen[s] = 1;
    for (size_t i = 0; i < set.size(); ++i)
      for (uint32_t t : nfa.epsilon[set[i]])
        if (!seen[t]) seen[t] = 1, set.push_back(t);
    std::sort(set.begin(), set.end());
    return set;
  };
  const size_t classes = dfa.classes();
  std::map<std::vector<uint32_t>, uint32_t> ids;
  std::vector<std::vector<uint32_t>> subsets;
  auto id_of = [&](std::vector<uint32_t> subset) -> std::optional<uint32_t> {
    auto [it, inserted] = ids.emplace(std::move(subset), static_cast<uint32_t>(subsets.size()));
    if (inserted) {
      if (subsets.size() >= limits.max_states) return std::nullopt;
      subsets.push_back(it->first);
      dfa.next_.resize(subsets.size() * classes, kDead);
      dfa.accepting_.push_back(std::binary_search(it->first.begin(), it->first.end(), whole.accept));
    }
    return it->second;
  };
  dfa.start_ = *id_of(closure({whole.start}));
  std::vector<std::vector<uint32_t>> moves(classes);
  for (size_t i = 0; i < subsets.size(); ++i) {
    for (auto& m : moves) m.clear();
    for (uint32_t s : subsets[i])
      for (const ClassNfa::Edge& e : nfa.edges[s]) moves[e.cls].push_back(e.target);
    for (uint32_t c = 0; c < classes; ++c) {
      if (moves[c].empty()) continue;
      const std::optional<uint32_t> to = id_of(closure(moves[c]));
      if (!to) return std::nullopt;
      dfa.next_[i * classes + c] = *to;
    }
  }
  dfa.minimize();
  return dfa;
}

std::optional<CharDfa> CharDfa::of_strings(std::span<const std::string> strings, const CharDfaLimits& limits) {
  RegexNode any_of;
  any_of.kind = RegexNode::Kind::Alternation;
  for (const std::string& s : strings) {
    RegexNode word;
    word.kind = RegexNode::Kind::Concat;
    for (size_t pos = 0; pos < s.size();) {
      const std::optional<uint32_t> cp = decode_utf8(s, pos);
      RegexNode ch;
      ch.kind = RegexNode::Kind::Set;
      ch.set = CodePointSet::single(cp.value_or(0xFFFD));
      word.children.push_back(std::move(ch));
    }
    if (word.children.empty()) word.kind = RegexNode::Kind::Empty;
    any_of.children.push_back(std::move(word));
  }
  return of_regex(any_of, limits);
}

CharDfa CharDfa::everything() {
  CharDfa dfa;
  dfa.bounds_ = {0, 0xD800, 0xE000, 0x110000};
  dfa.start_ = 0;
  dfa.accepting_ = {1};
  dfa.next_ = {0, kDead, 0};
  return dfa;
}

CharDfa CharDfa::multiples(uint64_t m, uint32_t e) {
  // Classes: '-', '.', each digit, and the rest (three runs of it).
  CharDfa dfa;
  dfa.bounds_ = {0, '-', '-' + 1, '.' + 1, '0'};
  for (uint32_t d = 1; d <= 10; ++d) dfa.bounds_.push_back('0' + d);
  dfa.bounds_.push_back(0x110000);
  const uint32_t minus = 1, dot = 2, digit0 = 4, classes = static_cast<uint32_t>(dfa.bounds_.size() - 1);
  // States: 0 start, 1 after '-', 2 a lone 0, then INT(r), DOT(r), FRAC(r, k) for k = 1..e.
  const uint32_t n = static_cast<uint32_t>(3 + m * (2 + e));
  auto int_state = [&](uint64_t r) { return static_cast<uint32_t>(3 + r); };
  auto dot_state = [&](uint64_t r) { return static_cast<uint32_t>(3 + m + r); };
  auto frac_state = [&](uint64_t r, uint32_t k) { return static_cast<uint32_t>(3 + m * (1 + k) + r); };
  dfa.next_.assign(size_t{n} * classes, kDead);
  dfa.accepting_.assign(n, 0);
  auto set = [&](uint32_t from, uint32_t cls, uint32_t to) { dfa.next_[size_t{from} * classes + cls] = to; };
  // r · 10^k mod m: whether the integer the digits so far make, padded to e
  // fraction digits, is a multiple of m.
  auto multiple = [&](uint64_t r, uint32_t missing) {
    for (uint32_t i = 0; i < missing; ++i) r = r * 10 % m;
    return r == 0;
  };
  dfa.start_ = 0;
  set(0, minus, 1);
  for (uint32_t from : {0u, 1u}) {
    set(from, digit0, 2);
    for (uint32_t d = 1; d <= 9; ++d) set(from, digit0 + d, int_state(d % m));
  }
  dfa.accepting_[2] = 1;  // 0
  if (e > 0) set(2, dot, dot_state(0));
  for (uint64_t r = 0; r < m; ++r) {
    for (uint32_t d = 0; d <= 9; ++d) set(int_state(r), digit0 + d, int_state((r * 10 + d) % m));
    dfa.accepting_[int_state(r)] = multiple(r, e);
    if (e == 0) continue;
    set(int_state(r), dot, dot_state(r));
    for (uint32_t d = 0; d <= 9; ++d) set(dot_state(r), digit0 + d, frac_state((r * 10 + d) % m, 1));
    for (uint32_t k = 1; k <= e; ++k) {
      dfa.accepting_[frac_state(r, k)] = multiple(r, e - k);
      if (k < e)
        for (uint32_t d = 0; d <= 9; ++d) set(frac_state(r, k), digit0 + d, frac_state((r * 10 + d) % m, k + 1));
    }
  }
  dfa.minimize();
  return dfa;
}

uint32_t CharDfa::class_of(uint32_t code_point) const {
  return static_cast<uint32_t>(std::upper_bound(bounds_.begin(), bounds_.end(), code_point) - bounds_.begin() - 1);
}

std::optional<CharDfa> CharDfa::combine(const CharDfa& other, Op op, const CharDfaLimits& limits) const {
  CharDfa out;
  out.bounds_.clear();
  std::set_union(bounds_.begin(), bounds_.end(), other.bounds_.begin(), other.bounds_.end(),
                 std::back_inserter(out.bounds_));
  const size_t classes = out.classes();
  std::vector<uint32_t> mine(classes), theirs(classes);
  for (uint32_t c = 0; c < classes; ++c) {
    mine[c] = class_of(out.bounds_[c]);
    theirs[c] = other.class_of(out.bounds_[c]);
  }
  auto alive = [op](uint32_t a, uint32_t b) {
    switch (op) {
      case Op::Intersect: return a != kDead && b != kDead;
      case Op::Minus: return a != kDead;
      case Op::Unite: return a != kDead || b != kDead;
    }
    return false;
  };
  auto accepts = [&](uint32_t a, uint32_t b) {
    const bool x = a != kDead && accepting_[a], y = b != kDead && other.accepting_[b];
    switch (op) {
      case Op::Intersect: return x && y;
      case Op::Minus: return x && !y;
      case Op::Unite: return x || y;
    }
    return false;
  };
  std::map<uint64_t, uint32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  auto id_of = [&](uint32_t a, uint32_t b) -> std::optional<uint32_t> {
    if (!alive(a, b)) return kDead;
    auto [it, inserted] = ids.emplace(uint64_t{a} << 32 | b, static_cast<uint32_t>(pairs.size()));
    if (inserted) {
      if (pairs.size() >= limits.max_states) return std::nullopt;
      pairs.emplace_back(a, b);
      out.next_.resize(pairs.size() * classes, kDead);
      out.accepting_.push_back(accepts(a, b));
    }
    return it->second;
  };
  const std::optional<uint32_t> start = id_of(start_, other.start_);
  if (!start) return std::nullopt;
  out.start_ = *start;
  for (size_t i = 0; i < pairs.size(); ++i)
    for (uint32_t c = 0; c < classes; ++c) {
      const auto [a, b] = pairs[i];
      const std::optional<uint32_t> to = id_of(next(a, mine[c]), other.next(b, theirs[c]));
      if (!to) return std::nullopt;
      out.next_[i * classes + c] = *to;
    }
  out.minimize();
  return out;
}

std::optional<CharDfa> CharDfa::intersect(const CharDfa& other, const CharDfaLimits& limits) const {
  return combine(other, Op::Intersect, limits);
}
std::optional<CharDfa> CharDfa::minus(const CharDfa& other, const CharDfaLimits& limits) const {
  return combine(other, Op::Minus, limits);
}
std::optional<CharDfa> CharDfa::unite(const CharDfa& other, const CharDfaLimits& limits) const {
  return combine(other, Op::Unite, limits);
}

CharDfa CharDfa::shortest() const {
  CharDfa out = *this;
  const size_t classes = this->classes();
  for (size_t s = 0; s < out.accepting_.size(); ++s)
    if (out.accepting_[s]) std::fill_n(out.next_.begin() + static_cast<std::ptrdiff_t>(s * classes), classes, kDead);
  out.minimize();
  return out;
}

void CharDfa::minimize() {
  const size_t n = accepting_.size(), classes = this->classes();
  if (start_ == kDead) {
    next_.clear(), accepting_.clear();
    return;
  }
  // States from which an accepting one is reached (backwards from them).
  std::vector<std::vector<uint32_t>> sources(n);
  for (uint32_t s = 0; s < n; ++s)
    for (uint32_t c = 0; c < classes; ++c)
      if (next(s, c) != kDead) sources[next(s, c)].push_back(s);
  std::vector<uint8_t> live(n, 0);
  std::vector<uint32_t> work;
  for (uint32_t s = 0; s < n; ++s)
    if (accepting_[s]) live[s] = 1, work.push_back(s);
  while (!work.empty()) {
    const uint32_t s = work.back();
    work.pop_back();
    for (uint32_t p : sources[s])
      if (!live[p]) live[p] = 1, work.push_back(p);
  }
  if (!live[start_]) {
    start_ = kDead, next_.clear(), accepting_.clear();
    return;
  }
  // Moore's refinement: blocks by accepting, then by the blocks each class leads to.
  std::vector<uint32_t> block(n, kDead);
  for (uint32_t s = 0; s < n; ++s)
    if (live[s]) block[s] = accepting_[s];
  size_t blocks = 0;
  for (;;) {
    std::map<std::vector<uint32_t>, uint32_t> ids;
    std::vector<uint32_t> refined(n, kDead);
    std::vector<uint32_t> signature(classes + 1);
    for (uint32_t s = 0; s < n; ++s) {
      if (!live[s]) continue;
      signature[0] = block[s];
      for (uint32_t c = 0; c < classes; ++c) {
        const uint32_t t = next(s, c);
        signature[c + 1] = t == kDead ? kDead : block[t];
      }
      refined[s] = ids.emplace(signature, static_cast<uint32_t>(ids.size())).first->second;
    }
    const bool stable = ids.size() == blocks;
    blocks = ids.size();
    block = std::move(refined);
    if (stable) break;
  }
  // Renumber from the start, breadth first (a stable order for to_regex).
  std::vector<uint32_t> order(blocks, kDead), first_state(blocks, kDead);
  for (uint32_t s = 0; s < n; ++s)
    if (live[s] && first_state[block[s]] == kDead) first_state[block[s]] = s;
  std::vector<uint32_t> queue{block[start_]};
  order[block[start_]] = 0;
  for (size_t i = 0; i < queue.size(); ++i)
    for (uint32_t c = 0; c < classes; ++c) {
      const uint32_t t = next(first_state[queue[i]], c);
      if (t == kDead || !live[t] || order[block[t]] != kDead) continue;
      order[block[t]] = static_cast<uint32_t>(queue.size());
      queue.push_back(block[t]);
    }
  std::vector<uint32_t> next(queue.size() * classes, kDead);
  std::vector<uint8_t> accepting(queue.size());
  for (uint32_t i = 0; i < queue.size(); ++i) {
    const uint32_t s = first_state[queue[i]];
    accepting[i] = accepting_[s];
    for (uint32_t c = 0; c < classes; ++c) {
      const uint32_t t = this->next(s, c);
      if (t != kDead && live[t]) next[i * classes + c] = order[block[t]];
    }
  }
  // Neighbouring classes that lead everywhere alike are one class.
  std::vector<uint32_t> bounds{bounds_[0]};
  std::vector<uint32_t> kept;
  for (uint32_t c = 0; c < classes; ++c) {
    bool same = !kept.empty();
    for (uint32_t s = 0; same && s < queue.size(); ++s) same = next[s * classes + c] == next[s * classes + kept.back()];
    if (!same) {
      if (!kept.empty()) bounds.push_back(bounds_[c]);
      kept.push_back(c);
    }
  }
  bounds.push_back(bounds_.back());
  next_.assign(queue.size() * kept.size(), kDead);
  for (uint32_t s = 0; s < queue.size(); ++s)
    for (size_t k = 0; k < kept.size(); ++k) next_[s * kept.size() + k] = next[s * classes + kept[k]];
  bounds_ = std::move(bounds);
  accepting_ = std::move(accepting);
  start_ = 0;
}

bool CharDfa::matches(std::string_view utf8) const {
  uint32_t s = start_;
  for (size_t pos = 0; pos < utf8.size() && s != kDead;) {
    const std::optional<uint32_t> cp = decode_utf8(utf8, pos);
    s = next(s, class_of(cp.value_or(0xFFFD)));
  }
  return s != kDead && accepting_[s];
}

// --- Back to a regex -----------------------------------------------------------

std::optional<RegexNode> CharDfa::to_regex(const CharDfaLimits& limits) const {
  if (empty()) return std::nullopt;
  // The cheapest state first keeps a trie a nested trie; a chain of states
  // with a common exit reads better from its start (X{0,n}Y, which the
  // labels count, where the other order nests n groups). Both are tried,
  // and the smaller kept.
  auto nodes = [](const RegexNode& r) {
    size_t count = 0;
    std::vector<const RegexNode*> work{&r};
    while (!work.empty()) {
      const RegexNode* node = work.back();
      work.pop_back();
      ++count;
      for (const RegexNode& child : node->children) work.push_back(&child);
    }
    return count;
  };
  std::optional<RegexNode> cheapest = eliminate(Order::Cheapest, limits);
  // The other order only while it stays smaller (a trie taken from its root
  // grows quadratic labels: stopped early, not built to the limit).
  CharDfaLimits smaller = limits;
  if (cheapest) smaller.max_regex_nodes = std::min(limits.max_regex_nodes, nodes(*cheapest));
  std::optional<RegexNode> from_start = eliminate(Order::FromStart, smaller);
  if (!cheapest || !from_start) return cheapest ? std::move(cheapest) : std::move(from_start);
  return nodes(*from_start) < nodes(*cheapest) ? std::move(from_start) : std::move(cheapest);
}

std::optional<RegexNode> CharDfa::eliminate(Order order, const CharDfaLimits& limits) const {
  const uint32_t n = static_cast<uint32_t>(size()), first = n, last = n + 1;
  std::vector<std::map<uint32_t, Label>> out(n + 2);
  std::vector<std::set<uint32_t>> in(n + 2);
  auto put = [&](uint32_t from, uint32_t to, Label label) {
    auto it = out[from].find(to);
    if (it == out[from].end()) out[from].emplace(to, std::move(label));
    else it->second = alternate(std::move(it->second), std::move(label));
    in[to].insert(from);
  };
  for (uint32_t s = 0; s < n; ++s) {
    std::map<uint32_t, CodePointSet> by_target;
    for (uint32_t c = 0; c < classes(); ++c)
      if (const uint32_t t = next(s, c); t != kDead) by_target[t].add(bounds_[c], bounds_[c + 1] - 1);
    for (auto& [t, set] : by_target) {
      CodePointSet scalars = set.complement().complement();  // without surrogates
      if (!scalars.empty()) put(s, t, set_label(std::move(scalars)));
    }
    if (accepting_[s]) put(s, last, Label{});
  }
  put(first, start_, Label{});
  std::vector<uint8_t> gone(n, 0);
  size_t work = 0;
  auto weight = [&](uint32_t q) {
    size_t in_count = 0, out_count = 0, in_size = 0, out_size = 0, loop = 0;
    for (uint32_t p : in[q])
      if (p != q) ++in_count, in_size += out[p].at(q).size;
    for (const auto& [r, label] : out[q])
      if (r != q) ++out_count, out_size += label.size;
      else loop = label.size;
    return in_size * (out_count ? out_count - 1 : 0) + out_size * (in_count ? in_count - 1 : 0) +
           loop * (in_count * out_count > 0 ? in_count * out_count - 1 : 0);
  };
  // From the start: breadth-first (the states' order), states with a loop
  // (sinks such as "any string") last.
  std::vector<uint32_t> from_start;
  for (int looped = 0; looped < 2; ++looped)
    for (uint32_t s = 0; s < n; ++s)
      if (out[s].count(s) == static_cast<size_t>(looped)) from_start.push_back(s);
  // Weights change only where an elimination changed edges: they are kept,
  // and recomputed for the neighbours of each state taken.
  std::vector<size_t> weights(n, 0);
  if (order == Order::Cheapest)
    for (uint32_t s = 0; s < n; ++s) weights[s] = weight(s);
  for (uint32_t round = 0; round < n; ++round) {
    uint32_t q = kDead;
    if (order == Order::FromStart) {
      q = from_start[round];
    } else {
      size_t best = SIZE_MAX;
      for (uint32_t s = 0; s < n; ++s)
        if (!gone[s] && weights[s] < best) best = weights[s], q = s;
    }
    gone[q] = 1;
    std::vector<uint32_t> neighbours(in[q].begin(), in[q].end());
    for (const auto& [r, label] : out[q]) neighbours.push_back(r);
    std::optional<Label> loop;
    if (auto it = out[q].find(q); it != out[q].end()) loop = star(it->second);
    for (uint32_t p : in[q]) {
      if (p == q) continue;
      Label into = std::move(out[p].at(q));
      out[p].erase(q);
      for (const auto& [r, from] : out[q]) {
        if (r == q) continue;
        Label path = loop ? concat(concat(into, *loop), from) : concat(into, from);
        work += path.size;  // nodes copied: bounded, or a large automaton takes seconds to fail
        if (path.size > limits.max_regex_nodes || path.depth > limits.max_regex_depth || work > limits.max_regex_work)
          return std::nullopt;
        put(p, r, std::move(path));
        if (const Label& now = out[p].at(r); now.size > limits.max_regex_nodes || now.depth > limits.max_regex_depth)
          return std::nullopt;
      }
    }
    for (const auto& [r, label] : out[q]) in[r].erase(q);
    out[q].clear();
    in[q].clear();
    if (order == Order::Cheapest)
      for (uint32_t s : neighbours)
        if (s < n && !gone[s]) weights[s] = weight(s);
  }
  auto it = out[first].find(last);
  if (it == out[first].end() || it->second.depth > limits.max_regex_depth) return std::nullopt;
  return it->second.node();
}

}  // namespace cgram::json

#include "lr.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "memory_budget.h"

namespace cgram::ir {
namespace {

// A growable bitset over lookahead terminals.
class Bits {
 public:
  explicit Bits(size_t n = 0) : words_((n + 63) / 64, 0) {}
  void set(size_t i) { words_[i / 64] |= uint64_t(1) << (i % 64); }
  bool test(size_t i) const { return words_[i / 64] >> (i % 64) & 1; }
  bool merge(const Bits& o) {
    bool changed = false;
    for (size_t i = 0; i < words_.size(); ++i) {
      uint64_t next = words_[i] | o.words_[i];
      changed = changed || next != words_[i];
      words_[i] = next;
    }
    return changed;
  }
  template <typename F>
  void for_each(F f) const {
    for (size_t w = 0; w < words_.size(); ++w)
      for (uint64_t bits = words_[w]; bits; bits &= bits - 1) f(w * 64 + __builtin_ctzll(bits));
  }

 private:
  std::vector<uint64_t> words_;
};

struct SymbolLess {
  bool operator()(SkeletonSymbol a, SkeletonSymbol b) const {
    return std::tie(a.terminal, a.index) < std::tie(b.terminal, b.index);
  }
};

struct Item {
  uint32_t production, dot;
  auto operator<=>(const Item&) const = default;
};

class Builder {
  const LexicalGrammar& g_;

 public:
  explicit Builder(const LexicalGrammar& g)
      : g_(g), terminals_(g.terminals.size()), lookaheads_(terminals_ + 2) {
    by_lhs_.resize(g.nonterminal_names.size());
    for (uint32_t p = 0; p < g.productions.size(); ++p) by_lhs_[g.productions[p].lhs].push_back(p);
    compute_first();
    compute_nullable_suffixes();
  }

  // Whether everything after the item's dot can derive the empty string:
  // the item then reduces, right-nulled, by `dot` symbols.
  bool rest_nullable(Item item) const { return item.dot >= nullable_suffix_from_[item.production]; }

  size_t terminals_;
  size_t lookaheads_;  // terminals, then '$', then the propagation marker '#'
  uint32_t end() const { return static_cast<uint32_t>(terminals_); }
  uint32_t marker() const { return static_cast<uint32_t>(terminals_ + 1); }

  std::vector<std::vector<Item>> kernels;
  std::vector<std::map<SkeletonSymbol, uint32_t, SymbolLess>> transitions;
  std::vector<std::vector<Bits>> kernel_lookaheads;  // per state, per kernel item

  // False (with `error` set) when the automaton outgrows its limits.
  bool build_lr0(const LrLimits& limits, std::string& error) {
    std::map<std::vector<Item>, uint32_t> ids;
    kernels.push_back({{0, 0}});
    ids[kernels[0]] = 0;
    size_t items = 1;
    for (uint32_t s = 0; s < kernels.size(); ++s) {
      if (kernels.size() > limits.max_states) {
        error = fmt::format("the grammar's LR automaton needs more than {} states", limits.max_states);
        return false;
      }
      if (items > limits.max_kernel_items) {
        error = fmt::format("the grammar's LR automaton needs more than {} kernel items", limits.max_kernel_items);
        return false;
      }
      std::map<SkeletonSymbol, std::vector<Item>, SymbolLess> next;
      for (Item it : closure0(kernels[s])) {
        const auto& rhs = g_.productions[it.production].rhs;
        if (it.dot < rhs.size()) next[rhs[it.dot]].push_back({it.production, it.dot + 1});
      }
      transitions.emplace_back();
      for (auto& [symbol, kernel] : next) {
        std::sort(kernel.begin(), kernel.end());
        auto [pos, inserted] = ids.emplace(kernel, static_cast<uint32_t>(kernels.size()));
        if (inserted) {
          // The kernel twice (in `kernels` and as a key of `ids`), its
          // transitions and, later, its row of the table.
          charge_memory(2 * kernel.size() * sizeof(Item) + 256);
          kernels.push_back(kernel), items += kernel.size();
        }
        transitions[s][symbol] = pos->second;
      }
    }
    return true;
  }

  // LR(1) closure of items with lookahead sets.
  std::map<Item, Bits> closure1(const std::vector<std::pair<Item, Bits>>& seed) const {
    std::map<Item, Bits> items;
    std::vector<Item> work;
    for (const auto& [item, la] : seed) {
      auto [pos, inserted] = items.emplace(item, Bits(lookaheads_));
      if (pos->second.merge(la) || inserted) work.push_back(item);
    }
    while (!work.empty()) {
      Item it = work.back();
      work.pop_back();
      const auto& rhs = g_.productions[it.production].rhs;
      if (it.dot >= rhs.size() || rhs[it.dot].terminal) continue;
      // FIRST(β L) for the items B -> •γ.
      Bits la(lookaheads_);
      bool nullable_rest = true;
      for (size_t k = it.dot + 1; k < rhs.size() && nullable_rest; ++k) {
        if (rhs[k].terminal) {
          la.set(rhs[k].index);
          nullable_rest = false;
        } else {
          la.merge(first_[rhs[k].index]);
          nullable_rest = nullable_[rhs[k].index];
        }
      }
      if (nullable_rest) la.merge(items.at(it));
      for (uint32_t p : by_lhs_[rhs[it.dot].index]) {
        Item child{p, 0};
        auto [pos, inserted] = items.emplace(child, Bits(lookaheads_));
        if (pos->second.merge(la) || inserted) work.push_back(child);
      }
    }
    return items;
  }

  void compute_lookaheads() {
    kernel_lookaheads.resize(kernels.size());
    for (uint32_t s = 0; s < kernels.size(); ++s) kernel_lookaheads[s].assign(kernels[s].size(), Bits(lookaheads_));
    kernel_lookaheads[0][0].set(end());
    // Propagation links: (state, kernel index) -> (state, kernel index).
    std::vector<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>> links;
    for (uint32_t s = 0; s < kernels.size(); ++s) {
      for (uint32_t k = 0; k < kernels[s].size(); ++k) {
        Bits marker_only(lookaheads_);
        marker_only.set(marker());
        for (const auto& [item, la] : closure1({{kernels[s][k], marker_only}})) {
          const auto& rhs = g_.productions[item.production].rhs;
          if (item.dot >= rhs.size()) continue;
          uint32_t target = transitions[s].at(rhs[item.dot]);
          uint32_t target_k = kernel_index(target, {item.production, item.dot + 1});
          la.for_each([&](size_t a) {
            if (a == marker()) links.emplace_back(s, k, target, target_k);
            else kernel_lookaheads[target][target_k].set(a);
          });
        }
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (auto [s, k, t, tk] : links) changed = kernel_lookaheads[t][tk].merge(kernel_lookaheads[s][k]) || changed;
    }
  }

  uint32_t kernel_index(uint32_t state, Item item) const {
    const auto& k = kernels[state];
    return static_cast<uint32_t>(std::lower_bound(k.begin(), k.end(), item) - k.begin());
  }

  std::vector<Item> closure0(const std::vector<Item>& kernel) const {
    std::set<Item> items(kernel.begin(), kernel.end());
    std::vector<Item> work(kernel.begin(), kernel.end());
    while (!work.empty()) {
      Item it = work.back();
      work.pop_back();
      const auto& rhs = g_.productions[it.production].rhs;
      if (it.dot >= rhs.size() || rhs[it.dot].terminal) continue;
      for (uint32_t p : by_lhs_[rhs[it.dot].index])
        if (items.insert({p, 0}).second) work.push_back({p, 0});
    }
    return {items.begin(), items.end()};
  }

 private:
  void compute_first() {
    size_t n = g_.nonterminal_names.size();
    nullable_.assign(n, false);
    first_.assign(n, Bits(lookaheads_));
    for (bool changed = true; changed;) {
      changed = false;
      for (const SkeletonProduction& p : g_.productions) {
        bool all_nullable = true;
        for (SkeletonSymbol s : p.rhs) {
          if (s.terminal) {
            if (!first_[p.lhs].test(s.index)) first_[p.lhs].set(s.index), changed = true;
            all_nullable = false;
            break;
          }
          changed = first_[p.lhs].merge(first_[s.index]) || changed;
          if (!nullable_[s.index]) {
            all_nullable = false;
            break;
          }
        }
        if (all_nullable && !nullable_[p.lhs]) nullable_[p.lhs] = true, changed = true;
      }
    }
  }

  void compute_nullable_suffixes() {
    nullable_suffix_from_.resize(g_.productions.size());
    for (uint32_t p = 0; p < g_.productions.size(); ++p) {
      const auto& rhs = g_.productions[p].rhs;
      size_t from = rhs.size();
      while (from > 0 && !rhs[from - 1].terminal && nullable_[rhs[from - 1].index]) --from;
      nullable_suffix_from_[p] = static_cast<uint32_t>(from);
    }
  }

  std::vector<std::vector<uint32_t>> by_lhs_;
  std::vector<bool> nullable_;
  std::vector<uint32_t> nullable_suffix_from_;  // per production: the first dot after which all is nullable
  std::vector<Bits> first_;
};

// Whether `sets` lookahead sets over the grammar's terminals fit the limit
// (their bytes in `bytes`), with the error when they do not.
bool lookaheads_fit(const LexicalGrammar& grammar, size_t sets, const LrLimits& limits, size_t& bytes,
                    std::string& error) {
  const size_t set_bytes = (grammar.terminals.size() + 2 + 63) / 64 * 8;  // a Bits over Builder::lookaheads_
  bytes = sets * set_bytes;
  if (sets <= limits.max_lookahead_bytes / set_bytes) return true;
  error = fmt::format(
      "the grammar's LR lookahead sets need more than {} MiB ({} sets of {} terminals; the limit is "
      "LrLimits::max_lookahead_bytes): write the alternatives as one regular rule, or with fewer distinct literals",
      limits.max_lookahead_bytes >> 20, sets, grammar.terminals.size());
  return false;
}

}  // namespace

LrTable::LrTable(const LexicalGrammar& grammar, const LrLimits& limits)
    : grammar_(&grammar), terminal_count_(grammar.terminals.size()), nonterminal_count_(grammar.nonterminal_names.size()) {
  // FIRST sets and the largest closure, before any is built; then one set
  // per kernel item.
  const size_t fixed_sets = grammar.nonterminal_names.size() + grammar.productions.size();
  if (!lookaheads_fit(grammar, fixed_sets, limits, lookahead_bytes_, error_)) return;
  MemoryStage stage("building the LR automaton");
  charge_memory(lookahead_bytes_);
  Builder b(grammar);
  if (!b.build_lr0(limits, error_)) return;
  size_t kernel_items = 0;
  for (const auto& kernel : b.kernels) kernel_items += kernel.size();
  const size_t fixed_bytes = lookahead_bytes_;
  if (!lookaheads_fit(grammar, fixed_sets + kernel_items, limits, lookahead_bytes_, error_)) return;
  charge_memory(lookahead_bytes_ - fixed_bytes);
  b.compute_lookaheads();
  const size_t n = b.kernels.size();
  shifts_.resize(n);
  gotos_.resize(n);
  reduces_.resize(n);
  active_.resize(n);
  for (uint32_t s = 0; s < n; ++s) {
    for (const auto& [symbol, target] : b.transitions[s])
      (symbol.terminal ? shifts_[s] : gotos_[s]).emplace_back(symbol.index, target);
    std::vector<std::pair<Item, Bits>> seed;
    for (uint32_t k = 0; k < b.kernels[s].size(); ++k) seed.emplace_back(b.kernels[s][k], b.kernel_lookaheads[s][k]);
    std::map<uint32_t, std::vector<LrReduction>> by_terminal;
    std::map<uint32_t, size_t> complete_items;  // per terminal: reductions of complete items (for conflicts)
    for (const auto& [item, la] : b.closure1(seed)) {
      if (!b.rest_nullable(item)) continue;
      const bool complete = item.dot == grammar.productions[item.production].rhs.size();
      la.for_each([&](size_t a) {
        if (a > terminal_count_) return;
        by_terminal[static_cast<uint32_t>(a)].push_back({item.production, item.dot});
        if (complete) ++complete_items[static_cast<uint32_t>(a)];
      });
    }
    std::set<uint32_t> active;
    for (auto& [t, reductions] : by_terminal) {
      std::sort(reductions.begin(), reductions.end());
      bool shift_too = std::any_of(shifts_[s].begin(), shifts_[s].end(), [&](const auto& e) { return e.first == t; });
      if (complete_items[t] + (shift_too ? 1 : 0) > 1) ++conflicts_;
      if (t < terminal_count_) active.insert(t);
      reduces_[s].emplace_back(t, std::move(reductions));
    }
    for (const auto& [t, target] : shifts_[s]) active.insert(t);
    active_[s].assign(active.begin(), active.end());
  }
  build_dense(limits.max_dense_cells);
}

void LrTable::build_dense(size_t max_dense_cells) {
  const size_t n = shifts_.size();
  // Rows are searched where a dense table would be too big (a grammar of
  // 10,000 rules would otherwise ask for gigabytes).
  const bool dense_shift = n * terminal_count_ <= max_dense_cells;
  const bool dense_go = n * nonterminal_count_ <= max_dense_cells;
  const bool dense_reduce = n * (terminal_count_ + 1) <= max_dense_cells;
  charge_memory(((dense_shift ? n * terminal_count_ : 0) + (dense_go ? n * nonterminal_count_ : 0) +
                 (dense_reduce ? n * (terminal_count_ + 1) : 0)) *
                sizeof(uint32_t));
  shift_dense_.assign(dense_shift ? n * terminal_count_ : 0, kNone);
  go_dense_.assign(dense_go ? n * nonterminal_count_ : 0, kNone);
  reduce_dense_.assign(dense_reduce ? n * (terminal_count_ + 1) : 0, 0);
  reduce_lists_.assign(1, {});  // list 0: no reductions
  reduce_ids_.assign(n, {});
  // One id per distinct list (sorted above): cells that reduce alike share
  // it, so a parser can tell that two lookaheads act alike in a state.
  std::map<std::vector<LrReduction>, uint32_t> list_ids;
  list_ids.emplace(std::vector<LrReduction>{}, 0);
  for (size_t s = 0; s < n; ++s) {
    if (dense_shift)
      for (auto [t, target] : shifts_[s]) shift_dense_[s * terminal_count_ + t] = target;
    if (dense_go)
      for (auto [a, target] : gotos_[s]) go_dense_[s * nonterminal_count_ + a] = target;
    for (const auto& [t, reductions] : reduces_[s]) {
      const auto [at, added] = list_ids.emplace(reductions, static_cast<uint32_t>(reduce_lists_.size()));
      if (added) reduce_lists_.push_back(reductions);
      const uint32_t id = at->second;
      if (dense_reduce) reduce_dense_[s * (terminal_count_ + 1) + t] = id;
      reduce_ids_[s].emplace_back(t, id);
    }
  }
}

size_t LrTable::memory_bytes() const {
  size_t bytes = (shift_dense_.capacity() + go_dense_.capacity() + reduce_dense_.capacity()) * 4;
  for (size_t s = 0; s < shifts_.size(); ++s) {
    bytes += (shifts_[s].capacity() + gotos_[s].capacity() + reduce_ids_[s].capacity()) * 8 + active_[s].capacity() * 4;
    for (const auto& [t, reductions] : reduces_[s]) bytes += 32 + reductions.capacity() * sizeof(LrReduction);
  }
  return bytes;
}

}  // namespace cgram::ir

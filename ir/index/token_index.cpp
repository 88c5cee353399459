#include "token_index.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <string_view>
#include <tuple>

#include "memory_budget.h"
#include "walk_classes.h"

namespace cgram {
namespace {
// What one entry holds (its vectors' capacities), for memory_bytes and the
// compile's memory budget.
size_t into_bytes(std::span<const CrossInto> into) {
  size_t bytes = 0;
  for (const CrossInto& c : into)
    bytes += sizeof(c) + c.tokens.sparse_bytes() + 2 * c.second.capacity() * 4 + into_bytes(c.next);
  return bytes;
}

// Reorders `items` by the byte `byte_of` gives each, keeping their order
// within a byte (a counting sort); returns where each byte's run begins
// (257 offsets).
template <typename T, typename ByteOf>
std::vector<uint32_t> group_by_byte(std::vector<T>& items, ByteOf byte_of) {
  std::vector<uint32_t> begin(257, 0);
  for (const T& x : items) ++begin[byte_of(x) + 1];
  for (int b = 0; b < 256; ++b) begin[b + 1] += begin[b];
  std::vector<T> grouped(items.size());
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  for (const T& x : items) grouped[fill[byte_of(x)]++] = x;
  items.swap(grouped);
  return begin;
}

size_t entry_bytes(const StateIndex& ix) {
  // Dense sets are counted once, where they are shared from (TokenIndex::share).
  return sizeof(StateIndex) + ix.inside.sparse_bytes() +
         (ix.cross_begin.capacity() + ix.cross_nodes.capacity() + ix.cross_states.capacity()) * 4 + into_bytes(ix.into);
}
}  // namespace

TokenIndex::TokenIndex(const ir::LexicalGrammar& lexical, const VocabTrie& trie, size_t mask_words,
                       std::vector<std::vector<uint32_t>> followers)
    : lexical_(lexical), trie_(trie), words_(mask_words), followers_(std::move(followers)) {
  for (const auto& next : followers_) {
    std::bitset<256> bytes;
    for (uint32_t u : next) {
      const ir::LexTerminal& t = lexical.terminals[u];
      if (t.kind != ir::LexTerminal::Kind::Bytes) bytes.set();  // except! starts anywhere; any! never mid-token
      else
        for (int b = 0; b < 256; ++b) bytes[b] = bytes[b] || t.dfa.next(t.dfa.start(), static_cast<uint8_t>(b)) != ir::Dfa::kDead;
    }
    after_first_.push_back(bytes);
    byte_followers_.push_back(std::all_of(next.begin(), next.end(), [&](uint32_t u) {
      return lexical.terminals[u].kind == ir::LexTerminal::Kind::Bytes;
    }));
  }
  for (const ir::LexTerminal& t : lexical.terminals) {
    offset_.push_back(slot_count_);
    slot_count_ += t.dfa.size();
  }
  charge_memory(slot_count_ * sizeof(Slot));
  slots_ = std::make_unique<Slot[]>(slot_count_);
  classes_ = std::make_unique<Classes[]>(lexical.terminals.size());
}

uint32_t TokenIndex::same_walk_as(uint32_t terminal, uint32_t state) const {
  const ir::Dfa& dfa = lexical_.terminals[terminal].dfa;
  if (dfa.size() < kLazyClassesMin) return state;
  Classes& c = classes_[terminal];
  // The first entries of a terminal are walked as they come (the first
  // mask stays quick); from the kLazyClassesAfter-th on, its states' classes
  // are found once and shared.
  if (c.walked.fetch_add(1, std::memory_order_relaxed) < kLazyClassesAfter) return state;
  std::call_once(c.once, [&] { c.first = walk_classes(dfa, trie_.max_depth()); });
  return c.first[state];
}

TokenIndex::Walk TokenIndex::walk(uint32_t root, uint32_t terminal, uint32_t state) const {
  Walk out{std::vector<uint32_t>(words_, 0u), {}};
  const ir::Dfa& dfa = lexical_.terminals[terminal].dfa;
  const uint32_t base = trie_.depth(root);
  std::vector<uint32_t> at(trie_.max_depth() + 2);
  at[0] = state;
  // The hot loop of compiling: one step per live trie node, on raw arrays
  // (`at` holds live states only, so no kDead check before a step).
  const VocabTrie::Arrays t = trie_.arrays();
  const uint32_t* table = dfa.table_data();
  const uint8_t* accepting = dfa.accepting_data();
  uint32_t* bits = out.inside.data();
  const uint32_t stop = t.end[root];
  // The lexeme may end before a node's byte, but not before the token: at
  // the root of the whole trie that case is the matcher's own. Only where
  // a lexeme that may come next starts with the byte: no reader looks at
  // the others (for free text before a tag, all but one byte).
  const uint32_t first_crossing_depth = root != 0 ? 1 : 2;
  const std::bitset<256>& follows = after_first_[terminal];
  for (uint32_t node = root + 1; node < stop;) {
    const uint32_t d = t.depth[node] - base;
    const uint32_t before = at[d - 1];
    const uint8_t byte = t.byte[node];
    if (accepting[before] && d >= first_crossing_depth && follows[byte]) out.crossing.push_back({byte, before, node});
    const uint32_t q = table[size_t(before) * 256 + byte];
    if (q == ir::Dfa::kDead) {
      node = t.end[node];
      continue;
    }
    at[d] = q;
    for (uint32_t k = t.token_begin[node], e = t.token_begin[node + 1]; k < e; ++k)
      bits[t.ids[k] / 32] |= 1u << (t.ids[k] % 32);
    ++node;
  }
  return out;
}

std::vector<TokenIndex::Walk> TokenIndex::walk_together(uint32_t terminal, std::span<const uint32_t> states) const {
  static_assert(kWalkTogether <= 16, "the walks that keep a token are 16 bits");
  const size_t k_count = states.size();
  std::vector<Walk> out(k_count);
  const ir::Dfa& dfa = lexical_.terminals[terminal].dfa;
  // By depth, the state of each walk (kDead once it died above).
  std::vector<uint32_t> at((trie_.max_depth() + 2) * k_count);
  std::copy(states.begin(), states.end(), at.begin());
  // By token: which walks keep it inside (one store per token, not one per walk).
  std::vector<uint16_t> kept_by(words_ * 32, 0);
  const VocabTrie::Arrays t = trie_.arrays();
  const uint32_t* table = dfa.table_data();
  const uint8_t* accepting = dfa.accepting_data();
  const std::bitset<256>& follows = after_first_[terminal];  // as in walk()
  for (uint32_t node = 1; node < t.end[0];) {
    const uint32_t d = t.depth[node];
    const uint8_t byte = t.byte[node];
    const uint32_t* before = &at[(d - 1) * k_count];
    uint32_t* after = &at[d * k_count];
    uint32_t alive = 0;
    // The walks are independent: their DFA steps overlap, where one walk
    // is a chain of dependent loads.
    for (size_t k = 0; k < k_count; ++k) {
      const uint32_t s = before[k];
      if (s == ir::Dfa::kDead) {
        after[k] = ir::Dfa::kDead;
        continue;
      }
      if (accepting[s] && d >= 2 && follows[byte]) out[k].crossing.push_back({byte, s, node});
      const uint32_t q = table[size_t(s) * 256 + byte];
      after[k] = q;
      alive |= uint32_t(q != ir::Dfa::kDead) << k;
    }
    if (alive == 0) {
      node = t.end[node];
      continue;
    }
    for (uint32_t i = t.token_begin[node]; i < t.token_begin[node + 1]; ++i) kept_by[t.ids[i]] = static_cast<uint16_t>(alive);
    ++node;
  }
  for (Walk& w : out) w.inside.assign(words_, 0u);
  for (uint32_t id = 0; id < kept_by.size(); ++id)
    for (uint32_t walks = kept_by[id]; walks != 0; walks &= walks - 1)
      out[std::countr_zero(walks)].inside[id / 32] |= 1u << (id % 32);
  return out;
}

std::unique_ptr<StateIndex> TokenIndex::build(uint32_t root, uint32_t terminal, uint32_t state) const {
  return finish(root, terminal, walk(root, terminal, state));
}

std::unique_ptr<StateIndex> TokenIndex::finish(uint32_t root, uint32_t terminal, Walk walked) const {
  auto out = std::make_unique<StateIndex>();
  std::vector<Crossing>& crossing = walked.crossing;
  // Grouped by byte (in the trie's order within a byte), then by state
  // within each byte, where a walk met several.
  out->cross_begin = group_by_byte(crossing, [](const Crossing& c) { return c.byte; });
  auto by_state = [](const Crossing& a, const Crossing& b) { return a.state < b.state; };
  for (int b = 0; b < 256; ++b) {
    const auto first = crossing.begin() + out->cross_begin[b], last = crossing.begin() + out->cross_begin[b + 1];
    if (!std::is_sorted(first, last, by_state)) std::stable_sort(first, last, by_state);
  }
  out->cross_nodes.reserve(crossing.size());
  out->cross_states.reserve(crossing.size());
  for (const Crossing& c : crossing) {
    out->cross_nodes.push_back(c.node);
    out->cross_states.push_back(c.state);
  }
  out->inside = TokenSet::from_words(std::move(walked.inside));
  out->ends_inside = !out->cross_nodes.empty();
  if (!out->ends_inside) drop_crossing_nodes(*out);  // not even the offsets by byte
  if (root == 0 && lexical_.terminals[terminal].kind == ir::LexTerminal::Kind::Bytes) {
    IntoScratch scratch{std::vector<uint8_t>(words_ * 32, 0), std::vector<uint32_t>(trie_.max_depth() + 2)};
    out->into = crossings_into(out->cross_nodes, terminal, 1, scratch);
    // Every follower is a byte terminal: `into` holds every crossing token
    // (those past its depth as places to walk from), and no walk reads the
    // nodes (the engine walks them only where except! may follow).
    if (byte_followers_[terminal]) drop_crossing_nodes(*out);
  }
  share_sets(*out);
  charge_memory(entry_bytes(*out));  // eager builds count against the compile's budget
  return out;
}

void TokenIndex::share(TokenSet& set) const {
  if (!set.dense()) return;
  const std::span<const uint32_t> words = set.words();
  const uint64_t hash =
      std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(words.data()), words.size_bytes()));
  std::lock_guard lock(shared_mutex_);
  for (auto [it, end] = shared_sets_.equal_range(hash); it != end; ++it)
    if (std::equal(words.begin(), words.end(), it->second->begin(), it->second->end())) {
      set.share_words(it->second);
      return;
    }
  shared_sets_.emplace(hash, set.shared_words());
  shared_bytes_ += words.size_bytes();
  charge_memory(words.size_bytes());
}

void TokenIndex::share_sets(StateIndex& ix) const {
  share(ix.inside);
  std::function<void(std::vector<CrossInto>&)> share_into = [&](std::vector<CrossInto>& into) {
    for (CrossInto& c : into) {
      share(c.tokens);
      share_into(c.next);
    }
  };
  share_into(ix.into);
}

void TokenIndex::drop_crossing_nodes(StateIndex& ix) {
  // Swapped out, not cleared: their memory goes with them.
  std::vector<uint32_t>().swap(ix.cross_begin);
  std::vector<uint32_t>().swap(ix.cross_nodes);
  std::vector<uint32_t>().swap(ix.cross_states);
}

std::vector<CrossInto> TokenIndex::crossings_into(std::span<const uint32_t> starts, uint32_t terminal, int level,
                                                   IntoScratch& scratch) const {
  std::vector<CrossInto> out;
  // The places by their byte, once: each next terminal walks only from
  // those whose byte it can start with.
  std::vector<uint32_t> by_byte(starts.begin(), starts.end());
  const std::vector<uint32_t> begin = group_by_byte(by_byte, [&](uint32_t node) { return trie_.byte(node); });
  for (uint32_t u : followers_[terminal]) {
    const ir::LexTerminal& next = lexical_.terminals[u];
    if (next.kind != ir::LexTerminal::Kind::Bytes) continue;  // the matcher walks those
    CrossInto into;
    into.terminal = u;
    std::vector<uint32_t> ids;
    const ir::Dfa& dfa = next.dfa;
    for (int b = 0; b < 256; ++b)
      if (begin[b] != begin[b + 1] && dfa.next(dfa.start(), static_cast<uint8_t>(b)) != ir::Dfa::kDead)
        for (uint32_t i = begin[b]; i < begin[b + 1]; ++i) into_subtree(by_byte[i], u, into, ids, scratch);
    if (ids.empty() && into.second.empty()) continue;
    // Distinct already (`seen`); in order only where they stay ids: a
    // large set becomes mask words in any order.
    if (ids.size() * TokenSet::kSparseShare <= words_) std::sort(ids.begin(), ids.end());
    for (uint32_t id : ids) scratch.seen[id] = 0;
    into.tokens = TokenSet::from_ids(std::move(ids), words_);
    if (!into.second.empty() && level < CrossInto::kMaxCrossings && byte_followers_[u]) {
      // Where U ends does not matter to the parser: the places where the
      // lexeme after it starts are all the next level needs.
      std::vector<uint32_t> after_u;
      for (const CrossInto::Second& x : into.second) after_u.push_back(x.node);
      std::sort(after_u.begin(), after_u.end());
      after_u.erase(std::unique(after_u.begin(), after_u.end()), after_u.end());
      into.second.clear();
      into.second.shrink_to_fit();
      into.next = crossings_into(after_u, u, level + 1, scratch);
    }
    std::sort(into.second.begin(), into.second.end(), [&](const CrossInto::Second& a, const CrossInto::Second& b) {
      return std::pair(a.state, trie_.byte(a.node)) < std::pair(b.state, trie_.byte(b.node));
    });
    out.push_back(std::move(into));
  }
  return out;
}

void TokenIndex::into_subtree(uint32_t node, uint32_t u, CrossInto& into, std::vector<uint32_t>& ids,
                              IntoScratch& scratch) const {
  const ir::Dfa& dfa = lexical_.terminals[u].dfa;
  const VocabTrie::Arrays t = trie_.arrays();
  const uint32_t* table = dfa.table_data();
  const uint8_t* accepting = dfa.accepting_data();
  const std::bitset<256>& starts_next = after_first_[u];
  const uint32_t base = t.depth[node] - 1;
  std::vector<uint32_t>& at = scratch.at;
  at[0] = dfa.start();
  for (uint32_t y = node, stop = t.end[node]; y < stop;) {
    const uint32_t d = t.depth[y] - base;
    const uint32_t before = at[d - 1];
    const uint8_t byte = t.byte[y];
    if (y != node && accepting[before] && starts_next[byte]) into.second.push_back({before, y});
    const uint32_t q = table[size_t(before) * 256 + byte];
    if (q == ir::Dfa::kDead) {
      y = t.end[y];
      continue;
    }
    at[d] = q;
    for (uint32_t k = t.token_begin[y], e = t.token_begin[y + 1]; k < e; ++k)
      if (!scratch.seen[t.ids[k]]) scratch.seen[t.ids[k]] = 1, ids.push_back(t.ids[k]);
    ++y;
  }
}

const StateIndex& TokenIndex::get(uint32_t terminal, uint32_t state) const {
  Slot& slot = slots_[offset_[terminal] + state];
  std::call_once(slot.once, [&] {
    // A state whose walk is like a smaller one's shares its entry (a counted
    // repetition's states: each character of a bounded string is a state).
    if (const uint32_t same = same_walk_as(terminal, state); same != state) {
      slot.value = &get(terminal, same);
      return;
    }
    slot.value = own(build(0, terminal, state));
    built_bytes_.fetch_add(entry_bytes(*slot.value), std::memory_order_relaxed);
  });
  return *slot.value;
}

void TokenIndex::build_together(uint32_t terminal, std::span<const uint32_t> first,
                                const std::atomic<bool>* stop) const {
  // States that can start on the same bytes walk mostly the same subtrees:
  // they are walked together, kWalkTogether at a time.
  const ir::Dfa& dfa = lexical_.terminals[terminal].dfa;
  std::map<std::bitset<256>, std::vector<uint32_t>, BitsetLess> by_first_bytes;
  for (uint32_t q = 0; q < first.size(); ++q) {
    if (first[q] != q) continue;
    std::bitset<256> bytes;
    for (int b = 0; b < 256; ++b) bytes[b] = dfa.next(q, static_cast<uint8_t>(b)) != ir::Dfa::kDead;
    by_first_bytes[bytes].push_back(q);
  }
  for (const auto& [bytes, states] : by_first_bytes)
    for (size_t i = 0; i + 1 < states.size(); i += kWalkTogether) {
      if (stop && stop->load(std::memory_order_relaxed)) return;
      const std::span<const uint32_t> batch(states.data() + i, std::min(kWalkTogether, states.size() - i));
      if (batch.size() < 2) break;  // one alone walks as get() does
      std::vector<Walk> walks = walk_together(terminal, batch);
      for (size_t k = 0; k < batch.size(); ++k) {
        Slot& slot = slots_[offset_[terminal] + batch[k]];
        std::call_once(slot.once, [&] {
          slot.value = own(finish(0, terminal, std::move(walks[k])));
          built_bytes_.fetch_add(entry_bytes(*slot.value), std::memory_order_relaxed);
        });
      }
    }
}

const StateIndex* TokenIndex::own(std::unique_ptr<StateIndex> entry) const {
  std::lock_guard lock(owned_mutex_);
  const size_t capacity = owned_.capacity();
  owned_.push_back(std::move(entry));
  const StateIndex* kept = owned_.back().get();
  charge_memory((owned_.capacity() - capacity) * sizeof(owned_[0]));
  return kept;
}

const StateIndex& TokenIndex::get_subtree(uint32_t root, uint32_t terminal, uint32_t state) const {
  if (root == 0) return get(terminal, state);
  const uint64_t key = (uint64_t(root) << 32) ^ (uint64_t(offset_[terminal] + state));
  {
    std::lock_guard lock(subtree_mutex_);
    if (auto it = subtrees_.find(key); it != subtrees_.end()) return *it->second;
  }
  auto built = build(root, terminal, state);
  std::lock_guard lock(subtree_mutex_);
  auto [it, inserted] = subtrees_.emplace(key, std::move(built));
  return *it->second;
}

const std::vector<uint32_t>* TokenIndex::inside_from_start(const std::vector<uint32_t>& terminals, bool now) const {
  {
    std::lock_guard lock(union_mutex_);
    auto [it, first] = unions_.try_emplace(terminals);
    if (first && !now) return nullptr;
    if (it->second) return it->second.get();
  }
  auto bits = std::make_unique<std::vector<uint32_t>>(words_, 0);
  inside_from_start_parts(terminals, [&](const TokenSet& inside) { inside.or_into(*bits); });
  std::lock_guard lock(union_mutex_);
  std::unique_ptr<std::vector<uint32_t>>& kept = unions_[terminals];
  if (!kept) kept = std::move(bits);  // unless another thread made it first
  return kept.get();
}

void TokenIndex::build_all(const std::atomic<bool>* stop) const {
  if (complete()) return;
  const auto stopped = [stop] { return stop && stop->load(std::memory_order_relaxed); };
  for (uint32_t t = 0; t < lexical_.terminals.size(); ++t) {
    if (stopped()) return;
    const std::vector<uint32_t> first = walk_classes(lexical_.terminals[t].dfa, trie_.max_depth());
    build_together(t, first, stop);
    for (uint32_t q = 0; q < first.size(); ++q) {
      if (stopped()) return;
      const StateIndex& entry = get(t, first[q]);
      if (first[q] == q) continue;
      Slot& slot = slots_[offset_[t] + q];
      std::call_once(slot.once, [&] { slot.value = &entry; });  // unless a lazy call built its own already
    }
  }
  complete_.store(true, std::memory_order_release);
}

size_t TokenIndex::memory_bytes() const {
  // The entries built so far, as they were counted when built: a slot is
  // not read here, since another thread may be building it.
  size_t bytes = slot_count_ * sizeof(Slot) + built_bytes_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(owned_mutex_);
    bytes += owned_.capacity() * sizeof(owned_[0]);
  }
  {
    std::lock_guard lock(shared_mutex_);
    bytes += shared_bytes_;
  }
  {
    std::lock_guard lock(subtree_mutex_);
    for (const auto& [key, ix] : subtrees_) bytes += entry_bytes(*ix);
  }
  std::lock_guard lock(union_mutex_);
  for (const auto& [key, bits] : unions_) bytes += (bits ? bits->capacity() * 4 : 0) + key.capacity() * 4;
  return bytes;
}

namespace {
void save_set(ir::BinaryWriter& out, const TokenSet& set) {
  out.put_vector(std::vector<uint32_t>(set.ids().begin(), set.ids().end()));
  out.put_vector(std::vector<uint32_t>(set.words().begin(), set.words().end()));
}

void save_into(ir::BinaryWriter& out, std::span<const CrossInto> into) {
  out.put<uint64_t>(into.size());
  for (const CrossInto& c : into) {
    out.put<uint32_t>(c.terminal);
    save_set(out, c.tokens);
    out.put_vector(c.second);
    save_into(out, c.next);
  }
}

void save_state_index(ir::BinaryWriter& out, const StateIndex& ix) {
  save_set(out, ix.inside);
  out.put<uint8_t>(ix.ends_inside ? 1 : 0);
  out.put_vector(ix.cross_begin);
  out.put_vector(ix.cross_nodes);
  out.put_vector(ix.cross_states);
  save_into(out, ix.into);
}

// Mask words: the right count, and no bit past the last token.
bool valid_words(std::span<const uint32_t> words, size_t count, size_t vocab_size) {
  if (words.size() != count) return false;
  if (vocab_size % 32 == 0 || count == 0) return true;
  return (words.back() >> (vocab_size % 32)) == 0;
}

TokenSet load_set(ir::BinaryReader& in) {
  std::vector<uint32_t> ids = in.get_vector<uint32_t>();
  std::vector<uint32_t> words = in.get_vector<uint32_t>();
  return TokenSet::from_parts(std::move(ids), std::move(words));
}

// One of the two forms, mask words of the right size, ids sorted and in the vocabulary.
bool valid_set(const TokenSet& set, size_t mask_words, size_t vocab_size) {
  if (set.dense()) return set.ids().empty() && valid_words(set.words(), mask_words, vocab_size);
  return std::is_sorted(set.ids().begin(), set.ids().end()) &&
         std::all_of(set.ids().begin(), set.ids().end(), [&](uint32_t id) { return id < vocab_size; });
}
}  // namespace

void TokenIndex::save(ir::BinaryWriter& out) const {
  build_all();
  out.put<uint64_t>(followers_.size());
  for (const auto& f : followers_) out.put_vector(f);
  out.put<uint64_t>(slot_count_);
  // Each entry once: a state that shares an earlier state's entry names it.
  for (uint32_t t = 0; t < lexical_.terminals.size(); ++t) {
    std::unordered_map<const StateIndex*, uint32_t> saved;
    for (uint32_t q = 0; q < lexical_.terminals[t].dfa.size(); ++q) {
      const StateIndex* entry = slots_[offset_[t] + q].value;
      const auto [it, first] = saved.emplace(entry, q);
      out.put<uint32_t>(it->second);
      if (first) save_state_index(out, *entry);
    }
  }
}

std::unique_ptr<TokenIndex> TokenIndex::load(ir::BinaryReader& in, const ir::LexicalGrammar& lexical,
                                             const VocabTrie& trie, size_t mask_words, size_t vocab_size) {
  const size_t terminals = lexical.terminals.size();
  auto bad = [&](const char* message) {
    in.fail(message);
    return nullptr;
  };
  if (in.get<uint64_t>() != terminals) return bad("the token index does not match the terminals");
  std::vector<std::vector<uint32_t>> followers(terminals);
  for (auto& f : followers) {
    f = in.get_vector<uint32_t>();
    for (uint32_t u : f)
      if (u >= terminals) return bad("the token index names a terminal that does not exist");
  }
  if (!in.ok()) return nullptr;
  auto index = std::make_unique<TokenIndex>(lexical, trie, mask_words, std::move(followers));
  if (in.get<uint64_t>() != index->slot_count_) return bad("the token index does not match the lexer states");
  auto valid_node = [&](uint32_t node) { return node != 0 && node < trie.size(); };
  // Nested crossings, as deep as they are built (no deeper: a crafted file
  // must not recurse without end).
  std::function<std::vector<CrossInto>(ir::BinaryReader&, int)> load_into = [&](ir::BinaryReader& in, int level) {
    std::vector<CrossInto> into;
    const uint64_t count = in.get_count(36);
    for (uint64_t i = 0; i < count && in.ok(); ++i) {
      CrossInto c;
      c.terminal = in.get<uint32_t>();
      c.tokens = load_set(in);
      c.second = in.get_vector<CrossInto::Second>();
      if (level < CrossInto::kMaxCrossings) c.next = load_into(in, level + 1);
      else if (in.get_count(36) != 0) in.fail("token index crossings nested too deep");
      into.push_back(std::move(c));
    }
    return into;
  };
  std::function<const char*(const std::vector<CrossInto>&)> check_into = [&](const std::vector<CrossInto>& into) -> const char* {
    for (const CrossInto& c : into) {
      if (c.terminal >= terminals || lexical.terminals[c.terminal].kind != ir::LexTerminal::Kind::Bytes)
        return "a token index crossing into a terminal that does not exist";
      if (!valid_set(c.tokens, mask_words, vocab_size)) return "a token index set of the wrong size, or ids past the vocabulary";
      const size_t next_states = lexical.terminals[c.terminal].dfa.size();
      for (const CrossInto::Second& x : c.second)
        if (x.state >= next_states || !valid_node(x.node)) return "a token index crossing out of range";
      if (const char* why = check_into(c.next)) return why;
    }
    return nullptr;
  };
  for (uint32_t t = 0; t < terminals; ++t) {
    const size_t states = lexical.terminals[t].dfa.size();
    for (size_t q = 0; q < states; ++q) {
      Slot& slot = index->slots_[index->offset_[t] + q];
      const uint32_t same_as = in.get<uint32_t>();
      if (same_as > q) return bad("a token index entry shared with a later state");
      if (same_as < q) {
        const StateIndex* entry = index->slots_[index->offset_[t] + same_as].value;
        std::call_once(slot.once, [&] { slot.value = entry; });
        continue;
      }
      auto ix = std::make_unique<StateIndex>();
      ix->inside = load_set(in);
      ix->ends_inside = in.get<uint8_t>() != 0;
      ix->cross_begin = in.get_vector<uint32_t>();
      ix->cross_nodes = in.get_vector<uint32_t>();
      ix->cross_states = in.get_vector<uint32_t>();
      ix->into = load_into(in, 1);
      if (!in.ok()) return nullptr;
      if (!valid_set(ix->inside, mask_words, vocab_size)) return bad("a token index entry of the wrong size");
      // Crossing nodes as built: grouped by byte, or none where every
      // follower is a byte terminal (a walk would need them otherwise).
      const bool kept = !ix->cross_nodes.empty();
      if (kept ? ix->cross_begin.size() != 257 || ix->cross_begin[0] != 0 ||
                     !std::is_sorted(ix->cross_begin.begin(), ix->cross_begin.end()) ||
                     ix->cross_begin[256] != ix->cross_nodes.size() || ix->cross_states.size() != ix->cross_nodes.size() ||
                     !ix->ends_inside
               : !ix->cross_begin.empty() || !ix->cross_states.empty() ||
                     (ix->ends_inside && (lexical.terminals[t].kind != ir::LexTerminal::Kind::Bytes ||
                                          !index->byte_followers_[t])))
        return bad("a token index entry with inconsistent crossings");
      if (!std::all_of(ix->cross_nodes.begin(), ix->cross_nodes.end(), valid_node) ||
          !std::all_of(ix->cross_states.begin(), ix->cross_states.end(), [&](uint32_t s) { return s < states; }))
        return bad("a token index crossing out of range");
      if (const char* why = check_into(ix->into)) return bad(why);
      index->share_sets(*ix);
      std::call_once(slot.once, [&] {
        index->built_bytes_.fetch_add(entry_bytes(*ix), std::memory_order_relaxed);
        slot.value = index->own(std::move(ix));
      });
    }
  }
  index->complete_.store(true, std::memory_order_release);
  return index;
}

}  // namespace cgram

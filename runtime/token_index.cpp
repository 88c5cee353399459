#include "token_index.h"

#include <algorithm>

namespace cgram {

TokenIndex::TokenIndex(const ir::LexicalGrammar& lexical, const VocabTrie& trie, size_t mask_words)
    : lexical_(lexical), trie_(trie), words_(mask_words) {
  for (const ir::LexTerminal& t : lexical.terminals) {
    offset_.push_back(slot_count_);
    slot_count_ += t.dfa.size();
  }
  slots_ = std::make_unique<Slot[]>(slot_count_);
}

std::unique_ptr<StateIndex> TokenIndex::build(uint32_t root, uint32_t terminal, uint32_t state) const {
  auto out = std::make_unique<StateIndex>();
  out->inside.assign(words_, 0);
  const ir::Dfa& dfa = lexical_.terminals[terminal].dfa;
  const uint32_t base = trie_.depth(root);
  std::vector<uint32_t> at(trie_.max_depth() + 2);
  std::vector<std::pair<uint8_t, uint32_t>> crossing;  // (byte, node after the end)
  at[0] = state;
  for (uint32_t node = root + 1; node < trie_.subtree_end(root);) {
    const uint32_t d = trie_.depth(node) - base;
    const uint32_t before = at[d - 1];
    // The lexeme may end before this node's byte (not before the token).
    // (At the root of the whole trie that would be before the token: the
    // matcher handles that case itself.)
    if ((root != 0 || d > 1) && dfa.accepting(before)) crossing.emplace_back(trie_.byte(node), node);
    const uint32_t q = dfa.next(before, trie_.byte(node));
    if (q == ir::Dfa::kDead) {
      node = trie_.subtree_end(node);
      continue;
    }
    at[d] = q;
    for (uint32_t id : trie_.tokens(node)) out->inside[id / 32] |= 1u << (id % 32);
    ++node;
  }
  std::stable_sort(crossing.begin(), crossing.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  out->cross_begin.assign(257, 0);
  for (auto [b, node] : crossing) ++out->cross_begin[b + 1];
  for (int b = 0; b < 256; ++b) out->cross_begin[b + 1] += out->cross_begin[b];
  for (auto [b, node] : crossing) out->cross_nodes.push_back(node);
  out->inside.shrink_to_fit();
  return out;
}

const StateIndex& TokenIndex::get(uint32_t terminal, uint32_t state) const {
  Slot& slot = slots_[offset_[terminal] + state];
  std::call_once(slot.once, [&] { slot.value = build(0, terminal, state); });
  return *slot.value;
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

const std::vector<uint32_t>& TokenIndex::inside_from_start(const std::vector<uint32_t>& terminals) const {
  {
    std::lock_guard lock(union_mutex_);
    if (auto it = unions_.find(terminals); it != unions_.end()) return *it->second;
  }
  auto bits = std::make_unique<std::vector<uint32_t>>(words_, 0);
  for (uint32_t t : terminals) {
    const ir::LexTerminal& term = lexical_.terminals[t];
    if (term.kind == ir::LexTerminal::Kind::AnyToken) continue;
    const StateIndex& ix = get(t, term.dfa.start());
    for (size_t w = 0; w < words_; ++w) (*bits)[w] |= ix.inside[w];
  }
  std::lock_guard lock(union_mutex_);
  auto [it, inserted] = unions_.emplace(terminals, std::move(bits));
  return *it->second;
}

void TokenIndex::build_all() const {
  for (uint32_t t = 0; t < lexical_.terminals.size(); ++t)
    for (uint32_t q = 0; q < lexical_.terminals[t].dfa.size(); ++q) get(t, q);
}

size_t TokenIndex::memory_bytes() const {
  size_t bytes = slot_count_ * sizeof(Slot);
  for (size_t i = 0; i < slot_count_; ++i)
    if (slots_[i].value)
      bytes += (slots_[i].value->inside.capacity() + slots_[i].value->cross_nodes.capacity() + 257) * 4;
  {
    std::lock_guard lock(subtree_mutex_);
    for (const auto& [key, ix] : subtrees_) bytes += (ix->inside.capacity() + ix->cross_nodes.capacity() + 257) * 4;
  }
  std::lock_guard lock(union_mutex_);
  for (const auto& [key, bits] : unions_) bytes += bits->capacity() * 4 + key.capacity() * 4;
  return bytes;
}

}  // namespace cgram

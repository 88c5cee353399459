#include "except_automaton.h"

#include <algorithm>
#include <array>
#include <map>

#include "utf8_dfa.h"

namespace cgram::ir {

ExceptAutomaton::ExceptAutomaton(std::span<const std::string> strings)
    : strings_(strings.begin(), strings.end()) {
  // Sorted and unique: the strings through a trie node are then a range.
  std::sort(strings_.begin(), strings_.end());
  strings_.erase(std::unique(strings_.begin(), strings_.end()), strings_.end());
  // Trie of S.
  struct Node {
    std::map<uint8_t, uint32_t> children;
    uint32_t fail = 0;
    bool terminal = false;  // some string of S ends here (or at a suffix)
  };
  std::vector<Node> nodes(1);
  trie_.assign(1, TrieNode{0, 0, 0, static_cast<uint32_t>(strings_.size())});
  for (uint32_t i = 0; i < strings_.size(); ++i) {
    uint32_t at = 0;
    for (char c : strings_[i]) {
      uint8_t b = static_cast<uint8_t>(c);
      auto it = nodes[at].children.find(b);
      if (it == nodes[at].children.end()) {
        nodes.push_back({});
        trie_.push_back(TrieNode{0, trie_[at].depth + 1, i, i + 1});
        it = nodes[at].children.emplace(b, static_cast<uint32_t>(nodes.size() - 1)).first;
      }
      at = it->second;
      trie_[at].last = i + 1;  // strings come sorted: the range only grows
    }
    nodes[at].terminal = true;
  }
  // Failure links in BFS order; the goto function becomes a full DFA.
  std::vector<std::array<uint32_t, 256>> go(nodes.size());
  std::vector<uint32_t> order{0};
  for (int b = 0; b < 256; ++b) {
    auto it = nodes[0].children.find(static_cast<uint8_t>(b));
    go[0][b] = it == nodes[0].children.end() ? 0 : it->second;
  }
  for (auto [b, child] : nodes[0].children) order.push_back(child);
  for (size_t i = 1; i < order.size(); ++i) {
    uint32_t u = order[i];
    nodes[u].terminal = nodes[u].terminal || nodes[nodes[u].fail].terminal;
    for (int b = 0; b < 256; ++b) {
      auto it = nodes[u].children.find(static_cast<uint8_t>(b));
      if (it == nodes[u].children.end()) {
        go[u][b] = go[nodes[u].fail][b];
      } else {
        nodes[it->second].fail = go[nodes[u].fail][b];
        go[u][b] = it->second;
        order.push_back(it->second);
      }
    }
  }
  // The DFA is the product of the Aho–Corasick automaton (no whole
  // occurrence yet) and the UTF-8 automaton (the text is valid UTF-8):
  // state (u, c) for trie node u and character state c, accepting between
  // characters. States that cannot reach acceptance are dead.
  if (nodes[0].terminal) return;  // the empty string is in S: nothing is allowed
  auto step = [&](uint32_t u, utf8::State c, uint8_t b) -> std::pair<uint32_t, utf8::State> {
    const utf8::State c2 = utf8::step(c, b);
    const uint32_t v = go[u][b];
    if (nodes[v].terminal || c2 == utf8::kInvalid) return {UINT32_MAX, c2};
    return {v, c2};
  };
  // Forward from the starts: (root, boundary), and (root, c) for a text that
  // begins inside a character. A suffix that begins a string of S begins at
  // a character, so the trie node mostly fixes the character state and the
  // product stays about the size of the trie.
  const size_t product_size = nodes.size() * utf8::kStateCount;
  auto product = [](uint32_t u, utf8::State c) { return u * utf8::kStateCount + c; };
  std::vector<uint32_t> index_of(product_size, UINT32_MAX);
  std::vector<uint32_t> reached;
  auto reach = [&](uint32_t q) {
    if (index_of[q] != UINT32_MAX) return;
    index_of[q] = static_cast<uint32_t>(reached.size());
    reached.push_back(q);
  };
  for (utf8::State c = 0; c < utf8::kStateCount; ++c) reach(product(0, c));
  std::vector<std::array<uint32_t, 256>> next;  // by index, to an index or kDead
  for (size_t i = 0; i < reached.size(); ++i) {
    const uint32_t u = reached[i] / utf8::kStateCount;
    const utf8::State c = static_cast<utf8::State>(reached[i] % utf8::kStateCount);
    std::array<uint32_t, 256> row;
    for (int b = 0; b < 256; ++b) {
      auto [v, c2] = step(u, c, static_cast<uint8_t>(b));
      row[b] = Dfa::kDead;
      if (v == UINT32_MAX) continue;
      reach(product(v, c2));
      row[b] = index_of[product(v, c2)];
    }
    next.push_back(row);
  }
  // Backward from acceptance (a live trie node between characters).
  std::vector<std::vector<uint32_t>> reverse(reached.size());
  for (uint32_t i = 0; i < reached.size(); ++i)
    for (uint32_t target : next[i])
      if (target != Dfa::kDead) reverse[target].push_back(i);
  std::vector<bool> live(reached.size(), false);
  std::vector<uint32_t> work;
  for (uint32_t i = 0; i < reached.size(); ++i)
    if (reached[i] % utf8::kStateCount == utf8::kBoundary) live[i] = true, work.push_back(i);
  while (!work.empty()) {
    const uint32_t q = work.back();
    work.pop_back();
    for (uint32_t p : reverse[q])
      if (!live[p]) live[p] = true, work.push_back(p);
  }
  if (!live[0]) return;  // nothing can follow a whole character
  std::vector<uint32_t> state_of(reached.size(), Dfa::kDead);
  for (uint32_t i = 0; i < reached.size(); ++i) {
    if (!live[i]) continue;
    state_of[i] = dfa_.add_state(reached[i] % utf8::kStateCount == utf8::kBoundary);
    node_of_.push_back(reached[i] / utf8::kStateCount);
    utf8_state_.push_back(static_cast<uint8_t>(reached[i] % utf8::kStateCount));
  }
  dfa_.set_start(state_of[0]);
  for (utf8::State c = 0; c < utf8::kStateCount; ++c) start_in_char_[c] = state_of[c];  // reached in order
  for (uint32_t i = 0; i < reached.size(); ++i) {
    if (!live[i]) continue;
    for (int b = 0; b < 256; ++b) {
      const uint32_t target = next[i][b];
      dfa_.set(state_of[i], static_cast<uint8_t>(b), target == Dfa::kDead ? Dfa::kDead : state_of[target]);
    }
  }
  for (uint32_t u = 1; u < nodes.size(); ++u) trie_[u].fail = nodes[u].fail;
}

// Every suffix of w that is a proper prefix of a string of S is pending:
// they are exactly the nodes on the failure chain of w's trie node. Worked
// out when asked (the engine asks once per state it meets and keeps the
// answer), because all of them at once grow with the cube of the strings'
// length.
std::vector<std::string> ExceptAutomaton::pending(uint32_t state) const {
  std::vector<std::string> out;
  if (state >= node_of_.size()) return out;
  for (uint32_t v = node_of_[state]; v != 0 && v < trie_.size(); v = trie_[v].fail) {
    const TrieNode& node = trie_[v];
    for (uint32_t i = node.first; i < node.last && i < strings_.size(); ++i)
      if (strings_[i].size() > node.depth) out.push_back(strings_[i].substr(node.depth));
    if (trie_[node.fail].depth >= node.depth) break;  // failure links always lead up
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace cgram::ir

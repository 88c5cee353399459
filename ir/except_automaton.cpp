#include "except_automaton.h"

#include <algorithm>
#include <array>
#include <map>

namespace cgram::ir {

ExceptAutomaton::ExceptAutomaton(std::span<const std::string> strings)
    : strings_(strings.begin(), strings.end()) {
  // Trie of S.
  struct Node {
    std::map<uint8_t, uint32_t> children;
    uint32_t fail = 0;
    bool terminal = false;  // some string of S ends here (or at a suffix)
    std::string text;
  };
  std::vector<Node> nodes(1);
  for (const std::string& s : strings_) {
    uint32_t at = 0;
    for (char c : s) {
      uint8_t b = static_cast<uint8_t>(c);
      auto it = nodes[at].children.find(b);
      if (it == nodes[at].children.end()) {
        nodes.push_back({});
        nodes.back().text = nodes[at].text + c;
        it = nodes[at].children.emplace(b, static_cast<uint32_t>(nodes.size() - 1)).first;
      }
      at = it->second;
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
  // Non-terminal trie nodes are the DFA's states (all accepting).
  std::vector<uint32_t> state_of(nodes.size(), Dfa::kDead);
  for (uint32_t u = 0; u < nodes.size(); ++u)
    if (!nodes[u].terminal) state_of[u] = dfa_.add_state(true);
  if (state_of[0] == Dfa::kDead) return;  // the empty string is in S: nothing is allowed
  dfa_.set_start(state_of[0]);
  pending_.resize(dfa_.size());
  for (uint32_t u = 0; u < nodes.size(); ++u) {
    if (state_of[u] == Dfa::kDead) continue;
    for (int b = 0; b < 256; ++b) dfa_.set(state_of[u], static_cast<uint8_t>(b), state_of[go[u][b]]);
    // Every suffix of w that is a proper prefix of a string of S is pending;
    // they are exactly the nodes on u's failure chain.
    std::vector<std::string>& pend = pending_[state_of[u]];
    for (uint32_t v = u; v != 0; v = nodes[v].fail) {
      const std::string& prefix = nodes[v].text;
      for (const std::string& s : strings_)
        if (s.size() > prefix.size() && s.compare(0, prefix.size(), prefix) == 0)
          pend.push_back(s.substr(prefix.size()));
    }
    std::sort(pend.begin(), pend.end());
    pend.erase(std::unique(pend.begin(), pend.end()), pend.end());
  }
}

}  // namespace cgram::ir

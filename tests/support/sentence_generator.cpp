#include "sentence_generator.h"

#include <algorithm>

namespace cgram::test {

namespace {
constexpr uint32_t kInfinite = UINT32_MAX / 2;
}

SentenceGenerator::SentenceGenerator(const ir::GrammarIR& ir, uint64_t seed) : ir_(ir), rng_(seed) {
  height_.assign(ir.nonterminals.size(), kInfinite);
  production_height_.assign(ir.productions.size(), kInfinite);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t p = 0; p < ir.productions.size(); ++p) {
      uint32_t h = 1;
      for (ir::Symbol s : ir.productions[p].rhs)
        if (s.kind == ir::Symbol::Kind::Nonterminal) h = std::max(h, height_[s.index] + 1);
      production_height_[p] = std::min(h, kInfinite);
      uint32_t lhs = ir.productions[p].lhs;
      if (h < height_[lhs]) height_[lhs] = h, changed = true;
    }
  }
  distances_.resize(ir.terminals.size());
}

std::string SentenceGenerator::generate(size_t depth) {
  std::string out;
  nonterminal(ir_.start, depth, out);
  return out;
}

void SentenceGenerator::nonterminal(uint32_t n, size_t depth, std::string& out) {
  const auto& prods = ir_.nonterminals[n].productions;
  uint32_t chosen;
  if (depth == 0) {
    chosen = *std::min_element(prods.begin(), prods.end(), [&](uint32_t a, uint32_t b) {
      return production_height_[a] < production_height_[b];
    });
  } else {
    std::vector<uint32_t> finite;
    for (uint32_t p : prods)
      if (production_height_[p] < kInfinite) finite.push_back(p);
    chosen = finite[std::uniform_int_distribution<size_t>(0, finite.size() - 1)(rng_)];
  }
  for (ir::Symbol s : ir_.productions[chosen].rhs) {
    switch (s.kind) {
      case ir::Symbol::Kind::Nonterminal: nonterminal(s.index, depth ? depth - 1 : 0, out); break;
      case ir::Symbol::Kind::Terminal: terminal(s.index, out); break;
      case ir::Symbol::Kind::AnyToken: {
        size_t length = std::uniform_int_distribution<size_t>(1, 4)(rng_);
        for (size_t i = 0; i < length; ++i) out += static_cast<char>('a' + rng_() % 26);
        break;
      }
      case ir::Symbol::Kind::Except: except(s.index, out); break;
    }
  }
}

const std::vector<uint32_t>& SentenceGenerator::distance_to_accept(uint32_t t) {
  std::vector<uint32_t>& d = distances_[t];
  if (!d.empty()) return d;
  const ir::Dfa& dfa = ir_.terminals[t].dfa;
  d.assign(dfa.size(), kInfinite);
  for (uint32_t s = 0; s < dfa.size(); ++s)
    if (dfa.accepting(s)) d[s] = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t s = 0; s < dfa.size(); ++s)
      for (int b = 0; b < 256; ++b) {
        uint32_t next = dfa.next(s, static_cast<uint8_t>(b));
        if (next != ir::Dfa::kDead && d[next] + 1 < d[s]) d[s] = d[next] + 1, changed = true;
      }
  }
  return d;
}

void SentenceGenerator::terminal(uint32_t t, std::string& out) {
  const ir::Dfa& dfa = ir_.terminals[t].dfa;
  const std::vector<uint32_t>& distance = distance_to_accept(t);
  uint32_t state = dfa.start();
  for (size_t length = 0;; ++length) {
    std::vector<uint8_t> live, closer;
    for (int b = 0; b < 256; ++b) {
      uint32_t next = dfa.next(state, static_cast<uint8_t>(b));
      if (next == ir::Dfa::kDead) continue;
      live.push_back(static_cast<uint8_t>(b));
      if (distance[next] < distance[state]) closer.push_back(static_cast<uint8_t>(b));
    }
    bool stop = dfa.accepting(state) && (live.empty() || rng_() % 3 == 0 || length > 12);
    if (stop) return;
    const std::vector<uint8_t>& pick = length > 12 && !closer.empty() ? closer : live;
    uint8_t b = pick[std::uniform_int_distribution<size_t>(0, pick.size() - 1)(rng_)];
    out += static_cast<char>(b);
    state = dfa.next(state, b);
  }
}

void SentenceGenerator::except(uint32_t e, std::string& out) {
  // Characters that begin no string of S: no occurrence can start inside w.
  std::string safe;
  for (char c : std::string("abcdefghijklmnopqrstuvwxyz ABC0123456789")) {
    bool starts = false;
    for (const std::string& s : ir_.excepts[e].strings) starts = starts || s[0] == c;
    if (!starts) safe += c;
  }
  size_t length = std::uniform_int_distribution<size_t>(0, 6)(rng_);
  for (size_t i = 0; i < length && !safe.empty(); ++i) out += safe[rng_() % safe.size()];
}

}  // namespace cgram::test

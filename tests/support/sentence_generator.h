#pragma once
// Random sentences of a grammar, for property tests: derived from the IR
// (terminals by random walks on their DFAs), so they are in the language by
// construction and say nothing about the oracle's own expansion.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "grammar_ir.h"

namespace cgram::test {

class SentenceGenerator {
 public:
  SentenceGenerator(const ir::GrammarIR& ir, uint64_t seed);
  // A random sentence; derivations deeper than `depth` take the shortest way out.
  std::string generate(size_t depth = 12);

 private:
  void nonterminal(uint32_t n, size_t depth, std::string& out);
  void terminal(uint32_t t, std::string& out);
  void except(uint32_t e, std::string& out);
  const std::vector<uint32_t>& distance_to_accept(uint32_t t);

  const ir::GrammarIR& ir_;
  std::mt19937_64 rng_;
  std::vector<uint32_t> height_;             // per nonterminal: shortest derivation depth
  std::vector<uint32_t> production_height_;  // per production
  std::vector<std::vector<uint32_t>> distances_;
};

}  // namespace cgram::test

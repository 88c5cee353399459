#pragma once
// The oracle's brute-force mask: for every token, ask the reference
// recognizer whether the consumed tokens plus that token are a viable prefix
// (end of sequence: whether they are complete). The vocabulary trie shares
// the work of common prefixes; nothing of the matcher is used.
#include <memory>
#include <vector>

#include "oracle.h"
#include "vocab_trie.h"
#include "vocabulary.h"

namespace cgram::test {

class OracleMasker {
 public:
  OracleMasker(std::shared_ptr<const oracle::OracleGrammar> grammar, std::shared_ptr<const Vocabulary> vocab);

  // The allowed tokens after `history`, as a mask of ceil(vocab/32) words.
  std::vector<uint32_t> mask(const std::vector<uint32_t>& history);

 private:
  std::shared_ptr<const oracle::OracleGrammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  const VocabTrie& trie_;
  bool token_sensitive_;  // any! or except! counts: token boundaries matter
};

}  // namespace cgram::test

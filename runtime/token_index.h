#pragma once
// The token index: for each lexer DFA state, every token classified by one
// walk of the vocabulary trie (Outlines' index, XGrammar's context-
// independent cache):
//  - inside: all its bytes stay inside the terminal, which can still end
//    after them — allowed whatever the parse stack (a bitset);
//  - crossing: the terminal can end at a trie node with more bytes below it;
//    those suffixes depend on the parser and are walked at run time (the
//    crossing nodes share their prefixes in the trie);
//  - dead: everything else.
// Entries are built on first use (thread-safe) or all at once (eager).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "lexical.h"
#include "vocab_trie.h"

namespace cgram {

struct StateIndex {
  std::vector<uint32_t> inside;  // mask words
  // Where the terminal may end mid-token: the trie nodes just after such an
  // end, grouped by their byte (the first byte of the next lexeme), so that
  // a byte no next lexeme can start with costs nothing at run time.
  std::vector<uint32_t> cross_begin;  // 257 offsets into cross_nodes, by byte
  std::vector<uint32_t> cross_nodes;
  bool crosses() const { return !cross_nodes.empty(); }
  std::span<const uint32_t> crossing(uint8_t byte) const {
    return {cross_nodes.data() + cross_begin[byte], cross_nodes.data() + cross_begin[byte + 1]};
  }
};

class TokenIndex {
 public:
  TokenIndex(const ir::LexicalGrammar& lexical, const VocabTrie& trie, size_t mask_words);

  const StateIndex& get(uint32_t terminal, uint32_t state) const;
  // The same for the tokens below trie node `root`, reading their bytes
  // after root's depth (cached for subtrees of at least kSubtreeMin nodes).
  static constexpr uint32_t kSubtreeMin = 256;
  const StateIndex& get_subtree(uint32_t root, uint32_t terminal, uint32_t state) const;
  // Union of the inside sets of these terminals from their start states.
  const std::vector<uint32_t>& inside_from_start(const std::vector<uint32_t>& terminals) const;
  // Builds every entry now (AOT and eager JIT compilation).
  void build_all() const;
  size_t memory_bytes() const;

 private:
  struct Slot {
    std::once_flag once;
    std::unique_ptr<StateIndex> value;
  };
  std::unique_ptr<StateIndex> build(uint32_t root, uint32_t terminal, uint32_t state) const;

  const ir::LexicalGrammar& lexical_;
  const VocabTrie& trie_;
  size_t words_;
  std::vector<size_t> offset_;  // first slot of each terminal
  std::unique_ptr<Slot[]> slots_;
  size_t slot_count_ = 0;
  mutable std::mutex subtree_mutex_;
  mutable std::unordered_map<uint64_t, std::unique_ptr<StateIndex>> subtrees_;
  mutable std::mutex union_mutex_;
  mutable std::map<std::vector<uint32_t>, std::unique_ptr<std::vector<uint32_t>>> unions_;
};

}  // namespace cgram

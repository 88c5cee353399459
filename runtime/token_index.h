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
#include <vector>

#include "lexical.h"
#include "vocab_trie.h"

namespace cgram {

struct StateIndex {
  std::vector<uint32_t> inside;    // mask words
  std::vector<uint32_t> crossing;  // trie nodes where the terminal may end mid-token
};

class TokenIndex {
 public:
  TokenIndex(const ir::LexicalGrammar& lexical, const VocabTrie& trie, size_t mask_words);

  const StateIndex& get(uint32_t terminal, uint32_t state) const;
  // Union of the inside sets of these terminals from their start states.
  const std::vector<uint32_t>& inside_from_start(const std::vector<uint32_t>& terminals) const;
  // Builds every entry now (AOT and eager JIT compilation).
  void build_all() const;
  size_t built_entries() const;
  size_t memory_bytes() const;

 private:
  struct Slot {
    std::once_flag once;
    std::unique_ptr<StateIndex> value;
  };
  std::unique_ptr<StateIndex> build(uint32_t terminal, uint32_t state) const;

  const ir::LexicalGrammar& lexical_;
  const VocabTrie& trie_;
  size_t words_;
  std::vector<size_t> offset_;  // first slot of each terminal
  std::unique_ptr<Slot[]> slots_;
  size_t slot_count_ = 0;
  mutable std::mutex union_mutex_;
  mutable std::map<std::vector<uint32_t>, std::unique_ptr<std::vector<uint32_t>>> unions_;
};

}  // namespace cgram

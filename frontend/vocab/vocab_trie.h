#pragma once
// The vocabulary as a trie of token bytes, laid out in depth-first preorder:
// a node's subtree is the contiguous range [node, subtree_end). Walking the
// trie is then a loop over an array that skips dead subtrees in one step.
// Special tokens are left out: text never produces them.
#include <cstdint>
#include <span>
#include <vector>

#include "vocabulary.h"

namespace cgram {

class VocabTrie {
 public:
  explicit VocabTrie(const Vocabulary& vocab);

  // Node 0 is the root (the empty prefix).
  size_t size() const { return byte_.size(); }
  uint8_t byte(uint32_t node) const { return byte_[node]; }  // the edge into the node
  uint32_t depth(uint32_t node) const { return depth_[node]; }
  uint32_t subtree_end(uint32_t node) const { return end_[node]; }
  // Token ids whose bytes are exactly this node's prefix.
  std::span<const uint32_t> tokens(uint32_t node) const {
    return {ids_.data() + token_begin_[node], ids_.data() + token_begin_[node + 1]};
  }
  uint32_t max_depth() const { return max_depth_; }
  // The arrays behind the accessors above, indexed by node, for loops over
  // many nodes (the token index's walks): no bounds or size reloads.
  struct Arrays {
    const uint8_t* byte;
    const uint32_t* depth;
    const uint32_t* end;
    const uint32_t* token_begin;  // a node's tokens are ids[token_begin[n] .. token_begin[n + 1])
    const uint32_t* ids;
  };
  Arrays arrays() const { return {byte_.data(), depth_.data(), end_.data(), token_begin_.data(), ids_.data()}; }
  size_t memory_bytes() const {
    return byte_.capacity() + (depth_.capacity() + end_.capacity() + token_begin_.capacity() + ids_.capacity()) * 4;
  }

 private:
  std::vector<uint8_t> byte_;
  std::vector<uint32_t> depth_, end_, token_begin_, ids_;
  uint32_t max_depth_ = 0;
};

}  // namespace cgram

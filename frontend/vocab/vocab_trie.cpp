#include "vocab_trie.h"

#include <algorithm>

namespace cgram {

VocabTrie::VocabTrie(const Vocabulary& vocab) {
  std::vector<uint32_t> order;
  for (uint32_t id = 0; id < vocab.size(); ++id)
    if (!vocab.is_special(id)) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return vocab.bytes(a) < vocab.bytes(b); });
  // Counted first so that every array is allocated once at its exact size:
  // growing by doubling would cost up to twice the memory at its peak. The
  // count is at most the vocabulary's total token bytes plus one, which the
  // loaders bound (VocabularyOptions::max_total_token_bytes).
  size_t nodes = 1, max_length = 0;
  {
    std::string_view previous;
    for (uint32_t id : order) {
      std::string_view bytes = vocab.bytes(id);
      size_t common = 0;
      while (common < previous.size() && common < bytes.size() && previous[common] == bytes[common]) ++common;
      nodes += bytes.size() - common;
      max_length = std::max(max_length, bytes.size());
      previous = bytes;
    }
  }
  byte_.reserve(nodes);
  depth_.reserve(nodes);
  end_.reserve(nodes);
  token_begin_.reserve(nodes + 1);
  ids_.reserve(order.size());
  // Root.
  byte_.push_back(0);
  depth_.push_back(0);
  end_.push_back(0);
  token_begin_.push_back(0);
  std::vector<uint32_t> path{0};  // node ids along the current prefix
  path.reserve(max_length + 1);
  std::string_view prefix;
  for (uint32_t id : order) {
    std::string_view bytes = vocab.bytes(id);
    // Common prefix with the current path.
    size_t common = 0;
    while (common < prefix.size() && common < bytes.size() && prefix[common] == bytes[common]) ++common;
    for (size_t d = path.size() - 1; d > common; --d) end_[path[d]] = static_cast<uint32_t>(byte_.size());
    path.resize(common + 1);
    for (size_t d = common; d < bytes.size(); ++d) {
      byte_.push_back(static_cast<uint8_t>(bytes[d]));
      depth_.push_back(static_cast<uint32_t>(d + 1));
      end_.push_back(0);
      token_begin_.push_back(static_cast<uint32_t>(ids_.size()));
      path.push_back(static_cast<uint32_t>(byte_.size() - 1));
    }
    ids_.push_back(id);
    prefix = bytes;
    max_depth_ = std::max<uint32_t>(max_depth_, static_cast<uint32_t>(bytes.size()));
  }
  for (uint32_t node : path) end_[node] = static_cast<uint32_t>(byte_.size());
  token_begin_.push_back(static_cast<uint32_t>(ids_.size()));
}

}  // namespace cgram

#pragma once
// The merge derivations canonical mode reads (CanonicalPairs::Merges), in a
// header of their own: canonical.cpp builds and reads them, canonical_io.cpp
// saves and loads them.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "canonical.h"

namespace cgram {

// The merge derivations of the whole vocabulary, built once: each token's
// right edge, the tokens by the symbols on their left edges, and the merges
// from right-edge symbols to left-edge ones.
struct CanonicalPairs::Merges {
  // A merge key as its place in the order of all keys (equal keys, equal
  // times): before every merge (a unit), after every merge (never).
  using Time = uint32_t;
  static constexpr Time kFromStart = 0, kNever = UINT32_MAX;
  struct Edge {
    uint32_t id;    // a symbol, or a token
    Time made;      // the merge that made the symbol (kFromStart for a unit)
    Time consumed;  // the merge that joins the symbol to the rest of its token
  };
  struct Step {
    uint32_t symbol;
    Time key;
  };
  // Per token.
  std::vector<uint8_t> flags;
  static constexpr uint8_t kSafe = 1;        // the fast path applies to it
  static constexpr uint8_t kMergesGive = 2;  // merging its units gives it
  static constexpr uint8_t kPieceGives = 4;  // encoding it as one piece gives it
  // Not safe, but the first bytes of a character that merging gives (its
  // left edge is in loose_left).
  static constexpr uint8_t kCutMergesGive = 8;
  std::vector<uint32_t> group;               // its first character's group
  std::vector<std::string> group_text;       // each group's character
  std::vector<uint32_t> right_begin;         // right edges: right[right_begin[t], right_begin[t + 1])
  std::vector<Edge> right;
  // Per symbol: the tokens with it on their left edge (most lasting
  // first), and the merges it makes as the left side.
  std::vector<uint32_t> left_begin, merges_begin;
  std::vector<Edge> left;
  std::vector<Step> merges;
  std::vector<uint32_t> always_candidate;  // tokens every pair of which goes to the encoder
  // Tokens whose merges are not monotone (a merge made after one of a
  // higher key): their edges' keys say nothing of when, so as next tokens
  // they are candidates wherever a merge joins any symbol on the previous
  // token's right edge to any on theirs (untimed, by symbol); as previous
  // tokens their rows go to the encoder (always_candidate_prev).
  std::vector<uint32_t> loose_left_begin;
  std::vector<Edge> loose_left;  // consumed: the edge's gone_by (most lasting first)
  std::vector<uint32_t> always_candidate_prev;
  // Per text token A: the text tokens B whose bytes after A's are a token
  // (joined[joined_begin[A], joined_begin[A + 1])).
  std::vector<uint32_t> joined_begin, joined;
  // The same for the B that end inside a character, where A, B and the
  // bytes that finish it are a token.
  std::vector<uint32_t> joined_cut_begin, joined_cut;
  std::vector<std::string> added;          // the added tokens' texts
  std::array<bool, 256> added_first{};     // the bytes they start with

  // Whether an added token's text is in `text`, or begins at its end: the
  // encoder cuts those out before the pre-tokenizer runs.
  bool mentions_added(std::string_view text) const {
    if (std::none_of(text.begin(), text.end(), [&](char c) { return added_first[static_cast<uint8_t>(c)]; }))
      return false;
    for (const std::string& a : added) {
      if (text.find(a) != std::string_view::npos) return true;
      for (size_t i = text.size() > a.size() ? text.size() - a.size() : 0; i < text.size(); ++i)
        if (std::string_view(a).starts_with(text.substr(i))) return true;
    }
    return false;
  }

  bool has(uint32_t t, uint8_t flag) const { return flags[t] & flag; }

  void note_added_tokens(const Vocabulary& vocab) {
    for (const auto& [text, id] : vocab.encoder_data().added_tokens)
      if (!text.empty()) {
        added.push_back(text);
        added_first[static_cast<uint8_t>(text[0])] = true;
      }
  }
};

}  // namespace cgram

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
//
// Why an entry depends on the lexer state alone. While a lexeme of terminal
// T is in progress the parser is not consulted: T's DFA alone decides
// whether the next byte continues it. So whether a token stays inside the
// lexeme is a function of (T, q) and the token's bytes, and one walk of the
// trie from q, pruned where the DFA dies, classifies every token at once
// (one DFA step per trie edge, shared by all tokens below it). A token is
// inside when the DFA does not die on its bytes: in a minimal DFA every live
// state can still reach an accepting one, so the lexeme may end later; the
// stack is asked only when the lexeme ends, which is the crossing case. At a
// crossing the walk records the trie node after the end (by the byte that
// must start the next lexeme), and for whole-vocabulary entries it also
// follows each next terminal U's DFA below it: the tokens whose rest stays
// inside U (CrossInto) are allowed exactly when U can be shifted after T,
// which the engine knows from the stack (engine/mask_walks.cpp). A token
// that crosses U's end too is classified again by the terminal after U,
// and so on up to CrossInto::kMaxCrossings ends; past that it is left to
// the engine's walk from the recorded place. A level does not depend on
// where in the token the lexeme before it ended: the parser state after a
// lexeme is the same wherever it ends. Nothing in an entry is a guess: each bit is a fact about the
// token's bytes and T's and U's automata, and the engine supplies what the
// stack decides.
#include <atomic>
#include <bitset>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "binary_io.h"
#include "lexical.h"
#include "token_set.h"
#include "vocab_trie.h"

namespace cgram {

// Tokens that cross out of the lexeme into a next lexeme of terminal U,
// precomputed (for whole-vocabulary entries): the parser state after the
// lexeme ends is the same wherever in the token it ends, so at run time the
// tokens whose rest stays inside U are allowed exactly when U can be
// shifted then — one OR.
//
// Tokens that cross U's end too are classified the same way, one level
// down (`next`: by the terminal after U), and so on for up to
// kMaxCrossings lexeme ends: a token such as ");\n" is then one OR under
// the parse check of its terminal sequence, made once per sequence and not
// once per token. Past that depth, or where U may be followed by a lexeme
// whose tokens depend on more than their bytes (except!, any!), they are
// walked from the recorded places where U may end (`second`).
struct CrossInto {
  static constexpr int kMaxCrossings = 3;
  uint32_t terminal = 0;
  TokenSet tokens;  // the tokens whose rest stays inside U
  std::vector<CrossInto> next;  // the tokens that cross U's end as well, by the terminal after U
  struct Second {
    uint32_t state;  // U's DFA state, accepting, before `node`'s byte
    uint32_t node;   // the trie node whose byte starts the lexeme after U
  };
  std::vector<Second> second;  // sorted by (state, byte); empty where `next` classifies them
};

struct StateIndex {
  TokenSet inside;
  // Whether the terminal may end mid-token somewhere below, before a byte
  // that a lexeme which may follow it starts with (an end before any other
  // byte leads nowhere, and is not recorded).
  bool ends_inside = false;
  // Where: the trie nodes just after such an end, grouped by their byte (the
  // first byte of the next lexeme). The walks read them; a whole-vocabulary
  // entry whose terminal is followed by byte terminals only has every such
  // token classified in `into`, and keeps none (for an identifier they are
  // most of the trie's nodes: without them Python's grammar went from 60 to
  // 7.6 MB, docs/BENCHMARKS.md).
  std::vector<uint32_t> cross_begin;  // 257 offsets into cross_nodes, by byte (empty with cross_nodes)
  std::vector<uint32_t> cross_nodes;
  std::vector<uint32_t> cross_states;  // per crossing node: the terminal's state where it ends (sorted within a byte)
  std::vector<CrossInto> into;  // by next terminal; whole-vocabulary entries only
  bool crosses() const { return ends_inside; }
  // The crossing nodes whose byte is `byte` (none where the entry keeps none).
  std::span<const uint32_t> crossing(uint8_t byte) const {
    if (cross_nodes.empty()) return {};
    return {cross_nodes.data() + cross_begin[byte], cross_nodes.data() + cross_begin[byte + 1]};
  }
};

class TokenIndex {
 public:
  // followers[t]: the terminals that may come right after a lexeme of t (a
  // superset is fine: the matcher checks the parser).
  TokenIndex(const ir::LexicalGrammar& lexical, const VocabTrie& trie, size_t mask_words,
             std::vector<std::vector<uint32_t>> followers);

  const StateIndex& get(uint32_t terminal, uint32_t state) const;
  // The same for the tokens below trie node `root`, reading their bytes
  // after root's depth (cached for subtrees of at least kSubtreeMin nodes).
  static constexpr uint32_t kSubtreeMin = 256;
  // A terminal whose DFA has kLazyClassesMin states or more shares the
  // entries of states alike (walk_classes) on the lazy index too, once
  // kLazyClassesAfter of its entries have been walked one by one.
  static constexpr size_t kLazyClassesMin = 64;
  static constexpr size_t kLazyClassesAfter = 4;
  const StateIndex& get_subtree(uint32_t root, uint32_t terminal, uint32_t state) const;
  // Union of the inside sets of these terminals from their start states, as
  // mask words (ORed into every mask between lexemes), from the second time
  // it is asked for; null the first time, and the caller ORs the terminals'
  // own sets (inside_from_start_parts). A union made for a context met once
  // was 16 KB of fresh pages, more than the few ORs it saves. `now`: made
  // the first time too (a GPU fill hands whole sets over, the fewer the
  // better).
  const std::vector<uint32_t>* inside_from_start(const std::vector<uint32_t>& terminals, bool now = false) const;
  // The sets that union is made of.
  template <class F>
  void inside_from_start_parts(const std::vector<uint32_t>& terminals, F each) const {
    for (uint32_t t : terminals)
      if (lexical_.terminals[t].kind != ir::LexTerminal::Kind::AnyToken)
        each(get(t, lexical_.terminals[t].dfa.start()).inside);
  }
  // Bytes that can start a lexeme right after one of `terminal`.
  const std::bitset<256>& follower_first_bytes(uint32_t terminal) const { return after_first_[terminal]; }
  // The terminals that may come right after a lexeme of `terminal`.
  const std::vector<uint32_t>& followers(uint32_t terminal) const { return followers_[terminal]; }
  std::span<const std::bitset<256>> follower_first_bytes() const { return after_first_; }
  // Builds every entry now (AOT and eager JIT compilation). States whose
  // walks are alike (index/walk_classes.h) share one entry. `stop`: checked
  // before each terminal and each batch of states (a background build,
  // background_build.h), which then leaves the rest to be built on use.
  void build_all(const std::atomic<bool>* stop = nullptr) const;
  // Whether every entry is built (build_all ran to its end, or the index
  // was loaded).
  bool complete() const { return complete_.load(std::memory_order_acquire); }
  // Every entry as bytes (builds them first), and back. Loading checks every
  // token id, trie node and DFA state; null with a message in `in` when the
  // bytes are invalid.
  void save(ir::BinaryWriter& out) const;
  static std::unique_ptr<TokenIndex> load(ir::BinaryReader& in, const ir::LexicalGrammar& lexical,
                                          const VocabTrie& trie, size_t mask_words, size_t vocab_size);
  size_t memory_bytes() const;

 private:
  struct Slot {
    std::once_flag once;
    const StateIndex* value = nullptr;  // in owned_; another state's entry where they are alike (build_all, load)
  };
  // Keeps a built entry and returns it.
  const StateIndex* own(std::unique_ptr<StateIndex> entry) const;
  struct Crossing {
    uint8_t byte;    // the first byte of the next lexeme
    uint32_t state;  // where the terminal ended
    uint32_t node;   // the trie node of that byte
  };
  // What a walk of the trie records, before it becomes an entry.
  struct Walk {
    std::vector<uint32_t> inside;  // mask words
    std::vector<Crossing> crossing;  // in the trie's order
  };
  // The smallest state whose entry equals `state`'s (walk_classes), found
  // lazily for large DFAs; `state` itself before that.
  uint32_t same_walk_as(uint32_t terminal, uint32_t state) const;
  struct Classes {
    std::atomic<size_t> walked{0};
    std::once_flag once;
    std::vector<uint32_t> first;
  };
  std::unique_ptr<Classes[]> classes_;
  std::unique_ptr<StateIndex> build(uint32_t root, uint32_t terminal, uint32_t state) const;
  Walk walk(uint32_t root, uint32_t terminal, uint32_t state) const;
  // Walks of the whole trie from several states at once (the same result as one by one).
  std::vector<Walk> walk_together(uint32_t terminal, std::span<const uint32_t> states) const;
  static constexpr size_t kWalkTogether = 16;
  // The entries of the states `first` names as their own (build_all),
  // walked together where they start on the same bytes.
  void build_together(uint32_t terminal, std::span<const uint32_t> first, const std::atomic<bool>* stop) const;
  std::unique_ptr<StateIndex> finish(uint32_t root, uint32_t terminal, Walk walked) const;
  struct BitsetLess {
    bool operator()(const std::bitset<256>& a, const std::bitset<256>& b) const {
      for (int i = 255; i >= 0; --i)
        if (a[i] != b[i]) return b[i];
      return false;
    }
  };
  // Makes the entry's dense sets share their words with equal sets made
  // before (one copy of each distinct set).
  void share_sets(StateIndex& ix) const;
  void share(TokenSet& set) const;
  static void drop_crossing_nodes(StateIndex& ix);
  // The tokens below `starts` (trie nodes whose byte starts the lexeme
  // after one of `terminal`), by that next lexeme's terminal; `level`
  // lexeme ends are crossed already.
  struct IntoScratch {
    std::vector<uint8_t> seen;  // by token id: already in the set being made
    std::vector<uint32_t> at;   // by depth: the DFA state of a walk
  };
  std::vector<CrossInto> crossings_into(std::span<const uint32_t> starts, uint32_t terminal, int level,
                                        IntoScratch& scratch) const;
  void into_subtree(uint32_t node, uint32_t terminal, CrossInto& into, std::vector<uint32_t>& ids,
                    IntoScratch& scratch) const;

  const ir::LexicalGrammar& lexical_;
  const VocabTrie& trie_;
  size_t words_;
  std::vector<std::vector<uint32_t>> followers_;
  std::vector<std::bitset<256>> after_first_;  // per terminal: bytes that can start a follower
  std::vector<uint8_t> byte_followers_;        // per terminal: every follower is a byte terminal
  std::vector<size_t> offset_;  // first slot of each terminal
  std::unique_ptr<Slot[]> slots_;
  mutable std::atomic<size_t> built_bytes_{0};  // of the entries in slots_
  mutable std::atomic<bool> complete_{false};
  mutable std::mutex owned_mutex_;
  mutable std::vector<std::unique_ptr<StateIndex>> owned_;  // the entries of slots_, each once
  size_t slot_count_ = 0;
  mutable std::mutex subtree_mutex_;
  mutable std::unordered_map<uint64_t, std::unique_ptr<StateIndex>> subtrees_;
  mutable std::mutex shared_mutex_;
  // The distinct dense sets, by a hash of their words.
  mutable std::unordered_multimap<uint64_t, std::shared_ptr<const std::vector<uint32_t>>> shared_sets_;
  mutable size_t shared_bytes_ = 0;
  mutable std::mutex union_mutex_;
  mutable std::map<std::vector<uint32_t>, std::unique_ptr<std::vector<uint32_t>>> unions_;  // null: asked once
};

}  // namespace cgram

// The token index (index/token_index.h) on its own: on a dozen tokens and
// `start ::= '(' start ')' | num`, each lexer state's entry is computed by
// hand (tokens inside the lexeme, crossings of its end by the next byte,
// the tokens that cross into each next terminal), lazily or all at once,
// saved and loaded, with its memory accounted.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "background_build.h"
#include "binary_io.h"
#include "helpers.h"
#include "lexical.h"
#include "memory_budget.h"
#include "token_index.h"
#include "vocab_trie.h"
#include "walk_classes.h"

using namespace cgram;
using namespace cgram::test;

namespace {

using Ids = std::set<uint32_t>;

// Ids:       0    1     2     3    4      5    6     7     8     9     10   11 (end of sequence)
const std::vector<std::string> kTokens = {"1", "12", "1)", ")", "1))", "a", "(1", "))", "1a", "1(", "(", "<eos>"};

// The tokens, the last one the end of sequence.
std::shared_ptr<const Vocabulary> vocabulary(const std::vector<std::string>& tokens) {
  auto v = Vocabulary::from_tokens(tokens, {static_cast<uint32_t>(tokens.size() - 1)});
  REQUIRE(v.ok());
  return *v;
}

struct Fixture {
  explicit Fixture(const std::vector<std::string>& tokens = kTokens) : vocab(vocabulary(tokens)) {}
  std::shared_ptr<const Grammar> g = grammar("start ::= '(' start ')' | num ; num ::= #'[0-9]+' ;");
  ir::LexicalGrammar lex = ir::lower_lexical(g->ir());
  std::shared_ptr<const Vocabulary> vocab;
  const VocabTrie& trie = vocab->trie();
  size_t words = (vocab->size() + 31) / 32;
  uint32_t open = terminal("'('"), close = terminal("')'"), num = terminal("num");
  std::map<std::string, uint32_t> node_of = nodes();

  uint32_t terminal(std::string_view name) const {
    for (uint32_t t = 0; t < lex.terminals.size(); ++t)
      if (lex.terminals[t].name == name) return t;
    FAIL("no terminal " << name << " in\n" << lex.dump());
    return 0;
  }
  // What may follow each terminal in this grammar, by hand.
  std::vector<std::vector<uint32_t>> followers() const {
    std::vector<std::vector<uint32_t>> f(lex.terminals.size());
    f[open] = {open, num};
    f[close] = {close};
    f[num] = {close};
    for (auto& v : f) std::sort(v.begin(), v.end());
    return f;
  }
  TokenIndex index() const { return TokenIndex(lex, trie, words, followers()); }
  // Every trie node by the bytes that lead to it (the trie is in preorder).
  std::map<std::string, uint32_t> nodes() const {
    std::map<std::string, uint32_t> out;
    std::vector<std::string> path(trie.max_depth() + 1);
    for (uint32_t n = 1; n < trie.size(); ++n) {
      const uint32_t d = trie.depth(n);
      path[d] = path[d - 1] + static_cast<char>(trie.byte(n));
      out[path[d]] = n;
    }
    return out;
  }
  uint32_t node(const std::string& bytes) const {
    auto it = node_of.find(bytes);
    REQUIRE(it != node_of.end());
    return it->second;
  }
  const ir::Dfa& dfa(uint32_t t) const { return lex.terminals[t].dfa; }
  uint32_t after(uint32_t t, std::string_view bytes) const { return dfa(t).run(dfa(t).start(), bytes); }
};

Ids bits(std::span<const uint32_t> words) { return test::set_bits(words); }

// The tokens of a set, whichever form it took (ids or mask words).
Ids bits(const TokenSet& set) {
  Ids out(set.ids().begin(), set.ids().end());
  for (uint32_t id : bits(set.words())) out.insert(id);
  return out;
}

Ids into_ids(const CrossInto& c) { return bits(c.tokens); }

// The crossings of an entry as (byte, state, node), in the entry's order.
std::vector<std::tuple<uint8_t, uint32_t, uint32_t>> crossings(const StateIndex& ix) {
  std::vector<std::tuple<uint8_t, uint32_t, uint32_t>> out;
  REQUIRE(ix.cross_begin.size() == 257);
  for (int b = 0; b < 256; ++b)
    for (uint32_t i = ix.cross_begin[b]; i < ix.cross_begin[b + 1]; ++i)
      out.emplace_back(static_cast<uint8_t>(b), ix.cross_states[i], ix.cross_nodes[i]);
  return out;
}

void expect_same_into(const std::vector<CrossInto>& a, const std::vector<CrossInto>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].terminal == b[i].terminal);
    CHECK(a[i].tokens == b[i].tokens);
    REQUIRE(a[i].second.size() == b[i].second.size());
    for (size_t k = 0; k < a[i].second.size(); ++k) {
      CHECK(a[i].second[k].state == b[i].second[k].state);
      CHECK(a[i].second[k].node == b[i].second[k].node);
    }
    expect_same_into(a[i].next, b[i].next);
  }
}

void expect_same_entry(const StateIndex& a, const StateIndex& b) {
  CHECK(a.inside == b.inside);
  CHECK(a.cross_begin == b.cross_begin);
  CHECK(a.cross_nodes == b.cross_nodes);
  CHECK(a.cross_states == b.cross_states);
  expect_same_into(a.into, b.into);
}

}  // namespace

TEST_CASE("token index: inside a number, and the crossings out of it", "[index-unit]") {
  Fixture f;
  TokenIndex index = f.index();
  const uint32_t digit = f.after(f.num, "1");
  REQUIRE(f.dfa(f.num).accepting(digit));
  REQUIRE_FALSE(f.dfa(f.num).accepting(f.dfa(f.num).start()));
  for (uint32_t q : {f.dfa(f.num).start(), digit}) {
    INFO("num state " << q);
    const StateIndex& ix = index.get(f.num, q);
    // Inside: all their bytes are digits ("1", "12").
    CHECK(bits(ix.inside) == Ids{0, 1});
    // The number may end mid-token. Its only follower is a byte terminal,
    // so every crossing token is classified below (`into`) and the entry
    // keeps no crossing places: no walk will need them.
    CHECK(ix.crosses());
    CHECK(ix.cross_nodes.empty());
    CHECK(ix.crossing(')').empty());
    // Into ')' (the only follower of num): "1)" stays inside it; "1))"
    // ends it again, and the level below holds it, inside the second ')'.
    REQUIRE(ix.into.size() == 1);
    const CrossInto& into = ix.into[0];
    CHECK(into.terminal == f.close);
    CHECK(into_ids(into) == Ids{2});
    CHECK(into.second.empty());
    REQUIRE(into.next.size() == 1);
    CHECK(into.next[0].terminal == f.close);
    CHECK(into_ids(into.next[0]) == Ids{4});
    CHECK(into.next[0].next.empty());
    CHECK(into.next[0].second.empty());
  }
  // Where it ends, as a walk reads it (a subtree entry keeps its places):
  // below "1", before ')' of "1)" — the lexeme could also end before '(' of
  // "1(", '2' of "12" and 'a' of "1a", but no lexeme that may follow a
  // number starts with those bytes, and no walk would read them.
  const StateIndex& below = index.get_subtree(f.node("1"), f.num, digit);
  CHECK(crossings(below) == std::vector<std::tuple<uint8_t, uint32_t, uint32_t>>{{')', digit, f.node("1)")}});
  CHECK(below.crosses());
  CHECK(std::vector<uint32_t>(below.crossing(')').begin(), below.crossing(')').end()) ==
        std::vector<uint32_t>{f.node("1)")});
  CHECK(below.crossing('x').empty());
}

TEST_CASE("token index: crossings classified kMaxCrossings lexeme ends deep, then recorded to be walked",
          "[index-unit]") {
  // "1", "1)", "1))", ... : a number then ever more closing brackets.
  std::vector<std::string> tokens;
  for (int closes = 0; closes <= CrossInto::kMaxCrossings + 2; ++closes) tokens.push_back("1" + std::string(closes, ')'));
  tokens.push_back("<eos>");
  Fixture f(tokens);
  TokenIndex index = f.index();
  const StateIndex& ix = index.get(f.num, f.after(f.num, "1"));
  REQUIRE(ix.into.size() == 1);
  const CrossInto* level = &ix.into[0];
  for (int depth = 1;; ++depth) {
    INFO("lexeme ends crossed: " << depth);
    CHECK(level->terminal == f.close);
    CHECK(into_ids(*level) == Ids{static_cast<uint32_t>(depth)});  // the token with `depth` brackets
    if (depth == CrossInto::kMaxCrossings) {
      // The deepest level: the tokens that cross once more are walked from
      // where the next ')' starts.
      CHECK(level->next.empty());
      REQUIRE(level->second.size() == 1);
      CHECK(level->second[0].state == f.after(f.close, ")"));
      CHECK(level->second[0].node == f.node(tokens[depth + 1]));
      break;
    }
    CHECK(level->second.empty());
    REQUIRE(level->next.size() == 1);
    level = &level->next[0];
  }
}

TEST_CASE("token index: the entries of the brackets", "[index-unit]") {
  Fixture f;
  TokenIndex index = f.index();
  // '(' from its start: "(" inside; "(1" crosses at '1' into num.
  const StateIndex& open = index.get(f.open, f.dfa(f.open).start());
  CHECK(bits(open.inside) == Ids{10});
  const uint32_t opened = f.after(f.open, "(");
  CHECK(open.crosses());
  CHECK(open.cross_nodes.empty());  // classified by next terminal, below
  // Only num's DFA goes on with '1' ('(' would die): one CrossInto.
  REQUIRE(open.into.size() == 1);
  CHECK(open.into[0].terminal == f.num);
  CHECK(into_ids(open.into[0]) == Ids{6});
  CHECK(open.into[0].second.empty());
  // '(' read: nothing more fits in it, and no token crosses (a token that
  // starts a new lexeme at once is the engine's case, not the index's).
  const StateIndex& done = index.get(f.open, opened);
  CHECK(bits(done.inside).empty());
  CHECK_FALSE(done.crosses());
  CHECK(done.into.empty());
  // ')' from its start: ")" inside, "))" into the next ')'.
  const StateIndex& close = index.get(f.close, f.dfa(f.close).start());
  CHECK(bits(close.inside) == Ids{3});
  CHECK(close.crosses());
  CHECK(close.cross_nodes.empty());
  REQUIRE(close.into.size() == 1);
  CHECK(close.into[0].terminal == f.close);
  CHECK(into_ids(close.into[0]) == Ids{7});
  // The end-of-sequence token is special: it is never in any entry.
  for (uint32_t t = 0; t < f.lex.terminals.size(); ++t)
    for (uint32_t q = 0; q < f.dfa(t).size(); ++q) CHECK(bits(index.get(t, q).inside).count(11) == 0);
}

TEST_CASE("token index: the same entry object on every call", "[index-unit]") {
  Fixture f;
  TokenIndex index = f.index();
  const StateIndex* first = &index.get(f.num, f.dfa(f.num).start());
  CHECK(&index.get(f.num, f.dfa(f.num).start()) == first);
  // The whole trie as a subtree is the entry itself.
  CHECK(&index.get_subtree(0, f.num, f.dfa(f.num).start()) == first);
}

TEST_CASE("token index: a subtree entry reads the tokens below a node", "[index-unit]") {
  Fixture f;
  TokenIndex index = f.index();
  const uint32_t digit = f.after(f.num, "1");
  // Below "1", read from after the '1': "12" stays inside; the number may
  // end right at the subtree's first byte (not the token's), where ')', its
  // only follower, begins.
  const StateIndex& ix = index.get_subtree(f.node("1"), f.num, digit);
  CHECK(bits(ix.inside) == Ids{1});
  CHECK(crossings(ix) == std::vector<std::tuple<uint8_t, uint32_t, uint32_t>>{{')', digit, f.node("1)")}});
  CHECK(ix.into.empty());  // whole-vocabulary entries only
  CHECK(&index.get_subtree(f.node("1"), f.num, digit) == &ix);  // cached
}

TEST_CASE("token index: followers' first bytes and the union of start entries", "[index-unit]") {
  Fixture f;
  TokenIndex index = f.index();
  auto bytes = [](const std::bitset<256>& b) {
    std::string out;
    for (int i = 0; i < 256; ++i)
      if (b[i]) out += static_cast<char>(i);
    return out;
  };
  CHECK(bytes(index.follower_first_bytes(f.num)) == ")");
  CHECK(bytes(index.follower_first_bytes(f.close)) == ")");
  CHECK(bytes(index.follower_first_bytes(f.open)) == "(0123456789");
  CHECK(index.follower_first_bytes().size() == f.lex.terminals.size());
  // The tokens that stay inside a '(' or a num lexeme begun from scratch:
  // the parts the first time, their union from the second on.
  std::vector<uint32_t> parts(f.words, 0u);
  CHECK(index.inside_from_start({f.open, f.num}) == nullptr);
  index.inside_from_start_parts({f.open, f.num}, [&](const TokenSet& s) { s.or_into(parts); });
  CHECK(bits(parts) == Ids{0, 1, 10});
  const std::vector<uint32_t>* together = index.inside_from_start({f.open, f.num});
  REQUIRE(together != nullptr);
  CHECK(bits(*together) == Ids{0, 1, 10});
  CHECK(index.inside_from_start({f.open, f.num}) == together);
  CHECK(index.inside_from_start({f.close}) == nullptr);
  REQUIRE(index.inside_from_start({f.close}) != nullptr);
  CHECK(bits(*index.inside_from_start({f.close})) == Ids{3});
}

TEST_CASE("token index: lazy entries equal those built all at once", "[index-unit]") {
  Fixture f;
  TokenIndex lazy = f.index();
  TokenIndex eager = f.index();
  eager.build_all();
  // The lazy one in another order: last terminal, last state first.
  for (uint32_t t = static_cast<uint32_t>(f.lex.terminals.size()); t-- > 0;)
    for (uint32_t q = static_cast<uint32_t>(f.dfa(t).size()); q-- > 0;) {
      INFO(f.lex.terminals[t].name << " state " << q);
      expect_same_entry(lazy.get(t, q), eager.get(t, q));
    }
  CHECK(lazy.memory_bytes() == eager.memory_bytes());
}

TEST_CASE("token index: a build told to stop leaves the rest to be built on use; the background build ends "
          "complete, or stopped by its memory budget",
          "[index-unit]") {
  Fixture f;
  {
    TokenIndex index = f.index();
    const std::atomic<bool> stop{true};
    index.build_all(&stop);
    CHECK_FALSE(index.complete());
    index.build_all();
    CHECK(index.complete());
  }
  {
    TokenIndex eager = f.index();
    eager.build_all();
    TokenIndex index = f.index();
    BackgroundIndexBuild build;
    build.start(index, kDefaultCompileMemoryBytes);
    build.start(index, kDefaultCompileMemoryBytes);  // once
    build.wait();
    CHECK(build.started());
    CHECK_FALSE(build.stopped_early());
    CHECK(index.complete());
    for (uint32_t t = 0; t < f.lex.terminals.size(); ++t)
      for (uint32_t q = 0; q < f.dfa(t).size(); ++q) expect_same_entry(index.get(t, q), eager.get(t, q));
  }
  {
    TokenIndex eager = f.index();
    eager.build_all();
    TokenIndex index = f.index();
    BackgroundIndexBuild build;
    build.start(index, 1);  // no entry fits
    build.wait();
    CHECK(build.stopped_early());
    CHECK_FALSE(index.complete());
    // The entries it did not build are built on use, the same.
    for (uint32_t t = 0; t < f.lex.terminals.size(); ++t)
      for (uint32_t q = 0; q < f.dfa(t).size(); ++q) expect_same_entry(index.get(t, q), eager.get(t, q));
  }
}

TEST_CASE("token index: memory grows with the entries built, and is charged", "[index-unit]") {
  Fixture f;
  TokenIndex index = f.index();
  const size_t empty = index.memory_bytes();
  CHECK(empty > 0);  // a slot per lexer state
  index.get(f.num, f.dfa(f.num).start());
  const size_t one = index.memory_bytes();
  CHECK(one > empty);
  index.build_all();
  const size_t all = index.memory_bytes();
  CHECK(all > one);
  index.get_subtree(f.node("1"), f.num, f.after(f.num, "1"));
  CHECK(index.memory_bytes() > all);
  // Building entries charges the compile's memory budget.
  MemoryBudget budget;
  {
    MemoryBudgetScope scope(budget);
    TokenIndex charged = f.index();
    const size_t slots = budget.used();
    CHECK(slots > 0);
    charged.build_all();
    CHECK(budget.used() > slots);
  }
}

TEST_CASE("token index: save and load give the same entries; a smaller vocabulary is refused", "[index-unit]") {
  Fixture f;
  TokenIndex index = f.index();
  ir::BinaryWriter out;
  index.save(out);  // builds every entry first
  const std::string bytes = out.take();
  ir::BinaryReader in(bytes);
  auto loaded = TokenIndex::load(in, f.lex, f.trie, f.words, f.vocab->size());
  REQUIRE(loaded);
  CHECK(in.ok());
  CHECK(in.at_end());
  for (uint32_t t = 0; t < f.lex.terminals.size(); ++t) {
    CHECK(loaded->follower_first_bytes(t) == index.follower_first_bytes(t));
    for (uint32_t q = 0; q < f.dfa(t).size(); ++q) expect_same_entry(loaded->get(t, q), index.get(t, q));
  }
  // Token 10 ("(") is past a vocabulary of 4: refused, with a message.
  ir::BinaryReader small(bytes);
  CHECK_FALSE(TokenIndex::load(small, f.lex, f.trie, f.words, 4));
  CHECK(small.error() == "a token index entry of the wrong size");
  ir::BinaryReader cut(std::string_view(bytes).substr(0, bytes.size() / 2));
  CHECK_FALSE(TokenIndex::load(cut, f.lex, f.trie, f.words, f.vocab->size()));
  CHECK_FALSE(cut.error().empty());
}

TEST_CASE("token set: few tokens kept as ids, many as mask words, the same set either way", "[index-unit]") {
  // 64 words: 2,048 ids; ids while there are at most 64 / 8 = 8 of them.
  constexpr size_t kWords = 64;
  std::vector<uint32_t> few(kWords, 0u), many(kWords, 0u);
  for (uint32_t id : {3u, 40u, 2047u}) few[id / 32] |= 1u << (id % 32);
  for (uint32_t id = 0; id < 2048; id += 100) many[id / 32] |= 1u << (id % 32);
  const TokenSet sparse = TokenSet::from_words(few), dense = TokenSet::from_words(many);
  CHECK_FALSE(sparse.dense());
  CHECK(std::vector<uint32_t>(sparse.ids().begin(), sparse.ids().end()) == std::vector<uint32_t>{3, 40, 2047});
  CHECK(dense.dense());
  CHECK(dense.count() == 21);
  CHECK(sparse.count() == 3);
  CHECK(sparse.contains(40));
  CHECK_FALSE(sparse.contains(41));
  CHECK(dense.contains(1000));
  CHECK_FALSE(dense.contains(1001));
  // ORed into words already set.
  std::vector<uint32_t> words(kWords, 0u);
  words[0] = 1u << 5;
  sparse.or_into(words);
  dense.or_into(words);
  CHECK(bits(words) == [&] {
    Ids expected{5, 3, 40, 2047};
    for (uint32_t id = 0; id < 2048; id += 100) expected.insert(id);
    return expected;
  }());
  // From ids: the same form as from the words.
  CHECK(TokenSet::from_ids({3, 40, 2047}, kWords) == sparse);
  std::vector<uint32_t> every_100;
  for (uint32_t id = 0; id < 2048; id += 100) every_100.push_back(id);
  CHECK(TokenSet::from_ids(every_100, kWords) == dense);
  const TokenSet none = TokenSet::from_words(std::vector<uint32_t>(kWords, 0u));
  CHECK_FALSE(none.dense());
  CHECK(none.count() == 0);
  // The bound: ids while there are at most kWords / kSparseShare of them
  // (counted only that far), whether they share words or not.
  for (const uint32_t stride : {1u, 37u}) {
    std::vector<uint32_t> at_bound(kWords, 0u), past(kWords, 0u);
    const uint32_t bound = kWords / TokenSet::kSparseShare;
    for (uint32_t i = 0; i <= bound; ++i) {
      const uint32_t id = (i * stride) % (kWords * 32);
      if (i < bound) at_bound[id / 32] |= 1u << (id % 32);
      past[id / 32] |= 1u << (id % 32);
    }
    const TokenSet small = TokenSet::from_words(at_bound), large = TokenSet::from_words(past);
    CHECK_FALSE(small.dense());
    CHECK(small.count() == bound);
    CHECK(large.dense());
    CHECK(large.count() == bound + 1);
  }
  CHECK(sparse.memory_bytes() < dense.memory_bytes());
}

TEST_CASE("token index: equal dense sets are one copy, counted once", "[index-unit]") {
  Fixture f;
  TokenIndex index = f.index();
  // A vocabulary of one mask word: every set that is not empty is dense.
  // A number keeps "1" and "12" inside from its start and after a digit.
  const StateIndex& start = index.get(f.num, f.dfa(f.num).start());
  const size_t after_one = index.memory_bytes();
  const StateIndex& digit = index.get(f.num, f.after(f.num, "1"));
  REQUIRE(start.inside.dense());
  CHECK(start.inside == digit.inside);
  CHECK(start.inside.shared_words() == digit.inside.shared_words());
  // The second entry added its own parts, not a second copy of the words.
  CHECK(index.memory_bytes() - after_one < sizeof(StateIndex) + 2000);
}

namespace {
// A string of at most `letters` letters (12 by default), for the states a
// counted repetition makes.
struct CountedString {
  explicit CountedString(int letters = 12) : g(grammar(fmt::format("start ::= #'\"[a-z]{{0,{}}}\"' ;", letters))) {}
  // The longest token has 4 bytes.
  std::shared_ptr<const Vocabulary> vocab = vocabulary({"\"", "a", "ab", "abc", "abcd", "\"a", "a\"", "ab\"", "<eos>"});
  std::shared_ptr<const Grammar> g;
  ir::LexicalGrammar lex = ir::lower_lexical(g->ir());
  const VocabTrie& trie = vocab->trie();
  const ir::Dfa& dfa = lex.terminals.at(0).dfa;
  TokenIndex index() const {
    return TokenIndex(lex, trie, (vocab->size() + 31) / 32, std::vector<std::vector<uint32_t>>(lex.terminals.size()));
  }
  // The state after the opening quote and `letters` letters.
  uint32_t after(size_t letters) const { return dfa.run(dfa.start(), "\"" + std::string(letters, 'a')); }
};
}  // namespace

TEST_CASE("walk classes: the states of a counted repetition that no token can tell apart", "[index-unit]") {
  CountedString s;
  REQUIRE(s.lex.terminals.size() == 1);
  // After i letters, 13 - i more letters are the shortest text that is dead
  // there and alive after fewer: within 4 bytes, the states of 0 to 8
  // letters answer alike, and each later one differently.
  const std::vector<uint32_t> four = walk_classes(s.dfa, 4);
  for (size_t i = 0; i <= 8; ++i) CHECK(four[s.after(i)] == four[s.after(0)]);
  for (size_t i = 9; i <= 12; ++i) {
    INFO(i << " letters");
    CHECK(four[s.after(i)] == s.after(i));
    CHECK(four[s.after(i)] != four[s.after(i - 1)]);
  }
  // Within 13 bytes every state is told apart: as many classes as states.
  const std::vector<uint32_t> thirteen = walk_classes(s.dfa, 13);
  for (uint32_t q = 0; q < s.dfa.size(); ++q) CHECK(thirteen[q] == q);
  // Accepting states are never merged (a crossing records the state itself).
  const std::vector<uint32_t> none = walk_classes(s.dfa, 0);
  for (uint32_t q = 0; q < s.dfa.size(); ++q) CHECK(none[q] == q);
}

TEST_CASE("token index: states alike share one entry, equal to the one each builds alone, saved once", "[index-unit]") {
  CountedString s;
  REQUIRE(s.trie.max_depth() == 4);
  TokenIndex lazy = s.index();
  TokenIndex eager = s.index();
  eager.build_all();
  for (uint32_t q = 0; q < s.dfa.size(); ++q) {
    INFO("state " << q);
    expect_same_entry(lazy.get(0, q), eager.get(0, q));
  }
  // 0 to 8 letters: one entry (4 more letters fit after each); after 9
  // letters "abcd" no longer fits.
  for (size_t i = 1; i <= 8; ++i) CHECK(&eager.get(0, s.after(i)) == &eager.get(0, s.after(0)));
  CHECK(&eager.get(0, s.after(9)) != &eager.get(0, s.after(8)));
  CHECK(bits(eager.get(0, s.after(9)).inside) != bits(eager.get(0, s.after(8)).inside));
  CHECK(eager.memory_bytes() < lazy.memory_bytes());
  // Saved once and loaded as one entry.
  ir::BinaryWriter out;
  eager.save(out);
  const std::string bytes = out.take();
  ir::BinaryReader in(bytes);
  auto loaded = TokenIndex::load(in, s.lex, s.trie, (s.vocab->size() + 31) / 32, s.vocab->size());
  REQUIRE(loaded);
  CHECK(in.at_end());
  for (uint32_t q = 0; q < s.dfa.size(); ++q) expect_same_entry(loaded->get(0, q), lazy.get(0, q));
  CHECK(&loaded->get(0, s.after(5)) == &loaded->get(0, s.after(0)));
  CHECK(loaded->memory_bytes() == eager.memory_bytes());
  // An entry may only name an earlier state as the one it shares.
  TokenIndex fresh = s.index();
  ir::BinaryWriter forward;
  fresh.save(forward);
  std::string broken = forward.take();
  // (The first state's marker follows the followers and the slot count.)
  const size_t marker = 8 + 8 * s.lex.terminals.size() + 8;
  REQUIRE(broken.size() > marker + 4);
  broken[marker] = 1;
  ir::BinaryReader bad(broken);
  CHECK_FALSE(TokenIndex::load(bad, s.lex, s.trie, (s.vocab->size() + 31) / 32, s.vocab->size()));
  CHECK(bad.error() == "a token index entry shared with a later state");
}

TEST_CASE("token index: a large DFA's states alike share an entry on the lazy index too, after the first few",
          "[index-unit]") {
  CountedString s(100);  // 103 states: past TokenIndex::kLazyClassesMin
  REQUIRE(s.dfa.size() >= TokenIndex::kLazyClassesMin);
  TokenIndex lazy = s.index();
  TokenIndex eager = s.index();
  eager.build_all();
  // Letter by letter, as a model writes the string.
  for (size_t i = 0; i <= 100; ++i) {
    INFO(i << " letters");
    expect_same_entry(lazy.get(0, s.after(i)), eager.get(0, s.after(i)));
  }
  // The first entries were walked one by one; after them, the states that
  // still take 4 more letters share one entry.
  const StateIndex* shared = &lazy.get(0, s.after(TokenIndex::kLazyClassesAfter));
  for (size_t i = TokenIndex::kLazyClassesAfter + 1; i <= 96; ++i) {
    INFO(i << " letters");
    CHECK(&lazy.get(0, s.after(i)) == shared);
  }
  CHECK(&lazy.get(0, s.after(97)) != shared);
  CHECK(lazy.memory_bytes() < eager.memory_bytes() + 8 * 1024);
}

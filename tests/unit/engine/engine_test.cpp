// The GLR engine (engine/engine.h) driven directly, as matcher/text_match.cpp
// drives it: heads stepped over the bytes of tokens, masks over a vocabulary
// of a dozen tokens compared with sets computed by hand, the end of the
// text, several stacks at once, compaction, forced text, context keys, and
// the work and stack limits.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "compiled_grammar.h"
#include "engine.h"
#include "helpers.h"

using namespace cgram;
using namespace cgram::test;

namespace {

using Ids = std::set<uint32_t>;

Ids word_bits(std::span<const uint32_t> words) { return test::set_bits(words); }

// `source` compiled for `tokens` plus an end-of-sequence token (the last id).
std::shared_ptr<const CompiledGrammar> compile(std::string_view source, std::vector<std::string> tokens) {
  const auto eos = static_cast<uint32_t>(tokens.size());
  tokens.push_back("<eos>");
  auto vocab = Vocabulary::from_tokens(std::move(tokens), {eos});
  REQUIRE(vocab.ok());
  auto compiled = CompiledGrammar::compile(grammar(source), *vocab);
  REQUIRE(compiled.ok());
  return *compiled;
}

struct Driver {
  std::shared_ptr<const CompiledGrammar> compiled;
  Engine engine;

  Driver(std::string_view source, std::vector<std::string> tokens, const EngineLimits& limits = every_mask_kept())
      : compiled(compile(source, std::move(tokens))), engine(*compiled, limits) {}
  // These masks take little work: kept in the memo all the same, so that
  // its answers are checked too.
  static EngineLimits every_mask_kept() {
    EngineLimits limits;
    limits.mask_memo_min_work = 0;
    limits.cross_memo_min_work = 0;
    limits.walk_memo_min_work = 0;
    return limits;
  }

  const Vocabulary& vocab() const { return compiled->vocabulary(); }
  std::vector<Head> feed(const std::vector<Head>& heads, std::string_view bytes) {
    std::vector<Head> out;
    engine.step_token(heads, bytes, out);
    return out;
  }
  // The heads after these tokens from the start (each must be accepted).
  std::vector<Head> after(const std::vector<std::string>& tokens) {
    std::vector<Head> heads = engine.initial_heads();
    for (const std::string& t : tokens) {
      INFO("token '" << t << "'");
      heads = feed(heads, t);
      REQUIRE_FALSE(heads.empty());
    }
    return heads;
  }
  bool rejects(const std::vector<Head>& heads, std::string_view bytes) {
    const Engine::Mark m = engine.mark();
    const bool rejected = feed(heads, bytes).empty();
    engine.truncate(m);  // as the matcher does: a probe leaves nothing behind
    return rejected;
  }
  // The mask; it leaves the stack as it found it.
  Ids mask(const std::vector<Head>& heads) {
    std::vector<uint32_t> words(compiled->mask_words(), 0);
    const size_t before = engine.stack_elements();
    engine.fill_text_tokens(heads, words);
    CHECK_FALSE(engine.exhausted());
    CHECK(engine.stack_elements() == before);
    return word_bits(words);
  }
  // The mask by hand, and the same as stepping every text token's bytes.
  void expect_mask(const std::vector<Head>& heads, const Ids& expected) {
    const Ids m = mask(heads);
    CHECK(m == expected);
    for (uint32_t id = 0; id < vocab().size(); ++id) {
      if (vocab().is_special(id)) {
        CHECK(m.count(id) == 0);
        continue;
      }
      INFO("token " << id << " '" << vocab().bytes(id) << "'");
      CHECK(m.count(id) == (rejects(heads, vocab().bytes(id)) ? 0u : 1u));
    }
  }
};

// Balanced parentheses around a number.
constexpr const char* kBrackets = "start ::= '(' start ')' | num ; num ::= #'[0-9]+' ;";
// Ids:                                0    1     2     3    4      5    6     7     8     9     10
const std::vector<std::string> kBracketTokens = {"1", "12", "1)", ")", "1))", "a", "(1", "))", "1a", "1(", "("};

// 'p' reduces to a or to b: both stacks live until the last terminal.
constexpr const char* kTwoWays =
    "start ::= a 'x' 'y' 'q' | b 'x' 'y' 'r' ; a ::= 'p' | '(' a ')' ; b ::= 'p' | '[' b ']' ;";
// Ids:                              0    1    2    3    4    5     6     7     8     9    10   11   12
const std::vector<std::string> kTwoWaysTokens = {"p", "x", "y", "q", "r", "px", "xy", "yq", "yr", "(", "[", ")", "]"};

}  // namespace

TEST_CASE("engine: masks after prefixes, by hand", "[engine-unit]") {
  Driver d(kBrackets, kBracketTokens);
  // Nothing read: a number or an opening bracket.
  d.expect_mask(d.after({}), {0, 1, 6, 10});
  // "(": the same, and "1)" closes it.
  d.expect_mask(d.after({"("}), {0, 1, 2, 6, 10});
  // "((1": more digits, or one or two closing brackets.
  d.expect_mask(d.after({"(", "(1"}), {0, 1, 2, 3, 4, 7});
  // "12": only more digits.
  d.expect_mask(d.after({"12"}), {0, 1});
  // "(1)": complete, nothing may follow.
  d.expect_mask(d.after({"(1", ")"}), {});
  // A token that spans three lexemes at once: "((1" then "1))".
  d.expect_mask(d.after({"(", "(1", "1))"}), {});
}

TEST_CASE("engine: invalid bytes are rejected", "[engine-unit]") {
  Driver d(kBrackets, kBracketTokens);
  const std::vector<Head> start = d.after({});
  CHECK(d.rejects(start, "a"));
  CHECK(d.rejects(start, ")"));
  CHECK(d.rejects(start, "\xff"));
  CHECK(d.rejects(start, "1a"));
  CHECK(d.rejects(start, "1("));
  CHECK(d.rejects(d.after({"("}), "1))"));  // one bracket too many
  CHECK(d.rejects(d.after({"(1", ")"}), ")"));
  // The engine reads bytes, not only the vocabulary's tokens.
  CHECK_FALSE(d.rejects(start, "(((42"));
  // No bytes: no heads.
  CHECK(d.rejects(start, ""));
}

TEST_CASE("engine: the end of the text", "[engine-unit]") {
  Driver d(kBrackets, kBracketTokens);
  CHECK_FALSE(d.engine.can_end(d.after({})));
  CHECK_FALSE(d.engine.can_end(d.after({"("})));
  CHECK_FALSE(d.engine.can_end(d.after({"(1"})));
  CHECK(d.engine.can_end(d.after({"12"})));
  CHECK(d.engine.can_end(d.after({"(1", ")"})));
  CHECK(d.engine.can_end(d.after({"(", "(1", "1))"})));
  // can_end leaves the stack as it was.
  const std::vector<Head> heads = d.after({"(", "1"});
  const size_t elements = d.engine.stack_elements();
  CHECK_FALSE(d.engine.can_end(heads));
  CHECK(d.engine.stack_elements() == elements);
  // A grammar whose empty text is a sentence (S -> a S b | ε).
  Driver e("start ::= 'a' start 'b' | '' ;", {"a", "b", "ab"});
  CHECK(e.engine.can_end(e.after({})));
  CHECK_FALSE(e.engine.can_end(e.after({"a"})));
  CHECK(e.engine.can_end(e.after({"a", "ab", "b"})));
  e.expect_mask(e.after({}), {0, 2});
  e.expect_mask(e.after({"a", "ab"}), {1});  // "aab": one more b, nothing else
}

TEST_CASE("engine: an ambiguous grammar keeps every stack and gives the union", "[engine-unit]") {
  Driver d(kTwoWays, kTwoWaysTokens);
  d.expect_mask(d.after({}), {0, 5, 9, 10});
  // Inside '(' only a can follow, inside '[' only b.
  d.expect_mask(d.after({"("}), {0, 9});
  d.expect_mask(d.after({"["}), {0, 10});
  // "px": 'p' is a and b at once.
  d.expect_mask(d.after({"px"}), {2, 7, 8});
  // "pxy": a lexeme 'y' on two stacks, one after a and one after b.
  const std::vector<Head> both = d.after({"px", "y"});
  CHECK(both.size() == 2);
  CHECK(both[0].node != both[1].node);
  d.expect_mask(both, {3, 4});
  CHECK_FALSE(d.engine.can_end(both));
  // Each reading alone gives its own part of the union.
  d.expect_mask(d.after({"(", "p", ")", "xy"}), {3});
  d.expect_mask(d.after({"[", "p", "]", "xy"}), {4});
  CHECK(d.engine.can_end(d.after({"px", "yq"})));
  CHECK(d.engine.can_end(d.after({"px", "y", "r"})));
  CHECK(d.rejects(d.after({"(", "p", ")", "xy"}), "r"));
}

TEST_CASE("engine: the dangling else, where plain GLR loses a reduction", "[engine-unit]") {
  // After "iix" the inner and the outer if meet in one stack node; an else
  // may then bind to either, and a second else to the outer one.
  Driver d("start ::= 'i' start [ 'e' start ] | 'x' ;", {"i", "x", "e", "ex", "xe", "ix"});
  d.expect_mask(d.after({}), {0, 1, 5});
  d.expect_mask(d.after({"i", "ix"}), {2, 3});
  CHECK(d.engine.can_end(d.after({"i", "ix"})));
  d.expect_mask(d.after({"i", "ix", "ex"}), {2, 3});
  CHECK(d.engine.can_end(d.after({"i", "ix", "ex"})));
  d.expect_mask(d.after({"i", "ix", "ex", "ex"}), {});
  CHECK(d.engine.can_end(d.after({"i", "ix", "ex", "ex"})));
}

TEST_CASE("engine: readings that differ only in their stacks are lexed as one", "[engine-unit]") {
  // Lua's shape: unary minus, and whitespace that may hold a "--" comment.
  // After "--------a" the comment may have begun after any of the minus
  // signs; each such reading stands on a stack with one more operator, and
  // the stacks' tops have one LR state, so they are one reading of a node
  // with all those parents (Engine::merge_equal_heads), not one per split.
  Driver d("start ::= e ; e ::= '-' ws e | '(' e ')' | 'x' ; ws ::= #'( |--[^\\n]*\\n)*' ;",
           {"-", " ", "--", "a", "x", "\n", "- -", "--a\n", " x", "-x", "----"});
  std::vector<Head> heads = d.after({});
  for (int i = 0; i < 12; ++i) heads = d.feed(heads, "-");
  heads = d.feed(heads, "a");
  CHECK(heads.size() == 1);  // eleven places where the comment may have begun
  d.expect_mask(heads, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});  // in the comment: anything, the newline too
  heads = d.feed(heads, "\n");
  d.expect_mask(heads, {0, 1, 2, 4, 6, 7, 8, 9, 10});
  CHECK(d.engine.can_end(d.feed(heads, "x")));
  // Compaction keeps a merged node's shared list of parents.
  std::vector<Head> pool = heads;
  std::vector<Engine::Mark*> no_marks;
  const Ids before = d.mask(heads);
  d.engine.compact(pool, no_marks);
  CHECK(d.mask(pool) == before);
  CHECK(d.engine.can_end(d.feed(pool, "x")));
  CHECK_FALSE(d.engine.can_end(pool));
  // Runs of minus signs inside tokens: the walk merges its readings too.
  d.expect_mask(d.after({"----", "----"}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
}

TEST_CASE("engine: shiftable sets and lexeme ends remembered by the states below the top, never mixed up",
          "[engine-unit]") {
  // After "ac" and "bc" the top state is the same (x ::= 'c' •); which
  // terminal may follow depends on the state below it. Tokens that cross
  // the lexeme's end ask for the fresh node's set, mask after mask, and end
  // the same lexemes on the same stacks: "c)d" after "a(" pops through the
  // parenthesis to the state of 'a', which decides that 'd' may follow.
  Driver d("start ::= 'a' x 'd' | 'b' x 'e' ; x ::= 'c' | '(' x ')' ;",
           {"a", "b", "c", "d", "e", "cd", "ce", "(", ")", "c)", "c))", "c)d", "c)e"});
  // Ids:     0    1    2    3    4    5     6     7    8    9     10     11     12
  auto round = [&] {
    d.expect_mask(d.after({}), {0, 1});
    d.expect_mask(d.after({"a"}), {2, 5, 7});
    d.expect_mask(d.after({"b"}), {2, 6, 7});
    d.expect_mask(d.after({"a", "("}), {2, 7, 9, 11});
    d.expect_mask(d.after({"b", "("}), {2, 7, 9, 12});
    d.expect_mask(d.after({"a", "(", "("}), {2, 7, 9, 10});
    d.expect_mask(d.after({"a", "c"}), {3});
    d.expect_mask(d.after({"b", "c"}), {4});
  };
  round();
  const size_t remembered = d.engine.remembered_stacks(), ends = d.engine.remembered_ends();
  CHECK(remembered > 0);
  CHECK(ends > 0);
  round();  // the same stacks again: answered from the memos, which do not grow
  CHECK(d.engine.remembered_stacks() == remembered);
  CHECK(d.engine.remembered_ends() == ends);
}

TEST_CASE("engine: masks remembered by the stack states they read, never mixed up", "[engine-unit]") {
  // "((1" and "(((1" have the same top of stack; whether "1))" and "))" may
  // follow depends on how many brackets are open, two levels and more below
  // the top. Each mask is checked against stepping every token.
  Driver d(kBrackets, kBracketTokens);
  auto round = [&] {
    d.expect_mask(d.after({"(1"}), {0, 1, 2, 3});
    d.expect_mask(d.after({"(", "(1"}), {0, 1, 2, 3, 4, 7});
    d.expect_mask(d.after({"(", "(", "(1"}), {0, 1, 2, 3, 4, 7});
    d.expect_mask(d.after({"(", "(", "(1", "1)"}), {3, 7});
    d.expect_mask(d.after({"(", "(", "(1", "1))"}), {3});
    d.expect_mask(d.after({"(", "(1", "1)"}), {3});
    d.expect_mask(d.after({"1"}), {0, 1});
  };
  const MaskMemo& memo = d.compiled->mask_memo();
  round();
  const MaskMemo::Stats first = memo.stats();
  CHECK(first.masks > 0);
  round();  // the same stacks again: answered from the memo
  const MaskMemo::Stats second = memo.stats();
  CHECK(second.hits > first.hits);
  CHECK(second.masks == first.masks);
  // Another engine of the same grammar finds them too.
  Engine other(*d.compiled, Driver::every_mask_kept());
  std::vector<Head> heads = other.initial_heads();
  for (const char* t : {"(", "(", "(1"}) {
    std::vector<Head> next;
    other.step_token(heads, t, next);
    heads = next;
  }
  std::vector<uint32_t> words(d.compiled->mask_words(), 0);
  other.fill_text_tokens(heads, words);
  CHECK(word_bits(words) == Ids{0, 1, 2, 3, 4, 7});
  CHECK(memo.stats().hits == second.hits + 1);
}

TEST_CASE("engine: a new engine starts from the work averages the last one left, so its first mask asks the memo",
          "[engine-unit]") {
  // With the averages at zero (a grammar just compiled) the memo is not
  // asked until masks prove costly; a server's next request should not
  // learn that again, or each request's first mask is made anew.
  EngineLimits limits;
  limits.mask_memo_min_work = 1;
  auto compiled = compile(kBrackets, kBracketTokens);
  const MaskMemo& memo = compiled->mask_memo();
  auto lookups = [&] { return memo.stats().hits + memo.stats().misses; };
  std::vector<uint32_t> words(compiled->mask_words(), 0);
  {
    Engine fresh(*compiled, limits);
    fresh.fill_text_tokens(fresh.initial_heads(), words);
    CHECK(lookups() == 0);
  }
  compiled->mask_memo().keep_work_averages({500, 0, {}});
  {
    Engine next(*compiled, limits);
    next.fill_text_tokens(next.initial_heads(), words);
    CHECK(lookups() == 1);
    std::vector<Head> heads = next.initial_heads();
    for (const char* t : {"(", "(", "(1"}) {
      std::vector<Head> out;
      next.step_token(heads, t, out);
      heads = out;
      next.fill_text_tokens(heads, words);
    }
  }
  // The one destroyed last left its own (a running average over its masks).
  const int64_t left = memo.work_averages().mask;
  CHECK(left < 500);  // these masks take a few units each
  CHECK(left >= 0);
}

TEST_CASE("engine: masks of several stacks at once are remembered whole", "[engine-unit]") {
  // After "p" two stacks live (a or b); after "(p" one, after "[p" the
  // other, over stacks of the same depth. Nodes with several parents are
  // described by the key as a graph, not as one path.
  Driver d(kTwoWays, kTwoWaysTokens);
  const Ids after_p = {1, 6};
  auto round = [&] {
    d.expect_mask(d.after({"p"}), after_p);
    d.expect_mask(d.after({"p", "x"}), {2, 7, 8});
    d.expect_mask(d.after({"(", "p"}), {11});
    d.expect_mask(d.after({"[", "p"}), {12});
    d.expect_mask(d.after({"(", "(", "p", ")"}), {11});
    d.expect_mask(d.after({"(", "p", ")"}), {1, 6});
  };
  round();
  const uint64_t hits = d.compiled->mask_memo().stats().hits;
  round();
  CHECK(d.compiled->mask_memo().stats().hits > hits);
}

TEST_CASE("engine: with no memo every mask is worked out, and the same", "[engine-unit]") {
  const auto eos = static_cast<uint32_t>(kBracketTokens.size());
  std::vector<std::string> tokens = kBracketTokens;
  tokens.push_back("<eos>");
  auto vocab = Vocabulary::from_tokens(std::move(tokens), {eos});
  REQUIRE(vocab.ok());
  CompileOptions options;
  options.mask_memo_bytes = 0;
  auto off = CompiledGrammar::compile(grammar(kBrackets), *vocab, options);
  REQUIRE(off.ok());
  auto on = CompiledGrammar::compile(grammar(kBrackets), *vocab);
  REQUIRE(on.ok());
  Engine a(**off, Driver::every_mask_kept()), b(**on, Driver::every_mask_kept());
  for (int round = 0; round < 2; ++round) {
    std::vector<Head> ha = a.initial_heads(), hb = b.initial_heads();
    for (const char* t : {"(", "(", "(1", "1)", ")"}) {
      std::vector<uint32_t> wa((*off)->mask_words(), 0), wb((*on)->mask_words(), 0);
      a.fill_text_tokens(ha, wa);
      b.fill_text_tokens(hb, wb);
      CHECK(wa == wb);
      std::vector<Head> na, nb;
      a.step_token(ha, t, na);
      b.step_token(hb, t, nb);
      REQUIRE_FALSE(na.empty());
      REQUIRE_FALSE(nb.empty());
      ha = na;
      hb = nb;
    }
  }
  CHECK((*off)->mask_memo().stats().hits + (*off)->mask_memo().stats().misses == 0);
  CHECK((*on)->mask_memo().stats().hits > 0);
}

TEST_CASE("engine: except! text, ended by its first occurrence", "[engine-unit]") {
  Driver d("start ::= except!('ab') 'ab' ;", {"a", "b", "ab", "x", "xa", "bx", "abx"});
  d.expect_mask(d.after({}), {0, 1, 2, 3, 4, 5});
  // After "a", an occurrence of "ab" is pending: "b" ends the text.
  d.expect_mask(d.after({"a"}), {0, 1, 2, 3, 4});
  d.expect_mask(d.after({"xa"}), {0, 1, 2, 3, 4});
  CHECK_FALSE(d.engine.can_end(d.after({"xa"})));
  CHECK(d.engine.can_end(d.after({"xa", "b"})));
  d.expect_mask(d.after({"ab"}), {});
  CHECK(d.engine.can_end(d.after({"ab"})));
  CHECK(d.rejects(d.after({"x"}), "abx"));
}

TEST_CASE("engine: any! is one whole token of valid UTF-8", "[engine-unit]") {
  // Ids: 0 "<", 1 ">", 2 "a", 3 "<a", 4 "a>", 5 first byte of é, 6 its second byte, 7 é, 8 an invalid byte.
  Driver d("start ::= '<' any! '>' ;", {"<", ">", "a", "<a", "a>", "\xC3", "\xA9", "\xC3\xA9", "\xFF"});
  // any! starts at a token boundary: "<a" cannot be '<' and any!.
  d.expect_mask(d.after({}), {0});
  // Any token whose UTF-8 is complete ('>' cannot finish a character).
  d.expect_mask(d.after({"<"}), {0, 1, 2, 3, 4, 7});
  d.expect_mask(d.after({"<", "a"}), {1});
  d.expect_mask(d.after({"<", "\xC3\xA9"}), {1});
  CHECK(d.engine.can_end(d.after({"<", "a>", ">"})));
}

TEST_CASE("engine: compaction frees dead stacks and keeps every answer", "[engine-unit]") {
  Driver d(kTwoWays, kTwoWaysTokens);
  const std::vector<Head> h1 = d.after({"p"});
  Engine::Mark m1 = d.engine.mark();
  const std::vector<Head> h2 = d.feed(h1, "xy");
  REQUIRE(h2.size() == 2);
  const std::vector<Head> h3 = d.feed(h2, "q");  // the b reading dies here
  REQUIRE(h3.size() == 1);
  Engine::Mark m3 = d.engine.mark();
  const Ids mask1 = d.mask(h1), mask3 = d.mask(h3);
  const bool end3 = d.engine.can_end(h3);
  CHECK(end3);
  const size_t before = d.engine.stack_elements();
  // Keep the first and last steps, as a matcher's history would.
  std::vector<Head> pool = h1;
  pool.insert(pool.end(), h3.begin(), h3.end());
  std::vector<Engine::Mark*> marks{&m1, &m3};
  d.engine.compact(pool, marks);
  CHECK(d.engine.stack_elements() < before);
  CHECK(d.engine.stack_elements() == m3.nodes + m3.edges);  // everything alive was made before m3
  const std::vector<Head> c1(pool.begin(), pool.begin() + h1.size()), c3(pool.begin() + h1.size(), pool.end());
  CHECK(d.mask(c3) == mask3);
  CHECK(d.engine.can_end(c3) == end3);
  // Roll back to the first step, and take the other way.
  d.engine.truncate(m1);
  CHECK(d.mask(c1) == mask1);
  const std::vector<Head> other = d.feed(d.feed(c1, "xy"), "r");
  REQUIRE(other.size() == 1);
  CHECK(d.engine.can_end(other));
  d.expect_mask(d.feed(c1, "xy"), {3, 4});
}

TEST_CASE("engine: forced text and context keys", "[engine-unit]") {
  Driver d("start ::= 'let ' name ' = ' num ';' ; name ::= #'[a-z]+' ; num ::= #'[0-9]+' ;", {"let", " ", "x", "1"});
  const Engine::Forced start = d.engine.forced_text(d.after({}), 100);
  CHECK(start.text == "let ");
  CHECK_FALSE(start.ends);
  CHECK(d.engine.forced_text(d.after({}), 2).text == "le");
  CHECK(d.engine.forced_text(d.after({"let x"}), 100).text.empty());  // a letter, or ' '
  CHECK(d.engine.forced_text(d.after({"let x ="}), 100).text == " ");
  CHECK(d.engine.forced_text(d.after({"let x = 1"}), 100).text.empty());  // a digit, or ';'
  const Engine::Forced end = d.engine.forced_text(d.after({"let x = 1;"}), 100);
  CHECK(end.text.empty());
  CHECK(end.ends);

  // Keys: the top `depth` levels of the stack, the lexeme, its state.
  Driver b(kBrackets, kBracketTokens), other(kBrackets, kBracketTokens);
  auto key = [](Driver& x, const std::vector<std::string>& tokens, int depth) {
    return x.engine.context_key(x.after(tokens), depth);
  };
  CHECK(key(b, {"(", "("}, 2) == key(other, {"(", "("}, 2));
  CHECK(key(b, {"("}, 2) != key(b, {"(", "("}, 2));
  CHECK(key(b, {"(", "(", "("}, 2) == key(b, {"(", "(", "(", "("}, 2));
  CHECK(key(b, {"(", "(", "("}, 3) != key(b, {"(", "(", "(", "("}, 3));
  CHECK(key(b, {"(", "1"}, 2) == key(b, {"(", "12"}, 2));  // the same DFA state after "1" and "12"
  CHECK(key(b, {"1"}, 2) != key(b, {"("}, 2));
}

TEST_CASE("engine: the stack, heads and work limits stop with their message, not a crash", "[engine-unit]") {
  SECTION("max_stack_elements") {
    EngineLimits limits;
    limits.max_stack_elements = 6;
    Driver d(kBrackets, kBracketTokens, limits);
    std::vector<Head> heads = d.engine.initial_heads();
    for (int i = 0; i < 50 && !d.engine.exhausted(); ++i) heads = d.feed(heads, "(");
    REQUIRE(d.engine.exhausted());
    CHECK(d.engine.budget().why() == "the parse stack holds more than 6 nodes and edges (EngineLimits::max_stack_elements)");
    d.engine.budget().clear_exhausted();
    CHECK_FALSE(d.engine.exhausted());
    // The defaults take fifty levels in their stride.
    Driver roomy(kBrackets, kBracketTokens);
    std::vector<Head> deep = roomy.engine.initial_heads();
    for (int i = 0; i < 50; ++i) deep = roomy.feed(deep, "(");
    CHECK_FALSE(roomy.engine.exhausted());
    CHECK_FALSE(deep.empty());
  }
  SECTION("max_heads") {
    EngineLimits limits;
    limits.max_heads = 1;
    Driver d(kTwoWays, kTwoWaysTokens, limits);
    std::vector<Head> heads = d.feed(d.engine.initial_heads(), "px");
    CHECK_FALSE(d.engine.exhausted());  // one reading so far
    heads = d.feed(heads, "y");
    REQUIRE(d.engine.exhausted());
    CHECK(d.engine.budget().why() == "more than 1 readings of the text after one token (EngineLimits::max_heads)");
  }
  SECTION("max_work_per_call, on a grammar whose work grows with the text") {
    EngineLimits limits;
    limits.max_work_per_call = 200;
    const char* source = "start ::= start start | 'a' ;";
    Driver d(source, {"a"}, limits);
    std::vector<Head> heads = d.engine.initial_heads();
    int steps = 0;
    for (; steps < 2000 && !d.engine.exhausted(); ++steps) heads = d.feed(heads, "a");
    REQUIRE(d.engine.exhausted());
    CHECK(steps > 1);
    CHECK(d.engine.budget().why() ==
          "the parser did more than 200 steps of work for one token: the grammar is too ambiguous here "
          "(EngineLimits::max_work_per_call)");
    CHECK(d.engine.budget().peak() > 200);
    // The same text, the first steps of it, within the defaults.
    Driver roomy(source, {"a"});
    std::vector<Head> ok = roomy.engine.initial_heads();
    for (int i = 0; i < steps; ++i) ok = roomy.feed(ok, "a");
    CHECK_FALSE(roomy.engine.exhausted());
    CHECK(roomy.engine.can_end(ok));
  }
  SECTION("max_pending_sets") {
    // Each "<" of free text leaves "/a>" pending, each "</" leaves "a>":
    // with room for the empty set and one more, the second is past the limit.
    EngineLimits limits;
    limits.max_pending_sets = 2;
    const char* source = "start ::= except!('</a>') '</a>' ;";
    const std::vector<std::string> tokens = {"x", "<", "/", "a", ">"};
    Driver d(source, tokens, limits);
    std::vector<Head> heads = d.feed(d.engine.initial_heads(), "x<");
    CHECK_FALSE(d.engine.exhausted());  // one set pending: {"/a>"}
    heads = d.feed(heads, "/");
    REQUIRE(d.engine.exhausted());
    CHECK(d.engine.budget().why() ==
          "more than 2 distinct sets of pending except! occurrences (EngineLimits::max_pending_sets)");
    // The defaults take the whole text, and end it at the string.
    Driver roomy(source, tokens);
    std::vector<Head> all = roomy.feed(roomy.engine.initial_heads(), "x</");
    all = roomy.feed(all, "a");
    CHECK_FALSE(roomy.engine.exhausted());
    CHECK_FALSE(roomy.engine.can_end(all));
    CHECK(roomy.engine.can_end(roomy.feed(all, ">")));
  }
  SECTION("the sequence's budget: slack plus work per byte") {
    EngineLimits limits;
    limits.max_work_per_byte = 1;
    limits.sequence_work_slack = 40;
    Driver d(kBrackets, kBracketTokens, limits);
    d.engine.budget().start_sequence();
    std::vector<Head> heads = d.engine.initial_heads();
    int steps = 0;
    for (; steps < 200 && !d.engine.exhausted(); ++steps) {
      heads = d.feed(heads, "(");
      d.engine.budget().grant_bytes(1);
    }
    REQUIRE(d.engine.exhausted());
    CHECK(steps > 5);  // the slack lasts a while
    CHECK_THAT(d.engine.budget().why(), Catch::StartsWith("the parser did more than"));
    CHECK_THAT(d.engine.budget().why(), Catch::Contains("over this sequence"));
    CHECK_THAT(d.engine.budget().why(), Catch::Contains("(40 + 1 per byte"));
    // Without a per-byte bound (0), the same text goes through.
    limits.max_work_per_byte = 0;
    Driver off(kBrackets, kBracketTokens, limits);
    off.engine.budget().start_sequence();
    std::vector<Head> all = off.engine.initial_heads();
    for (int i = 0; i < 200; ++i) all = off.feed(all, "(");
    CHECK_FALSE(off.engine.exhausted());
  }
}

namespace {
// Runs of one operator cross more lexeme ends than the index classifies
// (CrossInto::kMaxCrossings): "-----" after "-" is walked below "----",
// and so is "1)))))" below "1)))". Whether a run of closing brackets may
// follow depends on how many are open, however deep; a run of minus signs
// reads nothing below the top.
constexpr const char* kRuns = "start ::= '(' start ')' | '-' start | num ; num ::= #'[0-9]+' ;";
std::vector<std::string> run_tokens() {
  std::vector<std::string> tokens = {"1", "(", ")", "-"};
  for (int k = 2; k <= 12; ++k) tokens.push_back(std::string(k, '-'));
  for (int k = 1; k <= 12; ++k) tokens.push_back("1" + std::string(k, ')'));
  for (int k = 2; k <= 12; ++k) tokens.push_back(std::string(k, ')'));
  return tokens;
}
}  // namespace

TEST_CASE("engine: the walks of runs and the crossings after an operand are remembered by the stack they read, never mixed up", "[engine-unit]") {
  // With whole masks kept (the walks and crossings then recorded inside a
  // recorded mask, and found inside one), with whole masks never kept, and
  // with walks alone kept (gathered over the whole mask).
  EngineLimits no_masks = Driver::every_mask_kept();
  no_masks.mask_memo_min_work = SIZE_MAX;
  EngineLimits walks_only = no_masks;
  walks_only.cross_memo_min_work = SIZE_MAX;
  for (const EngineLimits& limits : {Driver::every_mask_kept(), no_masks, walks_only}) {
    const bool crossings_kept = limits.cross_memo_min_work == 0;
    Driver d(kRuns, run_tokens(), limits);
    const auto stepped = [&](const std::vector<Head>& heads) {
      Ids out;
      for (uint32_t id = 0; id < d.vocab().size(); ++id)
        if (!d.vocab().is_special(id) && !d.rejects(heads, d.vocab().bytes(id))) out.insert(id);
      return out;
    };
    // (brackets open, minus signs): "(((((-1" and "(((((--1" walk the same
    // runs of closing brackets from the same stack, but their masks differ
    // (and so do their keys): the second finds the walk inside its own
    // recording, which must then read as deep as that walk did, or
    // "(((((((--1" would be answered with its mask.
    for (auto [open, minus] : {std::pair{2, 1}, {5, 1}, {5, 2}, {7, 2}, {3, 1}, {9, 2}, {9, 1}, {12, 2}, {2, 2}}) {
      INFO(open << " brackets open, " << minus << " minus signs");
      std::vector<std::string> prefix(static_cast<size_t>(open), "(");
      prefix.insert(prefix.end(), static_cast<size_t>(minus), "-");
      std::vector<Head> heads = d.after(prefix);
      CHECK(d.mask(heads) == stepped(heads));  // runs of minus signs
      prefix.push_back("1");
      heads = d.after(prefix);
      CHECK(d.mask(heads) == stepped(heads));  // runs of closing brackets
      prefix.push_back(")");
      heads = d.after(prefix);
      CHECK(d.mask(heads) == stepped(heads));
    }
    CHECK(d.engine.walks_looked_up() > 0);
    CHECK(d.engine.walks_remembered() > 0);
    CHECK((d.engine.crossings_looked_up() > 0) == crossings_kept);
    CHECK((d.engine.crossings_remembered() > 0) == crossings_kept);
  }
}

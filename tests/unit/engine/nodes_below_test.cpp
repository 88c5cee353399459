// The memo of the stack nodes below a fork (engine/nodes_below.h) on its
// own, and the engine through it: an ambiguous part that could have ended
// at any earlier byte, read at the reference recognizer's pace (the
// reductions of a long production through every new edge no longer walk
// the n² paths below it).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "helpers.h"
#include "nodes_below.h"
#include "oracle.h"
#include "text_match.h"

using namespace cgram;
using cgram::test::grammar;
using cgram::test::oracle_grammar;

TEST_CASE("nodes below: a set found by its node's serial and depth only; cleared, nothing is", "[engine-unit]") {
  NodesBelow memo;
  const std::vector<uint32_t> two_down{3, 5, 8}, three_down{1, 2};
  memo.keep(7, 2, two_down);
  memo.keep(7, 3, three_down);
  const auto found = memo.find(7, 2);
  REQUIRE(found.has_value());
  CHECK(std::vector<uint32_t>(memo.nodes(*found).begin(), memo.nodes(*found).end()) == two_down);
  const auto deeper = memo.find(7, 3);
  REQUIRE(deeper.has_value());
  CHECK(std::vector<uint32_t>(memo.nodes(*deeper).begin(), memo.nodes(*deeper).end()) == three_down);
  CHECK_FALSE(memo.find(8, 2).has_value());  // another node
  CHECK_FALSE(memo.find(7, 4).has_value());  // another depth
  CHECK(memo.entries() == 2);
  CHECK(memo.kept() == 5);
  memo.clear();
  CHECK_FALSE(memo.find(7, 2).has_value());
  CHECK(memo.kept() == 0);
}

TEST_CASE("nodes below: thousands of sets through the table's growth, each found, none invented", "[engine-unit]") {
  NodesBelow memo;
  constexpr uint32_t kSerials = 3000;
  for (uint32_t serial = 1; serial <= kSerials; ++serial)
    for (uint32_t depth = 2; depth < 5; ++depth) {
      const std::vector<uint32_t> nodes{serial, depth, serial + depth};
      memo.keep(serial, depth, nodes);
    }
  CHECK(memo.entries() == kSerials * 3);
  for (uint32_t serial = 1; serial <= kSerials; ++serial)
    for (uint32_t depth = 2; depth < 5; ++depth) {
      const auto found = memo.find(serial, depth);
      REQUIRE(found.has_value());
      const auto nodes = memo.nodes(*found);
      REQUIRE(nodes.size() == 3);
      CHECK((nodes[0] == serial && nodes[1] == depth && nodes[2] == serial + depth));
    }
  CHECK_FALSE(memo.find(kSerials + 1, 2).has_value());
  CHECK_FALSE(memo.find(5, 5).has_value());
  // Kept again under the same key: the newest set answers, still one entry.
  const std::vector<uint32_t> again{42};
  memo.keep(5, 2, again);
  CHECK(memo.entries() == kSerials * 3);
  CHECK(memo.nodes(*memo.find(5, 2)).size() == 1);
}

TEST_CASE("nodes below: past its bound the memo starts again, and keeps the newest set", "[engine-unit]") {
  NodesBelow memo;
  const std::vector<uint32_t> big(NodesBelow::kMinKept - 10, 1u), small{4, 6, 9, 11, 12, 13, 14, 15, 16, 17, 18};
  memo.keep(1, 2, big);
  CHECK(memo.find(1, 2).has_value());
  memo.keep(2, 2, small);  // 11 more would pass kMinKept: it starts again
  CHECK_FALSE(memo.find(1, 2).has_value());
  const auto found = memo.find(2, 2);
  REQUIRE(found.has_value());
  CHECK(found->size == small.size());
  CHECK(memo.kept() == small.size());
  // A larger bound of the caller's (a stack this large) keeps both.
  NodesBelow roomy;
  roomy.keep(1, 2, big);
  roomy.keep(2, 2, small, 2 * NodesBelow::kMinKept);
  CHECK(roomy.find(1, 2).has_value());
  CHECK(roomy.find(2, 2).has_value());
}

TEST_CASE("an ambiguous part that may end at any byte is read like the oracle reads it, long texts included",
          "[engine]") {
  // Each `a` is free text or three `a`s: every split of the text into
  // lexemes is a reading, and the node after two `a`s stands on every
  // earlier byte. Before the memo, match stopped at byte 38 (its work grew
  // with the cube of the text, per byte).
  const auto g = grammar("start ::= value \"c\" ;\na = #\".\"* | b2 ;\nb2 ::= a a a ;\nvalue ::= a ;\n");
  const auto oracle = oracle_grammar(*g);
  for (const std::string& text : {std::string("c"), std::string("xc"), std::string(40, 'x') + "c",
                                  std::string(40, 'x'), std::string(40, 'x') + "c\xff"}) {
    const TextMatch mine = match_text(*g, text);
    const oracle::MatchResult want = oracle::match_text(oracle, text);
    INFO(text);
    REQUIRE(mine.error.empty());
    CHECK(static_cast<int>(mine.verdict) == static_cast<int>(want.verdict));
    CHECK(mine.viable_bytes == (want.verdict == oracle::Verdict::Rejected ? want.viable_bytes : text.size()));
  }
  // 250 bytes: well within match's default budget (the oracle takes about
  // half a second here).
  const TextMatch long_text = match_text(*g, std::string(250, 'x') + "c");
  INFO(long_text.error);
  CHECK(long_text.verdict == TextVerdict::Complete);
}

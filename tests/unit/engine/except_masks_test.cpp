// The masks of free text kept per node and DFA state (engine/except_masks.h):
// found by the whole key, the entry used least recently replaced, a mask a
// limit cut short never found, and nodes renumbered by compaction.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "except_masks.h"

using namespace cgram;

TEST_CASE("except masks: found by node, serial, terminal and state, and by their size", "[engine-unit]") {
  ExceptMasks masks;
  std::vector<uint32_t> words{1, 2, 3};
  const ExceptMasks::Key key{4, 40, 2, 7};
  CHECK(masks.find(key, 3) == nullptr);
  CHECK(masks.keep(key, words) == std::vector<uint32_t>{1, 2, 3});
  REQUIRE(masks.find(key, 3) != nullptr);
  CHECK(*masks.find(key, 3) == std::vector<uint32_t>{1, 2, 3});
  CHECK(masks.find(key, 4) == nullptr);                      // another vocabulary's size
  CHECK(masks.find(ExceptMasks::Key{4, 41, 2, 7}, 3) == nullptr);  // the slot reused by another node
  CHECK(masks.find(ExceptMasks::Key{4, 40, 2, 8}, 3) == nullptr);  // another DFA state
  CHECK(masks.find(ExceptMasks::Key{4, 40, 3, 7}, 3) == nullptr);  // another terminal
}

TEST_CASE("except masks: two entries, the one used least recently replaced; a cut-short mask is not found",
          "[engine-unit]") {
  ExceptMasks masks;
  const ExceptMasks::Key a{1, 10, 0, 0}, b{2, 20, 0, 0}, c{3, 30, 0, 0};
  std::vector<uint32_t> wa{1}, wb{2}, wc{3};
  masks.keep(a, wa);
  masks.keep(b, wb);
  CHECK(masks.find(a, 1) != nullptr);  // a used after b: b is the older
  masks.keep(c, wc);
  CHECK(masks.find(a, 1) != nullptr);
  CHECK(masks.find(b, 1) == nullptr);
  CHECK(masks.find(c, 1) != nullptr);
  CHECK(wc == std::vector<uint32_t>{2});  // the replaced entry's buffer came back
  std::vector<uint32_t> cut{9};
  CHECK(masks.keep(std::nullopt, cut) == std::vector<uint32_t>{9});  // returned, not kept
  CHECK(masks.find(ExceptMasks::Key{UINT32_MAX, 0, 0, 0}, 1) == nullptr);
}

TEST_CASE("except masks: compaction moves the nodes, and forgets the ones gone", "[engine-unit]") {
  ExceptMasks masks;
  std::vector<uint32_t> w1{5}, w2{6};
  masks.keep(ExceptMasks::Key{3, 33, 1, 1}, w1);
  masks.keep(ExceptMasks::Key{1, 11, 1, 1}, w2);
  constexpr uint32_t kGone = UINT32_MAX;
  const std::vector<uint32_t> node_to{kGone, kGone, 0, 1};  // node 3 is now 1, node 1 is gone
  masks.renumber(node_to, kGone);
  REQUIRE(masks.find(ExceptMasks::Key{1, 33, 1, 1}, 1) != nullptr);
  CHECK(*masks.find(ExceptMasks::Key{1, 33, 1, 1}, 1) == std::vector<uint32_t>{5});
  CHECK(masks.find(ExceptMasks::Key{1, 11, 1, 1}, 1) == nullptr);
}

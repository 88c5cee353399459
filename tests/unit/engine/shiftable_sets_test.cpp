// The engine's shiftable sets and their readings (engine/shiftable_sets.h)
// on their own: one id per distinct set and per distinct reading, depths
// interned with their state and bounded, the bytes a set's terminals start
// with, and the deepest read per byte.
#include <catch2/catch.hpp>

#include <bitset>
#include <vector>

#include "shiftable_sets.h"

using namespace cgram;

namespace {
// Terminal t starts with the byte 'a' + t; terminal 3 also with 'z'.
std::vector<std::bitset<256>> shiftable_test_first_bytes() {
  std::vector<std::bitset<256>> bytes(4);
  for (size_t t = 0; t < bytes.size(); ++t) bytes[t].set('a' + t);
  bytes[3].set('z');
  return bytes;
}
}  // namespace

TEST_CASE("shiftable sets: one id per distinct set, with its terminals' first bytes, references stable",
          "[engine-unit]") {
  const auto first = shiftable_test_first_bytes();
  ShiftableSets sets;
  const uint32_t a = sets.intern_set({0, 2}, first);
  const uint32_t b = sets.intern_set({3}, first);
  CHECK(a != b);
  CHECK(sets.intern_set({0, 2}, first) == a);
  CHECK(sets.set_count() == 2);
  CHECK(sets.first_bytes(a).count() == 2);
  CHECK(sets.first_bytes(a)['a']);
  CHECK(sets.first_bytes(a)['c']);
  CHECK_FALSE(sets.first_bytes(a)['b']);
  CHECK(sets.first_bytes(b)['z']);
  const uint32_t empty = sets.intern_set({}, first);
  CHECK(sets.first_bytes(empty).none());
  // A reading's set is the set it was made of, and stays where it is.
  const auto reading = static_cast<int32_t>(sets.intern_reading(a, 5, nullptr));
  const std::vector<uint32_t>* held = &sets.set_of(reading);
  const std::vector<std::bitset<256>> many(4 + 2000);
  for (uint32_t n = 0; n < 2000; ++n) sets.intern_set({n % 4, 4 + n}, many);
  CHECK(&sets.set_of(reading) == held);
  CHECK(*held == std::vector<uint32_t>{0, 2});
}

TEST_CASE("shiftable sets: readings by set, state and depths; depths interned with their state", "[engine-unit]") {
  const auto first = shiftable_test_first_bytes();
  ShiftableSets sets;
  const uint32_t set = sets.intern_set({1, 3}, first);
  const std::vector<uint8_t> shallow{0, 1}, deep{0, 7};
  const auto r1 = static_cast<int32_t>(sets.intern_reading(set, 10, &shallow));
  CHECK(sets.intern_reading(set, 10, &shallow) == static_cast<uint32_t>(r1));
  const auto r2 = static_cast<int32_t>(sets.intern_reading(set, 10, &deep));
  const auto unknown = static_cast<int32_t>(sets.intern_reading(set, 10, nullptr));
  CHECK(r1 != r2);
  CHECK(unknown != r1);
  CHECK(unknown != r2);
  CHECK(sets.reading(unknown).depths == ShiftableSets::kUnknownDepths);
  CHECK(sets.reading(r1).set == set);
  CHECK(sets.depths(sets.reading(r1).depths) == shallow);
  CHECK(sets.deepest(sets.reading(r1).depths) == 1);
  CHECK(sets.deepest(sets.reading(r2).depths) == 7);
  // The same depths in another state are another state's terminals: their own id.
  const auto other_state = static_cast<int32_t>(sets.intern_reading(set, 11, &shallow));
  CHECK(sets.reading(other_state).depths != sets.reading(r1).depths);
  CHECK(sets.reading_count() == 4);
}

TEST_CASE("shiftable sets: past the bound on distinct depths only those kept fit", "[engine-unit]") {
  ShiftableSets sets;
  const uint32_t set = sets.intern_set({0}, shiftable_test_first_bytes());
  std::vector<uint8_t> depths(2);
  for (size_t n = 0; n < ShiftableSets::kMaxDepths; ++n) {
    depths = {static_cast<uint8_t>(n % 251), static_cast<uint8_t>(n / 251)};
    REQUIRE(sets.depths_fit(1, depths));
    sets.intern_reading(set, 1, &depths);
  }
  CHECK(sets.depths_fit(1, {0, 0}));            // kept already
  CHECK_FALSE(sets.depths_fit(1, {250, 250}));  // new
  CHECK_FALSE(sets.depths_fit(2, {0, 0}));      // the same bytes in another state are new
}

TEST_CASE("shiftable sets: the deepest read of the terminals a byte starts", "[engine-unit]") {
  const auto first = shiftable_test_first_bytes();
  ShiftableSets sets;
  const uint32_t set = sets.intern_set({0, 1, 3}, first);
  const std::vector<uint32_t> active{0, 1, 3};  // the state's terminals with actions, in the depths' order
  const std::vector<uint8_t> depths{2, 5, 9};
  const int32_t id = sets.reading(static_cast<int32_t>(sets.intern_reading(set, 4, &depths))).depths;
  CHECK(sets.deepest_for_byte(id, 'a', active, first) == 2);
  CHECK(sets.deepest_for_byte(id, 'b', active, first) == 5);
  CHECK(sets.deepest_for_byte(id, 'd', active, first) == 9);
  CHECK(sets.deepest_for_byte(id, 'z', active, first) == 9);
  CHECK(sets.deepest_for_byte(id, 'q', active, first) == 0);  // no terminal starts with it: nothing read
  CHECK(sets.deepest_for_byte(id, 'b', active, first) == 5);  // asked again: the kept answer
}

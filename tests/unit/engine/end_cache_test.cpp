// The engine's cache of lexeme ends (engine/end_cache.h) on its own:
// nothing allocated until used, empty entries zeroed, one slot per key,
// copies independent.
#include <catch2/catch.hpp>

#include "end_cache.h"

using namespace cgram;

TEST_CASE("end cache: allocated on first use, its entries empty, one slot per key, copies apart", "[engine-unit]") {
  EndCache cache;
  CHECK_FALSE(cache.allocated());
  EndCache unused_copy(cache);
  CHECK_FALSE(unused_copy.allocated());  // a copy of an unused cache costs nothing either
  EndCache::Entry& entry = cache.slot(7, 3);
  CHECK(cache.allocated());
  CHECK(entry.serial == 0);  // empty: no node has serial 0
  CHECK(entry.count == 0);
  CHECK(&cache.slot(7, 3) == &entry);  // the same key, the same slot
  entry = {5, 7, 3, 1, {9, 0, 0, 0}, {11, 0, 0, 0}};
  EndCache copy(cache);
  CHECK(copy.allocated());
  EndCache::Entry& copied = copy.slot(7, 3);
  CHECK(&copied != &entry);
  CHECK(copied.node == 5);
  CHECK(copied.results[0] == 9);
  copied.node = 6;
  CHECK(entry.node == 5);  // the copy is its own
  // The keys spread: of 64 serials for one terminal, most have slots of their own.
  size_t distinct = 0;
  for (uint32_t serial = 100; serial < 164; ++serial) {
    EndCache::Entry& e = cache.slot(serial, 3);
    if (e.serial == 0) ++distinct, e.serial = serial;
  }
  CHECK(distinct > 56);
}

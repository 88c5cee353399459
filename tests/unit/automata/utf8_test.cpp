// Code point ranges → UTF-8 byte sequences, checked on every code point.
#include <catch2/catch.hpp>

#include <random>

#include "utf8.h"
#include "utf8_ranges.h"

using namespace cgram;

namespace {
bool matches(const std::vector<ir::Utf8Sequence>& seqs, std::string_view bytes) {
  size_t hits = 0;
  for (const auto& seq : seqs) {
    if (seq.length != bytes.size()) continue;
    bool all = true;
    for (size_t i = 0; i < bytes.size(); ++i) {
      uint8_t b = static_cast<uint8_t>(bytes[i]);
      all = all && b >= seq.bytes[i].lo && b <= seq.bytes[i].hi;
    }
    hits += all;
  }
  REQUIRE(hits <= 1);  // the sequences are disjoint
  return hits == 1;
}
}  // namespace

TEST_CASE("the full range covers every scalar value exactly once", "[utf8]") {
  auto seqs = ir::utf8_sequences(0, 0x10FFFF);
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string bytes;
    append_utf8(bytes, cp);
    if (!matches(seqs, bytes)) FAIL("U+" << std::hex << cp << " not covered");
  }
  // Surrogates, overlong forms and values past U+10FFFF are not covered.
  for (std::string bad : {"\xED\xA0\x80", "\xED\xBF\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x9F\xBF",
                          "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80"})
    CHECK_FALSE(matches(seqs, bad));
}

TEST_CASE("random ranges: membership agrees with the range for sampled code points", "[utf8]") {
  std::mt19937 rng(7);
  std::vector<uint32_t> interesting{0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xE000,
                                    0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0xFFFFF, 0x100000, 0x10FFFF};
  for (int trial = 0; trial < 300; ++trial) {
    uint32_t a = trial < 100 ? interesting[rng() % interesting.size()] : rng() % 0x110000;
    uint32_t b = trial % 2 ? interesting[rng() % interesting.size()] : rng() % 0x110000;
    uint32_t lo = std::min(a, b), hi = std::max(a, b);
    auto seqs = ir::utf8_sequences(lo, hi);
    for (int s = 0; s < 200; ++s) {
      uint32_t cp = s < 16 ? interesting[s] : rng() % 0x110000;
      for (uint32_t probe : {cp, lo, hi, lo ? lo - 1 : 0, hi + 1}) {
        if (probe > 0x10FFFF || (probe >= 0xD800 && probe <= 0xDFFF)) continue;
        std::string bytes;
        append_utf8(bytes, probe);
        INFO("range " << std::hex << lo << "-" << hi << " probe " << probe);
        CHECK(matches(seqs, bytes) == (probe >= lo && probe <= hi));
      }
    }
  }
}

TEST_CASE("UTF-8 decoding rejects what is not a scalar value", "[utf8]") {
  auto decode = [](std::string s) {
    size_t pos = 0;
    auto cp = decode_utf8(s, pos);
    return cp && pos == s.size() ? cp : std::nullopt;
  };
  CHECK(decode("\xF0\x9F\x98\x80") == 0x1F600u);
  CHECK(decode("\xC3\xA9") == 0xE9u);
  CHECK_FALSE(decode("\xED\xA0\x80"));
  CHECK_FALSE(decode("\xC0\x80"));
  CHECK_FALSE(decode("\xF4\x90\x80\x80"));
  CHECK_FALSE(decode("\xC3"));
  CHECK(first_invalid_utf8("ab\xC3\xA9\xFF") == 4u);
  CHECK_FALSE(first_invalid_utf8("ok \xE2\x82\xAC"));
}

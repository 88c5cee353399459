#pragma once
// The unit of the mask targets (issue 56, docs/BENCHMARKS.md): one OR of a
// full-vocabulary bitset into another, on this machine, now. Absolute
// times differ 2-4x between machines of one kind; a mask's time over this
// floor does not, and says how many whole-vocabulary ORs a mask is worth.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "mask_words.h"

namespace cgram {

// Microseconds for one or_words of `words` mask words into as many: the
// median of kBatches timed batches of kBatch ORs, both bitsets warm in the
// cache as a mask's own sets are when it is made.
inline double or_floor_median_us(size_t words) {
  constexpr int kBatch = 32, kBatches = 301;
  std::vector<uint32_t> into(std::max<size_t>(words, 1), 0x01234567u), from(into.size(), 0x89ABCDEFu);
  std::vector<double> per_or;
  per_or.reserve(kBatches);
  for (int b = -20; b < kBatches; ++b) {  // the first batches warm the cache and the clock
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < kBatch; ++k) {
      or_words(into, from);
      // The same OR again would change nothing: the barrier keeps every one.
      asm volatile("" : : "r"(into.data()), "r"(from.data()) : "memory");
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (b >= 0) per_or.push_back(us / kBatch);
  }
  std::nth_element(per_or.begin(), per_or.begin() + kBatches / 2, per_or.end());
  return per_or[kBatches / 2];
}

// The floor: the least of kRounds medians (about 3 ms each with 128,000
// tokens). On a shared machine one median now and then comes out 1.5-2x
// (another process on the core); the least is the machine's own figure.
inline double or_floor_us(size_t words) {
  constexpr int kRounds = 5;
  double least = or_floor_median_us(words);
  for (int r = 1; r < kRounds; ++r) least = std::min(least, or_floor_median_us(words));
  return least;
}

}  // namespace cgram

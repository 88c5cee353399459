#pragma once
// A set of non-zero 64-bit keys, open addressing with linear probing: no
// allocation per key (std::unordered_set allocates a node for each, which
// was a quarter of the time of an ambiguous grammar's reductions).
#include <cstdint>
#include <vector>

namespace cgram {

class KeySet {
 public:
  // False when the key was there already. Key 0 is reserved (empty slot).
  bool insert(uint64_t key) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    // Fibonacci hashing: the product's top bits (the low ones of keys that
    // differ only in their high half would all collide).
    for (size_t i = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);; i = (i + 1) & mask) {
      if (slots_[i] == key) return false;
      if (slots_[i] == 0) {
        slots_[i] = key;
        ++size_;
        return true;
      }
    }
  }
  void clear() {
    if (size_ == 0) return;
    std::fill(slots_.begin(), slots_.end(), 0);
    size_ = 0;
  }
  size_t size() const { return size_; }

 private:
  void grow() {
    std::vector<uint64_t> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, 0);
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(slots_.size()));
    size_ = 0;
    for (uint64_t k : old)
      if (k != 0) insert(k);
  }

  std::vector<uint64_t> slots_;
  size_t size_ = 0;
  unsigned shift_ = 64;
};

}  // namespace cgram

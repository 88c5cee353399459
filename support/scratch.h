#pragma once
// Reusable vectors for the per-token path: a lease hands out a cleared
// vector whose capacity survives from call to call, so that once warm the
// matcher allocates nothing. Leases nest (calls recurse) and end in reverse
// order, as scopes do.
#include <deque>
#include <vector>

namespace cgram {

template <typename T>
class ScratchPool {
 public:
  class Lease {
   public:
    explicit Lease(ScratchPool& pool) : pool_(pool), vector_(pool.take()) {}
    ~Lease() { --pool_.used_; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    std::vector<T>& operator*() { return vector_; }
    std::vector<T>* operator->() { return &vector_; }

   private:
    ScratchPool& pool_;
    std::vector<T>& vector_;
  };

  // Copies carry no leases: a copy starts empty.
  ScratchPool() = default;
  ScratchPool(const ScratchPool&) {}
  ScratchPool& operator=(const ScratchPool&) { return *this; }

 private:
  std::vector<T>& take() {
    if (used_ == rows_.size()) rows_.emplace_back();
    std::vector<T>& v = rows_[used_++];
    v.clear();
    return v;
  }
  std::deque<std::vector<T>> rows_;  // stable addresses
  size_t used_ = 0;
};

}  // namespace cgram

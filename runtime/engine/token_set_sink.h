#pragma once
// Where a mask's precomputed token sets can go instead of being ORed into it
// on the CPU. A mask is the OR of whole-vocabulary sets taken from the token
// index (and the grammar's any! sets), plus tokens found by walking the
// vocabulary trie with the parse stack. A sink that takes a set promises to
// OR it in elsewhere (on a GPU: gpu/mask_plan.h); the walked tokens
// always reach the mask itself.
#include <cstdint>
#include <span>

namespace cgram {

class TokenSetSink {
 public:
  // True when the sink takes `set` (mask words, owned by the compiled
  // grammar and never moved while it lives); false: the engine ORs it in.
  virtual bool take(std::span<const uint32_t> set) = 0;

 protected:
  ~TokenSetSink() = default;
};

}  // namespace cgram

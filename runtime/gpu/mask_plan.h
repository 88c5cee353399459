#pragma once
// Masks planned for a device that ORs token sets (the GPU kernels of
// codegen/gpu_kernels.h): the host does only what needs the parse stack.
//
// A mask is the OR of whole-vocabulary token sets from the token index, plus
// tokens walked with the parser (engine/engine.h). For each row, the
// planner asks the matcher for its mask with a sink that takes every set the
// table knows (or can still register), so the host's part is small: the
// walked tokens and end of sequence. The device holds each set once per
// table (gpu/gpu_masker.h has one per masker); a batch sends only set ids
// and those tokens.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "matcher.h"

namespace cgram {

// The sets of one compiled grammar a device holds, by id. A set is
// registered the first time a mask uses it, by address: index entries live
// as long as the compiled grammar and never move (entries built lazily
// appear as masks need them). Thread-safe.
class TokenSetTable {
 public:
  // Past `max_bytes` of sets, new ones are refused: they are ORed on the
  // host and reach the device as tokens (docs/LIMITS.md).
  static constexpr size_t kDefaultMaxBytes = size_t{256} << 20;
  explicit TokenSetTable(std::shared_ptr<const CompiledGrammar> grammar, size_t max_bytes = kDefaultMaxBytes);

  const CompiledGrammar& grammar() const { return *grammar_; }
  size_t words() const { return words_; }  // of each set
  size_t size() const;                     // sets registered
  // The set's id, registered now if new; nullopt when it is not a whole
  // mask or the table is full.
  std::optional<uint32_t> id_of(std::span<const uint32_t> set);
  // Sets [first, size()) one after the other, appended to `out` (what a
  // device has not received yet); returns how many.
  size_t copy_from(size_t first, std::vector<uint32_t>& out) const;

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  size_t words_;
  size_t max_sets_;
  mutable std::mutex mutex_;
  std::unordered_map<const uint32_t*, uint32_t> ids_;
  std::vector<const uint32_t*> sets_;
};

// One batch, as the kernels take it: plan row y is written to bitmask row
// out_rows[y] as the OR of sets set_ids[row_offsets[y] .. row_offsets[y+1]),
// then tokens[i] is set in bitmask row token_rows[i].
struct MaskPlan {
  std::vector<uint32_t> set_ids;
  std::vector<uint32_t> row_offsets{0};
  std::vector<uint32_t> out_rows;
  std::vector<uint32_t> tokens, token_rows;
  size_t rows() const { return out_rows.size(); }
  void clear();
};

class MaskPlanner {
 public:
  explicit MaskPlanner(TokenSetTable& table) : table_(table) {}
  // Appends `matcher`'s mask as a row written to bitmask row `out_row`.
  // False when the matcher has an error, or another grammar (the row is
  // then all clear, as Matcher::fill_mask leaves it).
  bool add_row(Matcher& matcher, uint32_t out_row, MaskPlan& plan);

 private:
  TokenSetTable& table_;
  std::vector<uint32_t> residual_;  // the host's part of one row, as mask words
};

}  // namespace cgram

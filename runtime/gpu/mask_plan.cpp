#include "mask_plan.h"

#include <algorithm>
#include <bit>

namespace cgram {

TokenSetTable::TokenSetTable(std::shared_ptr<const CompiledGrammar> grammar, size_t max_bytes)
    : grammar_(std::move(grammar)),
      words_(grammar_->mask_words()),
      max_sets_(words_ == 0 ? 0 : max_bytes / (words_ * sizeof(uint32_t))) {}

size_t TokenSetTable::size() const {
  std::lock_guard lock(mutex_);
  return sets_.size();
}

std::optional<uint32_t> TokenSetTable::id_of(std::span<const uint32_t> set) {
  if (set.size() != words_ || words_ == 0) return std::nullopt;
  std::lock_guard lock(mutex_);
  if (auto it = ids_.find(set.data()); it != ids_.end()) return it->second;
  if (sets_.size() >= max_sets_) return std::nullopt;
  const auto id = static_cast<uint32_t>(sets_.size());
  sets_.push_back(set.data());
  ids_.emplace(set.data(), id);
  return id;
}

size_t TokenSetTable::copy_from(size_t first, std::vector<uint32_t>& out) const {
  std::lock_guard lock(mutex_);
  if (first >= sets_.size()) return 0;
  out.reserve(out.size() + (sets_.size() - first) * words_);
  for (size_t i = first; i < sets_.size(); ++i) out.insert(out.end(), sets_[i], sets_[i] + words_);
  return sets_.size() - first;
}

void MaskPlan::clear() {
  set_ids.clear();
  row_offsets.assign(1, 0);
  out_rows.clear();
  tokens.clear();
  token_rows.clear();
}

namespace {

// Takes every set the table accepts, each id once per row.
class PlanSink final : public TokenSetSink {
 public:
  PlanSink(TokenSetTable& table, std::vector<uint32_t>& ids, size_t first) : table_(table), ids_(ids), first_(first) {}
  bool take(std::span<const uint32_t> set) override {
    const std::optional<uint32_t> id = table_.id_of(set);
    if (!id) return false;
    if (std::find(ids_.begin() + static_cast<ptrdiff_t>(first_), ids_.end(), *id) == ids_.end()) ids_.push_back(*id);
    return true;
  }

 private:
  TokenSetTable& table_;
  std::vector<uint32_t>& ids_;
  size_t first_;
};

}  // namespace

bool MaskPlanner::add_row(Matcher& matcher, uint32_t out_row, MaskPlan& plan) {
  const size_t first = plan.set_ids.size();
  bool filled = false;
  if (matcher.has_grammar() && &matcher.grammar() == &table_.grammar()) {
    residual_.resize(table_.words());
    PlanSink sink(table_, plan.set_ids, first);
    filled = matcher.fill_mask(residual_, &sink);
  }
  if (!filled) {
    plan.set_ids.resize(first);  // an all-clear row
    residual_.assign(table_.words(), 0);
  }
  plan.out_rows.push_back(out_row);
  plan.row_offsets.push_back(static_cast<uint32_t>(plan.set_ids.size()));
  for (uint32_t w = 0; w < residual_.size(); ++w)
    for (uint32_t bits = residual_[w]; bits; bits &= bits - 1) {
      plan.tokens.push_back(w * 32 + static_cast<uint32_t>(std::countr_zero(bits)));
      plan.token_rows.push_back(out_row);
    }
  return filled;
}

}  // namespace cgram

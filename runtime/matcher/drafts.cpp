#include "drafts.h"

#include <algorithm>
#include <mutex>

namespace cgram {

DraftModel::DraftModel(const DraftOptions& options) : options_(options), buckets_(std::max<size_t>(options.buckets, 1)) {}

void DraftModel::add(Bucket& b, uint32_t token) {
  if (b.total >= (1u << 30)) {  // halve before the counts could overflow
    b.total = 0;
    for (Entry& e : b.entries) b.total += (e.count /= 2);
  }
  ++b.total;
  Entry* least = &b.entries[0];
  for (Entry& e : b.entries) {
    if (e.count > 0 && e.token == token) {
      ++e.count;
      return;
    }
    if (e.count < least->count) least = &e;
  }
  // A new token takes a free slot, or wears down the rarest one (which it
  // replaces once that is worn out): frequent tokens keep their counts.
  if (least->count <= 1) *least = {token, 1};
  else --least->count;
}

void DraftModel::record(const Matcher& matcher, uint32_t token) {
  if (!matcher.has_grammar() || matcher.has_error() || matcher.is_finished()) return;
  if (matcher.grammar().vocabulary().is_eos(token)) return;
  const uint64_t key = matcher.context_key(options_.context_depth);
  std::unique_lock lock(mutex_);
  Bucket& b = bucket_for(key);
  if (b.key != key) {
    // Another state holds the bucket: it decays, and gives way once worn out.
    if (b.total > 0) {
      b.total = 0;
      for (Entry& e : b.entries) b.total += (e.count /= 2);
      if (b.total > 0) return;
    }
    b = Bucket{};
    b.key = key;
  }
  add(b, token);
}

void DraftModel::learn(const std::shared_ptr<const CompiledGrammar>& grammar, std::span<const uint32_t> tokens) {
  Matcher m(grammar);
  for (uint32_t t : tokens) {
    record(m, t);
    if (m.advance(t) != AdvanceResult::Ongoing) break;
  }
}

std::vector<uint32_t> DraftModel::propose(Matcher& matcher, size_t k) const {
  std::vector<uint32_t> drafts;
  if (!matcher.has_grammar() || matcher.has_error() || matcher.is_finished()) return drafts;
  while (drafts.size() < k) {
    const uint64_t key = matcher.context_key(options_.context_depth);
    Entry best;
    uint32_t total = 0;
    {
      std::shared_lock lock(mutex_);
      const Bucket& b = bucket_for(key);
      if (b.key != key || b.total == 0) break;
      total = b.total;
      for (const Entry& e : b.entries)
        if (e.count > best.count) best = e;
    }
    if (best.count < options_.min_count || best.count < options_.threshold * total) break;
    if (matcher.advance(best.token) != AdvanceResult::Ongoing) break;
    drafts.push_back(best.token);
  }
  matcher.rollback(drafts.size());
  return drafts;
}

}  // namespace cgram

#include "ngram_sampler.h"

namespace cgram::cli {

uint64_t NgramSampler::context_hash(std::span<const uint32_t> context) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ context.size();
  for (uint32_t t : context) h = (h ^ t) * 0x100000001B3ull;
  return h;
}

NgramSampler::NgramSampler(const std::vector<std::vector<uint32_t>>& documents, uint32_t end) {
  for (const std::vector<uint32_t>& tokens : documents) {
    // Start markers first: the model learns how documents begin.
    std::vector<uint32_t> doc(kOrder - 1, kStart);
    doc.insert(doc.end(), tokens.begin(), tokens.end());
    doc.push_back(end);
    for (size_t i = kOrder - 1; i < doc.size(); ++i)
      for (size_t length = 0; length < kOrder; ++length)
        ++counts_[length][context_hash(std::span(doc).subspan(i - length, length))][doc[i]];
  }
}

uint32_t NgramSampler::pick(std::span<const uint32_t> allowed, std::span<const uint32_t> before,
                            std::mt19937_64& rng) const {
  // The distributions after each context length, and how much each weighs:
  // ten times more per token of context.
  struct Seen {
    const std::unordered_map<uint32_t, uint32_t>* next;
    double total, weight;
  };
  std::vector<uint32_t> context(kOrder - 1, kStart);
  context.insert(context.end(), before.begin(), before.end());
  const std::span<const uint32_t> last(context.data() + context.size() - (kOrder - 1), kOrder - 1);
  std::vector<Seen> seen;
  double weight = 1;
  for (size_t length = 0; length < kOrder; ++length, weight *= 10) {
    auto it = counts_[length].find(context_hash(last.subspan(last.size() - length, length)));
    if (it == counts_[length].end()) continue;
    double total = 0;
    for (const auto& [t, n] : it->second) total += n;
    seen.push_back({&it->second, total, weight});
  }
  // A floor of 0.1 % of the mass in all (inside a JSON string nearly every
  // token is allowed) keeps every allowed token possible.
  double mass = 0;
  for (const Seen& s : seen) mass += s.weight;
  const double floor = 1e-3 * (mass > 0 ? mass : 1) / double(allowed.size());
  std::vector<double> weights;
  weights.reserve(allowed.size());
  for (uint32_t t : allowed) {
    double w = floor;
    for (const Seen& s : seen)
      if (auto it = s.next->find(t); it != s.next->end()) w += s.weight * double(it->second) / s.total;
    weights.push_back(w);
  }
  std::discrete_distribution<size_t> draw(weights.begin(), weights.end());
  return allowed[draw(rng)];
}

}  // namespace cgram::cli

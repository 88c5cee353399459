#pragma once
// What the benchmark commands share: the clock, percentiles, and documents
// as token ids.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cgram {
class CompiledGrammar;
}

namespace cgram::cli {

struct BenchArgs;
using Clock = std::chrono::steady_clock;
// (name, token ids) per document.
using Documents = std::vector<std::pair<std::string, std::vector<uint32_t>>>;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5));
  return v[i];
}

// cgram bench --gpu (tools/cgram/gpu_bench.cpp): the GPU masker and the
// logits kernel on a batch of matchers standing inside `docs`.
int bench_gpu(const BenchArgs& args, const std::shared_ptr<const CompiledGrammar>& compiled, const Documents& docs);

}  // namespace cgram::cli

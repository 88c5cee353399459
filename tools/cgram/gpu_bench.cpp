// cgram bench --gpu: the GPU masker and the logits kernel, timed on a batch
// of matchers each standing somewhere inside one of the documents, and
// checked against the CPU on the same batch (a real device runs the same
// comparison the tests run on the host build).
#include <fmt/format.h>

#include <bit>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "bench_support.h"
#include "commands.h"
#include "gpu_masker.h"
#include "io.h"

namespace cgram::cli {
namespace {

using nlohmann::json;

template <typename T>
std::optional<T> or_report(Result<T> result, const char* what) {
  if (auto* error = result.if_error()) {
    print_error(fmt::format("{}: {}", what, error->message));
    return std::nullopt;
  }
  return std::move(*result);
}

bool ok(const std::optional<cgram::Error>& error, const char* what) {
  if (error) print_error(fmt::format("{}: {}", what, error->message));
  return !error;
}

struct Stat {
  double p50 = 0, p90 = 0;  // microseconds
};
Stat stat_of(const std::vector<double>& us) { return {percentile(us, 50), percentile(us, 90)}; }

// Wall-clock microseconds of `work`, `runs` times.
template <typename F>
std::optional<Stat> wall(size_t runs, F&& work) {
  std::vector<double> us;
  for (size_t i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    if (!work()) return std::nullopt;
    us.push_back(ms_since(start) * 1000);
  }
  return stat_of(us);
}

// Device microseconds of `work` (events on a GPU), in samples of `repeats`.
std::optional<Stat> device_time(jit::KernelBackend& backend, size_t samples, int repeats,
                                const std::function<std::optional<cgram::Error>()>& work) {
  std::vector<double> us;
  for (size_t i = 0; i < samples; ++i) {
    auto ms = or_report(backend.time_ms(work, repeats), "timing");
    if (!ms) return std::nullopt;
    us.push_back(*ms * 1000);
  }
  return stat_of(us);
}

std::vector<std::unique_ptr<Matcher>> matchers_inside(const std::shared_ptr<const CompiledGrammar>& g,
                                                      const Documents& docs, size_t rows) {
  std::mt19937_64 rng(1);
  std::vector<std::unique_ptr<Matcher>> out;
  for (size_t i = 0; i < rows; ++i) {
    const std::vector<uint32_t>& tokens = docs[i % docs.size()].second;
    auto m = std::make_unique<Matcher>(g);
    const size_t stop = tokens.empty() ? 0 : rng() % tokens.size();
    for (size_t t = 0; t < stop; ++t)
      if (m->advance(tokens[t]) == AdvanceResult::Rejected) break;  // a document that leaves the language
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

int bench_gpu(const BenchArgs& args, const std::shared_ptr<const CompiledGrammar>& g, const Documents& docs) {
  if (docs.empty()) {
    print_error("cgram bench --gpu: no documents to stand the matchers in");
    return 3;
  }
  const Vocabulary& vocab = g->vocabulary();
  const size_t width = args.logits_width ? args.logits_width : vocab.size();
  if (width < vocab.size() || width > (size_t{1} << 31)) {
    print_error(fmt::format("--logits-width {} does not hold the vocabulary's {} ids", width, vocab.size()));
    return kExitUsage;
  }
  const auto out_words = static_cast<uint32_t>((width + 31) / 32);
  const auto rows = static_cast<uint32_t>(args.rows);
  auto created = args.gpu_host ? jit::host_kernel_backend(jit::gpu_kernel_shape(*g))
                               : jit::cuda_kernel_backend(jit::gpu_kernel_shape(*g), {args.cuda_library, 0, ""});
  if (auto* error = created.if_error()) {
    std::cerr << "cgram bench: no GPU: " << printable(error->message, true) << "\n"
              << "(--gpu-host runs the kernels' host build instead.)\n";
    return args.gpu_host ? 3 : kExitNoGpu;
  }
  auto made = or_report(jit::GpuMasker::create(g, std::move(*created)), "GPU masker");
  if (!made) return 3;
  jit::GpuMasker& masker = **made;
  jit::KernelBackend& backend = masker.backend();

  auto owned = matchers_inside(g, docs, rows);
  std::vector<Matcher*> matchers;
  for (auto& m : owned) matchers.push_back(m.get());
  std::vector<uint32_t> out_rows(rows);
  for (uint32_t r = 0; r < rows; ++r) out_rows[r] = r;
  const size_t mask_bytes = size_t{rows} * out_words * 4;
  auto bitmask = or_report(masker.allocate(mask_bytes), "device memory");
  auto random_bitmask = or_report(masker.allocate(mask_bytes), "device memory");
  auto logits = or_report(masker.allocate(size_t{rows} * width * 4), "device memory");
  if (!bitmask || !random_bitmask || !logits) return 3;

  // The CPU's masks, and the device's for the same rows: equal, bit for bit.
  std::vector<uint32_t> cpu(size_t{rows} * out_words, 0), device(cpu.size());
  const size_t words = g->mask_words();
  for (uint32_t r = 0; r < rows; ++r)
    matchers[r]->fill_mask(std::span<uint32_t>(cpu).subspan(size_t{r} * out_words, words));
  if (!ok(masker.fill(matchers, out_rows, (*bitmask)->address(), out_words), "fill") ||
      !ok(masker.synchronize(), "fill") || !ok((*bitmask)->download(device.data(), mask_bytes), "download"))
    return 3;
  const bool masks_equal = device == cpu;
  size_t allowed = 0;
  for (uint32_t w : cpu) allowed += static_cast<size_t>(std::popcount(w));

  const size_t samples = std::max<size_t>(1, args.runs / 10);
  const int repeats = backend.is_gpu() ? 20 : 1;
  std::vector<uint32_t> scratch(words);
  auto cpu_fill = wall(args.runs, [&] {
    for (Matcher* m : matchers) m->fill_mask(scratch);
    return true;
  });
  std::vector<double> host_us;
  auto end_to_end = wall(args.runs, [&] {
    const bool filled = ok(masker.fill(matchers, out_rows, (*bitmask)->address(), out_words), "fill") &&
                        ok(masker.synchronize(), "fill");
    host_us.push_back(masker.last_plan_us());
    return filled;
  });
  const Stat host_part = stat_of(host_us);
  if (!ok(masker.fill(matchers, out_rows, (*bitmask)->address(), out_words), "fill")) return 3;
  auto kernels = device_time(backend, samples, repeats, [&] { return masker.launch_plan(); });
  if (!cpu_fill || !end_to_end || !kernels) return 3;

  // Random masks: about half the tokens allowed (the most writes a mask
  // with a realistic spread can cause), against the grammar's real masks.
  std::mt19937 rng(7);
  std::vector<uint32_t> random_masks(cpu.size());
  size_t random_allowed = 0;
  for (uint32_t& w : random_masks) {
    w = rng();
    random_allowed += static_cast<size_t>(std::popcount(w));
  }
  if (!ok((*random_bitmask)->upload(random_masks.data(), mask_bytes), "upload")) return 3;

  struct ApplyRow {
    std::string what;
    Stat time;
    double bytes;
  };
  std::vector<ApplyRow> applies;
  bool logits_equal = true;
  for (LogitsType type : {LogitsType::Float32, LogitsType::Float16, LogitsType::BFloat16}) {
    const size_t element = logits_type_bytes(type);
    const char* name = type == LogitsType::Float32 ? "float32" : type == LogitsType::Float16 ? "float16" : "bfloat16";
    for (bool real : {true, false}) {
      jit::KernelMemory& masks = real ? **bitmask : **random_bitmask;
      auto launch = [&] {
        return masker.apply(type, (*logits)->address(), static_cast<int64_t>(width), static_cast<uint32_t>(width),
                            masks.address(), out_words, {}, rows);
      };
      if (real) {  // the masked logits against the CPU kernel's, once per type
        std::vector<uint8_t> values(size_t{rows} * width * element), back(values.size());
        for (auto& b : values) b = static_cast<uint8_t>(rng());
        if (!ok((*logits)->upload(values.data(), values.size()), "upload") || !ok(launch(), "apply") ||
            !ok((*logits)->download(back.data(), back.size()), "download"))
          return 3;
        for (uint32_t r = 0; r < rows; ++r)
          apply_mask_to_logits(values.data() + size_t{r} * width * element, type, width,
                               std::span<const uint32_t>(cpu).subspan(size_t{r} * out_words, out_words));
        logits_equal = logits_equal && values == back;
      }
      auto time = device_time(backend, samples, repeats, launch);
      if (!time) return 3;
      // The kernel reads the bitmask and writes -inf over each disallowed
      // logit; it never reads the logits.
      const size_t disallowed = size_t{rows} * width - (real ? allowed : random_allowed);
      applies.push_back({fmt::format("apply, {}, {} masks", name, real ? "the grammar's" : "random"), *time,
                         static_cast<double>(mask_bytes + disallowed * element)});
    }
  }

  const double bandwidth = backend.peak_bandwidth_gb_s();
  const MaskPlan& plan = masker.last_plan();
  json out = {{"backend", backend.description()},
              {"peak_bandwidth_gb_s", bandwidth},
              {"vocabulary", vocab.name()},
              {"vocab_size", vocab.size()},
              {"rows", rows},
              {"logits_width", width},
              {"sets_on_device", masker.sets_on_device()},
              {"set_bytes_on_device", masker.sets_on_device() * words * 4},
              {"set_ids_per_batch", plan.set_ids.size()},
              {"host_tokens_per_batch", plan.tokens.size()},
              {"allowed_tokens_per_batch", allowed},
              {"masks_equal_cpu", masks_equal},
              {"masked_logits_equal_cpu", logits_equal},
              {"cpu_fill_us", {{"p50", cpu_fill->p50}, {"p90", cpu_fill->p90}}},
              {"device_fill_us", {{"p50", end_to_end->p50}, {"p90", end_to_end->p90}}},
              {"device_fill_kernels_us", {{"p50", kernels->p50}, {"p90", kernels->p90}}},
              {"device_fill_host_part_us", {{"p50", host_part.p50}, {"p90", host_part.p90}}}};
  for (const ApplyRow& a : applies) {
    const double bound_us = bandwidth > 0 ? a.bytes / (bandwidth * 1e9) * 1e6 : 0;
    out["apply"].push_back({{"what", a.what}, {"p50_us", a.time.p50}, {"p90_us", a.time.p90}, {"bytes", a.bytes},
                            {"bound_us", bound_us}, {"ratio", bound_us > 0 ? a.time.p50 / bound_us : 0}});
  }
  put_bytes(out, "grammar", args.file);
  if (args.json) {
    std::cout << dump_json(out, 2) << "\n";
  } else {
    std::cout << fmt::format("{} on {}\n", args.file, backend.description());
    std::cout << fmt::format(
        "{} ({} ids), {} rows x {} logits; {} sets on the device ({:.1f} MB); per batch the host sends {} set ids and "
        "{} tokens for {} allowed\n\n",
        vocab.name(), vocab.size(), rows, width, masker.sets_on_device(),
        masker.sets_on_device() * words * 4 / 1e6, plan.set_ids.size(), plan.tokens.size(), allowed);
    std::cout << "| what | p50 | p90 |\n|---|---|---|\n";
    std::cout << fmt::format("| CPU: Matcher::fill_mask for each row, 1 thread | {:.1f} µs | {:.1f} µs |\n",
                             cpu_fill->p50, cpu_fill->p90);
    std::cout << fmt::format(
        "| device fill, end to end (host part, uploads, kernels, synchronize) | {:.1f} µs | {:.1f} µs |\n",
        end_to_end->p50, end_to_end->p90);
    std::cout << fmt::format("| device fill, the host's part (the parser's walks; sets left to the device) | {:.1f} µs "
                             "| {:.1f} µs |\n",
                             host_part.p50, host_part.p90);
    std::cout << fmt::format("| device fill, kernels only | {:.1f} µs | {:.1f} µs |\n\n", kernels->p50, kernels->p90);
    std::cout << "| apply | p50 | p90 | bytes moved | bandwidth bound | p50 / bound |\n|---|---|---|---|---|---|\n";
    for (const json& a : out["apply"]) {
      const double bound = a["bound_us"];
      std::cout << fmt::format("| {} | {:.1f} µs | {:.1f} µs | {:.1f} MB | {} | {} |\n", a["what"].get<std::string>(),
                               a["p50_us"].get<double>(), a["p90_us"].get<double>(), a["bytes"].get<double>() / 1e6,
                               bound > 0 ? fmt::format("{:.1f} µs", bound) : "n/a",
                               bound > 0 ? fmt::format("{:.2f}", a["ratio"].get<double>()) : "n/a");
    }
    std::cout << fmt::format("\nmasks equal the CPU's: {}; masked logits equal the CPU's: {}\n",
                             masks_equal ? "yes" : "NO", logits_equal ? "yes" : "NO");
  }
  return masks_equal && logits_equal ? 0 : 1;
}

}  // namespace cgram::cli

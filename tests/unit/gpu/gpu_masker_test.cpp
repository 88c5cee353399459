// The GPU masker on the host backend (the kernels compiled for the CPU):
// the whole device path — planning, set uploads, fill, set_bits, apply —
// gives the CPU matcher's masks and masked logits bit for bit, on every
// example and benchmark-suite grammar along random walks. Then its limits
// and its refusals, and the CUDA backend's errors on machines without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <bit>
#include <random>

#include "gpu_masker.h"
#include "helpers.h"
#include "logits_mask.h"

using namespace cgram;

namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::string& source) {
  auto result = CompiledGrammar::compile(test::grammar(source), test::bundled_vocabulary());
  REQUIRE(result.ok());
  return (*result);
}

std::unique_ptr<jit::GpuMasker> host_masker(const std::shared_ptr<const CompiledGrammar>& g,
                                            const jit::GpuMaskerOptions& options = {}) {
  auto backend = jit::host_kernel_backend(jit::gpu_kernel_shape(*g));
  INFO((!backend.ok() ? backend.error().message : ""));
  REQUIRE(backend.ok());
  auto masker = jit::GpuMasker::create(g, std::move(*backend), options);
  REQUIRE(masker.ok());
  return std::move(*masker);
}

// The CUDA backend when this machine has a GPU (CGRAM_CUDA_LIBRARY names
// another driver library); null when it has no driver or no device. Where
// there is a device, failing to make the backend (PTX refused, a kernel
// missing) fails the test.
std::unique_ptr<jit::KernelBackend> real_gpu(const CompiledGrammar& g) {
  jit::CudaBackendOptions options;
  if (const char* library = std::getenv("CGRAM_CUDA_LIBRARY")) options.library = library;
  auto driver = gpu::Driver::load(options.library);
  if (auto* error = driver.if_error()) {
    WARN("no GPU here (" << error->message << "): the device comparisons are skipped (scripts/gpu.sh runs them)");
    return nullptr;
  }
  auto devices = (*driver)->devices();
  if (!devices.ok() || (*devices).empty()) {
    WARN("the CUDA driver sees no device: the device comparisons are skipped");
    return nullptr;
  }
  auto backend = jit::cuda_kernel_backend(jit::gpu_kernel_shape(g), options);
  INFO((!backend.ok() ? backend.error().message : ""));
  REQUIRE(backend.ok());
  return std::move(*backend);
}

std::unique_ptr<jit::KernelMemory> allocate(jit::GpuMasker& masker, size_t bytes) {
  auto memory = masker.allocate(bytes);
  REQUIRE(memory.ok());
  return std::move(*memory);
}

size_t popcount(std::span<const uint32_t> words) {
  size_t n = 0;
  for (uint32_t w : words) n += static_cast<size_t>(std::popcount(w));
  return n;
}

struct Totals {
  size_t rows = 0, allowed = 0, host_tokens = 0, set_ids = 0;
};

// `batch` matchers walk at random; at each step the masker fills their rows
// (in a shuffled order, among untouched rows, with padding words) and masks
// random logits of every dtype, and both are compared with the CPU's.
Totals walk_and_compare(const std::shared_ptr<const CompiledGrammar>& g, jit::GpuMasker& masker, uint64_t seed,
                        size_t batch, size_t steps, ThreadPool* pool = nullptr) {
  std::mt19937_64 rng(seed);
  const Vocabulary& vocab = g->vocabulary();
  const uint32_t words = static_cast<uint32_t>(g->mask_words());
  const uint32_t out_words = words + 2;  // a model's padded vocabulary
  const uint32_t total_rows = static_cast<uint32_t>(batch) + 2;
  const uint32_t logits_width = out_words * 32 - 5;
  std::vector<Matcher> matchers;
  for (size_t i = 0; i < batch; ++i) matchers.emplace_back(g);
  auto bitmask = allocate(masker, size_t{total_rows} * out_words * 4);
  auto logits = allocate(masker, size_t{total_rows} * logits_width * 4);
  const std::vector<uint32_t> sentinel(size_t{total_rows} * out_words, 0xA5A5A5A5u);
  std::vector<uint32_t> device(sentinel.size()), cpu(words);
  Totals totals;
  for (size_t step = 0; step < steps; ++step) {
    std::vector<uint32_t> rows(total_rows);
    for (uint32_t r = 0; r < total_rows; ++r) rows[r] = r;
    std::shuffle(rows.begin(), rows.end(), rng);
    rows.resize(batch);
    std::vector<Matcher*> pointers;
    for (Matcher& m : matchers) pointers.push_back(&m);
    test::require_no_error(bitmask->upload(sentinel.data(), sentinel.size() * 4));
    size_t rejected = 99;
    test::require_no_error(masker.fill(pointers, rows, bitmask->address(), out_words, pool, &rejected));
    test::require_no_error(bitmask->download(device.data(), device.size() * 4));
    CHECK(rejected == 0);
    totals.host_tokens += masker.last_plan().tokens.size();
    totals.set_ids += masker.last_plan().set_ids.size();
    std::vector<std::vector<uint32_t>> masks;
    for (size_t i = 0; i < batch; ++i) {
      INFO("step " << step << " row " << i);
      REQUIRE(matchers[i].fill_mask(cpu));
      std::vector<uint32_t> expected = cpu;
      expected.resize(out_words, 0);
      const auto at = device.begin() + static_cast<ptrdiff_t>(rows[i]) * out_words;
      REQUIRE(std::vector<uint32_t>(at, at + out_words) == expected);
      masks.push_back(expected);
      ++totals.rows;
      totals.allowed += popcount(cpu);
    }
    for (uint32_t r = 0; r < total_rows; ++r)
      if (std::find(rows.begin(), rows.end(), r) == rows.end()) {
        const auto at = device.begin() + static_cast<ptrdiff_t>(r) * out_words;
        REQUIRE(std::all_of(at, at + out_words, [](uint32_t w) { return w == 0xA5A5A5A5u; }));
      }

    // Masked logits, one dtype per step, rows listed.
    const LogitsType type = std::array{LogitsType::Float32, LogitsType::Float16, LogitsType::BFloat16}[step % 3];
    const size_t element = logits_type_bytes(type);
    std::vector<uint8_t> values(size_t{total_rows} * logits_width * element);
    for (auto& byte : values) byte = static_cast<uint8_t>(rng());
    test::require_no_error(logits->upload(values.data(), values.size()));
    test::require_no_error(masker.apply(type, logits->address(), logits_width, logits_width, bitmask->address(), out_words, rows,
                            static_cast<uint32_t>(rows.size())));
    std::vector<uint8_t> masked(values.size());
    test::require_no_error(logits->download(masked.data(), masked.size()));
    for (size_t i = 0; i < batch; ++i)
      apply_mask_to_logits(values.data() + size_t{rows[i]} * logits_width * element, type, logits_width, masks[i]);
    REQUIRE(masked == values);

    // Each matcher takes a random allowed token (end of sequence last).
    for (size_t i = 0; i < batch; ++i) {
      if (matchers[i].is_finished()) continue;
      std::vector<uint32_t> allowed;
      for (uint32_t id = 0; id < vocab.size(); ++id)
        if ((masks[i][id / 32] >> (id % 32) & 1) && !vocab.is_eos(id)) allowed.push_back(id);
      if (allowed.empty()) {
        if (matchers[i].can_end()) REQUIRE(matchers[i].advance(vocab.eos_ids()[0]) == AdvanceResult::Finished);
        continue;
      }
      REQUIRE(matchers[i].advance(allowed[rng() % allowed.size()]) == AdvanceResult::Ongoing);
    }
  }
  return totals;
}

}  // namespace

TEST_CASE("gpu masker on the host: masks and masked logits equal the CPU's, every grammar", "[gpu][differential]") {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const std::string& name : test::example_names()) cases.emplace_back(name, test::read_example(name));
  for (const test::SuiteGrammar& s : test::suite_grammars()) cases.emplace_back(s.label, s.source);
  Totals all;
  size_t sets = 0;
  for (const auto& [label, source] : cases) {
    INFO(label);
    auto g = compile(source);
    auto masker = host_masker(g);
    const Totals t = walk_and_compare(g, *masker, std::hash<std::string>()(label), 3, 10);
    all.rows += t.rows;
    all.allowed += t.allowed;
    all.host_tokens += t.host_tokens;
    all.set_ids += t.set_ids;
    sets += masker->sets_on_device();
  }
  // The device did the bulk of the work: most allowed tokens came from sets.
  CHECK(sets > 0);
  CHECK(all.set_ids > 0);
  CHECK(all.host_tokens * 4 < all.allowed);
  WARN("gpu masker (host backend): " << cases.size() << " grammars, " << all.rows << " rows equal; "
                                     << all.allowed << " allowed tokens, " << all.host_tokens
                                     << " sent by the host, " << sets << " sets on the device");
}

TEST_CASE("gpu masker: a thread pool plans the same rows", "[gpu]") {
  auto g = compile(test::read_example("json.cgram"));
  auto masker = host_masker(g);
  ThreadPool pool(3);
  const Totals t = walk_and_compare(g, *masker, 7, 8, 12, &pool);
  CHECK(t.rows == 96);
}

TEST_CASE("gpu masker: with no room for sets on the device, the host sends every token", "[gpu]") {
  auto g = compile(test::read_example("json.cgram"));
  jit::GpuMaskerOptions options;
  options.max_set_bytes = 0;
  auto masker = host_masker(g, options);
  const Totals t = walk_and_compare(g, *masker, 3, 2, 10);
  CHECK(masker->sets().size() == 0);
  CHECK(t.set_ids == 0);
  CHECK(t.host_tokens == t.allowed);
}

TEST_CASE("gpu masker: refusals, and rows it cannot fill are clear", "[gpu]") {
  auto g = compile(test::read_example("json.cgram"));
  auto other = compile(test::read_example("csv.cgram"));
  auto masker = host_masker(g);
  const uint32_t words = static_cast<uint32_t>(g->mask_words());
  auto bitmask = allocate(*masker, size_t{4} * words * 4);
  Matcher a(g), b(g), stranger(other);
  const std::vector<uint32_t> two_rows = {0, 1};

  std::vector<Matcher*> same = {&a, &a};
  auto error = masker->fill(same, two_rows, bitmask->address(), words);
  REQUIRE(error);
  CHECK(error->message == "matcher 1 appears twice");
  std::vector<Matcher*> pair0 = {&a, &b};
  error = masker->fill(pair0, std::vector<uint32_t>{1, 1}, bitmask->address(), words);
  REQUIRE(error);
  CHECK(error->message == "bitmask row 1 is given twice");
  std::vector<Matcher*> pair = {&a, &b};
  error = masker->fill(pair, two_rows, bitmask->address(), words - 1);
  REQUIRE(error);
  CHECK_THAT(error->message, Catch::Contains("the vocabulary needs"));
  error = masker->fill(pair, std::vector<uint32_t>{0}, bitmask->address(), words);
  REQUIRE(error);
  CHECK(error->message == "2 matchers for 1 bitmask rows");
  std::vector<Matcher*> with_null = {&a, nullptr};
  error = masker->fill(with_null, two_rows, bitmask->address(), words);
  REQUIRE(error);
  CHECK(error->message == "matcher 1 is null");
  error = masker->fill(pair, two_rows, 0, words);
  REQUIRE(error);
  CHECK(error->message == "the bitmask's address is null");
  error = masker->apply(LogitsType::Float32, bitmask->address(), 10, 20, bitmask->address(), words, {}, 1);
  REQUIRE(error);
  CHECK(error->message == "logits rows of 10 elements hold no 20 tokens");

  // A matcher of another grammar gets an all-clear row, counted.
  std::vector<uint32_t> ones(size_t{4} * words, UINT32_MAX), out(ones.size());
  test::require_no_error(bitmask->upload(ones.data(), ones.size() * 4));
  std::vector<Matcher*> mixed = {&a, &stranger};
  size_t rejected = 0;
  test::require_no_error(masker->fill(mixed, two_rows, bitmask->address(), words, nullptr, &rejected));
  test::require_no_error(bitmask->download(out.data(), out.size() * 4));
  CHECK(rejected == 1);
  CHECK(std::all_of(out.begin() + words, out.begin() + 2 * words, [](uint32_t w) { return w == 0; }));
  std::vector<uint32_t> expected(words);
  REQUIRE(a.fill_mask(expected));
  CHECK(std::equal(expected.begin(), expected.end(), out.begin()));
  // An empty batch launches nothing.
  test::require_no_error(masker->fill({}, {}, 0, words));
}

TEST_CASE("gpu masker: the CUDA backend without a driver or a device is an error, not a crash", "[gpu]") {
  jit::CudaBackendOptions options;
  options.library = "libcuda-not-here.so.1";
  auto missing = jit::cuda_kernel_backend({}, options);
  REQUIRE(!missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("cannot load the CUDA driver"));
  options.library = CGRAM_FAKE_CUDA_NO_DEVICE;
  auto no_device = jit::cuda_kernel_backend({}, options);
  REQUIRE(!no_device.ok());
  CHECK_THAT(no_device.error().message, Catch::Contains("cuInit"));
}

TEST_CASE("gpu masker: the PTX architecture follows the device, capped at what LLVM knows", "[gpu]") {
  CHECK(jit::ptx_arch_for(8, 0) == "sm_80");
  CHECK(jit::ptx_arch_for(9, 0) == "sm_90");
  CHECK(jit::ptx_arch_for(8, 6) == "sm_86");
  // A device newer than this LLVM gets the newest architecture below it.
  CHECK(jit::ptx_arch_for(99, 0) == "sm_90");
}

TEST_CASE("gpu masker on this machine's GPU, when it has one: the same comparisons", "[gpu]") {
  const std::vector<std::string> names = {"json.cgram", "csv.cgram", "markup.cgram", "c_subset.cgram"};
  for (const std::string& name : names) {
    INFO(name);
    auto g = compile(test::read_example(name));
    auto backend = real_gpu(*g);
    if (!backend) return;
    auto created = jit::GpuMasker::create(g, std::move(backend));
    REQUIRE(created.ok());
    jit::GpuMasker& masker = *(*created);
    const Totals t = walk_and_compare(g, masker, 11, 16, 24);
    CHECK(t.rows == 16 * 24);
  }
}

TEST_CASE("gpu masker: refused without a grammar, a backend, or with kernels for another width", "[gpu]") {
  auto g = compile(test::read_example("json.cgram"));
  auto other_width = jit::host_kernel_backend({static_cast<unsigned>(g->mask_words() + 1)});
  REQUIRE(other_width.ok());
  auto refused = jit::GpuMasker::create(g, std::move(*other_width));
  REQUIRE(!refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("the kernels were made for token sets of"));
  auto generic = jit::host_kernel_backend();
  REQUIRE(generic.ok());
  auto no_grammar = jit::GpuMasker::create(nullptr, std::move(*generic));
  REQUIRE(!no_grammar.ok());
  CHECK(no_grammar.error().message == "a GPU masker needs a compiled grammar");
  auto no_backend = jit::GpuMasker::create(g, nullptr);
  REQUIRE(!no_backend.ok());
  CHECK(no_backend.error().message == "a GPU masker needs a kernel backend");
  // A generic backend serves any grammar: the masks are the same.
  auto any_width = jit::host_kernel_backend();
  auto masker = jit::GpuMasker::create(g, std::move(*any_width));
  REQUIRE(masker.ok());
  walk_and_compare(g, *(*masker), 5, 2, 6);
}

TEST_CASE("gpu masker: a matcher a limit stops mid-mask gets a clear row, whatever sets it had given", "[gpu]") {
  auto g = compile(test::read_example("json.cgram"));
  auto masker = host_masker(g);
  MatcherOptions options;
  options.limits.max_work_per_call = 3;
  Matcher stopped(g, options);
  const uint32_t words = static_cast<uint32_t>(g->mask_words());
  auto bitmask = allocate(*masker, size_t{words} * 4);
  std::vector<uint32_t> ones(words, UINT32_MAX), out(words);
  test::require_no_error(bitmask->upload(ones.data(), ones.size() * 4));
  std::vector<Matcher*> one = {&stopped};
  size_t rejected = 0;
  test::require_no_error(masker->fill(one, std::vector<uint32_t>{0}, bitmask->address(), words, nullptr, &rejected));
  test::require_no_error(bitmask->download(out.data(), out.size() * 4));
  CHECK(stopped.has_error());
  CHECK(rejected == 1);
  REQUIRE(masker->sets().size() > 0);  // the engine had handed sets over before the limit stopped it
  CHECK(masker->last_plan().set_ids.empty());
  CHECK(std::all_of(out.begin(), out.end(), [](uint32_t w) { return w == 0; }));
}

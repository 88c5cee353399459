// The GPU path on machines without a GPU: the driver loader against a
// missing and a fake libcuda, the PTX checked by ptxas when it is present,
// and the kernels' logic run on the host (the same bodies, compiled for the
// host by the JIT, launched through the host backend) against the CPU code.
#include <catch2/catch.hpp>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "helpers.h"
#include "cuda_driver.h"
#include "gpu_kernels.h"
#include "kernel_backend.h"
#include "logits_mask.h"

using namespace cgram;

namespace {

template <typename T>
const cgram::Error& error_of(const T& result) {
  REQUIRE(!result.ok());
  return result.error();
}

// The host build of the kernels (the JIT), through the backend that runs
// the GPU masker's tests: made once.
jit::KernelBackend& host_kernels() {
  static std::unique_ptr<jit::KernelBackend> backend = [] {
    auto made = jit::host_kernel_backend();
    REQUIRE(made.ok());
    return std::move(*made);
  }();
  return *backend;
}

// A host pointer as the kernels' address (0 for null).
uint64_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

std::vector<uint32_t> random_words(size_t count, std::mt19937& rng) {
  std::vector<uint32_t> words(count);
  for (size_t i = 0; i < count; ++i) {
    switch (rng() % 4) {
      case 0: words[i] = 0; break;
      case 1: words[i] = UINT32_MAX; break;
      default: words[i] = static_cast<uint32_t>(rng());
    }
  }
  return words;
}

}  // namespace

TEST_CASE("gpu driver: a missing library is an error that says so", "[gpu]") {
  auto result = gpu::Driver::load("libcgram-no-such-cuda.so.1");
  const std::string& message = error_of(result).message;
  CHECK_THAT(message, Catch::Contains("cannot load the CUDA driver (libcgram-no-such-cuda.so.1)"));
  CHECK_THAT(message, Catch::Contains("NVIDIA driver"));
}

TEST_CASE("gpu driver: the machine's own libcuda, or a clear error", "[gpu]") {
  auto result = gpu::Driver::load();
  if (auto* error = result.if_error()) {
    // No driver here (the CI machines have none), or no device.
    CHECK((error->message.find("libcuda.so.1") != std::string::npos || error->message.find("cuInit") != std::string::npos));
  } else {
    auto devices = (*result)->devices();
    CHECK(devices.ok());
  }
}

TEST_CASE("gpu driver: fake libraries, no device and a driver too old", "[gpu]") {
  auto no_device = gpu::Driver::load(CGRAM_FAKE_CUDA_NO_DEVICE);
  CHECK(error_of(no_device).message == "cuInit: no CUDA-capable device is detected (100)");
  auto too_old = gpu::Driver::load(CGRAM_FAKE_CUDA_INCOMPLETE);
  CHECK_THAT(error_of(too_old).message, Catch::Contains("lacks cuGetErrorString"));
}

TEST_CASE("gpu kernels: PTX for sm_80 and sm_90, checked by ptxas", "[gpu]") {
  for (const char* arch : {"sm_80", "sm_90"}) {
    llvm::LLVMContext context;
    // Specialised for one vocabulary (Llama 3's) and generic.
    for (codegen::GpuKernelShape shape : {codegen::GpuKernelShape{}, codegen::GpuKernelShape{4008}}) {
      auto module = codegen::build_gpu_kernels(context, codegen::GpuTarget::Nvptx, shape);
      REQUIRE(module);
      auto ptx = codegen::emit_ptx(*module, arch);
      REQUIRE(ptx.ok());
      const std::string& text = *ptx;
      CHECK_THAT(text, Catch::Contains(std::string(".target ") + arch));
      for (const char* kernel : {"cgram_apply_f32", "cgram_apply_f16", "cgram_apply_bf16", "cgram_fill", "cgram_set_bits"})
        CHECK_THAT(text, Catch::Contains(std::string(".entry ") + kernel + "("));
      // The bodies are inlined into the kernels: no call per thread.
      CHECK_THAT(text, !Catch::Contains("call.uni"));
      const std::string ptxas = CGRAM_PTXAS;
      if (ptxas.empty()) {
        WARN("ptxas not found: the PTX is not assembled");
        continue;
      }
      const auto dir = std::filesystem::temp_directory_path();
      const auto file = dir / fmt::format("cgram_gpu_test_{}_{}.ptx", arch, shape.set_words);
      std::ofstream(file) << text;
      const std::string command = fmt::format("'{}' -arch={} '{}' -o /dev/null", ptxas, arch, file.string());
      INFO(command);
      CHECK(std::system(command.c_str()) == 0);
      std::filesystem::remove(file);
    }
  }
}

TEST_CASE("gpu kernels: an unknown architecture is an error", "[gpu]") {
  llvm::LLVMContext context;
  auto module = codegen::build_gpu_kernels(context, codegen::GpuTarget::Nvptx);
  REQUIRE(module);
  auto ptx = codegen::emit_ptx(*module, "sm_1");
  REQUIRE(!ptx.ok());
  CHECK_THAT(ptx.error().message, Catch::Contains("'sm_1' is not a GPU architecture"));
}

TEST_CASE("gpu kernels on the host: apply equals the CPU kernel, every dtype", "[gpu]") {
  jit::KernelBackend& k = host_kernels();
  std::mt19937 rng(11);
  const LogitsType types[] = {LogitsType::Float32, LogitsType::Float16, LogitsType::BFloat16};
  for (int t = 0; t < 3; ++t) {
    const size_t element = logits_type_bytes(types[t]);
    for (uint32_t vocab : {1u, 31u, 32u, 1000u, 4133u}) {
      const uint32_t words = (vocab + 31) / 32 - (vocab > 64 ? 1 : 0);  // sometimes narrower than the logits
      const uint32_t rows = 5, stride = vocab + 7;
      std::vector<uint32_t> bitmask = random_words(size_t{rows} * words, rng);
      std::vector<uint8_t> base(size_t{rows} * stride * element);
      for (auto& byte : base) byte = static_cast<uint8_t>(rng());
      for (bool listed : {false, true}) {
        const std::vector<uint32_t> row_list = {3, 0, 4};
        std::vector<uint8_t> device = base, cpu = base;
        const uint32_t launched = listed ? 3 : rows;
        test::require_no_error(k.apply({types[t], address(device.data()), stride, vocab, address(bitmask.data()), words,
                            listed ? address(row_list.data()) : 0, launched}));
        for (uint32_t i = 0; i < launched; ++i) {
          const uint32_t row = listed ? row_list[i] : i;
          apply_mask_to_logits(cpu.data() + size_t{row} * stride * element, types[t], vocab,
                               std::span<const uint32_t>(bitmask).subspan(size_t{row} * words, words));
        }
        INFO("type " << t << " vocab " << vocab << " listed " << listed);
        CHECK(device == cpu);
      }
    }
  }
}

TEST_CASE("gpu kernels on the host: fill ORs the sets, set_bits merges the host's tokens", "[gpu]") {
  jit::KernelBackend& k = host_kernels();
  std::mt19937 rng(5);
  const uint32_t words = 40, out_words = 43, set_count = 9, rows = 6;
  std::vector<uint32_t> sets = random_words(size_t{set_count} * words, rng);
  std::vector<uint32_t> offsets = {0}, ids;
  for (uint32_t r = 0; r < rows; ++r) {
    const uint32_t n = r == 2 ? 0 : rng() % 4 + 1;  // row 2 has no set
    for (uint32_t i = 0; i < n; ++i) ids.push_back(rng() % set_count);
    offsets.push_back(static_cast<uint32_t>(ids.size()));
  }
  std::vector<uint32_t> expected(size_t{rows} * out_words, 0);
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t i = offsets[r]; i < offsets[r + 1]; ++i)
      for (uint32_t w = 0; w < words; ++w) expected[size_t{r} * out_words + w] |= sets[size_t{ids[i]} * words + w];
  // With an output row list, plan row y lands in row out_rows[y]; the
  // rows not listed are untouched.
  const std::vector<uint32_t> out_rows = {4, 1, 0};
  std::vector<uint32_t> listed(size_t{rows} * out_words, 0xDEADBEEF);
  test::require_no_error(k.fill({address(sets.data()), address(ids.data()), address(offsets.data()), address(listed.data()),
                      address(out_rows.data()), words, out_words, 3}));
  for (uint32_t r = 0; r < rows; ++r) {
    auto row = [&](const std::vector<uint32_t>& v, uint32_t i) {
      return std::vector<uint32_t>(v.begin() + i * out_words, v.begin() + (i + 1) * out_words);
    };
    const auto at = std::find(out_rows.begin(), out_rows.end(), r);
    if (at == out_rows.end()) CHECK(row(listed, r) == std::vector<uint32_t>(out_words, 0xDEADBEEF));
    else CHECK(row(listed, r) == row(expected, static_cast<uint32_t>(at - out_rows.begin())));
  }
  std::vector<uint32_t> out(size_t{rows} * out_words, 0xDEADBEEF);
  test::require_no_error(k.fill({address(sets.data()), address(ids.data()), address(offsets.data()), address(out.data()), 0, words,
                      out_words, rows}));
  CHECK(out == expected);

  std::vector<uint32_t> tokens, token_rows;
  for (int i = 0; i < 50; ++i) {
    tokens.push_back(rng() % (words * 32));
    token_rows.push_back(rng() % rows);
    expected[size_t{token_rows.back()} * out_words + tokens.back() / 32] |= 1u << (tokens.back() % 32);
  }
  test::require_no_error(k.set_bits({address(out.data()), out_words, address(tokens.data()), address(token_rows.data()),
                          static_cast<uint32_t>(tokens.size())}));
  CHECK(out == expected);
}

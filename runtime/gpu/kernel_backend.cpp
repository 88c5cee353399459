#include "kernel_backend.h"

#include <fmt/format.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <array>
#include <chrono>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "jit_session.h"

namespace cgram::jit {
namespace {

constexpr unsigned kBlock = 256;  // threads per block, along x
constexpr uint32_t kMaxGridY = 65535;

size_t apply_index(LogitsType type) {
  switch (type) {
    case LogitsType::Float32: return 0;
    case LogitsType::Float16: return 1;
    case LogitsType::BFloat16: return 2;
  }
  return 0;
}
constexpr const char* kApplyNames[] = {"cgram_apply_f32", "cgram_apply_f16", "cgram_apply_bf16"};

std::optional<Error> check_range(const char* what, size_t offset, size_t bytes, size_t size) {
  if (offset > size || bytes > size - offset)
    return Error{ErrorCode::Backend,
                 fmt::format("{} of {} bytes at {} past a buffer of {}", what, bytes, offset, size)};
  return std::nullopt;
}

std::optional<Error> check_height(uint32_t height) {
  if (height > kMaxGridY)
    return Error{ErrorCode::Backend, fmt::format("{} rows in one launch; at most {}", height, kMaxGridY)};
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// The host: memory is host memory, a launch runs its grid now.

class HostMemory final : public KernelMemory {
 public:
  // Throws std::bad_alloc (HostBackend::allocate turns it into an error).
  explicit HostMemory(size_t bytes) : data_(bytes == 0 ? 1 : bytes), bytes_(bytes) {}
  uint64_t address() const override { return reinterpret_cast<uintptr_t>(data_.data()); }
  size_t bytes() const override { return bytes_; }
  std::optional<Error> upload(const void* data, size_t bytes, size_t offset) override {
    if (auto error = check_range("upload", offset, bytes, bytes_)) return error;
    if (bytes) std::memcpy(data_.data() + offset, data, bytes);
    return std::nullopt;
  }
  std::optional<Error> download(void* data, size_t bytes, size_t offset) override {
    if (auto error = check_range("download", offset, bytes, bytes_)) return error;
    if (bytes) std::memcpy(data, data_.data() + offset, bytes);
    return std::nullopt;
  }

 private:
  std::vector<uint8_t> data_;
  size_t bytes_;
};

template <typename T>
T* host_pointer(uint64_t address) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(address));
}

class HostBackend final : public KernelBackend {
 public:
  using Apply = void (*)(void*, int64_t, uint32_t, const uint32_t*, uint32_t, const uint32_t*, uint32_t, uint32_t);
  using Fill = void (*)(const uint32_t*, const uint32_t*, const uint32_t*, uint32_t*, uint32_t, uint32_t,
                        const uint32_t*, uint32_t, uint32_t);
  using SetBits = void (*)(uint32_t*, uint32_t, const uint32_t*, const uint32_t*, uint32_t, uint32_t, uint32_t);

  HostBackend(std::unique_ptr<JitSession> session, unsigned set_words)
      : session_(std::move(session)), set_words_(set_words) {}

  std::optional<Error> resolve() {
    auto find = [&](const std::string& name) -> Result<void*> {
      auto address = session_->lookup(name + "_grid");
      if (auto* error = address.if_error()) return Error{ErrorCode::Backend, error->message};
      return *address;
    };
    for (size_t i = 0; i < 3; ++i) {
      auto address = find(kApplyNames[i]);
      if (auto* error = address.if_error()) return *error;
      apply_[i] = reinterpret_cast<Apply>(*address);
    }
    auto fill = find("cgram_fill");
    if (auto* error = fill.if_error()) return *error;
    fill_ = reinterpret_cast<Fill>(*fill);
    auto set_bits = find("cgram_set_bits");
    if (auto* error = set_bits.if_error()) return *error;
    set_bits_ = reinterpret_cast<SetBits>(*set_bits);
    return std::nullopt;
  }

  std::string description() const override { return "host (the GPU kernels compiled for the CPU)"; }
  bool is_gpu() const override { return false; }
  double peak_bandwidth_gb_s() const override { return 0; }
  unsigned set_words() const override { return set_words_; }
  Result<std::unique_ptr<KernelMemory>> allocate(size_t bytes) override {
    try {
      return std::unique_ptr<KernelMemory>(std::make_unique<HostMemory>(bytes));
    } catch (const std::bad_alloc&) {
      return Error{ErrorCode::OutOfMemory, fmt::format("out of host memory for {} bytes", bytes)};
    } catch (const std::length_error&) {
      return Error{ErrorCode::OutOfMemory, fmt::format("out of host memory for {} bytes", bytes)};
    }
  }
  std::optional<Error> fill(const FillLaunch& l) override {
    if (auto error = check_height(l.rows)) return error;
    fill_(host_pointer<const uint32_t>(l.sets), host_pointer<const uint32_t>(l.set_ids),
          host_pointer<const uint32_t>(l.row_offsets), host_pointer<uint32_t>(l.out), l.words, l.out_words,
          host_pointer<const uint32_t>(l.out_rows), l.out_words, l.rows);
    return std::nullopt;
  }
  std::optional<Error> set_bits(const SetBitsLaunch& l) override {
    set_bits_(host_pointer<uint32_t>(l.out), l.out_words, host_pointer<const uint32_t>(l.tokens),
              host_pointer<const uint32_t>(l.token_rows), l.count, l.count, 1);
    return std::nullopt;
  }
  std::optional<Error> apply(const ApplyLaunch& l) override {
    if (auto error = check_height(l.row_count)) return error;
    apply_[apply_index(l.type)](host_pointer<void>(l.logits), l.row_stride, l.vocab,
                                host_pointer<const uint32_t>(l.bitmask), l.words, host_pointer<const uint32_t>(l.rows),
                                l.vocab, l.row_count);
    return std::nullopt;
  }
  std::optional<Error> synchronize() override { return std::nullopt; }
  Result<double> time_ms(const std::function<std::optional<Error>()>& work, int repeats) override {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i)
      if (auto error = work()) return *error;
    const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / std::max(repeats, 1);
  }

 private:
  std::unique_ptr<JitSession> session_;
  unsigned set_words_;
  std::array<Apply, 3> apply_{};
  Fill fill_ = nullptr;
  SetBits set_bits_ = nullptr;
};

// ---------------------------------------------------------------------------
// The GPU, through the CUDA driver.

class CudaMemory final : public KernelMemory {
 public:
  // Holds the context and stream: memory may outlive the backend.
  CudaMemory(std::shared_ptr<const gpu::Context> context, std::shared_ptr<const gpu::Stream> stream,
             gpu::DeviceBuffer buffer)
      : context_(std::move(context)), stream_(std::move(stream)), buffer_(std::move(buffer)) {}
  uint64_t address() const override { return buffer_.get(); }
  size_t bytes() const override { return buffer_.bytes(); }
  std::optional<Error> upload(const void* data, size_t bytes, size_t offset) override {
    if (auto error = context_->make_current()) return error;
    return buffer_.upload(*stream_, data, bytes, offset);
  }
  std::optional<Error> download(void* data, size_t bytes, size_t offset) override {
    if (auto error = context_->make_current()) return error;
    if (auto error = buffer_.download(*stream_, data, bytes, offset)) return error;
    return stream_->synchronize();
  }

 private:
  std::shared_ptr<const gpu::Context> context_;
  std::shared_ptr<const gpu::Stream> stream_;
  gpu::DeviceBuffer buffer_;  // freed before the context goes
};

class CudaBackend final : public KernelBackend {
 public:
  CudaBackend(std::shared_ptr<const gpu::Context> context, std::shared_ptr<const gpu::Stream> stream,
              std::unique_ptr<gpu::Module> module, std::string description, double bandwidth_gb_s,
              unsigned set_words)
      : context_(std::move(context)),
        stream_(std::move(stream)),
        module_(std::move(module)),
        description_(std::move(description)),
        bandwidth_gb_s_(bandwidth_gb_s),
        set_words_(set_words) {}

  std::optional<Error> resolve() {
    auto find = [&](const char* name, gpu::CUfunction& slot) -> std::optional<Error> {
      auto function = module_->function(name);
      if (auto* error = function.if_error()) return *error;
      slot = *function;
      return std::nullopt;
    };
    for (size_t i = 0; i < 3; ++i)
      if (auto error = find(kApplyNames[i], apply_[i])) return error;
    if (auto error = find("cgram_fill", fill_)) return error;
    return find("cgram_set_bits", set_bits_);
  }

  std::string description() const override { return description_; }
  bool is_gpu() const override { return true; }
  double peak_bandwidth_gb_s() const override { return bandwidth_gb_s_; }
  unsigned set_words() const override { return set_words_; }
  Result<std::unique_ptr<KernelMemory>> allocate(size_t bytes) override {
    auto buffer = gpu::DeviceBuffer::allocate(*context_, bytes == 0 ? 4 : bytes);
    if (auto* error = buffer.if_error()) return *error;
    return std::make_unique<CudaMemory>(context_, stream_, std::move(*buffer));
  }
  std::optional<Error> fill(const FillLaunch& l) override {
    if (auto error = check_height(l.rows)) return error;
    if (l.rows == 0) return std::nullopt;
    void* args[] = {const_cast<uint64_t*>(&l.sets),        const_cast<uint64_t*>(&l.set_ids),
                    const_cast<uint64_t*>(&l.row_offsets), const_cast<uint64_t*>(&l.out),
                    const_cast<uint32_t*>(&l.words),       const_cast<uint32_t*>(&l.out_words),
                    const_cast<uint64_t*>(&l.out_rows)};
    return launch(fill_, l.out_words, l.rows, args);
  }
  std::optional<Error> set_bits(const SetBitsLaunch& l) override {
    if (l.count == 0) return std::nullopt;
    void* args[] = {const_cast<uint64_t*>(&l.out), const_cast<uint32_t*>(&l.out_words),
                    const_cast<uint64_t*>(&l.tokens), const_cast<uint64_t*>(&l.token_rows),
                    const_cast<uint32_t*>(&l.count)};
    return launch(set_bits_, l.count, 1, args);
  }
  std::optional<Error> apply(const ApplyLaunch& l) override {
    if (auto error = check_height(l.row_count)) return error;
    if (l.row_count == 0 || l.vocab == 0) return std::nullopt;
    void* args[] = {const_cast<uint64_t*>(&l.logits),  const_cast<int64_t*>(&l.row_stride),
                    const_cast<uint32_t*>(&l.vocab),   const_cast<uint64_t*>(&l.bitmask),
                    const_cast<uint32_t*>(&l.words),   const_cast<uint64_t*>(&l.rows)};
    return launch(apply_[apply_index(l.type)], l.vocab, l.row_count, args);
  }
  std::optional<Error> synchronize() override {
    if (auto error = context_->make_current()) return error;
    return stream_->synchronize();
  }
  Result<double> time_ms(const std::function<std::optional<Error>()>& work, int repeats) override {
    if (auto error = context_->make_current()) return *error;
    auto timer = gpu::EventTimer::create(*context_);
    if (auto* error = timer.if_error()) return *error;
    gpu::EventTimer& t = **timer;
    if (auto error = t.start(*stream_)) return *error;
    for (int i = 0; i < repeats; ++i)
      if (auto error = work()) return *error;
    auto ms = t.stop(*stream_);
    if (auto* error = ms.if_error()) return *error;
    return *ms / std::max(repeats, 1);
  }

 private:
  std::optional<Error> launch(gpu::CUfunction function, uint32_t width, uint32_t height, std::span<void*> args) {
    if (auto error = context_->make_current()) return error;
    const unsigned blocks = (width + kBlock - 1) / kBlock;
    return module_->launch(function, *stream_, {blocks, height, 1}, {kBlock, 1, 1}, args);
  }

  std::shared_ptr<const gpu::Context> context_;
  std::shared_ptr<const gpu::Stream> stream_;
  std::unique_ptr<gpu::Module> module_;
  std::string description_;
  double bandwidth_gb_s_;
  unsigned set_words_;
  std::array<gpu::CUfunction, 3> apply_{};
  gpu::CUfunction fill_ = nullptr;
  gpu::CUfunction set_bits_ = nullptr;
};

template <typename T, typename V>
std::optional<Error> take(V&& result, std::unique_ptr<T>& into) {
  if (auto* error = result.if_error()) return *error;
  into = std::move(*result);
  return std::nullopt;
}

}  // namespace

Result<std::unique_ptr<KernelBackend>> host_kernel_backend(codegen::GpuKernelShape shape) {
  auto created = JitSession::create();
  if (auto* error = created.if_error()) return Error{ErrorCode::Backend, error->message};
  auto session = std::move(*created);
  auto module = codegen::build_gpu_kernels(session->context(), codegen::GpuTarget::Host, shape);
  if (!module) return Error{ErrorCode::Internal, "the GPU kernels' IR does not verify"};
  if (auto added = session->add(std::move(module)); auto* error = added.if_error())
    return Error{ErrorCode::Backend, error->message};
  auto backend = std::make_unique<HostBackend>(std::move(session), shape.set_words);
  if (auto error = backend->resolve()) return *error;
  return std::unique_ptr<KernelBackend>(std::move(backend));
}

std::string ptx_arch_for(int major, int minor) {
  const std::string own = fmt::format("sm_{}{}", major, minor);
  if (codegen::nvptx_knows_arch(own)) return own;
  // A device newer than this LLVM: the newest architecture it knows at or
  // below the device (the driver compiles PTX for later devices).
  constexpr const char* kKnown[] = {"sm_90", "sm_89", "sm_87", "sm_86", "sm_80", "sm_75", "sm_72", "sm_70"};
  for (const char* arch : kKnown) {
    const int number = std::stoi(std::string(arch + 3));
    if (number <= major * 10 + minor && codegen::nvptx_knows_arch(arch)) return arch;
  }
  return own;  // emit_ptx says why not
}

Result<std::unique_ptr<KernelBackend>> cuda_kernel_backend(codegen::GpuKernelShape shape,
                                                           const CudaBackendOptions& options) {
  auto loaded = gpu::Driver::load(options.library);
  if (auto* error = loaded.if_error()) return *error;
  const gpu::DriverPtr driver = *loaded;
  auto devices = driver->devices();
  if (auto* error = devices.if_error()) return *error;
  const auto& list = *devices;
  if (options.device < 0 || static_cast<size_t>(options.device) >= list.size())
    return Error{ErrorCode::Backend, fmt::format("no CUDA device {} ({} found)", options.device, list.size())};
  const gpu::Driver::Device& device = list[static_cast<size_t>(options.device)];
  const std::string arch = options.arch.empty() ? ptx_arch_for(device.major, device.minor) : options.arch;

  std::unique_ptr<gpu::Context> context;
  if (auto error = take(gpu::Context::open(driver, options.device), context)) return *error;
  std::unique_ptr<gpu::Stream> stream;
  if (auto error = take(gpu::Stream::create(*context), stream)) return *error;
  llvm::LLVMContext llvm_context;
  auto module = codegen::build_gpu_kernels(llvm_context, codegen::GpuTarget::Nvptx, shape);
  if (!module) return Error{ErrorCode::Internal, "the GPU kernels' IR does not verify"};
  auto ptx = codegen::emit_ptx(*module, arch);
  if (auto* error = ptx.if_error()) return Error{ErrorCode::Backend, error->message};
  std::unique_ptr<gpu::Module> loaded_module;
  if (auto error = take(gpu::Module::load_ptx(*context, *ptx), loaded_module)) return *error;
  auto backend = std::make_unique<CudaBackend>(
      std::move(context), std::move(stream), std::move(loaded_module),
      fmt::format("{} (sm_{}{}, PTX for {})", device.name, device.major, device.minor, arch), device.bandwidth_gb_s,
      shape.set_words);
  if (auto error = backend->resolve()) return *error;
  return std::unique_ptr<KernelBackend>(std::move(backend));
}

}  // namespace cgram::jit

#pragma once
// Where the mask kernels (codegen/gpu_kernels.h) run: on a GPU through the
// CUDA driver (loaded at run time), or on the host, where the same IR is
// compiled for the CPU by the JIT and each launch runs its grid in a loop.
// The host backend is how the whole GPU path — planning, uploads, launches,
// the kernels' logic — is tested on machines without a GPU.
//
// Addresses are 64-bit integers: a CUdeviceptr, or a host pointer on the
// host backend. Every call returns an error value, never throws.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "cuda_driver.h"
#include "error.h"
#include "gpu_kernels.h"
#include "logits_mask.h"

namespace cgram::jit {

using cgram::Error;

class KernelMemory {
 public:
  virtual ~KernelMemory() = default;
  virtual uint64_t address() const = 0;
  virtual size_t bytes() const = 0;
  // In order with the backend's launches. Pageable (not pinned) host memory
  // may be reused once the call returns: the driver copies it to a staging
  // buffer before returning (the CUDA API's documented synchronization
  // behaviour for asynchronous copies from pageable memory). Pinned memory
  // must stay until the backend is synchronized; cgram only uploads from
  // its own pageable buffers.
  virtual std::optional<Error> upload(const void* data, size_t bytes, size_t offset = 0) = 0;
  // Waits for the launches before it.
  virtual std::optional<Error> download(void* data, size_t bytes, size_t offset = 0) = 0;
};

// The kernels' parameters (see codegen/gpu_kernels.h); 0 is a null address.
struct FillLaunch {
  uint64_t sets = 0, set_ids = 0, row_offsets = 0, out = 0, out_rows = 0;
  uint32_t words = 0, out_words = 0, rows = 0;
};
struct SetBitsLaunch {
  uint64_t out = 0;
  uint32_t out_words = 0;
  uint64_t tokens = 0, token_rows = 0;
  uint32_t count = 0;
};
struct ApplyLaunch {
  LogitsType type = LogitsType::Float32;
  uint64_t logits = 0;
  int64_t row_stride = 0;  // elements
  uint32_t vocab = 0;
  uint64_t bitmask = 0;
  uint32_t words = 0;   // per bitmask row
  uint64_t rows = 0;    // row list, or 0: rows 0 .. row_count - 1
  uint32_t row_count = 0;
};

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;
  virtual std::string description() const = 0;
  virtual bool is_gpu() const = 0;
  // The device memory's peak bandwidth (0: unknown, or the host).
  virtual double peak_bandwidth_gb_s() const = 0;
  // The token-set width the kernels were specialised for (0: any).
  virtual unsigned set_words() const = 0;
  virtual Result<std::unique_ptr<KernelMemory>> allocate(size_t bytes) = 0;
  // Asynchronous on the backend's stream (the host backend runs them now).
  virtual std::optional<Error> fill(const FillLaunch& launch) = 0;
  virtual std::optional<Error> set_bits(const SetBitsLaunch& launch) = 0;
  virtual std::optional<Error> apply(const ApplyLaunch& launch) = 0;
  virtual std::optional<Error> synchronize() = 0;
  // Milliseconds the device spends on `work` (events on a GPU, the clock
  // on the host), `work` launched `repeats` times; the mean per run.
  virtual Result<double> time_ms(const std::function<std::optional<Error>()>& work, int repeats) = 0;
};

// The kernels compiled for the host (the JIT), with this shape.
Result<std::unique_ptr<KernelBackend>> host_kernel_backend(codegen::GpuKernelShape shape = {});

struct CudaBackendOptions {
  std::string library = "libcuda.so.1";
  int device = 0;
  // The PTX target; empty: the device's own (sm_XY), or the newest LLVM
  // knows for a device newer than that (PTX is forward compatible).
  std::string arch;
};
// The GPU: the driver loaded, the device's context, a stream, the kernels'
// PTX emitted for it and loaded. The error says why not (no driver, no
// device, PTX refused), and the caller then masks on the CPU.
Result<std::unique_ptr<KernelBackend>> cuda_kernel_backend(codegen::GpuKernelShape shape = {},
                                                           const CudaBackendOptions& options = {});

// The architecture the PTX is made for, for a device of compute capability
// major.minor: sm_XY when LLVM knows it, else the newest it knows below.
std::string ptx_arch_for(int major, int minor);

}  // namespace cgram::jit

// cgram gpu: the GPU this machine has (through the CUDA driver, loaded at
// run time), or why there is none; and the mask kernels' PTX.
#include <fmt/format.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <iostream>

#include "commands.h"
#include "cuda_driver.h"
#include "gpu_kernels.h"
#include "io.h"

namespace cgram::cli {
namespace {

int emit_kernels(const GpuArgs& args) {
  llvm::LLVMContext context;
  auto module = codegen::build_gpu_kernels(context, codegen::GpuTarget::Nvptx);
  if (!module) {
    print_error("the GPU kernels' IR does not verify");
    return 1;
  }
  auto ptx = codegen::emit_ptx(*module, args.emit_ptx);
  if (auto* error = ptx.if_error()) {
    print_error(error->message);
    return 1;
  }
  return write_output(args.output, *ptx);
}

}  // namespace

int run_gpu(const GpuArgs& args) {
  if (!args.emit_ptx.empty()) return emit_kernels(args);
  auto loaded = gpu::Driver::load(args.library);
  if (auto* error = loaded.if_error()) {
    std::cerr << "cgram gpu: no GPU: " << printable(error->message, true) << "\n"
              << "Masks are computed on the CPU: every command works without a GPU.\n";
    return kExitNoGpu;
  }
  const gpu::Driver& driver = **loaded;
  auto devices = driver.devices();
  if (auto* error = devices.if_error()) {
    print_error(error->message);
    return kExitNoGpu;
  }
  const auto& list = *devices;
  std::cout << fmt::format("CUDA driver {}: {} device{}\n", driver.library(), list.size(), list.size() == 1 ? "" : "s");
  for (const gpu::Driver::Device& d : list)
    std::cout << fmt::format("  {}: {} (sm_{}{}), {:.1f} GiB, peak bandwidth {:.0f} GB/s\n", d.ordinal, d.name, d.major,
                             d.minor, d.memory_bytes / double(1 << 30), d.bandwidth_gb_s);
  return list.empty() ? kExitNoGpu : 0;
}

}  // namespace cgram::cli

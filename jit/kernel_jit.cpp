#include "kernel_jit.h"

#include <fmt/format.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectTransformLayer.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <atomic>
#include <chrono>
#include <mutex>

#include "matcher_ir.h"

namespace cgram::jit {
namespace {
// Object bytes emitted on this thread (the lookup that materialises a
// grammar's kernels runs its compilation on the calling thread).
thread_local size_t object_bytes_here = 0;

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

struct KernelJit::State {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::mutex machine_mutex;  // the target machine is not thread-safe
  std::unique_ptr<llvm::TargetMachine> machine;
  std::atomic<uint64_t> next_id{0};
};

namespace {
// Owns one grammar's code: frees it (its resource tracker, then its
// JITDylib) when the last Kernels referring to it goes.
struct JitCode {
  std::shared_ptr<KernelJit::State> state;
  llvm::orc::JITDylib* dylib = nullptr;
  llvm::orc::ResourceTrackerSP tracker;
  ~JitCode() {
    if (tracker) llvm::consumeError(tracker->remove());
    if (dylib) llvm::consumeError(state->jit->getExecutionSession().removeJITDylib(*dylib));
  }
};
}  // namespace

KernelJit::~KernelJit() = default;

Result<std::shared_ptr<KernelJit>> KernelJit::create() {
  initialize_native_target();
  auto state = std::make_shared<State>();
  // Several threads compile at once (the Compiler's background workers, C API
  // callers): each compile gets its own target machine. Compilation stays
  // on the thread that looks the kernels up (no compile threads of ORC's own).
  auto jit = llvm::orc::LLJITBuilder().setSupportConcurrentCompilation(true).create();
  if (!jit) return Error{ErrorCode::Backend, "cannot start the LLVM JIT: " + llvm::toString(jit.takeError())};
  state->jit = std::move(*jit);
  state->jit->getObjTransformLayer().setTransform([](std::unique_ptr<llvm::MemoryBuffer> object) {
    object_bytes_here += object->getBufferSize();
    return llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>(std::move(object));
  });
  auto host = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!host) return Error{ErrorCode::Backend, "cannot describe the host to LLVM: " + llvm::toString(host.takeError())};
  auto machine = host->createTargetMachine();
  if (!machine)
    return Error{ErrorCode::Backend, "cannot create the host target machine: " + llvm::toString(machine.takeError())};
  state->machine = std::move(*machine);
  return std::shared_ptr<KernelJit>(new KernelJit(std::move(state)));
}

Result<std::shared_ptr<const Kernels>> KernelJit::compile(const CompiledGrammar& grammar, KernelTimings* timings) {
  using Clock = std::chrono::steady_clock;
  KernelTimings local;
  KernelTimings& t = timings ? *timings : local;
  auto t0 = Clock::now();
  auto context = std::make_unique<llvm::LLVMContext>();
  constexpr std::string_view prefix = "cgram_";
  auto module = codegen::build_matcher_module(*context, grammar.lexical(), grammar.table(),
                                              grammar.index().follower_first_bytes(), prefix);
  if (!module) return Error{ErrorCode::Internal, "the generated IR does not verify (a bug in cgram's code generator)"};
  t.ir_ms = ms_since(t0);
  auto t1 = Clock::now();
  {
    std::lock_guard lock(state_->machine_mutex);
    module->setDataLayout(state_->machine->createDataLayout());
    module->setTargetTriple(state_->machine->getTargetTriple().str());
    codegen::optimize(*module, state_->machine.get());
  }
  t.optimize_ms = ms_since(t1);
  auto t2 = Clock::now();
  auto code = std::make_shared<JitCode>();
  code->state = state_;
  auto& session = state_->jit->getExecutionSession();
  auto dylib = session.createJITDylib(fmt::format("cgram_grammar_{}", state_->next_id++));
  if (!dylib) return Error{ErrorCode::Backend, "cannot create a JITDylib: " + llvm::toString(dylib.takeError())};
  code->dylib = &*dylib;
  code->tracker = code->dylib->createResourceTracker();
  llvm::orc::ThreadSafeModule tsm(std::move(module), std::move(context));
  if (auto error = state_->jit->addIRModule(code->tracker, std::move(tsm)))
    return Error{ErrorCode::Backend, "cannot add the kernels to the JIT: " + llvm::toString(std::move(error))};
  auto kernels = std::make_shared<Kernels>();
  kernels->tier = "jit";
  std::optional<Error> error;
  object_bytes_here = 0;
  kernels->functions.bind_each([&](std::string_view kernel, auto& slot) {
    if (error) return;
    const std::string name = codegen::kernel_symbol(prefix, kernel);
    auto address = state_->jit->lookup(*code->dylib, name);
    if (!address) {
      error = Error{ErrorCode::Backend, "JIT lookup of '" + name + "' failed: " + llvm::toString(address.takeError())};
      return;
    }
    slot = address->toPtr<std::remove_reference_t<decltype(slot)>>();
  });
  if (error) return *error;
  t.native_ms = ms_since(t2);
  kernels->code_bytes = object_bytes_here;
  grammar.bind_tables(*kernels);
  kernels->owner = std::move(code);
  return std::shared_ptr<const Kernels>(std::move(kernels));
}

std::optional<Error> tier_up_now(const CompiledGrammar& grammar, KernelTimings* timings) {
  static const auto jit = KernelJit::create();
  if (auto* error = jit.if_error()) return *error;
  auto kernels = (*jit)->compile(grammar, timings);
  if (auto* error = kernels.if_error()) return *error;
  grammar.install_kernels(std::move(*kernels));
  return std::nullopt;
}

}  // namespace cgram::jit

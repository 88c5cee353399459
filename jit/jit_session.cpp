#include "jit_session.h"

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/TargetSelect.h>

#include <mutex>

namespace cgram::jit {

void initialize_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

struct JitSession::State {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  // Modules are built in this context, then handed to ORC with it.
  llvm::orc::ThreadSafeContext context{std::make_unique<llvm::LLVMContext>()};
};

JitSession::JitSession(Key) : state_(std::make_unique<State>()) {}
JitSession::~JitSession() = default;

Result<std::unique_ptr<JitSession>> JitSession::create() {
  initialize_native_target();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return Error{ErrorCode::Backend, "cannot start the LLVM JIT: " + llvm::toString(jit.takeError())};
  auto session = std::make_unique<JitSession>(Key{});
  session->state_->jit = std::move(*jit);
  return session;
}

llvm::LLVMContext& JitSession::context() { return *state_->context.getContext(); }

Result<void> JitSession::add(std::unique_ptr<llvm::Module> module) {
  if (!module) return Error{ErrorCode::Backend, "no module to compile"};
  module->setDataLayout(state_->jit->getDataLayout());
  if (auto error = state_->jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), state_->context)))
    return Error{ErrorCode::Backend, "cannot add the module to the JIT: " + llvm::toString(std::move(error))};
  return {};
}

Result<void*> JitSession::lookup(std::string_view symbol) {
  auto address = state_->jit->lookup(llvm::StringRef(symbol));
  if (!address)
    return Error{ErrorCode::Backend,
                 "JIT lookup of '" + std::string(symbol) + "' failed: " + llvm::toString(address.takeError())};
  return address->toPtr<void*>();
}

}  // namespace cgram::jit

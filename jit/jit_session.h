#pragma once
// One ORC LLJIT instance: modules in, native function addresses out. Errors
// are values (a message), never exceptions or aborts.
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "error.h"

namespace llvm {
class LLVMContext;
class Module;
namespace orc {
class LLJIT;
}
}  // namespace llvm

namespace cgram::jit {

// Registers the host target with LLVM (once per process; thread-safe).
void initialize_native_target();

class JitSession {
 public:
  static Result<std::unique_ptr<JitSession>> create();
  ~JitSession();
  JitSession(const JitSession&) = delete;
  JitSession& operator=(const JitSession&) = delete;

  // Takes ownership of `module`, which must have been built in `context()`.
  Result<void> add(std::unique_ptr<llvm::Module> module);
  Result<void*> lookup(std::string_view symbol);
  llvm::LLVMContext& context();

 private:
  struct Key {};  // only create() builds sessions

 public:
  explicit JitSession(Key);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cgram::jit

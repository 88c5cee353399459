#pragma once
// One ORC LLJIT instance: modules in, native function addresses out. Errors
// are values (a message), never exceptions or aborts.
#include <memory>
#include <string>
#include <string_view>
#include <variant>

namespace llvm {
class LLVMContext;
class Module;
namespace orc {
class LLJIT;
}
}  // namespace llvm

namespace cgram::jit {

struct JitError {
  std::string message;
};

// Registers the host target with LLVM (once per process; thread-safe).
void initialize_native_target();

class JitSession {
 public:
  static std::variant<std::unique_ptr<JitSession>, JitError> create();
  ~JitSession();
  JitSession(const JitSession&) = delete;
  JitSession& operator=(const JitSession&) = delete;

  // Takes ownership of `module`, which must have been built in `context()`.
  std::variant<std::monostate, JitError> add(std::unique_ptr<llvm::Module> module);
  std::variant<void*, JitError> lookup(std::string_view symbol);
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

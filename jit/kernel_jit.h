#pragma once
// The JIT tier's compiler: one ORC LLJIT for the process, one JITDylib per
// compiled grammar. compile() turns a grammar's tables into native kernels
// (codegen/matcher_ir.h); the returned Kernels own their code, which a
// resource tracker frees when the last compiled grammar using it goes.
// Thread-safe: many threads may compile at once (each module has its own
// LLVM context).
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "compiled_grammar.h"
#include "error.h"
#include "jit_session.h"
#include "kernels.h"

namespace cgram::jit {

struct KernelTimings {
  double ir_ms = 0;        // building the IR
  double optimize_ms = 0;  // codegen::optimize (SimplifyCFG)
  double native_ms = 0;    // instruction selection and linking in memory
};

class KernelJit {
 public:
  static Result<std::shared_ptr<KernelJit>> create();
  ~KernelJit();

  Result<std::shared_ptr<const Kernels>> compile(const CompiledGrammar& grammar, KernelTimings* timings = nullptr);

  struct State;

 private:
  explicit KernelJit(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;  // shared with every Kernels it made (they outlive this handle)
};

// Compiles `grammar`'s kernels now, on one KernelJit shared by the whole
// process, and installs them (a synchronous tier-up: the CLI's --tier jit,
// the C API's CGRAM_TIER_JIT). Kernels already there are kept.
std::optional<Error> tier_up_now(const CompiledGrammar& grammar, KernelTimings* timings = nullptr);

}  // namespace cgram::jit

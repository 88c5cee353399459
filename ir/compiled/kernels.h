#pragma once
// The matcher's table lookups as compiled code: the functions that
// codegen/ emits for one grammar (direct-coded lexer DFAs, LR actions as
// switches, lexeme-end checks), reached through plain C function pointers
// so that the runtime needs no LLVM. The table tier answers the same
// questions from the tables themselves; every tier gives bit-identical
// masks because these functions are those tables.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace cgram {

// The C ABI of generated code, listed once: X(name, result, parameters).
// The function pointers below, the generator (codegen/matcher_ir.cpp, which
// checks that it defines each with this many parameters), the JIT's lookup
// and the AOT binding (jit/) all come from this list. Every function is
// total: out-of-range arguments give kDead / kNone (UINT32_MAX) or 0, never
// undefined behaviour.
//  - dfa_next: the terminal's DFA after `byte` from `state` (UINT32_MAX:
//    dead). `tables[t]` is terminal t's own DFA table (Dfa::table_data),
//    which the DFAs too large to direct-code read.
//  - dfa_accepting: 1 when the terminal's lexeme may end in `state`.
//  - lr_shift: the LR shift on `terminal` (UINT32_MAX: none).
//  - lr_goto: the LR goto on `nonterminal` (UINT32_MAX: none).
//  - lr_reduce: the id of the list of productions to reduce on this
//    lookahead (0: none).
//  - can_follow: the crossing check, 1 when `byte` can start a lexeme that
//    may follow one of `terminal` (TokenIndex::follower_first_bytes).
#define CGRAM_KERNEL_LIST(X)                                                                               \
  X(dfa_next, uint32_t, (const uint32_t* const* tables, uint32_t terminal, uint32_t state, uint32_t byte)) \
  X(dfa_accepting, uint32_t, (uint32_t terminal, uint32_t state))                                          \
  X(lr_shift, uint32_t, (uint32_t state, uint32_t terminal))                                               \
  X(lr_goto, uint32_t, (uint32_t state, uint32_t nonterminal))                                             \
  X(lr_reduce, uint32_t, (uint32_t state, uint32_t lookahead))                                             \
  X(can_follow, uint32_t, (uint32_t terminal, uint32_t byte))

struct KernelFunctions {
#define CGRAM_KERNEL_POINTER(name, result, parameters) result(*name) parameters = nullptr;
  CGRAM_KERNEL_LIST(CGRAM_KERNEL_POINTER)
#undef CGRAM_KERNEL_POINTER

  // Calls bind(name, pointer) for each kernel of the list, `pointer` a
  // reference to its slot: how a tier fills the slots from its symbols.
  template <typename Bind>
  void bind_each(Bind&& bind) {
#define CGRAM_KERNEL_BIND(name, result, parameters) bind(std::string_view(#name), name);
    CGRAM_KERNEL_LIST(CGRAM_KERNEL_BIND)
#undef CGRAM_KERNEL_BIND
  }
  // Whether every slot is filled.
  bool complete() const {
#define CGRAM_KERNEL_SET(name, result, parameters) &&name != nullptr
    return true CGRAM_KERNEL_LIST(CGRAM_KERNEL_SET);
#undef CGRAM_KERNEL_SET
  }
};

// The kernels' names and parameter counts, in the list's order.
struct KernelSignature {
  std::string_view name;
  unsigned parameters;
};
template <typename Result, typename... Parameters>
constexpr unsigned kernel_parameter_count(Result (*)(Parameters...)) {
  return sizeof...(Parameters);
}
inline constexpr KernelSignature kKernelSignatures[] = {
#define CGRAM_KERNEL_SIGNATURE(name, result, parameters) \
  {#name, kernel_parameter_count(static_cast<decltype(KernelFunctions::name)>(nullptr))},
    CGRAM_KERNEL_LIST(CGRAM_KERNEL_SIGNATURE)
#undef CGRAM_KERNEL_SIGNATURE
};

// Compiled code for one compiled grammar. Whoever made it (the JIT's
// resource tracker, or a dlopen handle) keeps it alive through `owner`: the
// code lives exactly as long as the last compiled grammar that uses it.
struct Kernels {
  KernelFunctions functions;
  std::vector<const uint32_t*> dfa_tables;  // per terminal: the tables of the grammar they were made for
  const char* tier = "table";  // "jit" or "aot"
  size_t code_bytes = 0;
  std::shared_ptr<void> owner;
};

}  // namespace cgram

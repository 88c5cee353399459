#pragma once
// The matcher's table lookups as compiled code: the functions that
// tiers/ emits for one grammar (direct-coded lexer DFAs, LR actions as
// switches, lexeme-end checks), reached through plain C function pointers
// so that the runtime needs no LLVM. The table tier answers the same
// questions from the tables themselves; every tier gives bit-identical
// masks because these functions are those tables.
#include <cstdint>
#include <memory>
#include <vector>

namespace cgram {

// The C ABI of generated code. Every function is total: out-of-range
// arguments give kDead / kNone (UINT32_MAX) or 0, never undefined behaviour.
struct KernelFunctions {
  // The terminal's DFA after `byte` from `state` (UINT32_MAX: dead).
  // `tables[t]` is terminal t's own DFA table (Dfa::table_data), which the
  // DFAs too large to direct-code read.
  uint32_t (*dfa_next)(const uint32_t* const* tables, uint32_t terminal, uint32_t state, uint32_t byte) = nullptr;
  // 1 when the terminal's lexeme may end in `state`.
  uint32_t (*dfa_accepting)(uint32_t terminal, uint32_t state) = nullptr;
  // The LR shift on `terminal` (UINT32_MAX: none).
  uint32_t (*lr_shift)(uint32_t state, uint32_t terminal) = nullptr;
  // The LR goto on `nonterminal` (UINT32_MAX: none).
  uint32_t (*lr_goto)(uint32_t state, uint32_t nonterminal) = nullptr;
  // The id of the list of productions to reduce on this lookahead (0: none).
  uint32_t (*lr_reduce)(uint32_t state, uint32_t lookahead) = nullptr;
  // The crossing check: 1 when `byte` can start a lexeme that may follow one
  // of `terminal` (TokenIndex::follower_first_bytes).
  uint32_t (*can_follow)(uint32_t terminal, uint32_t byte) = nullptr;
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

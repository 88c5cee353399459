#pragma once
// LLVM IR for one compiled grammar's hot lookups (compiled/kernels.h gives
// their C ABI). One generator serves the JIT and the AOT shared objects:
//  - the lexer DFAs, direct-coded: a switch on the state, then on the byte
//    (huge DFAs fall back to a constant table, see kMaxDirectCases);
//  - the LR actions (shift, goto, reduce) as switches;
//  - the lexeme-end checks as switches on the accepting states;
//  - constant data (the AOT payload: the tables and the token index).
// Each emit_* function builds one function of one kind, alone, so that each
// can be verified and tested against the table it came from.
#include <bitset>
#include <cstdint>
#include <span>
#include <memory>
#include <string>
#include <string_view>

#include "lexical.h"
#include "lr.h"

namespace llvm {
class Function;
class GlobalVariable;
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace cgram::codegen {

// The symbol of one kernel of CGRAM_KERNEL_LIST (compiled/kernels.h):
// prefix + its name ("cgram_dfa_next").
std::string kernel_symbol(std::string_view prefix, std::string_view kernel);

// A DFA with more blocks than this (a state's switch, and a case per distinct
// transition of each state) is not direct-coded: a switch that large gains nothing and costs
// compile time (and copying its table into the code would cost more: a
// collapsed record grammar's DFA is 17 MB). Its function reads the table
// the compiled grammar already holds: tables[terminal], passed in by the
// runtime (KernelFunctions::dfa_next's first argument).
inline constexpr size_t kMaxDirectCases = 1u << 12;

// uint32_t name(const uint32_t* const* tables, uint32_t state, uint32_t
// byte): the DFA's transition (UINT32_MAX for dead, and for a state out of
// range). `terminal` picks the table when the DFA is too large to direct-code.
llvm::Function* emit_dfa(llvm::Module& module, const ir::Dfa& dfa, uint32_t terminal, std::string_view name);
// uint32_t name(const uint32_t* const* tables, uint32_t terminal, uint32_t
// state, uint32_t byte): a switch on the terminal to each terminal's DFA.
llvm::Function* emit_dfa_dispatch(llvm::Module& module, const ir::LexicalGrammar& lexical, std::string_view name,
                                  std::string_view per_terminal_prefix);
// uint32_t name(uint32_t terminal, uint32_t state): 1 when the state accepts.
llvm::Function* emit_accepting(llvm::Module& module, const ir::LexicalGrammar& lexical, std::string_view name);
// uint32_t name(uint32_t state, uint32_t terminal|nonterminal|lookahead).
llvm::Function* emit_lr_shift(llvm::Module& module, const ir::LrTable& table, std::string_view name);
llvm::Function* emit_lr_goto(llvm::Module& module, const ir::LrTable& table, std::string_view name);
llvm::Function* emit_lr_reduce(llvm::Module& module, const ir::LrTable& table, std::string_view name);
// uint32_t name(uint32_t terminal, uint32_t byte): the crossing check, 1
// when `byte` can start a lexeme that may follow one of `terminal` (the token
// index's follower bytes), as straight-line code: the byte's 64-bit word is
// selected and its bit tested, with no branch on the byte.
llvm::Function* emit_crossing_check(llvm::Module& module, std::span<const std::bitset<256>> can_follow,
                                    std::string_view name);
// A read-only byte array `name` and a uint64_t `name`_size holding `bytes`.
llvm::GlobalVariable* emit_constant_data(llvm::Module& module, std::string_view bytes, std::string_view name);

// Every kernel of CGRAM_KERNEL_LIST for one grammar in one module, named
// kernel_symbol(prefix, kernel) (verified, and each checked to have the
// list's parameters; null otherwise, which would be a bug here).
std::unique_ptr<llvm::Module> build_matcher_module(llvm::LLVMContext& context, const ir::LexicalGrammar& lexical,
                                                   const ir::LrTable& table,
                                                   std::span<const std::bitset<256>> can_follow,
                                                   std::string_view prefix);

// SimplifyCFG alone, not the -O2 pipeline: switches become lookup tables,
// which is all these kernels gain from optimisation.
void optimize(llvm::Module& module, llvm::TargetMachine* machine);

}  // namespace cgram::codegen

#pragma once
// Two small LLVM IR kernels over masks (a popcount, an OR), for the test
// that proves the JIT toolchain end to end (jit_test.cpp). The mask layout
// is the one inference servers use: ceil(vocab/32) 32-bit words, bit t % 32
// of word t / 32 set when token t is allowed.
#include <memory>
#include <string_view>

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace cgram::codegen {

// Builds a module with
//   uint32_t <name>(const uint32_t* words, uint32_t count)
// which returns the number of set bits (allowed tokens) in a mask.
std::unique_ptr<llvm::Module> build_mask_popcount(llvm::LLVMContext& context, std::string_view name);

// Builds a module with
//   void <name>(uint32_t* dst, const uint32_t* src, uint32_t count)
// which ORs one mask into another (the core of "OR a few precomputed bitsets").
std::unique_ptr<llvm::Module> build_mask_or(llvm::LLVMContext& context, std::string_view name);

}  // namespace cgram::codegen

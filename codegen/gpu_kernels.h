#pragma once
// LLVM IR for the GPU mask kernels, for NVPTX (PTX for the CUDA driver) or
// for the host (the same bodies run over the grid by a loop: how the kernels'
// logic is tested on machines without a GPU).
//
// Kernels, each thread (x, y) = (block.x * block size + thread.x, block.y),
// the block size being the launcher's choice (x past the work returns):
//   cgram_apply_f32 / _f16 / _bf16(ptr logits, i64 row_stride, i32 vocab, ptr bitmask, i32 words, ptr rows)
//     logits row r = rows ? rows[y] : y (the same row of the bitmask): token
//     x < vocab gets -inf unless bit x % 32 of word x / 32 is set; tokens
//     past 32 * words are never allowed. One store per disallowed token, no
//     load of logits: the kernel is bound by the bytes it writes.
//   cgram_fill(ptr sets, ptr set_ids, ptr row_offsets, ptr out, i32 words, i32 out_words, ptr out_rows)
//     out[r][x] = OR of sets[set_ids[k]][x] for k in [row_offsets[y], row_offsets[y + 1]),
//     0 past `words`, where r = out_rows ? out_rows[y] : y: a row's precomputed
//     token sets, ORed on the device.
//   cgram_set_bits(ptr out, i32 out_words, ptr tokens, ptr token_rows, i32 count)
//     sets bit tokens[x] of row token_rows[x] (atomically): what the host
//     computed from the parse stack, merged in.
// All pointers are to 32-bit words except logits. Sizes are in elements.
//
// On the host target each kernel K is `K_grid(params..., i32 width, i32 height)`,
// which runs every (x, y) with x < width and y < height.
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "error.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace cgram::codegen {

enum class GpuTarget { Nvptx, Host };

// What is fixed when the module is made for one grammar/vocabulary pair:
// the width of its token sets (cgram_fill's `words` argument is then
// ignored, and the loop over words has a constant bound); 0: read from the
// launch arguments. The logits' and bitmask's widths are the caller's (a
// model pads its vocabulary), so apply stays generic.
struct GpuKernelShape {
  unsigned set_words = 0;
};

std::unique_ptr<llvm::Module> build_gpu_kernels(llvm::LLVMContext& context, GpuTarget target,
                                                GpuKernelShape shape = {});

// PTX text for `arch` ("sm_80", "sm_90"), or why there is none.
Result<std::string> emit_ptx(llvm::Module& module, std::string_view arch);
// Whether LLVM's NVPTX target knows `arch`.
bool nvptx_knows_arch(std::string_view arch);

}  // namespace cgram::codegen

#include "gpu_kernels.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/Transforms/IPO/AlwaysInliner.h>

#include <fmt/format.h>

#include <functional>
#include <mutex>
#include <span>
#include <vector>

namespace cgram::codegen {
namespace {

constexpr const char* kNvptxTriple = "nvptx64-nvidia-cuda";

// A kernel: its parameters and its body for one thread (x, y).
struct KernelBody {
  std::string name;
  std::vector<llvm::Type*> params;
  // Emits the body into the current block of `b`; `args` are the kernel's
  // parameters. It may branch; it ends by branching to `done`.
  std::function<void(llvm::IRBuilder<>& b, llvm::Function* fn, std::span<llvm::Value* const> args, llvm::Value* x,
                     llvm::Value* y, llvm::BasicBlock* done)>
      emit;
};

// A void function of the kernel's parameters, then two i32 (x and y, or
// the grid's width and height) when `with_pair`.
llvm::Function* new_function(llvm::Module& module, const KernelBody& kernel, bool with_pair,
                             llvm::GlobalValue::LinkageTypes linkage, const std::string& name) {
  llvm::Type* i32 = llvm::Type::getInt32Ty(module.getContext());
  std::vector<llvm::Type*> types = kernel.params;
  if (with_pair) types.insert(types.end(), {i32, i32});
  return llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(module.getContext()), types, false),
                                linkage, name, module);
}

// body(params..., x, y): internal, always inlined into its wrappers.
llvm::Function* define_body(llvm::Module& module, const KernelBody& kernel) {
  llvm::LLVMContext& context = module.getContext();
  llvm::IRBuilder<> b(context);
  llvm::Function* fn = new_function(module, kernel, true, llvm::Function::InternalLinkage, kernel.name + "_body");
  fn->addFnAttr(llvm::Attribute::AlwaysInline);
  auto* entry = llvm::BasicBlock::Create(context, "entry", fn);
  auto* done = llvm::BasicBlock::Create(context, "done", fn);
  b.SetInsertPoint(entry);
  std::vector<llvm::Value*> args;
  for (size_t i = 0; i < kernel.params.size(); ++i) args.push_back(fn->getArg(static_cast<unsigned>(i)));
  kernel.emit(b, fn, args, fn->getArg(static_cast<unsigned>(kernel.params.size())),
              fn->getArg(static_cast<unsigned>(kernel.params.size() + 1)), done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  return fn;
}

llvm::Value* read_sreg(llvm::IRBuilder<>& b, llvm::Module& module, llvm::Intrinsic::ID id) {
  return b.CreateCall(llvm::Intrinsic::getDeclaration(&module, id), {});
}

// The NVPTX kernel: x and y from the thread and block indices.
void define_nvptx_kernel(llvm::Module& module, const KernelBody& kernel, llvm::Function* body) {
  llvm::LLVMContext& context = module.getContext();
  llvm::IRBuilder<> b(context);
  llvm::Function* fn = new_function(module, kernel, false, llvm::Function::ExternalLinkage, kernel.name);
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", fn));
  llvm::Value* x = b.CreateAdd(b.CreateMul(read_sreg(b, module, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x),
                                           read_sreg(b, module, llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x)),
                               read_sreg(b, module, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x));
  llvm::Value* y = read_sreg(b, module, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y);
  std::vector<llvm::Value*> args;
  for (llvm::Argument& a : fn->args()) args.push_back(&a);
  args.push_back(x);
  args.push_back(y);
  b.CreateCall(body, args);
  b.CreateRetVoid();
  // LLVM 19 finds kernels through nvvm.annotations.
  llvm::Metadata* entry[] = {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(context, "kernel"),
                             llvm::ValueAsMetadata::get(b.getInt32(1))};
  module.getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(context, entry));
}

// The host version: K_grid(params..., width, height) runs every (x, y).
void define_host_grid(llvm::Module& module, const KernelBody& kernel, llvm::Function* body) {
  llvm::LLVMContext& context = module.getContext();
  llvm::IRBuilder<> b(context);
  llvm::Function* fn = new_function(module, kernel, true, llvm::Function::ExternalLinkage, kernel.name + "_grid");
  auto* entry = llvm::BasicBlock::Create(context, "entry", fn);
  auto* outer = llvm::BasicBlock::Create(context, "rows", fn);
  auto* inner = llvm::BasicBlock::Create(context, "columns", fn);
  auto* call = llvm::BasicBlock::Create(context, "thread", fn);
  auto* next_row = llvm::BasicBlock::Create(context, "next_row", fn);
  auto* exit = llvm::BasicBlock::Create(context, "exit", fn);
  llvm::Value* width = fn->getArg(static_cast<unsigned>(kernel.params.size()));
  llvm::Value* height = fn->getArg(static_cast<unsigned>(kernel.params.size() + 1));
  b.SetInsertPoint(entry);
  b.CreateBr(outer);
  b.SetInsertPoint(outer);
  llvm::PHINode* y = b.CreatePHI(b.getInt32Ty(), 2, "y");
  y->addIncoming(b.getInt32(0), entry);
  b.CreateCondBr(b.CreateICmpULT(y, height), inner, exit);
  // The column loop's header is `inner`, entered from `outer` or `call`.
  b.SetInsertPoint(inner);
  llvm::PHINode* x = b.CreatePHI(b.getInt32Ty(), 2, "x");
  x->addIncoming(b.getInt32(0), outer);
  b.CreateCondBr(b.CreateICmpULT(x, width), call, next_row);
  b.SetInsertPoint(call);
  std::vector<llvm::Value*> args;
  for (size_t i = 0; i < kernel.params.size(); ++i) args.push_back(fn->getArg(static_cast<unsigned>(i)));
  args.push_back(x);
  args.push_back(y);
  b.CreateCall(body, args);
  x->addIncoming(b.CreateAdd(x, b.getInt32(1)), call);
  b.CreateBr(inner);
  b.SetInsertPoint(next_row);
  y->addIncoming(b.CreateAdd(y, b.getInt32(1)), next_row);
  b.CreateBr(outer);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
}

// if (!condition) goto done; continues in a new block.
void require(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* condition, llvm::BasicBlock* done) {
  auto* go_on = llvm::BasicBlock::Create(b.getContext(), "then", fn, done);
  b.CreateCondBr(condition, go_on, done);
  b.SetInsertPoint(go_on);
}

llvm::Value* word_at(llvm::IRBuilder<>& b, llvm::Value* base, llvm::Value* index64) {
  return b.CreateGEP(b.getInt32Ty(), base, index64);
}

// The row thread row y works on: rows[y], or y itself when `rows` is null (as i64).
llvm::Value* listed_row(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* rows, llvm::Value* y,
                        llvm::BasicBlock* done) {
  llvm::Value* listed = b.CreateICmpNE(rows, llvm::ConstantPointerNull::get(b.getPtrTy()));
  llvm::BasicBlock* unlisted_block = b.GetInsertBlock();
  auto* read_list = llvm::BasicBlock::Create(b.getContext(), "read_list", fn, done);
  auto* have_row = llvm::BasicBlock::Create(b.getContext(), "have_row", fn, done);
  b.CreateCondBr(listed, read_list, have_row);
  b.SetInsertPoint(read_list);
  llvm::Value* from_list = b.CreateLoad(b.getInt32Ty(), word_at(b, rows, b.CreateZExt(y, b.getInt64Ty())));
  b.CreateBr(have_row);
  b.SetInsertPoint(have_row);
  llvm::PHINode* row = b.CreatePHI(b.getInt32Ty(), 2, "row");
  row->addIncoming(y, unlisted_block);
  row->addIncoming(from_list, read_list);
  return b.CreateZExt(row, b.getInt64Ty());
}

struct Element {
  const char* suffix;
  unsigned bits;
  uint32_t minus_infinity;
};
constexpr Element kElements[] = {{"f32", 32, 0xFF800000u}, {"f16", 16, 0xFC00u}, {"bf16", 16, 0xFF80u}};

KernelBody apply_kernel(llvm::LLVMContext& context, const Element& element) {
  llvm::IRBuilder<> t(context);
  KernelBody k;
  k.name = std::string("cgram_apply_") + element.suffix;
  k.params = {t.getPtrTy(), t.getInt64Ty(), t.getInt32Ty(), t.getPtrTy(), t.getInt32Ty(), t.getPtrTy()};
  k.emit = [element](llvm::IRBuilder<>& b, llvm::Function* fn, std::span<llvm::Value* const> a, llvm::Value* x,
                     llvm::Value* y, llvm::BasicBlock* done) {
    llvm::Value* logits = a[0];
    llvm::Value* row_stride = a[1];
    llvm::Value* vocab = a[2];
    llvm::Value* bitmask = a[3];
    llvm::Value* words = a[4];
    llvm::Value* rows = a[5];
    require(b, fn, b.CreateICmpULT(x, vocab), done);
    llvm::Value* row = listed_row(b, fn, rows, y, done);
    llvm::Value* word_index = b.CreateLShr(x, b.getInt32(5));
    auto* in_mask = llvm::BasicBlock::Create(b.getContext(), "in_mask", fn, done);
    auto* decide = llvm::BasicBlock::Create(b.getContext(), "decide", fn, done);
    llvm::BasicBlock* before = b.GetInsertBlock();
    b.CreateCondBr(b.CreateICmpULT(word_index, words), in_mask, decide);
    b.SetInsertPoint(in_mask);
    llvm::Value* offset = b.CreateAdd(b.CreateMul(row, b.CreateZExt(words, b.getInt64Ty())),
                                      b.CreateZExt(word_index, b.getInt64Ty()));
    llvm::Value* word = b.CreateLoad(b.getInt32Ty(), word_at(b, bitmask, offset));
    b.CreateBr(decide);
    b.SetInsertPoint(decide);
    llvm::PHINode* bits = b.CreatePHI(b.getInt32Ty(), 2, "bits");
    bits->addIncoming(b.getInt32(0), before);  // past the mask: never allowed
    bits->addIncoming(word, in_mask);
    llvm::Value* allowed = b.CreateAnd(b.CreateLShr(bits, b.CreateAnd(x, b.getInt32(31))), b.getInt32(1));
    require(b, fn, b.CreateICmpEQ(allowed, b.getInt32(0)), done);
    llvm::Type* cell = b.getIntNTy(element.bits);
    llvm::Value* at = b.CreateAdd(b.CreateMul(row, row_stride), b.CreateZExt(x, b.getInt64Ty()));
    b.CreateStore(llvm::ConstantInt::get(cell, element.minus_infinity), b.CreateGEP(cell, logits, at));
    b.CreateBr(done);
  };
  return k;
}

KernelBody fill_kernel(llvm::LLVMContext& context, GpuKernelShape shape) {
  llvm::IRBuilder<> t(context);
  KernelBody k;
  k.name = "cgram_fill";
  k.params = {t.getPtrTy(), t.getPtrTy(), t.getPtrTy(), t.getPtrTy(), t.getInt32Ty(), t.getInt32Ty(), t.getPtrTy()};
  k.emit = [shape](llvm::IRBuilder<>& b, llvm::Function* fn, std::span<llvm::Value* const> a, llvm::Value* x,
                   llvm::Value* y, llvm::BasicBlock* done) {
    llvm::Value* sets = a[0];
    llvm::Value* set_ids = a[1];
    llvm::Value* row_offsets = a[2];
    llvm::Value* out = a[3];
    llvm::Value* words = shape.set_words ? b.getInt32(shape.set_words) : a[4];
    llvm::Value* out_words = a[5];
    llvm::Value* out_rows = a[6];
    llvm::Type* i64 = b.getInt64Ty();
    require(b, fn, b.CreateICmpULT(x, out_words), done);
    llvm::Value* y64 = b.CreateZExt(y, i64);
    llvm::Value* out_row = listed_row(b, fn, out_rows, y, done);
    llvm::Value* first = b.CreateLoad(b.getInt32Ty(), word_at(b, row_offsets, y64));
    llvm::Value* last = b.CreateLoad(b.getInt32Ty(), word_at(b, row_offsets, b.CreateAdd(y64, b.getInt64(1))));
    // Past `words` the loop runs no times: the word is 0.
    llvm::Value* end = b.CreateSelect(b.CreateICmpULT(x, words), last, first);
    llvm::BasicBlock* entry = b.GetInsertBlock();
    auto* loop = llvm::BasicBlock::Create(b.getContext(), "sets", fn, done);
    auto* body = llvm::BasicBlock::Create(b.getContext(), "set", fn, done);
    auto* store = llvm::BasicBlock::Create(b.getContext(), "store", fn, done);
    b.CreateBr(loop);
    b.SetInsertPoint(loop);
    llvm::PHINode* k_index = b.CreatePHI(b.getInt32Ty(), 2, "k");
    llvm::PHINode* acc = b.CreatePHI(b.getInt32Ty(), 2, "acc");
    k_index->addIncoming(first, entry);
    acc->addIncoming(b.getInt32(0), entry);
    b.CreateCondBr(b.CreateICmpULT(k_index, end), body, store);
    b.SetInsertPoint(body);
    llvm::Value* set = b.CreateLoad(b.getInt32Ty(), word_at(b, set_ids, b.CreateZExt(k_index, i64)));
    llvm::Value* at = b.CreateAdd(b.CreateMul(b.CreateZExt(set, i64), b.CreateZExt(words, i64)), b.CreateZExt(x, i64));
    llvm::Value* merged = b.CreateOr(acc, b.CreateLoad(b.getInt32Ty(), word_at(b, sets, at)));
    k_index->addIncoming(b.CreateAdd(k_index, b.getInt32(1)), body);
    acc->addIncoming(merged, body);
    b.CreateBr(loop);
    b.SetInsertPoint(store);
    llvm::Value* target = b.CreateAdd(b.CreateMul(out_row, b.CreateZExt(out_words, i64)), b.CreateZExt(x, i64));
    b.CreateStore(acc, word_at(b, out, target));
    b.CreateBr(done);
  };
  return k;
}

KernelBody set_bits_kernel(llvm::LLVMContext& context) {
  llvm::IRBuilder<> t(context);
  KernelBody k;
  k.name = "cgram_set_bits";
  k.params = {t.getPtrTy(), t.getInt32Ty(), t.getPtrTy(), t.getPtrTy(), t.getInt32Ty()};
  k.emit = [](llvm::IRBuilder<>& b, llvm::Function* fn, std::span<llvm::Value* const> a, llvm::Value* x, llvm::Value*,
              llvm::BasicBlock* done) {
    llvm::Value* out = a[0];
    llvm::Value* out_words = a[1];
    llvm::Value* tokens = a[2];
    llvm::Value* token_rows = a[3];
    llvm::Value* count = a[4];
    llvm::Type* i64 = b.getInt64Ty();
    require(b, fn, b.CreateICmpULT(x, count), done);
    llvm::Value* x64 = b.CreateZExt(x, i64);
    llvm::Value* token = b.CreateLoad(b.getInt32Ty(), word_at(b, tokens, x64));
    llvm::Value* row = b.CreateLoad(b.getInt32Ty(), word_at(b, token_rows, x64));
    llvm::Value* at = b.CreateAdd(b.CreateMul(b.CreateZExt(row, i64), b.CreateZExt(out_words, i64)),
                                  b.CreateZExt(b.CreateLShr(token, b.getInt32(5)), i64));
    llvm::Value* bit = b.CreateShl(b.getInt32(1), b.CreateAnd(token, b.getInt32(31)));
    b.CreateAtomicRMW(llvm::AtomicRMWInst::Or, word_at(b, out, at), bit, llvm::MaybeAlign(4),
                      llvm::AtomicOrdering::Monotonic);
    b.CreateBr(done);
  };
  return k;
}

void initialize_nvptx() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

}  // namespace

std::unique_ptr<llvm::Module> build_gpu_kernels(llvm::LLVMContext& context, GpuTarget target, GpuKernelShape shape) {
  auto module = std::make_unique<llvm::Module>("cgram_gpu_kernels", context);
  if (target == GpuTarget::Nvptx) module->setTargetTriple(kNvptxTriple);
  std::vector<KernelBody> kernels;
  for (const Element& element : kElements) kernels.push_back(apply_kernel(context, element));
  kernels.push_back(fill_kernel(context, shape));
  kernels.push_back(set_bits_kernel(context));
  for (const KernelBody& kernel : kernels) {
    llvm::Function* body = define_body(*module, kernel);
    if (target == GpuTarget::Nvptx) define_nvptx_kernel(*module, kernel, body);
    else define_host_grid(*module, kernel, body);
  }
  if (llvm::verifyModule(*module, &llvm::errs())) return nullptr;
  return module;
}

bool nvptx_knows_arch(std::string_view arch) {
  initialize_nvptx();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kNvptxTriple, error);
  if (!target) return false;
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(target->createMCSubtargetInfo(kNvptxTriple, "", ""));
  return subtarget && subtarget->isCPUStringValid(arch);
}

Result<std::string> emit_ptx(llvm::Module& module, std::string_view arch) {
  initialize_nvptx();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kNvptxTriple, error);
  if (!target) return Error{ErrorCode::Backend, "no NVPTX target in this LLVM: " + error};
  // LLVM only warns about an unknown processor: refuse it here.
  if (!nvptx_knows_arch(arch))
    return Error{ErrorCode::Backend,
                 fmt::format("'{}' is not a GPU architecture LLVM's NVPTX target knows (sm_80, sm_90, ...)", arch)};
  // PTX ISA 7.8 is the first with sm_90; ptxas 11.8 and later read it.
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      kNvptxTriple, llvm::StringRef(arch), "+ptx78", llvm::TargetOptions(), std::nullopt, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine) return Error{ErrorCode::Backend, "cannot make an NVPTX target machine for " + std::string(arch)};
  module.setDataLayout(machine->createDataLayout());
  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream stream(ptx);
  llvm::legacy::PassManager passes;
  // Each kernel's body goes into the kernel (no call per thread).
  passes.add(llvm::createAlwaysInlinerLegacyPass());
  if (machine->addPassesToEmitFile(passes, stream, nullptr, llvm::CodeGenFileType::AssemblyFile))
    return Error{ErrorCode::Backend, "the NVPTX target cannot emit PTX"};
  passes.run(module);
  return std::string(ptx.str());
}

}  // namespace cgram::codegen

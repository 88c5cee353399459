#include "jit_mask_kernels.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>

namespace cgram::codegen {
namespace {

// for (i = 0; i < count; ++i) body(i)
template <typename Body>
void emit_loop(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* count, Body body) {
  llvm::LLVMContext& ctx = b.getContext();
  llvm::BasicBlock* entry = b.GetInsertBlock();
  llvm::BasicBlock* header = llvm::BasicBlock::Create(ctx, "loop", fn);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, "exit", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* i = b.CreatePHI(b.getInt32Ty(), 2, "i");
  i->addIncoming(b.getInt32(0), entry);
  llvm::BasicBlock* body_block = llvm::BasicBlock::Create(ctx, "body", fn, exit);
  b.CreateCondBr(b.CreateICmpULT(i, count), body_block, exit);
  b.SetInsertPoint(body_block);
  body(i);
  llvm::Value* next = b.CreateAdd(i, b.getInt32(1));
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateBr(header);
  b.SetInsertPoint(exit);
}

}  // namespace

std::unique_ptr<llvm::Module> build_mask_popcount(llvm::LLVMContext& context, std::string_view name) {
  auto module = std::make_unique<llvm::Module>("cgram_mask_popcount", context);
  llvm::IRBuilder<> b(context);
  auto* i32 = b.getInt32Ty();
  auto* ptr = b.getPtrTy();
  auto* type = llvm::FunctionType::get(i32, {ptr, i32}, false);
  auto* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, llvm::StringRef(name), *module);
  llvm::Value* words = fn->getArg(0);
  llvm::Value* count = fn->getArg(1);
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", fn));
  llvm::Value* total_slot = b.CreateAlloca(i32);
  b.CreateStore(b.getInt32(0), total_slot);
  llvm::Function* ctpop = llvm::Intrinsic::getDeclaration(module.get(), llvm::Intrinsic::ctpop, {i32});
  emit_loop(b, fn, count, [&](llvm::Value* i) {
    llvm::Value* word = b.CreateLoad(i32, b.CreateGEP(i32, words, i));
    llvm::Value* bits = b.CreateCall(ctpop, {word});
    b.CreateStore(b.CreateAdd(b.CreateLoad(i32, total_slot), bits), total_slot);
  });
  b.CreateRet(b.CreateLoad(i32, total_slot));
  if (llvm::verifyFunction(*fn, nullptr)) return nullptr;
  return module;
}

std::unique_ptr<llvm::Module> build_mask_or(llvm::LLVMContext& context, std::string_view name) {
  auto module = std::make_unique<llvm::Module>("cgram_mask_or", context);
  llvm::IRBuilder<> b(context);
  auto* i32 = b.getInt32Ty();
  auto* ptr = b.getPtrTy();
  auto* type = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, i32}, false);
  auto* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, llvm::StringRef(name), *module);
  llvm::Value* dst = fn->getArg(0);
  llvm::Value* src = fn->getArg(1);
  llvm::Value* count = fn->getArg(2);
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", fn));
  emit_loop(b, fn, count, [&](llvm::Value* i) {
    llvm::Value* d = b.CreateGEP(i32, dst, i);
    llvm::Value* s = b.CreateGEP(i32, src, i);
    b.CreateStore(b.CreateOr(b.CreateLoad(i32, d), b.CreateLoad(i32, s)), d);
  });
  b.CreateRetVoid();
  if (llvm::verifyFunction(*fn, nullptr)) return nullptr;
  return module;
}

}  // namespace cgram::codegen

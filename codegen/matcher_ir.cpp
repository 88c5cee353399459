#include "matcher_ir.h"

#include "kernels.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>

#include <map>
#include <vector>

namespace cgram::codegen {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

// uint32_t name([const void* tables,] uint32_t, uint32_t[, uint32_t]),
// external, not throwing.
llvm::Function* declare(llvm::Module& module, std::string_view name, unsigned arity, bool with_tables = false) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  std::vector<llvm::Type*> params(arity, i32);
  if (with_tables) params.insert(params.begin(), llvm::PointerType::get(ctx, 0));
  auto* type = llvm::FunctionType::get(i32, params, false);
  auto* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, llvm::StringRef(name), module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr(llvm::Attribute::WillReturn);
  return fn;
}

// A block that returns `value`.
llvm::BasicBlock* returning(llvm::Function* fn, uint32_t value, std::string_view label) {
  auto* block = llvm::BasicBlock::Create(fn->getContext(), llvm::StringRef(label), fn);
  llvm::IRBuilder<> b(block);
  b.CreateRet(b.getInt32(value));
  return block;
}

// A switch on `key` over (case value → result) pairs, the rest giving
// `otherwise`; a block per distinct result.
void emit_value_switch(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* key,
                       const std::vector<std::pair<uint32_t, uint32_t>>& cases, uint32_t otherwise) {
  std::map<uint32_t, llvm::BasicBlock*> blocks;
  auto block_for = [&](uint32_t result) {
    auto [it, inserted] = blocks.emplace(result, nullptr);
    if (inserted) it->second = returning(fn, result, "ret");
    return it->second;
  };
  llvm::BasicBlock* fallback = block_for(otherwise);
  auto* sw = b.CreateSwitch(key, fallback, static_cast<unsigned>(cases.size()));
  for (auto [value, result] : cases)
    if (result != otherwise) sw->addCase(b.getInt32(value), block_for(result));
}

// A switch on argument `key` with one block per row, each built by `row(i, builder)`.
template <typename Row>
void emit_row_switch(llvm::Function* fn, size_t rows, uint32_t otherwise, Row row, unsigned key = 0) {
  llvm::LLVMContext& ctx = fn->getContext();
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  llvm::BasicBlock* none = returning(fn, otherwise, "none");
  llvm::IRBuilder<> b(entry);
  auto* sw = b.CreateSwitch(fn->getArg(key), none, static_cast<unsigned>(rows));
  for (size_t i = 0; i < rows; ++i) {
    auto* block = llvm::BasicBlock::Create(ctx, fmt::format("row{}", i), fn);
    llvm::IRBuilder<> rb(block);
    if (!row(static_cast<uint32_t>(i), rb)) {
      block->eraseFromParent();
      continue;
    }
    sw->addCase(b.getInt32(static_cast<uint32_t>(i)), block);
  }
}

// A DFA too large to direct-code: a bounds-checked load from tables[terminal]
// (the compiled grammar's own table; null reads as dead).
void emit_dfa_table(llvm::Function* fn, const ir::Dfa& dfa, uint32_t terminal) {
  llvm::LLVMContext& ctx = fn->getContext();
  auto* ptr = llvm::PointerType::get(ctx, 0);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* load = llvm::BasicBlock::Create(ctx, "load", fn);
  llvm::BasicBlock* dead = returning(fn, kNone, "dead");
  llvm::IRBuilder<> b(entry);
  llvm::Value* base = b.CreateLoad(ptr, b.CreateInBoundsGEP(ptr, fn->getArg(0), b.getInt64(terminal)));
  llvm::Value* in_range = b.CreateAnd(b.CreateICmpULT(fn->getArg(1), b.getInt32(static_cast<uint32_t>(dfa.size()))),
                                      b.CreateICmpULT(fn->getArg(2), b.getInt32(256)));
  b.CreateCondBr(b.CreateAnd(in_range, b.CreateIsNotNull(base)), load, dead);
  b.SetInsertPoint(load);
  llvm::Value* at = b.CreateAdd(b.CreateMul(b.CreateZExt(fn->getArg(1), b.getInt64Ty()), b.getInt64(256)),
                                b.CreateZExt(fn->getArg(2), b.getInt64Ty()));
  b.CreateRet(b.CreateLoad(b.getInt32Ty(), b.CreateInBoundsGEP(b.getInt32Ty(), base, at)));
}

// The distinct transitions of a state, as (byte, target), and its most
// common target (the switch's default).
std::pair<std::vector<std::pair<uint32_t, uint32_t>>, uint32_t> byte_cases(std::span<const uint32_t> row) {
  std::map<uint32_t, unsigned> counts;
  for (uint32_t target : row) ++counts[target];
  uint32_t common = row[0];
  for (auto [target, n] : counts)
    if (n > counts[common]) common = target;
  std::vector<std::pair<uint32_t, uint32_t>> cases;
  for (uint32_t byte = 0; byte < 256; ++byte)
    if (row[byte] != common) cases.emplace_back(byte, row[byte]);
  return {cases, common};
}

}  // namespace

std::string kernel_symbol(std::string_view prefix, std::string_view kernel) { return fmt::format("{}{}", prefix, kernel); }

llvm::Function* emit_dfa(llvm::Module& module, const ir::Dfa& dfa, uint32_t terminal, std::string_view name) {
  llvm::Function* fn = declare(module, name, 2, /*with_tables=*/true);
  size_t cases = dfa.size();  // a block per state, and one per case
  for (uint32_t q = 0; q < dfa.size() && cases <= kMaxDirectCases; ++q) cases += byte_cases(dfa.row(q)).first.size();
  if (cases > kMaxDirectCases) {
    emit_dfa_table(fn, dfa, terminal);
    return fn;
  }
  emit_row_switch(fn, dfa.size(), kNone, [&](uint32_t q, llvm::IRBuilder<>& b) {
    auto [byte_switch, common] = byte_cases(dfa.row(q));
    emit_value_switch(b, fn, fn->getArg(2), byte_switch, common);
    return true;
  }, /*key=*/1);
  return fn;
}

llvm::Function* emit_dfa_dispatch(llvm::Module& module, const ir::LexicalGrammar& lexical, std::string_view name,
                                  std::string_view per_terminal_prefix) {
  llvm::Function* fn = declare(module, name, 3, /*with_tables=*/true);
  std::vector<llvm::Function*> per_terminal;
  for (uint32_t t = 0; t < lexical.terminals.size(); ++t)
    per_terminal.push_back(lexical.terminals[t].dfa.size() == 0
                               ? nullptr
                               : emit_dfa(module, lexical.terminals[t].dfa, t, fmt::format("{}{}", per_terminal_prefix, t)));
  for (llvm::Function* f : per_terminal)
    if (f) f->setLinkage(llvm::GlobalValue::InternalLinkage);
  emit_row_switch(fn, per_terminal.size(), kNone, [&](uint32_t t, llvm::IRBuilder<>& b) {
    if (!per_terminal[t]) return false;
    llvm::CallInst* call = b.CreateCall(per_terminal[t], {fn->getArg(0), fn->getArg(2), fn->getArg(3)});
    call->setTailCall();
    b.CreateRet(call);
    return true;
  }, /*key=*/1);
  return fn;
}

llvm::Function* emit_accepting(llvm::Module& module, const ir::LexicalGrammar& lexical, std::string_view name) {
  llvm::Function* fn = declare(module, name, 2);
  emit_row_switch(fn, lexical.terminals.size(), 0, [&](uint32_t t, llvm::IRBuilder<>& b) {
    const ir::Dfa& dfa = lexical.terminals[t].dfa;
    std::vector<std::pair<uint32_t, uint32_t>> cases;
    for (uint32_t q = 0; q < dfa.size(); ++q)
      if (dfa.accepting(q)) cases.emplace_back(q, 1);
    if (cases.empty()) return false;
    emit_value_switch(b, fn, fn->getArg(1), cases, 0);
    return true;
  });
  return fn;
}

namespace {
// A switch on the state, then on the symbol, from sorted (symbol, target) rows.
template <typename Rows>
llvm::Function* emit_lr_rows(llvm::Module& module, const ir::LrTable& table, std::string_view name, Rows rows) {
  llvm::Function* fn = declare(module, name, 2);
  emit_row_switch(fn, table.state_count(), kNone, [&](uint32_t s, llvm::IRBuilder<>& b) {
    if (rows(s).empty()) return false;
    emit_value_switch(b, fn, fn->getArg(1), rows(s), kNone);
    return true;
  });
  return fn;
}
}  // namespace

llvm::Function* emit_lr_shift(llvm::Module& module, const ir::LrTable& table, std::string_view name) {
  return emit_lr_rows(module, table, name, [&](uint32_t s) -> const auto& { return table.shifts(s); });
}

llvm::Function* emit_lr_goto(llvm::Module& module, const ir::LrTable& table, std::string_view name) {
  return emit_lr_rows(module, table, name, [&](uint32_t s) -> const auto& { return table.gotos(s); });
}

llvm::Function* emit_lr_reduce(llvm::Module& module, const ir::LrTable& table, std::string_view name) {
  llvm::Function* fn = declare(module, name, 2);
  emit_row_switch(fn, table.state_count(), 0, [&](uint32_t s, llvm::IRBuilder<>& b) {
    std::vector<std::pair<uint32_t, uint32_t>> cases;
    for (uint32_t t = 0; t <= table.terminal_count(); ++t)
      if (uint32_t id = table.reduction_list_id(s, t); id != 0) cases.emplace_back(t, id);
    if (cases.empty()) return false;
    emit_value_switch(b, fn, fn->getArg(1), cases, 0);
    return true;
  });
  return fn;
}

llvm::Function* emit_crossing_check(llvm::Module& module, std::span<const std::bitset<256>> can_follow,
                                    std::string_view name) {
  llvm::Function* fn = declare(module, name, 2);
  emit_row_switch(fn, can_follow.size(), 0, [&](uint32_t t, llvm::IRBuilder<>& b) {
    if (can_follow[t].none()) return false;
    uint64_t words[4] = {0, 0, 0, 0};
    for (int byte = 0; byte < 256; ++byte)
      if (can_follow[t][byte]) words[byte / 64] |= uint64_t(1) << (byte % 64);
    // word = byte < 64 ? w0 : byte < 128 ? w1 : byte < 192 ? w2 : w3 (bytes
    // past 255 read as absent), then one shift and mask.
    llvm::Value* byte = fn->getArg(1);
    llvm::Value* in_range = b.CreateICmpULT(byte, b.getInt32(256));
    llvm::Value* quarter = b.CreateLShr(byte, b.getInt32(6));
    llvm::Value* word = b.getInt64(words[3]);
    for (int k = 2; k >= 0; --k)
      word = b.CreateSelect(b.CreateICmpEQ(quarter, b.getInt32(k)), b.getInt64(words[k]), word);
    word = b.CreateSelect(in_range, word, b.getInt64(0));
    llvm::Value* bit = b.CreateLShr(word, b.CreateZExt(b.CreateAnd(byte, b.getInt32(63)), b.getInt64Ty()));
    b.CreateRet(b.CreateTrunc(b.CreateAnd(bit, b.getInt64(1)), b.getInt32Ty()));
    return true;
  });
  return fn;
}

llvm::GlobalVariable* emit_constant_data(llvm::Module& module, std::string_view bytes, std::string_view name) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* data = llvm::ConstantDataArray::getString(ctx, llvm::StringRef(bytes.data(), bytes.size()), false);
  auto* global = new llvm::GlobalVariable(module, data->getType(), true, llvm::GlobalValue::ExternalLinkage, data,
                                          llvm::StringRef(name));
  global->setAlignment(llvm::Align(16));
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  new llvm::GlobalVariable(module, i64, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(i64, bytes.size()), fmt::format("{}_size", name));
  return global;
}

namespace {

// One emitter per kernel of CGRAM_KERNEL_LIST, all of one shape, so that
// the list drives the module: a kernel added to the list without an
// emitter here does not compile.
struct KernelInputs {
  const ir::LexicalGrammar& lexical;
  const ir::LrTable& table;
  std::span<const std::bitset<256>> can_follow;
};
void emit_kernel_dfa_next(llvm::Module& m, const KernelInputs& in, const std::string& name) {
  emit_dfa_dispatch(m, in.lexical, name, name + "_t");
}
void emit_kernel_dfa_accepting(llvm::Module& m, const KernelInputs& in, const std::string& name) {
  emit_accepting(m, in.lexical, name);
}
void emit_kernel_lr_shift(llvm::Module& m, const KernelInputs& in, const std::string& name) {
  emit_lr_shift(m, in.table, name);
}
void emit_kernel_lr_goto(llvm::Module& m, const KernelInputs& in, const std::string& name) {
  emit_lr_goto(m, in.table, name);
}
void emit_kernel_lr_reduce(llvm::Module& m, const KernelInputs& in, const std::string& name) {
  emit_lr_reduce(m, in.table, name);
}
void emit_kernel_can_follow(llvm::Module& m, const KernelInputs& in, const std::string& name) {
  emit_crossing_check(m, in.can_follow, name);
}

}  // namespace

std::unique_ptr<llvm::Module> build_matcher_module(llvm::LLVMContext& context, const ir::LexicalGrammar& lexical,
                                                   const ir::LrTable& table,
                                                   std::span<const std::bitset<256>> can_follow,
                                                   std::string_view prefix) {
  auto module = std::make_unique<llvm::Module>("cgram_matcher", context);
  const KernelInputs inputs{lexical, table, can_follow};
#define CGRAM_EMIT_KERNEL(name, result, parameters) emit_kernel_##name(*module, inputs, kernel_symbol(prefix, #name));
  CGRAM_KERNEL_LIST(CGRAM_EMIT_KERNEL)
#undef CGRAM_EMIT_KERNEL
  for (const KernelSignature& kernel : kKernelSignatures) {
    const llvm::Function* fn = module->getFunction(kernel_symbol(prefix, kernel.name));
    if (!fn || fn->isDeclaration() || fn->arg_size() != kernel.parameters) return nullptr;
  }
  if (llvm::verifyModule(*module, nullptr)) return nullptr;
  return module;
}

void optimize(llvm::Module& module, llvm::TargetMachine* machine) {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(machine);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  // The kernels are switches and nothing else: the one transformation that
  // matters is turning them into lookup tables (SimplifyCFG), which the
  // full -O2 pipeline does at many times the cost.
  llvm::FunctionPassManager passes;
  passes.addPass(llvm::SimplifyCFGPass(llvm::SimplifyCFGOptions()
                                           .convertSwitchRangeToICmp(true)
                                           .convertSwitchToLookupTable(true)
                                           .forwardSwitchCondToPhi(true)
                                           .needCanonicalLoops(false)));
  llvm::ModulePassManager module_passes;
  module_passes.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(passes)));
  module_passes.run(module, modules);
}

}  // namespace cgram::codegen

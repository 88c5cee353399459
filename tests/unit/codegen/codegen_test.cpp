// The IR generator, one kind of table at a time: each function is built
// alone in its own module, must verify, and, compiled by the JIT, must give
// exactly what the table it came from gives, on every input (states, bytes,
// symbols, and out-of-range arguments).
#include <catch2/catch.hpp>

#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <random>

#include "compiled_grammar.h"
#include "helpers.h"
#include "jit_session.h"
#include "matcher_ir.h"

using namespace cgram;

namespace {

constexpr uint32_t kNone = UINT32_MAX;

std::unique_ptr<jit::JitSession> session() {
  auto created = jit::JitSession::create();
  REQUIRE(created.ok());
  return std::move(*created);
}

// Builds one function with `emit` in a fresh module, verifies it, JITs it.
template <typename Fn, typename Emit>
Fn* compile_one(jit::JitSession& s, std::string_view name, Emit emit) {
  auto module = std::make_unique<llvm::Module>("one", s.context());
  emit(*module);
  std::string errors;
  llvm::raw_string_ostream os(errors);
  INFO(errors);
  REQUIRE_FALSE(llvm::verifyModule(*module, &os));
  REQUIRE((s.add(std::move(module))).ok());
  auto address = s.lookup(name);
  REQUIRE(address.ok());
  return reinterpret_cast<Fn*>(*address);
}

std::shared_ptr<const CompiledGrammar> compile_for_codegen(std::string_view source) {
  auto vocab = (*(Vocabulary::bundled()));
  auto result = CompiledGrammar::compile(test::grammar(source), vocab);
  REQUIRE(result.ok());
  return (*result);
}

// `tables` as the runtime passes them: terminal t's DFA table at index t.
void check_dfa(jit::JitSession& s, const ir::Dfa& dfa, uint32_t terminal, const std::vector<const uint32_t*>& tables,
               const std::string& name) {
  using Fn = uint32_t(const uint32_t* const*, uint32_t, uint32_t);
  Fn* fn = compile_one<Fn>(s, name, [&](llvm::Module& m) { codegen::emit_dfa(m, dfa, terminal, name); });
  for (uint32_t q = 0; q < dfa.size(); ++q)
    for (uint32_t b = 0; b < 256; ++b) REQUIRE(fn(tables.data(), q, b) == dfa.next(q, static_cast<uint8_t>(b)));
  CHECK(fn(tables.data(), static_cast<uint32_t>(dfa.size()), 0) == kNone);
  CHECK(fn(tables.data(), kNone, 'a') == kNone);
}

std::vector<const uint32_t*> tables_of(const ir::LexicalGrammar& lex) {
  std::vector<const uint32_t*> tables;
  for (const ir::LexTerminal& t : lex.terminals) tables.push_back(t.dfa.table_data());
  return tables;
}

}  // namespace

TEST_CASE("codegen: each kind of table alone, equal to its table, on every example", "[codegen]") {
  auto s = session();
  int id = 0;
  for (const std::string& name : test::example_names()) {
    INFO(name);
    auto g = compile_for_codegen(test::read_example(name));
    const ir::LexicalGrammar& lex = g->lexical();
    const ir::LrTable& table = g->table();
    const std::string prefix = "g" + std::to_string(id++) + "_";
    const auto tables = tables_of(lex);
    for (uint32_t t = 0; t < lex.terminals.size(); ++t)
      if (lex.terminals[t].dfa.size() > 0) check_dfa(*s, lex.terminals[t].dfa, t, tables, prefix + "dfa" + std::to_string(t));

    using Fn2 = uint32_t(uint32_t, uint32_t);
    Fn2* accepting = compile_one<Fn2>(*s, prefix + "accepting", [&](llvm::Module& m) {
      codegen::emit_accepting(m, lex, prefix + "accepting");
    });
    for (uint32_t t = 0; t < lex.terminals.size(); ++t)
      for (uint32_t q = 0; q <= lex.terminals[t].dfa.size(); ++q)
        REQUIRE((accepting(t, q) != 0) == lex.terminals[t].dfa.accepting(q < lex.terminals[t].dfa.size() ? q : kNone));
    CHECK(accepting(static_cast<uint32_t>(lex.terminals.size()), 0) == 0);

    Fn2* shift = compile_one<Fn2>(*s, prefix + "shift", [&](llvm::Module& m) {
      codegen::emit_lr_shift(m, table, prefix + "shift");
    });
    Fn2* go = compile_one<Fn2>(*s, prefix + "goto", [&](llvm::Module& m) {
      codegen::emit_lr_goto(m, table, prefix + "goto");
    });
    Fn2* reduce = compile_one<Fn2>(*s, prefix + "reduce", [&](llvm::Module& m) {
      codegen::emit_lr_reduce(m, table, prefix + "reduce");
    });
    for (uint32_t st = 0; st < table.state_count(); ++st) {
      for (uint32_t t = 0; t < table.terminal_count(); ++t) REQUIRE(shift(st, t) == table.shift(st, t));
      for (uint32_t a = 0; a < table.nonterminal_count(); ++a) REQUIRE(go(st, a) == table.go(st, a));
      for (uint32_t t = 0; t <= table.terminal_count(); ++t)
        REQUIRE(table.reduction_list(reduce(st, t)) == table.reductions(st, t));
    }
    const auto states = static_cast<uint32_t>(table.state_count());
    CHECK(shift(states, 0) == kNone);
    CHECK(go(states, 0) == kNone);
    CHECK(reduce(states, 0) == 0);

    Fn2* follow = compile_one<Fn2>(*s, prefix + "follow", [&](llvm::Module& m) {
      codegen::emit_crossing_check(m, g->index().follower_first_bytes(), prefix + "follow");
    });
    for (uint32_t t = 0; t < lex.terminals.size(); ++t)
      for (uint32_t b = 0; b < 256; ++b)
        REQUIRE((follow(t, b) != 0) == g->index().follower_first_bytes(t)[b]);
    CHECK(follow(0, 256) == 0);
    CHECK(follow(static_cast<uint32_t>(lex.terminals.size()), 'a') == 0);

    using Fn3 = uint32_t(const uint32_t* const*, uint32_t, uint32_t, uint32_t);
    Fn3* next = compile_one<Fn3>(*s, prefix + "next", [&](llvm::Module& m) {
      codegen::emit_dfa_dispatch(m, lex, prefix + "next", prefix + "next_t");
    });
    for (uint32_t t = 0; t < lex.terminals.size(); ++t)
      for (uint32_t q = 0; q < lex.terminals[t].dfa.size(); ++q)
        for (uint32_t b = 0; b < 256; b += 7)
          REQUIRE(next(tables.data(), t, q, b) == lex.terminals[t].dfa.next(q, static_cast<uint8_t>(b)));
    CHECK(next(tables.data(), static_cast<uint32_t>(lex.terminals.size()), 0, 'a') == kNone);
  }
}

TEST_CASE("codegen: a DFA too large for a switch reads the grammar's own table, with the same transitions",
          "[codegen]") {
  ir::Dfa dfa;
  std::mt19937 rng(7);
  const uint32_t states = 400;
  for (uint32_t q = 0; q < states; ++q) dfa.add_state(q % 3 == 0);
  dfa.set_start(0);
  for (uint32_t q = 0; q < states; ++q)
    for (int b = 0; b < 256; ++b) dfa.set(q, static_cast<uint8_t>(b), rng() % 5 == 0 ? ir::Dfa::kDead : rng() % states);
  auto s = session();
  // The table is found at the terminal's index; a null table reads as dead.
  check_dfa(*s, dfa, 2, {nullptr, nullptr, dfa.table_data()}, "big_dfa");
  using Fn = uint32_t(const uint32_t* const*, uint32_t, uint32_t);
  auto* fn = compile_one<Fn>(*s, "big_dfa_again", [&](llvm::Module& m) { codegen::emit_dfa(m, dfa, 0, "big_dfa_again"); });
  const std::vector<const uint32_t*> none = {nullptr};
  CHECK(fn(none.data(), 0, 'a') == kNone);
}

TEST_CASE("codegen: constant data keeps its bytes and its size", "[codegen]") {
  auto s = session();
  std::string bytes(1000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 37);
  auto module = std::make_unique<llvm::Module>("data", s->context());
  codegen::emit_constant_data(*module, bytes, "blob");
  REQUIRE_FALSE(llvm::verifyModule(*module, nullptr));
  REQUIRE((s->add(std::move(module))).ok());
  auto data = s->lookup("blob");
  auto size = s->lookup("blob_size");
  REQUIRE(data.ok());
  REQUIRE(size.ok());
  CHECK(*static_cast<const uint64_t*>(*size) == bytes.size());
  CHECK(std::string_view(static_cast<const char*>(*data), bytes.size()) == bytes);
}

TEST_CASE("codegen: the module defines every kernel of the list, with the list's parameters, and nothing binds short",
          "[codegen]") {
  llvm::LLVMContext context;
  auto g = compile_for_codegen(test::read_example("json.cgram"));
  auto module = codegen::build_matcher_module(context, g->lexical(), g->table(), g->index().follower_first_bytes(),
                                              "k_");
  REQUIRE(module);
  size_t defined = 0;
  for (const KernelSignature& kernel : kKernelSignatures) {
    INFO(kernel.name);
    const llvm::Function* fn = module->getFunction(codegen::kernel_symbol("k_", kernel.name));
    REQUIRE(fn);
    CHECK(!fn->isDeclaration());
    CHECK(fn->arg_size() == kernel.parameters);
    ++defined;
  }
  CHECK(defined == 6);
  // bind_each visits the slots in the list's order, and complete() needs them all.
  KernelFunctions f;
  std::vector<std::string> visited;
  f.bind_each([&](std::string_view name, auto&) { visited.emplace_back(name); });
  REQUIRE(visited.size() == std::size(kKernelSignatures));
  for (size_t i = 0; i < visited.size(); ++i) CHECK(visited[i] == kKernelSignatures[i].name);
  CHECK_FALSE(f.complete());
  auto stub = +[](uint32_t, uint32_t) -> uint32_t { return 0; };
  f.dfa_accepting = f.lr_shift = f.lr_goto = f.lr_reduce = stub;
  CHECK_FALSE(f.complete());
  f.can_follow = stub;
  f.dfa_next = +[](const uint32_t* const*, uint32_t, uint32_t, uint32_t) -> uint32_t { return 0; };
  CHECK(f.complete());
}

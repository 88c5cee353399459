// The toolchain is proven from the start: LLVM IR built by codegen/,
// compiled in-process by ORC LLJIT, called, and checked.
#include <catch2/catch.hpp>

#include <bit>
#include <llvm/IR/Module.h>
#include <random>

#include "jit_session.h"
#include "jit_mask_kernels.h"

using namespace cgram;

TEST_CASE("LLVM IR mask kernels run through ORC LLJIT", "[jit]") {
  auto created = jit::JitSession::create();
  REQUIRE(created.ok());
  auto& session = *(*created);

  auto popcount_module = codegen::build_mask_popcount(session.context(), "mask_popcount");
  auto or_module = codegen::build_mask_or(session.context(), "mask_or");
  REQUIRE(popcount_module);
  REQUIRE(or_module);
  REQUIRE((session.add(std::move(popcount_module))).ok());
  REQUIRE((session.add(std::move(or_module))).ok());

  auto popcount_address = session.lookup("mask_popcount");
  auto or_address = session.lookup("mask_or");
  REQUIRE(popcount_address.ok());
  REQUIRE(or_address.ok());
  auto popcount = reinterpret_cast<uint32_t (*)(const uint32_t*, uint32_t)>(*popcount_address);
  auto mask_or = reinterpret_cast<void (*)(uint32_t*, const uint32_t*, uint32_t)>(*or_address);

  // A 128,256-token mask, as for Llama 3.
  const uint32_t words = (128256 + 31) / 32;
  std::mt19937 rng(3);
  std::vector<uint32_t> a(words), b(words);
  for (auto& w : a) w = rng();
  for (auto& w : b) w = rng() & rng();
  uint32_t expected = 0;
  for (uint32_t w : a) expected += std::popcount(w);
  CHECK(popcount(a.data(), words) == expected);
  CHECK(popcount(a.data(), 0) == 0);

  std::vector<uint32_t> merged = a;
  mask_or(merged.data(), b.data(), words);
  for (uint32_t i = 0; i < words; ++i) REQUIRE(merged[i] == (a[i] | b[i]));
}

TEST_CASE("JIT lookup of a missing symbol is an error value", "[jit]") {
  auto created = jit::JitSession::create();
  REQUIRE(created.ok());
  auto& session = *(*created);
  auto missing = session.lookup("no_such_function");
  REQUIRE(!missing.ok());
  CHECK(missing.error().message.find("no_such_function") != std::string::npos);
  CHECK(!session.add(nullptr).ok());
}

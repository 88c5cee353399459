#pragma once
// The compile pipeline after parsing: named passes, run in this order by
// one function (CompiledGrammar's constructor, run_pipeline in
// compiled_grammar.cpp). Each pass reads what the passes before it made
// and adds one part of the compiled grammar; each can be dumped
// (CompiledGrammar::dump, `cgram check --dump PASS`) and has its own unit
// test (tests/unit/compiled/pipeline_test.cpp). Parsing, desugaring and the
// analyses come before, in Grammar::parse (ir/rules/grammar.h; `cgram check --ir`).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cgram {

enum class Pass : uint8_t {
  Collapse,    // regular rules into lexemes (lower/lexical.h): the lexical terminals and their DFAs
  Lr,          // the LALR(1) table over them (lower/lr.h), conflicts kept for GLR
  Followers,   // per terminal, the terminals that may come right after one of its lexemes
  TokenIndex,  // the token index (index/token_index.h): eager, or its skeleton for lazy entries
  AnyTokens,   // for any!: the text tokens by the UTF-8 state they end in
};

struct PassInfo {
  Pass pass;
  std::string_view name;  // as `cgram check --dump` takes it
  const char* job;        // what it is doing, for messages ("out of memory while …")
};

inline constexpr PassInfo kPasses[] = {
    {Pass::Collapse, "collapse", "collapsing rules into lexemes"},
    {Pass::Lr, "lr", "building the LALR(1) table"},
    {Pass::Followers, "followers", "finding which terminals follow which"},
    {Pass::TokenIndex, "token-index", "building the token index"},
    {Pass::AnyTokens, "any-tokens", "classifying the tokens any! allows"},
};
inline constexpr size_t kPassCount = sizeof(kPasses) / sizeof(kPasses[0]);

constexpr bool passes_in_order() {
  for (size_t i = 0; i < kPassCount; ++i)
    if (static_cast<size_t>(kPasses[i].pass) != i) return false;
  return true;
}
static_assert(passes_in_order(), "kPasses lists the passes in the order of enum Pass");

constexpr const PassInfo& pass_info(Pass pass) { return kPasses[static_cast<size_t>(pass)]; }

inline std::optional<Pass> pass_named(std::string_view name) {
  for (const PassInfo& info : kPasses)
    if (info.name == name) return info.pass;
  return std::nullopt;
}

}  // namespace cgram

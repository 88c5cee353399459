#include "compiled_grammar.h"

#include <chrono>

namespace cgram {

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
                                 const CompileOptions& options)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  auto t0 = Clock::now();
  lexical_ = ir::lower_lexical(grammar_->ir());
  table_ = std::make_unique<ir::LrTable>(lexical_);
  auto t1 = Clock::now();
  index_ = std::make_unique<TokenIndex>(lexical_, vocab_->trie(), mask_words());
  if (options.eager_index) index_->build_all();
  auto t2 = Clock::now();
  timings_ = {ms(t0, t1), ms(t1, t2)};
}

size_t CompiledGrammar::memory_bytes() const {
  size_t bytes = sizeof(*this) + table_->memory_bytes() + index_->memory_bytes();
  for (const ir::LexTerminal& t : lexical_.terminals) bytes += t.dfa.size() * (256 * sizeof(uint32_t) + 1);
  return bytes;
}

CompiledGrammar::Result CompiledGrammar::compile(std::shared_ptr<const Grammar> grammar,
                                                 std::shared_ptr<const Vocabulary> vocab,
                                                 const CompileOptions& options) {
  if (!grammar) return CompileError{"compile: no grammar (parse it first and check its diagnostics)"};
  if (!vocab) return CompileError{"compile: no vocabulary"};
  return std::make_shared<const CompiledGrammar>(std::move(grammar), std::move(vocab), options);
}

}  // namespace cgram

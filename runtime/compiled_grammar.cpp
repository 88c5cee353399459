#include "compiled_grammar.h"

#include <algorithm>
#include <chrono>

#include "utf8_dfa.h"

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
  // What may follow each terminal: the terminals with an action in a state
  // that shifting it leads to (reductions there take the next terminal as
  // lookahead).
  std::vector<std::vector<uint32_t>> followers(lexical_.terminals.size());
  for (uint32_t s = 0; s < table_->state_count(); ++s)
    for (uint32_t t = 0; t < lexical_.terminals.size(); ++t)
      if (uint32_t target = table_->shift(s, t); target != ir::LrTable::kNone)
        for (uint32_t u : table_->terminals_with_actions(target))
          if (u < lexical_.terminals.size()) followers[t].push_back(u);
  for (auto& f : followers) {
    std::sort(f.begin(), f.end());
    f.erase(std::unique(f.begin(), f.end()), f.end());
  }
  index_ = std::make_unique<TokenIndex>(lexical_, vocab_->trie(), mask_words(), std::move(followers));
  if (options.eager_index) index_->build_all();
  if (grammar_->ir().uses_any_token()) {
    for (uint32_t id = 0; id < vocab_->size(); ++id) {
      if (vocab_->is_special(id)) continue;
      const uint8_t c = ir::utf8::run(ir::utf8::kBoundary, vocab_->bytes(id));
      if (c == ir::utf8::kInvalid) continue;
      std::vector<uint32_t>& set = any_tokens_by_char_state_[c];
      if (set.empty()) set.resize(mask_words());
      set[id / 32] |= 1u << (id % 32);
    }
  }
  auto t2 = Clock::now();
  timings_ = {ms(t0, t1), ms(t1, t2)};
}

size_t CompiledGrammar::memory_bytes() const {
  size_t bytes = sizeof(*this) + table_->memory_bytes() + index_->memory_bytes();
  for (const ir::LexTerminal& t : lexical_.terminals) bytes += t.dfa.size() * (256 * sizeof(uint32_t) + 1);
  for (const auto& set : any_tokens_by_char_state_) bytes += set.size() * sizeof(uint32_t);
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

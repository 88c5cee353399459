#include "compiled_grammar.h"

namespace cgram {

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  lexical_ = ir::lower_lexical(grammar_->ir());
  table_ = std::make_unique<ir::LrTable>(lexical_);
  trie_ = std::make_unique<VocabTrie>(*vocab_);
}

CompiledGrammar::Result CompiledGrammar::compile(std::shared_ptr<const Grammar> grammar,
                                                 std::shared_ptr<const Vocabulary> vocab, const CompileOptions&) {
  if (!grammar) return CompileError{"compile: no grammar (parse it first and check its diagnostics)"};
  if (!vocab) return CompileError{"compile: no vocabulary"};
  return std::make_shared<const CompiledGrammar>(std::move(grammar), std::move(vocab));
}

}  // namespace cgram

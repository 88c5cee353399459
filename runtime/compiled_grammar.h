#pragma once
// A grammar compiled for one vocabulary: the lexical terminals, the LALR(1)
// table, the vocabulary trie. Immutable once built; shared by every matcher
// and safe to use from many threads.
#include <memory>
#include <string>
#include <variant>

#include "compile.h"
#include "lexical.h"
#include "lr.h"
#include "vocab_trie.h"
#include "vocabulary.h"

namespace cgram {

struct CompileError {
  std::string message;
};

struct CompileOptions {};

class CompiledGrammar {
 public:
  using Result = std::variant<std::shared_ptr<const CompiledGrammar>, CompileError>;
  static Result compile(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
                        const CompileOptions& options = {});

  const Grammar& grammar() const { return *grammar_; }
  const Vocabulary& vocabulary() const { return *vocab_; }
  const std::shared_ptr<const Vocabulary>& vocabulary_ptr() const { return vocab_; }
  const ir::LexicalGrammar& lexical() const { return lexical_; }
  const ir::LrTable& table() const { return *table_; }
  const VocabTrie& trie() const { return *trie_; }
  size_t mask_words() const { return (vocab_->size() + 31) / 32; }

  CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab);

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  ir::LexicalGrammar lexical_;
  std::unique_ptr<ir::LrTable> table_;
  std::unique_ptr<VocabTrie> trie_;
};

}  // namespace cgram

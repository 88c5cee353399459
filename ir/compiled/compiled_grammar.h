#pragma once
// A grammar compiled for one vocabulary: the lexical terminals, the LALR(1)
// table, the vocabulary trie. Immutable once built; shared by every matcher
// and safe to use from many threads.
#include <array>
#include <atomic>
#include <memory>
#include <span>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "background_build.h"
#include "error.h"
#include "grammar.h"
#include "kernels.h"
#include "lexical.h"
#include "lr.h"
#include "mask_memo.h"
#include "pipeline.h"
#include "token_index.h"
#include "vocab_trie.h"
#include "vocabulary.h"

namespace cgram {

class Encoder;
class CanonicalPairs;
class VocabularyContext;

struct CompileOptions {
  // Build the whole token index now (AOT, or a server that can wait), rather
  // than each lexer state's entry when a mask first needs it.
  bool eager_index = false;
  // With a lazy index: once the grammar has made its first mask, build the
  // entries left on a thread of its own (index/background_build.h), so that
  // later masks do not build them. False: the masks build them as they meet
  // them.
  bool background_index = true;
  // How much work collapsing regular rules into lexemes may take.
  ir::CollapseLimits collapse;
  // How big the LR automaton may grow.
  ir::LrLimits lr;
  // Canonical tokenization (vocab/canonical.h): matchers allow a token
  // only where the tokenizer itself would write it there. Needs a
  // merge-based vocabulary.
  bool canonical = false;
  // The memory compiling may take (support/memory_budget.h), the checked
  // grammar's own included: the lexical automata, the LR automaton and its
  // tables, an eager token index. Past it, an Error (code Limit) says which stage
  // reached it.
  size_t max_memory_bytes = kDefaultCompileMemoryBytes;
  // The memory the matchers' remembered masks may take, shared by all of
  // them (mask_memo.h); 0: every mask is worked out anew.
  size_t mask_memo_bytes = kDefaultMaskMemoBytes;
  bool operator==(const CompileOptions&) const = default;
};

// Where compile time goes (milliseconds).
struct CompileTimings {
  double lower_ms = 0;  // lexical terminals and the LALR(1) table
  double index_ms = 0;  // followers, the token index (lazy entries are built later, on first use), any! sets
  std::array<double, kPassCount> pass_ms{};  // each pass (pipeline.h), in its order
};

class CompiledGrammar;
// A compiled grammar, or why it could not be compiled or loaded.
using CompileResult = Result<std::shared_ptr<const CompiledGrammar>>;

class CompiledGrammar {
 public:
  static CompileResult compile(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
                               const CompileOptions& options = {});

  // The checked grammar; null for a compiled grammar loaded from a shared
  // object (which holds the tables, not the grammar).
  const Grammar* grammar() const { return grammar_.get(); }
  // The grammar's file name and the hash that identifies it (its text and
  // start rule), kept in shared objects.
  const std::string& source_name() const { return source_name_; }
  uint64_t grammar_hash() const { return grammar_hash_; }
  const Vocabulary& vocabulary() const { return *vocab_; }
  const std::shared_ptr<const Vocabulary>& vocabulary_ptr() const { return vocab_; }
  const ir::LexicalGrammar& lexical() const { return lexical_; }
  const ir::LrTable& table() const { return *table_; }
  const VocabTrie& trie() const { return vocab_->trie(); }
  const TokenIndex& index() const { return *index_; }
  // After the grammar's first mask (the engine calls it at the end of each
  // mask; only the first call starts anything): the rest of a lazy index,
  // built off the mask path, unless the options turned that off.
  void index_rest_in_background() const {
    if (background_index_ && !background_build_.started()) background_build_.start(*index_, max_memory_bytes_);
  }
  // Waits for that build to end (at once when there is none): every entry is
  // then built, unless the build stopped early (its memory budget).
  void wait_for_index() const { background_build_.wait(); }
  const BackgroundIndexBuild& background_index_build() const { return background_build_; }
  size_t mask_words() const { return (vocab_->size() + 31) / 32; }
  // Masks remembered by the stack states they read, for every matcher of
  // this grammar (mask_memo.h): a cache, safe from many threads.
  MaskMemo& mask_memo() const { return mask_memo_; }
  const CompileTimings& timings() const { return timings_; }
  // What a pass made, readable: its part of the compiled grammar
  // (`cgram check --dump PASS`). For a grammar loaded from saved tables,
  // the passes' results are there but the checked grammar is not.
  std::string dump(Pass pass) const;
  // For any!: the text tokens that leave UTF-8 state c when read from a
  // character boundary, as mask words (empty when the grammar has no any!,
  // or no token does). Tokens with invalid UTF-8 are in none of them.
  std::span<const uint32_t> any_tokens_ending_in(uint8_t c) const { return any_tokens_by_char_state_[c]; }
  // Their union: every text token with valid UTF-8 (empty without any!).
  std::span<const uint32_t> any_tokens() const { return any_tokens_; }
  // Bytes held by the compiled grammar (tables, automata, index), not
  // counting the vocabulary and its trie, which grammars share.
  size_t memory_bytes() const;
  // One byte for each class of bytes that nothing in the grammar tells
  // apart: every terminal's automaton moves them alike, the UTF-8 automaton
  // too, and none is in an except! string (those each stand alone). The
  // matcher searches continuations over them (Engine::viable). Made on first
  // use; thread-safe.
  std::span<const uint8_t> byte_representatives() const;
  // What the vocabulary alone decides, shared by every grammar compiled for
  // it (vocab/vocab_context.h).
  const VocabularyContext& vocabulary_context() const { return *context_; }
  // The vocabulary's own encoder (jump-forward re-encodes text with it),
  // from the vocabulary's context; or why there is none (a plain token
  // list). Thread-safe.
  Result<const Encoder*> encoder() const;
  // The canonical-pair filter of a grammar compiled with `canonical`, from
  // the vocabulary's context (null otherwise). Thread-safe.
  bool is_canonical() const { return canonical_; }
  const CanonicalPairs* canonical_pairs() const;

  // Tier-up: compiled code for these tables (JIT or AOT). Matchers pick it
  // up at their next call and give the same masks. Installed at most once;
  // false when code was already there, or when the kernels were bound to
  // another grammar's tables (see bind_tables).
  bool install_kernels(std::shared_ptr<const Kernels> kernels) const;
  const Kernels* kernels() const { return kernels_.load(std::memory_order_acquire); }
  // Binds kernels to this grammar's DFA tables (which large DFAs read).
  void bind_tables(Kernels& kernels) const {
    kernels.dfa_tables.clear();
    for (const ir::LexTerminal& t : lexical_.terminals) kernels.dfa_tables.push_back(t.dfa.table_data());
  }
  const char* tier() const {
    const Kernels* k = kernels();
    return k ? k->tier : "table";
  }

  // The tables, whole index included, as bytes (build_all first), and back.
  // The bytes end with a checksum of the rest: `load_tables` refuses bytes
  // damaged or changed after they were saved with a message of its own, then
  // checks every index against the vocabulary and never trusts the bytes (a
  // message instead of a crash).
  std::string save_tables() const;
  static CompileResult load_tables(std::string_view bytes, std::shared_ptr<const Vocabulary> vocab);
  // `payload` with its checksum: what save_tables writes for it (tests and
  // the fuzzer reach the checks behind the checksum with it).
  static std::string seal_tables(std::string payload);


 private:
  // Keys: only compile and load_tables can name them (a compiled grammar is
  // never half-built where users can reach it). The explicit constructors
  // keep `{}` from making one outside the class.
  struct Building {
    explicit Building() = default;
  };
  struct Loading {
    explicit Loading() = default;
  };

 public:
  CompiledGrammar(Building, std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
                  const CompileOptions& options);
  CompiledGrammar(Loading, std::shared_ptr<const Vocabulary> vocab);
  ~CompiledGrammar();

 private:
  static CompileResult load_tables_checked(std::string_view bytes, std::shared_ptr<const Vocabulary> vocab);
  // The pipeline (pipeline.h): each pass in order, timed, under its memory
  // stage; stops at the first that fails (build_error_).
  void run_pipeline(const CompileOptions& options);
  void run_pass(Pass pass, const CompileOptions& options);
  void collapse_pass(const CompileOptions& options);
  void lr_pass(const CompileOptions& options);
  void followers_pass();
  void token_index_pass(const CompileOptions& options);
  void build_any_token_sets();
  void unite_any_token_sets();  // any_tokens_ from the per-state sets

  std::shared_ptr<const Grammar> grammar_;
  std::string build_error_;  // set by the constructor when a limit stopped it
  std::string source_name_;
  uint64_t grammar_hash_ = 0;
  std::shared_ptr<const Vocabulary> vocab_;
  ir::LexicalGrammar lexical_;
  std::unique_ptr<ir::LrTable> table_;
  std::vector<std::vector<uint32_t>> followers_;  // Pass::Followers, until the index takes them
  std::unique_ptr<TokenIndex> index_;
  CompileTimings timings_;
  std::array<std::vector<uint32_t>, 8> any_tokens_by_char_state_;
  std::vector<uint32_t> any_tokens_;  // their union
  mutable std::mutex kernels_mutex_;
  mutable std::shared_ptr<const Kernels> kernels_owner_;
  mutable std::atomic<const Kernels*> kernels_{nullptr};
  std::shared_ptr<const VocabularyContext> context_;
  bool canonical_ = false;
  mutable std::once_flag representatives_once_;
  mutable std::vector<uint8_t> representatives_;
  mutable MaskMemo mask_memo_;
  bool background_index_ = false;
  size_t max_memory_bytes_ = kDefaultCompileMemoryBytes;
  // Last: destroyed first, so that the build stops before the index it
  // builds is gone.
  mutable BackgroundIndexBuild background_build_;
};

}  // namespace cgram

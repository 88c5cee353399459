#include "compiled_grammar.h"
#include "mask_words.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "binary_io.h"
#include "canonical.h"
#include "encoder.h"
#include "vocab_context.h"
#include "utf8_dfa.h"

namespace cgram {

namespace {
constexpr uint8_t kCanonicalTag = 0xC1;
constexpr uint64_t kTablesChecksumSeed = 0x7AB1E5;  // "tables"
}

CompiledGrammar::CompiledGrammar(Loading, std::shared_ptr<const Vocabulary> vocab)
    : vocab_(std::move(vocab)),
      context_(VocabularyContext::of(vocab_)),
      mask_memo_((vocab_->size() + 31) / 32, kDefaultMaskMemoBytes) {}

CompiledGrammar::~CompiledGrammar() = default;

const CanonicalPairs* CompiledGrammar::canonical_pairs() const {
  if (!canonical_) return nullptr;
  auto pairs = context_->canonical_pairs();
  // Compiling (and loading) checked the encoder, so there is one.
  return pairs ? *pairs : nullptr;
}

std::span<const uint8_t> CompiledGrammar::byte_representatives() const {
  std::call_once(representatives_once_, [this] {
    // A signature per byte: its column in every automaton, hashed.
    std::array<uint64_t, 256> signature{};
    auto mix = [](uint64_t h, uint64_t v) { return (h ^ v) * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull; };
    for (int b = 0; b < 256; ++b) {
      uint64_t h = 1;
      for (uint8_t u = 0; u < ir::utf8::kStateCount; ++u) h = mix(h, ir::utf8::step(u, static_cast<uint8_t>(b)));
      for (const ir::LexTerminal& t : lexical_.terminals) {
        if (t.kind == ir::LexTerminal::Kind::AnyToken) continue;
        for (uint32_t q = 0; q < t.dfa.size(); ++q) h = mix(h, t.dfa.next(q, static_cast<uint8_t>(b)));
      }
      signature[b] = h;
    }
    for (const ir::LexExcept& e : lexical_.excepts)
      for (const std::string& str : e.automaton->strings())
        for (char c : str) signature[static_cast<uint8_t>(c)] = mix(static_cast<uint8_t>(c), 0xE7C);
    std::vector<uint64_t> seen;
    for (int b = 0; b < 256; ++b) {
      if (std::find(seen.begin(), seen.end(), signature[b]) != seen.end()) continue;
      seen.push_back(signature[b]);
      representatives_.push_back(static_cast<uint8_t>(b));
    }
  });
  return representatives_;
}

Result<const Encoder*> CompiledGrammar::encoder() const { return context_->encoder(); }

CompiledGrammar::CompiledGrammar(Building, std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const Vocabulary> vocab, const CompileOptions& options)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      context_(VocabularyContext::of(vocab_)),
      canonical_(options.canonical),
      mask_memo_((vocab_->size() + 31) / 32, options.mask_memo_bytes),
      background_index_(options.background_index && !options.eager_index),
      max_memory_bytes_(options.max_memory_bytes) {
  source_name_ = grammar_->file().name();
  // The grammar's identity: its text and the start rule it was lowered for.
  const ir::GrammarIR& ir = grammar_->ir();
  grammar_hash_ = ir::hash_bytes(grammar_->file().text(), ir::hash_bytes(ir.nonterminals[ir.start].name));
  run_pipeline(options);
}

void CompiledGrammar::run_pipeline(const CompileOptions& options) {
  using Clock = std::chrono::steady_clock;
  for (const PassInfo& info : kPasses) {
    const auto start = Clock::now();
    {
      MemoryStage stage(info.job);
      run_pass(info.pass, options);
    }
    timings_.pass_ms[static_cast<size_t>(info.pass)] =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (!build_error_.empty()) return;
  }
  const auto& ms = timings_.pass_ms;
  timings_.lower_ms = ms[size_t(Pass::Collapse)] + ms[size_t(Pass::Lr)];
  timings_.index_ms = ms[size_t(Pass::Followers)] + ms[size_t(Pass::TokenIndex)] + ms[size_t(Pass::AnyTokens)];
}

void CompiledGrammar::run_pass(Pass pass, const CompileOptions& options) {
  switch (pass) {
    case Pass::Collapse:
      return collapse_pass(options);
    case Pass::Lr:
      return lr_pass(options);
    case Pass::Followers:
      return followers_pass();
    case Pass::TokenIndex:
      return token_index_pass(options);
    case Pass::AnyTokens:
      return build_any_token_sets();
  }
}

namespace {
// The most bytes one token has: the most iterations it can start in a
// counted lexeme (the width of its window).
uint32_t longest_token(const Vocabulary& vocab) { return vocab.trie().max_depth(); }
}  // namespace

void CompiledGrammar::collapse_pass(const CompileOptions& options) {
  lexical_ = ir::lower_lexical(grammar_->ir(), options.collapse, longest_token(*vocab_));
  // Bounded while it is built by CollapseLimits; what it keeps is charged.
  for (const ir::LexTerminal& t : lexical_.terminals) charge_memory(sizeof(t) + t.dfa.memory_bytes());
}

void CompiledGrammar::lr_pass(const CompileOptions& options) {
  table_ = std::make_unique<ir::LrTable>(lexical_, options.lr);
  if (!table_->error().empty()) build_error_ = table_->error();
}

// What may follow each terminal: the terminals with an action in a state
// that shifting it leads to (reductions there take the next terminal as
// lookahead).
void CompiledGrammar::followers_pass() {
  const auto terminals = static_cast<uint32_t>(lexical_.terminals.size());
  followers_.assign(terminals, {});
  // Each (terminal, target) once: a terminal such as whitespace is shifted
  // in thousands of states, often to the same few targets, and adding
  // every target's terminals for every state made lists thousands of times
  // longer than their distinct members (a fifth of a 400-tool grammar's
  // compile went to sorting them).
  std::vector<std::pair<uint32_t, uint32_t>> shifts;
  for (uint32_t s = 0; s < table_->state_count(); ++s)
    for (auto [t, target] : table_->shifts(s))
      if (t < terminals) shifts.emplace_back(t, target);
  std::sort(shifts.begin(), shifts.end());
  shifts.erase(std::unique(shifts.begin(), shifts.end()), shifts.end());
  std::vector<uint32_t> added_for(terminals, UINT32_MAX);  // the terminal whose list has u
  for (auto [t, target] : shifts)
    for (uint32_t u : table_->terminals_with_actions(target))
      if (u < terminals && added_for[u] != t) {
        added_for[u] = t;
        followers_[t].push_back(u);
      }
  for (auto& f : followers_) std::sort(f.begin(), f.end());
}

void CompiledGrammar::token_index_pass(const CompileOptions& options) {
  index_ = std::make_unique<TokenIndex>(lexical_, vocab_->trie(), mask_words(), std::move(followers_));
  followers_ = {};
  if (options.eager_index) index_->build_all();
}

void CompiledGrammar::build_any_token_sets() {
  const bool uses_any = std::any_of(lexical_.terminals.begin(), lexical_.terminals.end(), [](const ir::LexTerminal& t) {
    return t.kind == ir::LexTerminal::Kind::AnyToken;
  });
  if (!uses_any) return;
  for (uint32_t id = 0; id < vocab_->size(); ++id) {
    if (vocab_->is_special(id)) continue;
    const uint8_t c = ir::utf8::run(ir::utf8::kBoundary, vocab_->bytes(id));
    if (c == ir::utf8::kInvalid) continue;
    std::vector<uint32_t>& set = any_tokens_by_char_state_[c];
    if (set.empty()) set.resize(mask_words());
    set[id / 32] |= 1u << (id % 32);
  }
  unite_any_token_sets();
}

void CompiledGrammar::unite_any_token_sets() {
  any_tokens_.clear();
  for (const auto& set : any_tokens_by_char_state_) {
    if (set.empty()) continue;
    any_tokens_.resize(mask_words(), 0u);
    or_words(any_tokens_, set);
  }
}

bool CompiledGrammar::install_kernels(std::shared_ptr<const Kernels> kernels) const {
  if (!kernels || kernels->dfa_tables.size() != lexical_.terminals.size()) return false;
  for (uint32_t t = 0; t < lexical_.terminals.size(); ++t)
    if (kernels->dfa_tables[t] != lexical_.terminals[t].dfa.table_data()) return false;  // made for other tables
  std::lock_guard lock(kernels_mutex_);
  if (kernels_owner_) return false;
  kernels_owner_ = std::move(kernels);
  kernels_.store(kernels_owner_.get(), std::memory_order_release);
  return true;
}

std::string CompiledGrammar::save_tables() const {
  ir::BinaryWriter out;
  out.put_bytes(source_name_);
  out.put<uint64_t>(grammar_hash_);
  lexical_.save(out);
  table_->save(out);
  index_->save(out);
  for (const auto& set : any_tokens_by_char_state_) out.put_vector(set);
  // An optional last section (older objects end before it): canonical mode.
  if (canonical_) out.put<uint8_t>(kCanonicalTag);
  return seal_tables(out.take());
}

std::string CompiledGrammar::seal_tables(std::string payload) {
  const uint64_t checksum = ir::hash_bytes(payload, kTablesChecksumSeed);
  payload.append(reinterpret_cast<const char*>(&checksum), sizeof checksum);
  return payload;
}

CompileResult CompiledGrammar::load_tables(std::string_view bytes, std::shared_ptr<const Vocabulary> vocab) {
  if (!vocab) return Error{ErrorCode::InvalidInput, "load: no vocabulary"};
  uint64_t checksum = 0;
  if (bytes.size() < sizeof checksum)
    return Error{ErrorCode::InvalidInput, "invalid tables: too short to hold their checksum"};
  const std::string_view payload = bytes.substr(0, bytes.size() - sizeof checksum);
  std::memcpy(&checksum, bytes.data() + payload.size(), sizeof checksum);
  if (checksum != ir::hash_bytes(payload, kTablesChecksumSeed))
    return Error{ErrorCode::InvalidInput,
                 "invalid tables: their checksum does not match (the bytes were damaged or changed after "
                 "they were saved)"};
  try {
    return load_tables_checked(payload, std::move(vocab));
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::InvalidInput, "invalid tables: they ask for more memory than there is"};
  } catch (const std::exception& e) {
    return Error{ErrorCode::InvalidInput, std::string("invalid tables: ") + e.what()};
  }
}

CompileResult CompiledGrammar::load_tables_checked(std::string_view bytes, std::shared_ptr<const Vocabulary> vocab) {
  auto g = std::make_shared<CompiledGrammar>(Loading{}, std::move(vocab));
  ir::BinaryReader in(bytes);
  auto failed = [&] {
    return Error{ErrorCode::InvalidInput,
                 "invalid tables: " + (in.ok() ? std::string("inconsistent data") : in.error())};
  };
  g->source_name_ = std::string(in.get_bytes());
  g->grammar_hash_ = in.get<uint64_t>();
  if (!ir::LexicalGrammar::load(in, g->lexical_, longest_token(*g->vocab_))) return failed();
  g->table_ = ir::LrTable::load(in, g->lexical_);
  if (!g->table_) return failed();
  g->index_ = TokenIndex::load(in, g->lexical_, g->vocab_->trie(), g->mask_words(), g->vocab_->size());
  if (!g->index_) return failed();
  const size_t tail_bits = g->vocab_->size() % 32;
  for (auto& set : g->any_tokens_by_char_state_) {
    set = in.get_vector<uint32_t>();
    if (!set.empty() && (set.size() != g->mask_words() || (tail_bits && set.back() >> tail_bits)))
      in.fail("an any! token set of the wrong size");
  }
  if (in.ok()) g->unite_any_token_sets();
  if (in.ok() && !in.at_end()) {
    if (in.get<uint8_t>() != kCanonicalTag) in.fail("data after the tables");
    else if (!g->encoder().ok())
      in.fail("canonical mode for a vocabulary without an encoder");
    g->canonical_ = true;
  }
  if (in.ok() && !in.at_end()) in.fail("data after the tables");
  if (!in.ok()) return failed();
  return std::shared_ptr<const CompiledGrammar>(std::move(g));
}

size_t CompiledGrammar::memory_bytes() const {
  size_t bytes = sizeof(*this) + table_->memory_bytes() + index_->memory_bytes();
  for (const ir::LexTerminal& t : lexical_.terminals) bytes += t.dfa.size() * (256 * sizeof(uint32_t) + 1);
  for (const auto& set : any_tokens_by_char_state_) bytes += set.size() * sizeof(uint32_t);
  return bytes;
}

CompileResult CompiledGrammar::compile(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
                                       const CompileOptions& options) {
  if (!grammar) return Error{ErrorCode::InvalidInput, "compile: no grammar (parse it first and check its diagnostics)"};
  if (!vocab) return Error{ErrorCode::InvalidInput, "compile: no vocabulary"};
  if (options.canonical) {
    if (vocab->kind() == TokenizerKind::List)
      return Error{ErrorCode::Unsupported,
                   "canonical mode needs a merge-based vocabulary (byte-level BPE, tiktoken or "
                   "SentencePiece); " +
                       vocab->name() + " is a plain token list"};
    // Built once per vocabulary and kept in its context for every grammar.
    auto encoder = VocabularyContext::of(vocab)->encoder();
    if (auto* error = encoder.if_error())
      return error->in("canonical mode needs the vocabulary's encoder");
  }
  MemoryBudget budget(options.max_memory_bytes);
  MemoryBudgetScope scope(budget);
  try {
    budget.charge(grammar->memory_bytes(), "parsing the grammar");
    auto compiled = std::make_shared<const CompiledGrammar>(Building{}, std::move(grammar), std::move(vocab), options);
    if (!compiled->build_error_.empty()) return Error{ErrorCode::Limit, compiled->build_error_};
    return compiled;
  } catch (const MemoryLimitReached& limit) {
    return Error{ErrorCode::Limit, limit.message("CompileOptions::max_memory_bytes")};
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::OutOfMemory, fmt::format("out of memory while {}", failed_memory_stage())};
  }
}

}  // namespace cgram

#pragma once
// A tokenizer vocabulary: the exact bytes of every token id, which ids are
// special (never text), the end-of-sequence ids, and what the encoder needs
// (merge ranks or piece scores).
//
// Loads Hugging Face tokenizer.json (byte-level BPE and SentencePiece-style
// BPE with byte fallback), tiktoken files, GGUF vocabularies and plain token
// lists. Bad files give a precise error value, never an exception or abort.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "error.h"

namespace cgram {

class VocabTrie;

enum class TokenizerKind : uint8_t {
  ByteLevelBpe,    // GPT-2 style: bytes through the byte↔unicode table, merges
  SentencePiece,   // '▁' for space, <0xNN> byte fallback; merges or scores
  Tiktoken,        // raw bytes, rank = merge priority
  List,            // a plain list: no encoder
};
const char* tokenizer_kind_name(TokenizerKind kind);

struct VocabularyOptions {
  // Overrides the end-of-sequence ids found in the tokenizer's data.
  std::optional<std::vector<uint32_t>> eos_ids;
  // Added to the end-of-sequence ids (those found, or the override): a
  // model that ends with several tokens (Llama 3.1 Instruct ends turns with
  // <|eot_id|> or <|eom_id|>, and text with <|end_of_text|>).
  std::vector<uint32_t> extra_eos_ids;
  // Limits that keep hostile files bounded (docs/LIMITS.md). Counts claimed by
  // a file are checked against these and against the bytes the file has left
  // before anything is allocated for them.
  size_t max_file_bytes = size_t(1) << 30;
  // Token ids: every id must be below this (real vocabularies: up to 256,000).
  size_t max_tokens = size_t(1) << 22;
  // Bytes of one token (real vocabularies: 128 at most, cl100k, o200k, Llama 3).
  size_t max_token_bytes = 1024;
  // Bytes of all tokens together. The trie of the vocabulary costs about 17
  // bytes per token byte, so this bounds it (real vocabularies: under 2 MiB).
  size_t max_total_token_bytes = size_t(1) << 24;
  // Merge rules of a BPE vocabulary (real ones: up to 580,604, Gemma).
  size_t max_merges = size_t(1) << 22;
  // Metadata entries of a GGUF file (vocabulary files have about 20).
  size_t max_gguf_entries = size_t(1) << 16;
};
class Vocabulary;
using VocabularyResult = Result<std::shared_ptr<const Vocabulary>>;

class Vocabulary {
 public:
  Vocabulary();
  ~Vocabulary();
  // Views into the token data make a copy unsafe; share it through shared_ptr.
  Vocabulary(const Vocabulary&) = delete;
  Vocabulary& operator=(const Vocabulary&) = delete;

  // Detects the format from the content.
  static VocabularyResult load(const std::string& path, const VocabularyOptions& options = {});
  static VocabularyResult from_memory(std::string_view content, std::string_view name,
                                      const VocabularyOptions& options = {},
                                      std::optional<std::string> config_json = std::nullopt);
  // A plain list of token byte strings; `special` marks ids that are never text.
  // The vocabulary compiled into cgram (Phi-3, 32,064 ids): the default
  // when the caller names none.
  static VocabularyResult bundled(const VocabularyOptions& options = {});
  static VocabularyResult from_tokens(std::vector<std::string> tokens, std::vector<uint32_t> eos_ids,
                                      std::vector<uint32_t> special = {});
  // A copy with `ids` added to the end-of-sequence ids (each one becomes
  // special: never text). An error names an id outside the vocabulary.
  VocabularyResult with_eos_ids(std::span<const uint32_t> ids) const;

  size_t size() const { return offsets_.size() - 1; }
  // The token's bytes; empty for an id outside the vocabulary (never out of
  // bounds: ids come from callers and files).
  std::string_view bytes(uint32_t id) const {
    if (id >= size()) return {};
    return std::string_view(data_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  // Special and control tokens (and ids with no token, or outside the
  // vocabulary) are never matched by text.
  bool is_special(uint32_t id) const { return id >= special_.size() || special_[id] != 0; }
  const std::vector<uint32_t>& eos_ids() const { return eos_ids_; }
  bool is_eos(uint32_t id) const;
  TokenizerKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  // The id of a token from its bytes (the first one when several ids share them).
  std::optional<uint32_t> find(std::string_view bytes) const;
  // A readable rendering of a token's bytes (escapes for controls and invalid
  // UTF-8); "<invalid id N>" for an id outside the vocabulary.
  std::string display(uint32_t id) const;
  // What loaded but deserves a word to the user (no end-of-sequence token, an
  // unknown tiktoken encoding): one sentence each, for the caller to print.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The trie of the text tokens, built once on first use and shared by
  // every grammar compiled for this vocabulary.
  const VocabTrie& trie() const;
  // A hash of every token's bytes, the special ids and the end-of-sequence
  // ids (computed once): compiled objects are refused for any other vocabulary.
  uint64_t fingerprint() const;

  // What the encoder needs.
  struct EncoderData {
    std::string pretokenizer;                      // regex (ICU syntax), or a named scheme
    std::unordered_map<std::string, uint32_t> merge_rank;  // "a b" → rank (byte-level/SP merges)
    uint64_t merges_digest = 0;  // the merges' fingerprint: a sum of each one's hash (any order)
    void add_merge(std::string pair, uint32_t rank);
    std::vector<float> scores;                     // SentencePiece scores, by id
    bool add_prefix_space = false;                 // SentencePiece dummy prefix
    bool ignore_merges = false;                    // a whole piece found in the vocabulary wins
    std::unordered_map<std::string, uint32_t> text_ids;  // token text (as stored) → id
    // User-defined (added, non-special) tokens: matched whole in the raw text
    // before any BPE, as the tokenizers themselves do.
    std::vector<std::pair<std::string, uint32_t>> added_tokens;
  };
  const EncoderData& encoder_data() const { return encoder_; }

  // Building (used by the loaders).
  struct Builder;

 private:
  friend struct Builder;
  // Makes `eos` (any order, repeats allowed) the end-of-sequence ids: each
  // becomes special, and the index of text tokens by bytes is made again
  // without them. An error names an id outside the vocabulary.
  std::optional<Error> set_eos_ids(std::vector<uint32_t> eos);
  static std::string no_eos_warning(std::string_view name);
  std::string name_;
  TokenizerKind kind_ = TokenizerKind::List;
  std::string data_;
  std::vector<uint32_t> offsets_{0};
  std::vector<uint8_t> special_;
  std::vector<uint32_t> eos_ids_;
  std::vector<std::string> warnings_;
  std::unordered_map<std::string_view, uint32_t> by_bytes_;
  EncoderData encoder_;
  mutable std::once_flag trie_once_;
  mutable std::unique_ptr<VocabTrie> trie_;
  mutable std::once_flag fingerprint_once_;
  mutable uint64_t fingerprint_ = 0;
};

// GPT-2's byte ↔ unicode table used by byte-level BPE vocabularies.
uint32_t byte_to_unicode(uint8_t byte);
std::optional<uint8_t> unicode_to_byte(uint32_t cp);

}  // namespace cgram

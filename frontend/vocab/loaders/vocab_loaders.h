#pragma once
// Internal: the per-format loaders behind Vocabulary::load.
#include <cstdint>
#include <map>

#include "error.h"
#include "vocabulary.h"

namespace cgram {

struct Vocabulary::Builder {
  struct Entry {
    uint32_t id = 0;
    std::string bytes;
    bool special = false;
  };
  static constexpr uint32_t kNoEntry = UINT32_MAX;
  std::string name;
  TokenizerKind kind = TokenizerKind::List;
  // The tokens in the order they were defined; `slot[id]` is the index of
  // id's entry, or kNoEntry. Entries are kept apart from the id table so that
  // a file naming one high id costs 4 bytes per id below it, not a string.
  std::vector<Entry> entries;
  std::vector<uint32_t> slot;
  size_t total_bytes = 0;
  std::vector<uint32_t> eos_ids;
  std::vector<std::string> warnings;
  EncoderData encoder;

  // Records id → bytes; a second definition of the same id with other bytes
  // is an error, as are an id, a token or a total past the options' limits.
  std::optional<Error> set(uint64_t id, std::string bytes, bool special, const VocabularyOptions& o);
  // One more than the highest id defined.
  size_t id_count() const { return slot.size(); }
  const Entry* find(uint32_t id) const {
    return id < slot.size() && slot[id] != kNoEntry ? &entries[slot[id]] : nullptr;
  }
  // Finishes: ids never defined become special (never allowed); eos ids must exist.
  VocabularyResult build(const VocabularyOptions& options);
};

VocabularyResult load_hf_tokenizer_json(std::string_view content, std::string_view name,
                                        const VocabularyOptions& options,
                                        const std::optional<std::string>& config_json);
// The end-of-sequence ids a Hugging Face generation_config.json names
// ("eos_token_id": a number or a list; none when it has no such field), or
// what is wrong with it.
Result<std::vector<uint32_t>> eos_ids_from_generation_config(const std::string& config);
VocabularyResult load_tiktoken(std::string_view content, std::string_view name, const VocabularyOptions& options);
VocabularyResult load_gguf(std::string_view content, std::string_view name, const VocabularyOptions& options);
VocabularyResult load_token_list_json(std::string_view content, std::string_view name,
                                      const VocabularyOptions& options);

// '▁' → ' ', "<0xNN>" → the byte NN (when `byte_fallback`), anything else as is.
std::string sentencepiece_piece_bytes(std::string_view piece, bool byte_fallback);
// Byte-level BPE text → bytes; nullopt when a character is outside the table.
std::optional<std::string> byte_level_decode(std::string_view text);

}  // namespace cgram

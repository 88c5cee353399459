#pragma once
// Internal: the per-format loaders behind Vocabulary::load.
#include <map>

#include "vocabulary.h"

namespace cgram {

struct Vocabulary::Builder {
  struct Entry {
    std::string bytes;
    bool special = false;
    bool present = false;
  };
  std::string name;
  TokenizerKind kind = TokenizerKind::List;
  std::vector<Entry> entries;
  std::vector<uint32_t> eos_ids;
  EncoderData encoder;

  // Records id → bytes; a second definition of the same id is an error.
  std::optional<VocabularyError> set(uint64_t id, std::string bytes, bool special, const VocabularyOptions& o);
  // Finishes: ids never defined become special (never allowed); eos ids must exist.
  VocabularyResult build(const VocabularyOptions& options);
};

VocabularyResult load_hf_tokenizer_json(std::string_view content, std::string_view name,
                                        const VocabularyOptions& options,
                                        const std::optional<std::string>& config_json);
VocabularyResult load_tiktoken(std::string_view content, std::string_view name, const VocabularyOptions& options);
VocabularyResult load_gguf(std::string_view content, std::string_view name, const VocabularyOptions& options);
VocabularyResult load_token_list_json(std::string_view content, std::string_view name,
                                      const VocabularyOptions& options);

// '▁' → ' ', "<0xNN>" → the byte NN (when `byte_fallback`), anything else as is.
std::string sentencepiece_piece_bytes(std::string_view piece, bool byte_fallback);
// Byte-level BPE text → bytes; nullopt when a character is outside the table.
std::optional<std::string> byte_level_decode(std::string_view text);

}  // namespace cgram

#include <string_view>

#include "vocabulary.h"

extern "C" const char cgram_default_vocab_begin[];
extern "C" const char cgram_default_vocab_end[];

namespace cgram {

VocabularyResult Vocabulary::bundled(const VocabularyOptions& options) {
  std::string_view data(cgram_default_vocab_begin,
                        static_cast<size_t>(cgram_default_vocab_end - cgram_default_vocab_begin));
  return from_memory(data, "bundled phi-3 vocabulary", options);
}

}  // namespace cgram

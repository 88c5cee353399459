#pragma once
// What depends on a vocabulary alone, built once and shared by every grammar
// compiled for it: the vocabulary's encoder (jump-forward re-encodes text
// with it; canonical mode needs it) and the canonical token pairs. The first
// grammar that needs one builds it; later grammars for the same vocabulary,
// and their matchers, use the same one. It lives as long as some grammar (or
// other holder) keeps the context.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "error.h"
#include "vocabulary.h"

namespace cgram {

class Encoder;
class CanonicalPairs;

class VocabularyContext {
 public:
  // The context of `vocab`: the one already shared if some holder keeps it,
  // else a new one. Thread-safe.
  static std::shared_ptr<const VocabularyContext> of(const std::shared_ptr<const Vocabulary>& vocab);

  const Vocabulary& vocabulary() const { return *vocab_; }
  // The vocabulary's encoder, made on first use; or why there is none (a
  // plain token list). Thread-safe.
  Result<const Encoder*> encoder() const;
  // The canonical-pair filter (vocab/canonical.h), made on first use; or why
  // there is none. Thread-safe. Where $CGRAM_VOCAB_DIR holds a saved one for
  // this vocabulary (FINGERPRINT.cgvocab, `cgram vocab build`), it is loaded
  // instead of made; one that does not load is passed over (saved_note()).
  Result<const CanonicalPairs*> canonical_pairs() const;
  // Installs a saved canonical filter (CanonicalPairs::save's bytes) before
  // any is made; an error where one is made already or the bytes are wrong.
  Result<const CanonicalPairs*> use_saved_canonical(std::string_view bytes) const;
  // Why a saved filter found by fingerprint was passed over (empty if none was).
  std::string saved_note() const;
  // Where canonical_pairs() looks for this vocabulary's saved filter, or
  // empty without $CGRAM_VOCAB_DIR.
  static std::string saved_path(const Vocabulary& vocab);

  struct Key {
    explicit Key() = default;
  };
  VocabularyContext(Key, std::shared_ptr<const Vocabulary> vocab);
  ~VocabularyContext();

 private:
  std::shared_ptr<const Vocabulary> vocab_;
  mutable std::once_flag encoder_once_;
  mutable std::mutex canonical_mutex_;
  mutable std::string saved_note_;
  mutable std::unique_ptr<Encoder> encoder_;
  mutable std::optional<Error> encoder_error_;
  mutable std::unique_ptr<CanonicalPairs> canonical_;
  mutable std::optional<Error> canonical_error_;
  Result<const CanonicalPairs*> made_canonical() const;  // under canonical_mutex_
};

}  // namespace cgram

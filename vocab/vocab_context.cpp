#include "vocab_context.h"

#include <map>

#include "canonical.h"
#include "encoder.h"

namespace cgram {

VocabularyContext::VocabularyContext(Key, std::shared_ptr<const Vocabulary> vocab) : vocab_(std::move(vocab)) {}

VocabularyContext::~VocabularyContext() = default;

std::shared_ptr<const VocabularyContext> VocabularyContext::of(const std::shared_ptr<const Vocabulary>& vocab) {
  // Keyed by the vocabulary object (the context holds it, so the address is
  // not reused while the entry can be found alive); entries whose context
  // has gone are swept as new ones come.
  static std::mutex mutex;
  static std::map<const Vocabulary*, std::weak_ptr<const VocabularyContext>> contexts;
  std::lock_guard lock(mutex);
  if (auto it = contexts.find(vocab.get()); it != contexts.end())
    if (auto alive = it->second.lock()) return alive;
  std::erase_if(contexts, [](const auto& entry) { return entry.second.expired(); });
  auto made = std::make_shared<const VocabularyContext>(Key{}, vocab);
  contexts[vocab.get()] = made;
  return made;
}

Result<const Encoder*> VocabularyContext::encoder() const {
  std::call_once(encoder_once_, [this] {
    auto created = Encoder::create(vocab_);
    if (auto* error = created.if_error())
      encoder_error_ = *error;
    else
      encoder_ = std::move(*created);
  });
  if (encoder_error_) return *encoder_error_;
  return encoder_.get();
}

Result<const CanonicalPairs*> VocabularyContext::canonical_pairs() const {
  std::call_once(canonical_once_, [this] {
    auto enc = encoder();
    if (auto* error = enc.if_error()) {
      canonical_error_ = error->in("canonical mode needs the vocabulary's encoder");
      return;
    }
    auto made = CanonicalPairs::create(vocab_, **enc);
    if (made)
      canonical_ = std::move(*made);
    else
      canonical_error_ = made.error();
  });
  if (canonical_) return canonical_.get();
  return *canonical_error_;
}

}  // namespace cgram

#include "vocab_context.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "canonical.h"
#include "encoder.h"
#include "file_io.h"

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

namespace {
// A saved context is 20-60 MB for the real vocabularies.
constexpr size_t kMaxSavedContextBytes = size_t{1} << 30;
}  // namespace

std::string VocabularyContext::saved_path(const Vocabulary& vocab) {
  const char* dir = std::getenv("CGRAM_VOCAB_DIR");
  if (!dir || !*dir) return "";
  return (std::filesystem::path(dir) / fmt::format("{:016x}.cgvocab", CanonicalPairs::encoder_fingerprint(vocab)))
      .string();
}

Result<const CanonicalPairs*> VocabularyContext::made_canonical() const {
  if (canonical_) return canonical_.get();
  if (canonical_error_) return *canonical_error_;
  auto enc = encoder();
  if (auto* error = enc.if_error()) {
    canonical_error_ = error->in("canonical mode needs the vocabulary's encoder");
    return *canonical_error_;
  }
  // Any filesystem trouble with the saved file (a symlink loop, a name too
  // long, no permission) passes it over with a note: never an exception.
  std::error_code ec;
  if (const std::string path = saved_path(*vocab_);
      !path.empty() && std::filesystem::status(path, ec).type() != std::filesystem::file_type::not_found) {
    auto mapped = map_regular_file(path, "saved canonical context", kMaxSavedContextBytes);
    auto loaded = mapped ? CanonicalPairs::load(vocab_, **enc, mapped->bytes())
                         : Result<std::unique_ptr<CanonicalPairs>>(mapped.error());
    if (loaded) {
      canonical_ = std::move(*loaded);
      return canonical_.get();
    }
    const std::string& why = loaded.error().message;
    saved_note_ = why.find(path) != std::string::npos ? fmt::format("{} (made anew instead)", why)
                                                       : fmt::format("{}: {} (made anew instead)", path, why);
  }
  auto made = CanonicalPairs::create(vocab_, **enc);
  if (!made) {
    canonical_error_ = made.error();
    return *canonical_error_;
  }
  canonical_ = std::move(*made);
  return canonical_.get();
}

Result<const CanonicalPairs*> VocabularyContext::canonical_pairs() const {
  std::lock_guard lock(canonical_mutex_);
  return made_canonical();
}

Result<const CanonicalPairs*> VocabularyContext::use_saved_canonical(std::string_view bytes) const {
  std::lock_guard lock(canonical_mutex_);
  if (canonical_ || canonical_error_)
    return Error{ErrorCode::InvalidInput, "the vocabulary's canonical filter is made already; load the saved one first"};
  auto enc = encoder();
  if (auto* error = enc.if_error()) return error->in("canonical mode needs the vocabulary's encoder");
  auto loaded = CanonicalPairs::load(vocab_, **enc, bytes);
  if (!loaded) return loaded.error();
  canonical_ = std::move(*loaded);
  return canonical_.get();
}

std::string VocabularyContext::saved_note() const {
  std::lock_guard lock(canonical_mutex_);
  return saved_note_;
}

}  // namespace cgram

// GGUF vocabulary files (the tokenizer.ggml.* keys of llama.cpp's format).
// Every read is bounds-checked: a truncated or corrupt file is an error.
#include <fmt/format.h>

#include <cstring>

#include "vocab_loaders.h"

namespace cgram {
namespace {

enum GgufType : uint32_t {
  kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64
};

class Reader {
 public:
  Reader(std::string_view data, std::string_view name) : data_(data), name_(name) {}

  template <typename T>
  std::optional<T> scalar() {
    if (pos_ + sizeof(T) > data_.size()) return fail<T>("truncated");
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::optional<std::string_view> string() {
    auto length = scalar<uint64_t>();
    if (!length) return std::nullopt;
    if (*length > data_.size() - pos_) return fail<std::string_view>("truncated string");
    std::string_view s = data_.substr(pos_, *length);
    pos_ += *length;
    return s;
  }
  bool skip_value(uint32_t type, int depth = 0) {
    static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == kString) return string().has_value();
    if (type == kArray) {
      auto element = scalar<uint32_t>();
      auto count = scalar<uint64_t>();
      if (!element || !count || depth > 4) return false;
      if (*element != kString && *element != kArray && *element <= kF64) {
        if (*count > (data_.size() - pos_) / sizes[*element]) return fail<bool>("truncated array").has_value();
        pos_ += *count * sizes[*element];
        return true;
      }
      for (uint64_t i = 0; i < *count; ++i)
        if (!skip_value(*element, depth + 1)) return false;
      return true;
    }
    if (type > kF64) return fail<bool>(fmt::format("unknown value type {}", type)).has_value();
    if (sizes[type] > data_.size() - pos_) return fail<bool>("truncated").has_value();
    pos_ += sizes[type];
    return true;
  }
  size_t position() const { return pos_; }
  void seek(size_t pos) { pos_ = pos; }
  const std::string& error() const { return error_; }

  template <typename T>
  std::optional<T> fail(std::string message) {
    if (error_.empty()) error_ = fmt::format("{}: corrupt GGUF file: {} at byte {}", name_, message, pos_);
    return std::nullopt;
  }

 private:
  std::string_view data_;
  std::string_view name_;
  size_t pos_ = 0;
  std::string error_;
};

// Reads an integer of any GGUF integer type.
std::optional<uint64_t> read_integer(Reader& r, uint32_t type) {
  switch (type) {
    case kU8: { auto v = r.scalar<uint8_t>(); return v ? std::optional<uint64_t>(*v) : std::nullopt; }
    case kU16: { auto v = r.scalar<uint16_t>(); return v ? std::optional<uint64_t>(*v) : std::nullopt; }
    case kU32: { auto v = r.scalar<uint32_t>(); return v ? std::optional<uint64_t>(*v) : std::nullopt; }
    case kI32: { auto v = r.scalar<int32_t>(); return v && *v >= 0 ? std::optional<uint64_t>(*v) : std::nullopt; }
    case kU64: return r.scalar<uint64_t>();
    case kI64: { auto v = r.scalar<int64_t>(); return v && *v >= 0 ? std::optional<uint64_t>(*v) : std::nullopt; }
    default: return std::nullopt;
  }
}

}  // namespace

VocabularyResult load_gguf(std::string_view content, std::string_view name, const VocabularyOptions& options) {
  Reader r(content, name);
  r.seek(4);  // "GGUF"
  auto version = r.scalar<uint32_t>();
  auto tensors = r.scalar<uint64_t>();
  auto kv_count = r.scalar<uint64_t>();
  if (!version || !tensors || !kv_count) return VocabularyError{r.error()};
  if (*version < 2 || *version > 3)
    return VocabularyError{fmt::format("{}: GGUF version {} is not supported (cgram reads versions 2 and 3)", name, *version)};
  std::string model;
  std::string pre;
  std::vector<std::string_view> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;
  std::vector<std::string_view> merges;
  std::vector<uint32_t> eos;
  for (uint64_t i = 0; i < *kv_count; ++i) {
    auto key = r.string();
    auto type = r.scalar<uint32_t>();
    if (!key || !type) return VocabularyError{r.error()};
    auto string_array = [&](std::vector<std::string_view>& out) -> bool {
      auto element = r.scalar<uint32_t>();
      auto count = r.scalar<uint64_t>();
      if (!element || !count || *element != kString || *count > options.max_tokens * 4) return false;
      out.reserve(*count);
      for (uint64_t k = 0; k < *count; ++k) {
        auto s = r.string();
        if (!s) return false;
        out.push_back(*s);
      }
      return true;
    };
    if (*type == kString && (*key == "tokenizer.ggml.model" || *key == "tokenizer.ggml.pre")) {
      auto s = r.string();
      if (!s) return VocabularyError{r.error()};
      (*key == "tokenizer.ggml.model" ? model : pre) = std::string(*s);
    } else if (*type == kArray && *key == "tokenizer.ggml.tokens") {
      if (!string_array(tokens)) return VocabularyError{r.error().empty() ? fmt::format("{}: bad tokenizer.ggml.tokens", name) : r.error()};
    } else if (*type == kArray && *key == "tokenizer.ggml.merges") {
      if (!string_array(merges)) return VocabularyError{r.error().empty() ? fmt::format("{}: bad tokenizer.ggml.merges", name) : r.error()};
    } else if (*type == kArray && (*key == "tokenizer.ggml.token_type" || *key == "tokenizer.ggml.scores")) {
      auto element = r.scalar<uint32_t>();
      auto count = r.scalar<uint64_t>();
      bool scores_key = *key == "tokenizer.ggml.scores";
      if (!element || !count || *element != (scores_key ? kF32 : kI32) || *count > (content.size() - r.position()) / 4)
        return VocabularyError{r.error().empty() ? fmt::format("{}: bad {}", name, *key) : r.error()};
      for (uint64_t k = 0; k < *count; ++k) {
        if (scores_key) scores.push_back(*r.scalar<float>());
        else types.push_back(*r.scalar<int32_t>());
      }
    } else if (*key == "tokenizer.ggml.eos_token_id" || *key == "tokenizer.ggml.eot_token_id") {
      auto id = read_integer(r, *type);
      if (!id) return VocabularyError{fmt::format("{}: bad {}", name, *key)};
      eos.push_back(static_cast<uint32_t>(*id));
    } else if (!r.skip_value(*type)) {
      return VocabularyError{r.error().empty() ? fmt::format("{}: corrupt GGUF value for key '{}'", name, *key) : r.error()};
    }
  }
  if (tokens.empty())
    return VocabularyError{fmt::format("{}: GGUF file has no tokenizer.ggml.tokens (not a vocabulary?)", name)};
  if (!types.empty() && types.size() != tokens.size())
    return VocabularyError{fmt::format("{}: inconsistent ids: {} tokens but {} token types", name, tokens.size(), types.size())};
  if (!scores.empty() && scores.size() != tokens.size())
    return VocabularyError{fmt::format("{}: inconsistent ids: {} tokens but {} scores", name, tokens.size(), scores.size())};
  bool byte_level = model == "gpt2";
  if (!byte_level && model != "llama")
    return VocabularyError{fmt::format("{}: tokenizer model '{}' is not supported (cgram reads 'gpt2' and 'llama')", name, model)};

  Vocabulary::Builder builder;
  builder.name = std::string(name);
  builder.kind = byte_level ? TokenizerKind::ByteLevelBpe : TokenizerKind::SentencePiece;
  enum { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  for (uint32_t id = 0; id < tokens.size(); ++id) {
    int32_t type = types.empty() ? kNormal : types[id];
    bool special = type == kUnknown || type == kControl || type == kUnused;
    std::string bytes;
    if (type == kUserDefined || special) {
      bytes = std::string(tokens[id]);
      if (type == kUserDefined) builder.encoder.added_tokens.emplace_back(bytes, id);
    } else if (byte_level) {
      auto decoded = byte_level_decode(tokens[id]);
      if (!decoded)
        return VocabularyError{fmt::format("{}: token {} has a character outside the byte-level alphabet", name, id)};
      bytes = std::move(*decoded);
    } else {
      bytes = sentencepiece_piece_bytes(tokens[id], type == kByte);
    }
    if (auto error = builder.set(id, std::move(bytes), special, options)) return *error;
    builder.encoder.text_ids.emplace(std::string(tokens[id]), id);
  }
  for (uint32_t rank = 0; rank < merges.size(); ++rank) builder.encoder.merge_rank.emplace(std::string(merges[rank]), rank);
  builder.encoder.scores = std::move(scores);
  builder.encoder.add_prefix_space = !byte_level;
  builder.encoder.pretokenizer = byte_level ? "gguf:" + pre : "";
  builder.eos_ids = std::move(eos);
  return builder.build(options);
}

}  // namespace cgram

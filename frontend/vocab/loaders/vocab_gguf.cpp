// GGUF vocabulary files (the tokenizer.ggml.* keys of llama.cpp's format).
// Every read is bounds-checked: a truncated or corrupt file is an error.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <unordered_set>

#include "vocab_loaders.h"

namespace cgram {
namespace {

enum GgufType : uint32_t {
  kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64
};

// The smallest encoding of a value of each type: a claimed count of values
// is checked against the bytes left before anything is reserved for them.
size_t min_size(uint32_t type) {
  static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};
  return type <= kF64 ? sizes[type] : 1;
}

const char* type_name(uint32_t type) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  return type <= kF64 ? names[type] : "unknown";
}

// A key as it may appear in a message: hostile keys can be long or binary.
std::string printable(std::string_view key) {
  std::string out;
  for (char c : key.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7F) out += c;
    else out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  }
  if (key.size() > 80) out += "...";
  return out;
}

class Reader {
 public:
  Reader(std::string_view data, std::string_view name) : data_(data), name_(name) {}

  template <typename T>
  std::optional<T> scalar() {
    if (sizeof(T) > remaining()) return fail<T>("truncated");
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::optional<std::string_view> string() {
    auto length = scalar<uint64_t>();
    if (!length) return std::nullopt;
    if (*length > remaining())
      return fail<std::string_view>(fmt::format("truncated: a string of {} bytes, but {} bytes are left", *length,
                                                remaining()));
    std::string_view s = data_.substr(pos_, *length);
    pos_ += *length;
    return s;
  }
  // An array header: its element type and count, the count checked against
  // the bytes left (each element takes at least min_size bytes).
  bool array_header(uint32_t& element, uint64_t& count) {
    auto e = scalar<uint32_t>();
    auto c = e ? scalar<uint64_t>() : std::nullopt;
    if (!e || !c) return false;
    if (*e > kF64) return fail<bool>(fmt::format("unknown array element type {}", *e)).has_value();
    if (*c > remaining() / min_size(*e))
      return fail<bool>(fmt::format("truncated: an array of {} {} values, but {} bytes are left", *c,
                                    type_name(*e), remaining()))
          .has_value();
    element = *e;
    count = *c;
    return true;
  }
  bool skip_value(uint32_t type, int depth = 0) {
    if (type == kString) return string().has_value();
    if (type == kArray) {
      uint32_t element;
      uint64_t count;
      if (depth > 4) return fail<bool>("arrays nested too deeply").has_value();
      if (!array_header(element, count)) return false;
      if (element != kString && element != kArray) {
        pos_ += count * min_size(element);  // checked by array_header
        return true;
      }
      for (uint64_t i = 0; i < count; ++i)
        if (!skip_value(element, depth + 1)) return false;
      return true;
    }
    if (type > kF64) return fail<bool>(fmt::format("unknown value type {}", type)).has_value();
    if (min_size(type) > remaining()) return fail<bool>("truncated").has_value();
    pos_ += min_size(type);
    return true;
  }
  size_t position() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
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

// Reads an integer of any GGUF integer type; negative values are refused
// (every integer cgram reads is an id or a count).
std::optional<uint64_t> read_integer(Reader& r, uint32_t type, bool& negative) {
  negative = false;
  auto non_negative = [&](auto v) -> std::optional<uint64_t> {
    if (!v) return std::nullopt;
    if (*v < 0) {
      negative = true;
      return std::nullopt;
    }
    return static_cast<uint64_t>(*v);
  };
  switch (type) {
    case kU8: { auto v = r.scalar<uint8_t>(); return v ? std::optional<uint64_t>(*v) : std::nullopt; }
    case kI8: return non_negative(r.scalar<int8_t>());
    case kU16: { auto v = r.scalar<uint16_t>(); return v ? std::optional<uint64_t>(*v) : std::nullopt; }
    case kI16: return non_negative(r.scalar<int16_t>());
    case kU32: { auto v = r.scalar<uint32_t>(); return v ? std::optional<uint64_t>(*v) : std::nullopt; }
    case kI32: return non_negative(r.scalar<int32_t>());
    case kU64: return r.scalar<uint64_t>();
    case kI64: return non_negative(r.scalar<int64_t>());
    default: return std::nullopt;
  }
}

}  // namespace

VocabularyResult load_gguf(std::string_view content, std::string_view name, const VocabularyOptions& options) {
  Reader r(content, name);
  auto error = [&](std::string message, ErrorCode code = ErrorCode::InvalidInput) {
    return Error{code, fmt::format("{}: {}", name, message)};
  };
  auto reader_error = [&](std::string otherwise) {
    return r.error().empty() ? error(std::move(otherwise)) : Error{ErrorCode::InvalidInput, r.error()};
  };
  r.seek(4);  // "GGUF"
  auto version = r.scalar<uint32_t>();
  auto tensors = r.scalar<uint64_t>();
  auto kv_count = r.scalar<uint64_t>();
  if (!version || !tensors || !kv_count) return Error{ErrorCode::InvalidInput, r.error()};
  if (*version < 2 || *version > 3)
    return Error{ErrorCode::Unsupported,
                 fmt::format("{}: GGUF version {} is not supported (cgram reads versions 2 and 3)", name, *version)};
  // Tensors are never read (their descriptions follow the metadata), so
  // their count is not trusted for anything. Each metadata entry takes at
  // least a key length, a type and one byte of value.
  if (*kv_count > options.max_gguf_entries)
    return error(fmt::format("the file claims {} metadata entries; the limit is {}", *kv_count, options.max_gguf_entries),
                 ErrorCode::Limit);
  if (*kv_count > r.remaining() / 13) {
    r.fail<bool>(fmt::format("truncated: {} metadata entries claimed, but {} bytes are left", *kv_count, r.remaining()));
    return Error{ErrorCode::InvalidInput, r.error()};
  }
  std::string model;
  std::string pre;
  std::vector<std::string_view> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;
  std::vector<std::string_view> merges;
  std::vector<uint32_t> eos;
  std::unordered_set<std::string_view> keys;
  for (uint64_t i = 0; i < *kv_count; ++i) {
    auto key = r.string();
    auto type = key ? r.scalar<uint32_t>() : std::nullopt;
    if (!key || !type) return Error{ErrorCode::InvalidInput, r.error()};
    // A key given twice would, for the token list, silently double the
    // vocabulary: the format says keys are unique, so any repeat is refused.
    if (!keys.insert(*key).second) return error(fmt::format("GGUF key '{}' appears twice", printable(*key)));
    const bool tokenizer_key = key->starts_with("tokenizer.ggml.");
    auto expect_type = [&](uint32_t want) -> std::optional<Error> {
      if (*type == want) return std::nullopt;
      return error(fmt::format("{} has type {}; expected {}", *key, type_name(*type), type_name(want)));
    };
    // An array of `want`, its count checked against the bytes left and `limit`.
    auto array_of = [&](uint32_t want, size_t limit, uint64_t& count) -> std::optional<Error> {
      if (auto e = expect_type(kArray)) return e;
      uint32_t element;
      if (!r.array_header(element, count)) return Error{ErrorCode::InvalidInput, r.error()};
      if (element != want)
        return error(fmt::format("{} is an array of {}; expected an array of {}", *key, type_name(element), type_name(want)));
      if (count > limit) return error(fmt::format("{} has {} entries; the limit is {}", *key, count, limit), ErrorCode::Limit);
      return std::nullopt;
    };
    // Strings longer than `max_length` are refused before they are copied.
    auto string_array = [&](std::vector<std::string_view>& out, size_t limit,
                            size_t max_length) -> std::optional<Error> {
      uint64_t count;
      if (auto e = array_of(kString, limit, count)) return e;
      out.reserve(count);
      for (uint64_t k = 0; k < count; ++k) {
        auto s = r.string();
        if (!s) return Error{ErrorCode::InvalidInput, r.error()};
        if (s->size() > max_length)
          return error(fmt::format("entry {} of {} is {} bytes long; the limit is {}", k, *key, s->size(), max_length),
                       ErrorCode::Limit);
        out.push_back(*s);
      }
      return std::nullopt;
    };
    // A token's text may be longer than its bytes: up to 3 bytes of '▁' per
    // space, 2 bytes per byte through the byte-level table, "<0xNN>" for one.
    // The exact limit is checked on the bytes.
    const size_t max_text = options.max_token_bytes >= SIZE_MAX / 8 ? SIZE_MAX / 4 : options.max_token_bytes * 3 + 6;
    if (tokenizer_key && (*key == "tokenizer.ggml.model" || *key == "tokenizer.ggml.pre")) {
      if (auto e = expect_type(kString)) return *e;
      auto s = r.string();
      if (!s) return Error{ErrorCode::InvalidInput, r.error()};
      (*key == "tokenizer.ggml.model" ? model : pre) = std::string(*s);
    } else if (*key == "tokenizer.ggml.tokens") {
      if (auto e = string_array(tokens, options.max_tokens, max_text)) return *e;
    } else if (*key == "tokenizer.ggml.merges") {
      if (auto e = string_array(merges, options.max_merges, 2 * max_text + 1)) return *e;
    } else if (*key == "tokenizer.ggml.token_type") {
      uint64_t count;
      if (auto e = array_of(kI32, options.max_tokens, count)) return *e;
      types.reserve(count);
      for (uint64_t k = 0; k < count; ++k) types.push_back(*r.scalar<int32_t>());  // in bounds: array_of
    } else if (*key == "tokenizer.ggml.scores") {
      uint64_t count;
      if (auto e = array_of(kF32, options.max_tokens, count)) return *e;
      scores.reserve(count);
      for (uint64_t k = 0; k < count; ++k) {
        float score = *r.scalar<float>();  // in bounds: array_of
        // Scores order the merges; a NaN would leave them unordered.
        if (std::isnan(score)) return error(fmt::format("the score of token {} is not a number", k));
        scores.push_back(score);
      }
    } else if (*key == "tokenizer.ggml.eos_token_id" || *key == "tokenizer.ggml.eot_token_id") {
      bool negative = false;
      auto id = read_integer(r, *type, negative);
      if (!id && negative) return error(fmt::format("{} is negative", *key));
      if (!id && !r.error().empty()) return Error{ErrorCode::InvalidInput, r.error()};
      if (!id) return error(fmt::format("{} has type {}; expected an integer", *key, type_name(*type)));
      // Ids are 32-bit: a larger value must not wrap around onto a real token.
      if (*id >= options.max_tokens || *id > UINT32_MAX)
        return error(fmt::format("{} is {}, not a token id (the limit is {} ids)", *key, *id, options.max_tokens));
      eos.push_back(static_cast<uint32_t>(*id));
    } else if (!r.skip_value(*type)) {
      return reader_error(fmt::format("corrupt GGUF value for key '{}'", printable(*key)));
    }
  }
  if (tokens.empty())
    return Error{ErrorCode::InvalidInput,
                 fmt::format("{}: GGUF file has no tokenizer.ggml.tokens (not a vocabulary?)", name)};
  if (!types.empty() && types.size() != tokens.size())
    return Error{ErrorCode::InvalidInput,
                 fmt::format("{}: inconsistent ids: {} tokens but {} token types", name, tokens.size(), types.size())};
  if (!scores.empty() && scores.size() != tokens.size())
    return Error{ErrorCode::InvalidInput,
                 fmt::format("{}: inconsistent ids: {} tokens but {} scores", name, tokens.size(), scores.size())};
  bool byte_level = model == "gpt2";
  if (!byte_level && model != "llama")
    return Error{
        ErrorCode::Unsupported,
        fmt::format("{}: tokenizer model '{}' is not supported (cgram reads 'gpt2' and 'llama')", name, model)};

  Vocabulary::Builder builder;
  builder.name = std::string(name);
  builder.kind = byte_level ? TokenizerKind::ByteLevelBpe : TokenizerKind::SentencePiece;
  // llama.cpp's token types; 0 is "undefined", read as normal.
  enum { kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  for (uint32_t id = 0; id < tokens.size(); ++id) {
    int32_t type = types.empty() ? kNormal : types[id];
    if (type < kUndefined || type > kByte)
      return error(fmt::format("token {} has type {} (the known types are 0 to 6)", id, type));
    bool special = type == kUnknown || type == kControl || type == kUnused;
    std::string bytes;
    if (type == kUserDefined || special) {
      bytes = std::string(tokens[id]);
      if (type == kUserDefined) builder.encoder.added_tokens.emplace_back(bytes, id);
    } else if (byte_level) {
      auto decoded = byte_level_decode(tokens[id]);
      if (!decoded)
        return Error{ErrorCode::InvalidInput,
                     fmt::format("{}: token {} has a character outside the byte-level alphabet", name, id)};
      bytes = std::move(*decoded);
    } else {
      bytes = sentencepiece_piece_bytes(tokens[id], type == kByte);
    }
    if (auto error = builder.set(id, std::move(bytes), special, options)) return *error;
    builder.encoder.text_ids.emplace(std::string(tokens[id]), id);
  }
  for (uint32_t rank = 0; rank < merges.size(); ++rank) builder.encoder.add_merge(std::string(merges[rank]), rank);
  builder.encoder.scores = std::move(scores);
  builder.encoder.add_prefix_space = !byte_level;
  builder.encoder.pretokenizer = byte_level ? "gguf:" + pre : "";
  builder.eos_ids = std::move(eos);
  return builder.build(options);
}

}  // namespace cgram

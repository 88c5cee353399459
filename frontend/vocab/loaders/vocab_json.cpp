// The JSON vocabulary formats:
// - Hugging Face tokenizer.json: byte-level BPE (GPT-2, Llama 3) and
//   SentencePiece-style BPE with '▁' and <0xNN> byte fallback (Gemma, Llama 2);
// - a plain token list: an array whose i-th element is token i, either a
//   string (its UTF-8 text) or an object {"text": …} / {"hex": "e282ac"}
//   with optional "special": true and "eos": true.
#include <fmt/format.h>

#include <simdjson.h>

#include <algorithm>

#include "vocab_loaders.h"

namespace cgram {

namespace {
// A boolean member, or `otherwise` when it is absent or not a boolean.
bool bool_field(simdjson::dom::element e, const char* key, bool otherwise) {
  bool v;
  return e[key].get(v) == simdjson::SUCCESS ? v : otherwise;
}
}  // namespace
namespace {

using simdjson::dom::element;

std::optional<std::string> string_field(element e, const char* key) {
  std::string_view v;
  if (e[key].get(v) != simdjson::SUCCESS) return std::nullopt;
  return std::string(v);
}

// Does a pre-tokenizer or decoder (possibly a Sequence) contain `type`?
bool contains_type(element e, std::string_view type) {
  std::string_view t;
  if (e["type"].get(t) == simdjson::SUCCESS && t == type) return true;
  for (const char* list : {"pretokenizers", "decoders", "normalizers"}) {
    simdjson::dom::array items;
    if (e[list].get(items) != simdjson::SUCCESS) continue;
    for (element item : items)
      if (contains_type(item, type)) return true;
  }
  return false;
}

// The Split pre-tokenizer's regex, if any.
std::optional<std::string> split_pattern(element e) {
  std::string_view t;
  if (e["type"].get(t) == simdjson::SUCCESS && t == "Split") {
    element pattern;  // a Split without a pattern object has no regex (never an exception)
    if (e["pattern"].get(pattern) != simdjson::SUCCESS) return std::nullopt;
    return string_field(pattern, "Regex");
  }
  simdjson::dom::array items;
  if (e["pretokenizers"].get(items) == simdjson::SUCCESS)
    for (element item : items)
      if (auto p = split_pattern(item)) return p;
  return std::nullopt;
}

std::optional<std::string> eos_from_config(const std::string& config) {
  // On-demand parsing: configs hold numbers too large for the DOM parser
  // (Llama 3's model_max_length is 1e30), and only one field matters here.
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(config);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return std::nullopt;
  simdjson::ondemand::value eos;
  if (doc.find_field_unordered("eos_token").get(eos) != simdjson::SUCCESS) return std::nullopt;
  std::string_view name;
  if (eos.get_string().get(name) == simdjson::SUCCESS) return std::string(name);
  simdjson::ondemand::object object;
  if (eos.get_object().get(object) == simdjson::SUCCESS &&
      object.find_field_unordered("content").get_string().get(name) == simdjson::SUCCESS)
    return std::string(name);
  return std::nullopt;
}

}  // namespace

Result<std::vector<uint32_t>> eos_ids_from_generation_config(const std::string& config) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(config);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS)
    return Error{ErrorCode::InvalidInput, "not a JSON document"};
  simdjson::ondemand::value eos;
  auto found = doc.find_field_unordered("eos_token_id").get(eos);
  if (found == simdjson::NO_SUCH_FIELD) return std::vector<uint32_t>{};
  if (found != simdjson::SUCCESS) return Error{ErrorCode::InvalidInput, "not a JSON object"};
  std::vector<uint32_t> ids;
  auto take = [&](simdjson::ondemand::value v) -> bool {
    uint64_t id = 0;
    if (v.get_uint64().get(id) != simdjson::SUCCESS || id > UINT32_MAX) return false;
    ids.push_back(static_cast<uint32_t>(id));
    return true;
  };
  simdjson::ondemand::array list;
  if (eos.get_array().get(list) == simdjson::SUCCESS) {
    for (auto item : list) {
      simdjson::ondemand::value v;
      if (item.get(v) != simdjson::SUCCESS || !take(v))
        return Error{ErrorCode::InvalidInput, "eos_token_id holds something other than token ids"};
    }
    return ids;
  }
  if (!take(eos)) return Error{ErrorCode::InvalidInput, "eos_token_id is neither a token id nor a list of them"};
  return ids;
}

namespace {

// GPT-2's pre-tokenizer (ByteLevel with use_regex).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

VocabularyResult load_hf_tokenizer_json(std::string_view content, std::string_view name,
                                        const VocabularyOptions& options,
                                        const std::optional<std::string>& config_json) {
  simdjson::dom::parser parser;
  element doc;
  if (auto error = parser.parse(content.data(), content.size()).get(doc))
    return Error{ErrorCode::InvalidInput, fmt::format("{}: not valid JSON ({})", name, simdjson::error_message(error))};
  element model;
  if (doc["model"].get(model) != simdjson::SUCCESS)
    return Error{ErrorCode::InvalidInput,
                 fmt::format("{}: not a Hugging Face tokenizer.json (no \"model\" object)", name)};
  std::string_view type;
  if (model["type"].get(type) != simdjson::SUCCESS || type != "BPE")
    return Error{ErrorCode::Unsupported,
                 fmt::format("{}: unsupported tokenizer model type '{}' (cgram loads BPE models)", name, type)};
  simdjson::dom::object vocab;
  if (model["vocab"].get(vocab) != simdjson::SUCCESS)
    return Error{ErrorCode::InvalidInput, fmt::format("{}: \"model.vocab\" is missing or not an object", name)};

  element pre, decoder;
  const bool has_pre = doc["pre_tokenizer"].get(pre) == simdjson::SUCCESS;
  const bool has_decoder = doc["decoder"].get(decoder) == simdjson::SUCCESS;
  bool byte_level = (has_pre && contains_type(pre, "ByteLevel")) || (has_decoder && contains_type(decoder, "ByteLevel"));
  bool byte_fallback = false;
  byte_fallback = bool_field(model, "byte_fallback", byte_fallback);

  Vocabulary::Builder builder;
  builder.name = std::string(name);
  builder.kind = byte_level ? TokenizerKind::ByteLevelBpe : TokenizerKind::SentencePiece;
  for (auto field : vocab) {
    uint64_t id;
    if (field.value.get(id) != simdjson::SUCCESS)
      return Error{ErrorCode::InvalidInput,
                   fmt::format("{}: the id of token '{}' is not a non-negative integer", name, field.key)};
    std::string bytes;
    if (byte_level) {
      auto decoded = byte_level_decode(field.key);
      if (!decoded)
        return Error{
            ErrorCode::InvalidInput,
            fmt::format("{}: token '{}' (id {}) has a character outside the byte-level alphabet", name, field.key, id)};
      bytes = std::move(*decoded);
    } else {
      bytes = sentencepiece_piece_bytes(field.key, byte_fallback);
    }
    if (auto error = builder.set(id, std::move(bytes), false, options)) return *error;
    builder.encoder.text_ids.emplace(std::string(field.key), static_cast<uint32_t>(id));
  }
  simdjson::dom::array added;
  if (doc["added_tokens"].get(added) == simdjson::SUCCESS) {
    for (element token : added) {
      uint64_t id;
      std::string_view text;
      bool special = false;
      if (token["id"].get(id) != simdjson::SUCCESS || token["content"].get(text) != simdjson::SUCCESS)
        return Error{ErrorCode::InvalidInput,
                     fmt::format("{}: an entry of \"added_tokens\" lacks \"id\" or \"content\"", name)};
      special = bool_field(token, "special", special);
      // Added tokens hold their text as is (not through the byte-level table).
      if (auto error = builder.set(id, std::string(text), special, options)) return *error;
      if (!special) builder.encoder.added_tokens.emplace_back(std::string(text), static_cast<uint32_t>(id));
    }
  }
  simdjson::dom::array merges;
  if (model["merges"].get(merges) == simdjson::SUCCESS) {
    if (merges.size() > options.max_merges)
      return Error{ErrorCode::Limit,
                   fmt::format("{}: {} merges; the limit is {}", name, merges.size(), options.max_merges)};
    uint32_t rank = 0;
    for (element m : merges) {
      std::string_view pair;
      simdjson::dom::array parts;
      if (m.get(pair) == simdjson::SUCCESS) {
        builder.encoder.add_merge(std::string(pair), rank++);
      } else if (m.get(parts) == simdjson::SUCCESS && parts.size() == 2) {
        std::string_view a, b;
        if (parts.at(0).get(a) || parts.at(1).get(b))
          return Error{ErrorCode::InvalidInput, fmt::format("{}: a merge is not a pair of strings", name)};
        builder.encoder.add_merge(fmt::format("{} {}", a, b), rank++);
      } else {
        return Error{ErrorCode::InvalidInput,
                     fmt::format("{}: merge {} is neither \"a b\" nor [\"a\", \"b\"]", name, rank)};
      }
    }
  }
  builder.encoder.ignore_merges = bool_field(model, "ignore_merges", builder.encoder.ignore_merges);
  if (byte_level) {
    auto pattern = has_pre ? split_pattern(pre) : std::nullopt;
    builder.encoder.pretokenizer = pattern.value_or(kGpt2Pattern);
  }

  // End of sequence: the config beside the file, else the usual names.
  std::optional<std::string> eos_name = config_json ? eos_from_config(*config_json) : std::nullopt;
  for (const auto& e : builder.entries) {
    if (!e.special) continue;
    static const char* usual[] = {"</s>", "<eos>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "<|im_end|>"};
    bool match = eos_name ? e.bytes == *eos_name
                          : std::find(std::begin(usual), std::end(usual), e.bytes) != std::end(usual);
    if (match) builder.eos_ids.push_back(e.id);
  }
  return builder.build(options);
}

VocabularyResult load_token_list_json(std::string_view content, std::string_view name,
                                      const VocabularyOptions& options) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto error = parser.parse(content.data(), content.size()).get(doc))
    return Error{ErrorCode::InvalidInput, fmt::format("{}: not valid JSON ({})", name, simdjson::error_message(error))};
  simdjson::dom::array list;
  if (doc.get(list) != simdjson::SUCCESS)
    return Error{ErrorCode::InvalidInput, fmt::format("{}: a token list must be a JSON array", name)};
  Vocabulary::Builder builder;
  builder.name = std::string(name);
  uint32_t id = 0;
  for (simdjson::dom::element item : list) {
    std::string_view text;
    std::string bytes;
    bool special = false, eos = false;
    if (item.get(text) == simdjson::SUCCESS) {
      bytes = std::string(text);
    } else if (item["text"].get(text) == simdjson::SUCCESS) {
      bytes = std::string(text);
    } else if (item["hex"].get(text) == simdjson::SUCCESS) {
      if (text.size() % 2 != 0 || !std::all_of(text.begin(), text.end(), [](char c) { return isxdigit(static_cast<unsigned char>(c)); }))
        return Error{ErrorCode::InvalidInput,
                     fmt::format("{}: token {}: \"hex\" must be an even number of hex digits", name, id)};
      for (size_t i = 0; i < text.size(); i += 2)
        bytes += static_cast<char>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16));
    } else {
      return Error{ErrorCode::InvalidInput,
                   fmt::format("{}: token {} is neither a string nor an object with \"text\" or \"hex\"", name, id)};
    }
    special = bool_field(item, "special", special);
    eos = bool_field(item, "eos", eos);
    if (eos) builder.eos_ids.push_back(id);
    if (auto error = builder.set(id, std::move(bytes), special || eos, options)) return *error;
    ++id;
  }
  return builder.build(options);
}

}  // namespace cgram

#include "vocabulary.h"

#include "binary_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "file_io.h"
#include "utf8.h"
#include "vocab_loaders.h"
#include "vocab_trie.h"

namespace cgram {

const char* tokenizer_kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::ByteLevelBpe: return "byte-level BPE";
    case TokenizerKind::SentencePiece: return "SentencePiece BPE with byte fallback";
    case TokenizerKind::Tiktoken: return "tiktoken BPE";
    case TokenizerKind::List: return "token list";
  }
  return "?";
}

namespace {
// GPT-2's table: printable bytes stand for themselves, the others are moved
// to U+0100 and up, in byte order.
struct ByteTable {
  uint32_t to_unicode[256];
  std::unordered_map<uint32_t, uint8_t> to_byte;
  ByteTable() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_unicode[b] = printable ? b : next++;
      to_byte[to_unicode[b]] = static_cast<uint8_t>(b);
    }
  }
};
const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}
}  // namespace

uint32_t byte_to_unicode(uint8_t byte) { return byte_table().to_unicode[byte]; }

std::optional<uint8_t> unicode_to_byte(uint32_t cp) {
  auto it = byte_table().to_byte.find(cp);
  if (it == byte_table().to_byte.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> byte_level_decode(std::string_view text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    auto cp = decode_utf8(text, pos);
    if (!cp) return std::nullopt;
    auto b = unicode_to_byte(*cp);
    if (!b) return std::nullopt;
    out += static_cast<char>(*b);
  }
  return out;
}

std::string sentencepiece_piece_bytes(std::string_view piece, bool byte_fallback) {
  if (byte_fallback && piece.size() == 6 && piece.substr(0, 3) == "<0x" && piece[5] == '>' &&
      isxdigit(static_cast<unsigned char>(piece[3])) && isxdigit(static_cast<unsigned char>(piece[4])))
    return std::string(1, static_cast<char>(std::stoi(std::string(piece.substr(3, 2)), nullptr, 16)));
  std::string out;
  static constexpr std::string_view kSpace = "\xE2\x96\x81";  // ▁
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, 3) == kSpace) {
      out += ' ';
      i += 3;
    } else {
      out += piece[i++];
    }
  }
  return out;
}

std::optional<Error> Vocabulary::Builder::set(uint64_t id, std::string bytes, bool special,
                                              const VocabularyOptions& o) {
  if (id >= o.max_tokens || id >= kNoEntry)
    return Error{ErrorCode::Limit, fmt::format("{}: token id {} is out of range (the limit is {} ids)", name, id,
                                               std::min<uint64_t>(o.max_tokens, kNoEntry))};
  if (bytes.size() > o.max_token_bytes)
    return Error{ErrorCode::Limit, fmt::format("{}: token {} is {} bytes long; the limit is {} bytes per token", name,
                                               id, bytes.size(), o.max_token_bytes)};
  if (id >= slot.size()) slot.resize(id + 1, kNoEntry);
  if (slot[id] != kNoEntry) {
    Entry& e = entries[slot[id]];
    if (e.bytes == bytes) {  // the same token listed twice (added tokens repeat the vocabulary)
      e.special = e.special || special;
      return std::nullopt;
    }
    return Error{ErrorCode::InvalidInput, fmt::format("{}: inconsistent ids: id {} is defined twice", name, id)};
  }
  // Offsets are 32-bit, and the trie built from the tokens costs about 17
  // bytes per token byte: the total is what bounds it.
  const size_t total_limit = std::min<size_t>(o.max_total_token_bytes, UINT32_MAX);
  if (bytes.size() > total_limit - total_bytes)
    return Error{ErrorCode::Limit,
                 fmt::format("{}: the tokens' bytes add up to more than the limit of {} bytes", name, total_limit)};
  total_bytes += bytes.size();
  slot[id] = static_cast<uint32_t>(entries.size());
  entries.push_back({static_cast<uint32_t>(id), std::move(bytes), special});
  return std::nullopt;
}

VocabularyResult Vocabulary::Builder::build(const VocabularyOptions& options) {
  if (entries.empty()) return Error{ErrorCode::InvalidInput, fmt::format("{}: the vocabulary has no tokens", name)};
  auto vocab = std::make_shared<Vocabulary>();
  vocab->name_ = name;
  vocab->kind_ = kind;
  const size_t count = id_count();
  vocab->data_.reserve(total_bytes);
  vocab->offsets_.reserve(count + 1);
  vocab->special_.reserve(count);
  for (uint32_t id = 0; id < count; ++id) {
    const Entry* e = find(id);
    if (e) vocab->data_ += e->bytes;
    vocab->offsets_.push_back(static_cast<uint32_t>(vocab->data_.size()));
    // An id with no token, or with no bytes, can never be produced by text.
    vocab->special_.push_back(!e || e->special || e->bytes.empty());
  }
  std::vector<uint32_t> eos = options.eos_ids ? *options.eos_ids : eos_ids;
  eos.insert(eos.end(), options.extra_eos_ids.begin(), options.extra_eos_ids.end());
  if (auto error = vocab->set_eos_ids(std::move(eos))) return *error;
  // The caller who gives an empty list of end-of-sequence ids means it; a
  // file that names none is probably cut short or mislabelled.
  if (vocab->eos_ids_.empty() && !options.eos_ids) warnings.push_back(no_eos_warning(name));
  vocab->warnings_ = std::move(warnings);
  vocab->encoder_ = std::move(encoder);
  return std::shared_ptr<const Vocabulary>(std::move(vocab));
}

std::string Vocabulary::no_eos_warning(std::string_view name) {
  return fmt::format("{}: the vocabulary has no end-of-sequence token: no token can end a sequence, so generation "
                     "stops only at a length limit",
                     name);
}

std::optional<Error> Vocabulary::set_eos_ids(std::vector<uint32_t> eos) {
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  for (uint32_t id : eos)
    if (id >= size())
      return Error{ErrorCode::InvalidInput,
                   fmt::format("{}: end-of-sequence id {} is not in the vocabulary ({} ids)", name_, id, size())};
  // End of sequence is never text: it is allowed exactly when the text can end.
  for (uint32_t id : eos) special_[id] = 1;
  eos_ids_ = std::move(eos);
  by_bytes_.clear();
  for (uint32_t id = 0; id < size(); ++id)
    if (!special_[id]) by_bytes_.emplace(bytes(id), id);
  return std::nullopt;
}

VocabularyResult Vocabulary::with_eos_ids(std::span<const uint32_t> ids) const {
  auto vocab = std::make_shared<Vocabulary>();
  vocab->name_ = name_;
  vocab->kind_ = kind_;
  vocab->data_ = data_;
  vocab->offsets_ = offsets_;
  vocab->special_ = special_;
  std::vector<uint32_t> eos = eos_ids_;
  eos.insert(eos.end(), ids.begin(), ids.end());
  if (auto error = vocab->set_eos_ids(std::move(eos))) return *error;
  const std::string no_eos = no_eos_warning(name_);
  for (const std::string& w : warnings_)
    if (vocab->eos_ids_.empty() || w != no_eos) vocab->warnings_.push_back(w);
  vocab->encoder_ = encoder_;
  return std::shared_ptr<const Vocabulary>(std::move(vocab));
}

Vocabulary::Vocabulary() = default;
Vocabulary::~Vocabulary() = default;

void Vocabulary::EncoderData::add_merge(std::string pair, uint32_t rank) {
  merges_digest += ir::hash_bytes(pair, rank);
  merge_rank.emplace(std::move(pair), rank);
}

uint64_t Vocabulary::fingerprint() const {
  std::call_once(fingerprint_once_, [&] {
    auto view = [](const auto& v) {
      return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
    };
    uint64_t h = ir::hash_bytes(data_, size());
    h = ir::hash_bytes(view(offsets_), h);
    h = ir::hash_bytes(view(special_), h);
    fingerprint_ = ir::hash_bytes(view(eos_ids_), h);
  });
  return fingerprint_;
}

const VocabTrie& Vocabulary::trie() const {
  std::call_once(trie_once_, [this] { trie_ = std::make_unique<VocabTrie>(*this); });
  return *trie_;
}

bool Vocabulary::is_eos(uint32_t id) const {
  return std::binary_search(eos_ids_.begin(), eos_ids_.end(), id);
}

std::optional<uint32_t> Vocabulary::find(std::string_view bytes) const {
  auto it = by_bytes_.find(bytes);
  if (it == by_bytes_.end()) return std::nullopt;
  return it->second;
}

std::string Vocabulary::display(uint32_t id) const {
  if (id >= size()) return fmt::format("<invalid id {}>", id);
  std::string_view b = bytes(id);
  std::string out;
  for (size_t pos = 0; pos < b.size();) {
    size_t at = pos;
    auto cp = decode_utf8(b, pos);
    if (!cp) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(b[at]));
    } else if (*cp == '\n') {
      out += "\\n";
    } else if (*cp == '\t') {
      out += "\\t";
    } else if (*cp == '\r') {
      out += "\\r";
    } else if (*cp < 0x20 || *cp == 0x7F) {
      out += fmt::format("\\x{:02x}", *cp);
    } else {
      out.append(b.substr(at, pos - at));
    }
  }
  return out;
}

VocabularyResult Vocabulary::from_tokens(std::vector<std::string> tokens, std::vector<uint32_t> eos_ids,
                                         std::vector<uint32_t> special) {
  Builder builder;
  builder.name = "token list";
  VocabularyOptions options;
  if (tokens.size() > options.max_tokens)
    return Error{ErrorCode::Limit,
                 fmt::format("token list: {} tokens; the limit is {}", tokens.size(), options.max_tokens)};
  std::vector<bool> is_special(tokens.size());
  for (uint32_t id : special)
    if (id < tokens.size()) is_special[id] = true;
  for (uint32_t id = 0; id < tokens.size(); ++id)
    if (auto error = builder.set(id, std::move(tokens[id]), is_special[id], options)) return *error;
  builder.eos_ids = std::move(eos_ids);
  return builder.build(options);
}

VocabularyResult Vocabulary::from_memory(std::string_view content, std::string_view name,
                                         const VocabularyOptions& options, std::optional<std::string> config_json) {
  if (content.substr(0, 4) == "GGUF") return load_gguf(content, name, options);
  size_t first = content.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos)
    return Error{ErrorCode::InvalidInput, fmt::format("{}: the file is empty", name)};
  if (content[first] == '{') return load_hf_tokenizer_json(content, name, options, config_json);
  if (content[first] == '[') return load_token_list_json(content, name, options);
  return load_tiktoken(content, name, options);
}

VocabularyResult Vocabulary::load(const std::string& path, const VocabularyOptions& options) {
  // Only a regular file, read without blocking and never past the limit:
  // a directory, a FIFO or /dev/zero is refused, not waited on or read forever.
  auto read = read_regular_file(path, "vocabulary", options.max_file_bytes);
  if (!read) return read.error();
  const std::string& content = *read;
  // A Hugging Face tokenizer.json names its end-of-sequence token in the
  // tokenizer_config.json beside it ("llama3-tokenizer.json" →
  // "llama3-tokenizer_config.json", or "tokenizer_config.json"). Only a JSON
  // object can be one, so no other format looks for it.
  std::optional<std::string> config;
  size_t first = content.find_first_not_of(" \t\r\n");
  const bool hf_json = first != std::string::npos && content[first] == '{';
  if (hf_json) {
    std::string stem = path.size() > 5 && path.ends_with(".json") ? path.substr(0, path.size() - 5) : path;
    for (std::string candidate :
         {stem + "_config.json", path.substr(0, path.find_last_of('/') + 1) + "tokenizer_config.json"}) {
      std::error_code ec;
      if (candidate == path || !std::filesystem::exists(candidate, ec)) continue;
      auto text = read_regular_file(candidate, "tokenizer config", options.max_file_bytes);
      if (!text) return text.error();
      config = std::move(*text);
      break;
    }
  }
  if (!hf_json || options.eos_ids) return from_memory(content, path, options, config);
  // The generation_config.json beside it may name several end-of-sequence ids (a
  // number or a list): they are all honoured.
  VocabularyOptions with_generation = options;
  const std::string generation = path.substr(0, path.find_last_of('/') + 1) + "generation_config.json";
  std::error_code ec;
  if (std::filesystem::exists(generation, ec)) {
    auto text = read_regular_file(generation, "generation config", options.max_file_bytes);
    if (!text) return text.error();
    auto ids = eos_ids_from_generation_config(*text);
    if (!ids) return ids.error().in(generation);
    const auto& found = *ids;
    with_generation.extra_eos_ids.insert(with_generation.extra_eos_ids.end(), found.begin(), found.end());
  }
  return from_memory(content, path, with_generation, config);
}

}  // namespace cgram

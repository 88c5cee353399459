// tiktoken files: one "base64(bytes) rank" per line; rank = id = merge priority.
// The special tokens are not in the file; the known encodings' ones are added.
#include <fmt/format.h>

#include "vocab_loaders.h"

namespace cgram {
namespace {

std::optional<std::string> base64_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad || (v[k] = value(c)) < 0) {
        return std::nullopt;
      }
    }
    uint32_t triple = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>(triple >> 16);
    if (pad < 2) out += static_cast<char>((triple >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(triple & 0xFF);
  }
  return out;
}

struct KnownEncoding {
  size_t ranks;
  const char* pattern;
  std::vector<std::pair<const char*, uint32_t>> specials;
};

const KnownEncoding* known_encoding(size_t ranks) {
  static const KnownEncoding cl100k{
      100256,
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      {{"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258}, {"<|fim_middle|>", 100259},
       {"<|fim_suffix|>", 100260}, {"<|endofprompt|>", 100276}}};
  static const KnownEncoding o200k{
      199998,
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}};
  if (ranks == cl100k.ranks) return &cl100k;
  if (ranks == o200k.ranks) return &o200k;
  return nullptr;
}

}  // namespace

VocabularyResult load_tiktoken(std::string_view content, std::string_view name, const VocabularyOptions& options) {
  Vocabulary::Builder builder;
  builder.name = std::string(name);
  builder.kind = TokenizerKind::Tiktoken;
  size_t line_number = 0, ranks = 0;
  for (size_t pos = 0; pos < content.size();) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    size_t space = line.find(' ');
    // Checked before decoding: a line of a gigabyte must not become a
    // gigabyte-long token first (4 base64 characters hold 3 bytes).
    if (space != std::string_view::npos && space / 4 * 3 > options.max_token_bytes && space / 4 * 3 - options.max_token_bytes > 2)
      return Error{ErrorCode::Limit,
                   fmt::format("{}:{}: the token is about {} bytes long; the limit is {} bytes per token", name,
                               line_number, space / 4 * 3, options.max_token_bytes)};
    auto bytes = space == std::string_view::npos ? std::nullopt : base64_decode(line.substr(0, space));
    uint64_t rank = 0;
    bool rank_ok = space != std::string_view::npos && space + 1 < line.size();
    for (size_t i = space + 1; rank_ok && i < line.size(); ++i) {
      rank_ok = isdigit(static_cast<unsigned char>(line[i])) && rank < (uint64_t(1) << 40);
      rank = rank * 10 + (line[i] - '0');
    }
    if (!bytes || !rank_ok)
      return Error{ErrorCode::InvalidInput,
                   fmt::format("{}:{}: not a tiktoken line (expected \"base64 rank\"), and not any other "
                               "vocabulary format cgram knows",
                               name, line_number)};
    if (auto error = builder.set(rank, std::move(*bytes), false, options)) return *error;
    ++ranks;
  }
  if (ranks == 0) return Error{ErrorCode::InvalidInput, fmt::format("{}: no tokens", name)};
  if (ranks != builder.id_count())
    return Error{ErrorCode::InvalidInput, fmt::format("{}: inconsistent ids: {} ranks but the highest is {}", name,
                                                      ranks, builder.id_count() - 1)};
  for (const auto& entry : builder.entries) builder.encoder.add_merge(entry.bytes, entry.id);
  if (const KnownEncoding* known = known_encoding(ranks)) {
    builder.encoder.pretokenizer = known->pattern;
    for (auto [text, id] : known->specials) {
      if (auto error = builder.set(id, text, true, options)) return *error;
      if (std::string_view(text) == "<|endoftext|>") builder.eos_ids.push_back(id);
    }
  } else {
    // The special tokens are not in the file: only the known encodings' are
    // added. A file cut short (at a line) lands here too.
    builder.encoder.pretokenizer = known_encoding(100256)->pattern;
    builder.warnings.push_back(fmt::format(
        "{}: {} ranks is not a tiktoken encoding cgram knows (cl100k_base has 100256, o200k_base 199998): no "
        "special tokens were added and the cl100k_base pre-tokenizer is used",
        name, ranks));
  }
  return builder.build(options);
}

}  // namespace cgram

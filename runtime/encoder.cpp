#include "encoder.h"

#include <fmt/format.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <optional>

#include "utf8.h"
#include "vocab_loaders.h"

namespace cgram {
namespace {

constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Code point ranges as an ICU class body: [\x{41}-\x{5A}...]. Written as
// numbers because the characters themselves are not NFC-stable (U+1FD3 and
// U+212A would silently become other characters in an editor).
std::string ranges_class(std::initializer_list<std::pair<uint32_t, uint32_t>> ranges) {
  std::string out = "[";
  for (auto [lo, hi] : ranges) out += fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", lo, hi);
  return out + "]";
}

// DeepSeek LLM's letter class (87 ranges of its tokenizer.json).
std::string deepseek_letters() {
  return ranges_class({{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
                       {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
                       {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
                       {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
                       {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
                       {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
                       {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
                       {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
                       {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
                       {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
                       {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
                       {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
                       {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
                       {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
                       {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
                       {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
                       {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943}});
}

// The pre-tokenizer: a regex from tokenizer.json or tiktoken, or "gguf:NAME"
// for llama.cpp's pre-tokenizers (tokenizer.ggml.pre), which may be a
// sequence of regexes applied one after another.
std::optional<std::vector<std::string>> patterns_for(const std::string& spec) {
  if (!spec.starts_with("gguf:")) return std::vector<std::string>{spec};
  std::string name = spec.substr(5);
  if (name.empty() || name == "gpt2" || name == "gpt-2" || name == "default") return std::vector<std::string>{kGpt2Pattern};
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return std::vector<std::string>{kLlama3Pattern};
  if (name == "deepseek-llm")
    return std::vector<std::string>{
        "[\\r\\n]",
        "\\s?" + deepseek_letters() + "+",
        "\\s?" + ranges_class({{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F},
                                {0x3000, 0x3002}}) + "+",
        "\\s+$",
        ranges_class({{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}}) + "+",
        "\\p{N}+"};
  return std::nullopt;
}

}  // namespace

struct Encoder::State {
  std::shared_ptr<const Vocabulary> vocab;
  std::vector<std::unique_ptr<icu::RegexPattern>> patterns;

  // Valid UTF-8 runs are encoded as the tokenizer would; each byte that is
  // not part of a whole character (a prefix cut inside one, or invalid
  // text) becomes its own byte token, so the tokens' bytes are exactly the
  // text's.
  void encode_span(std::string_view text, std::vector<uint32_t>& out, bool first) const {
    size_t run = 0;
    for (size_t pos = 0; pos < text.size();) {
      const size_t at = pos;
      if (decode_utf8(text, pos)) continue;
      encode_valid(text.substr(run, at - run), out, first && run == 0);
      pos = at + 1;
      byte_token(static_cast<uint8_t>(text[at]), out);
      run = pos;
    }
    encode_valid(text.substr(run), out, first && run == 0);
  }

  void byte_token(uint8_t byte, std::vector<uint32_t>& out) const {
    const char c = static_cast<char>(byte);
    if (vocab->kind() == TokenizerKind::SentencePiece) return byte_fallback(std::string_view(&c, 1), out);
    if (auto id = vocab->find(std::string_view(&c, 1))) out.push_back(*id);
  }

  void encode_valid(std::string_view text, std::vector<uint32_t>& out, bool first) const {
    if (text.empty()) return;
    if (vocab->kind() == TokenizerKind::SentencePiece) return encode_sentencepiece(text, out, first);
    for (const std::string& piece : pretokenize(text)) {
      if (vocab->kind() == TokenizerKind::Tiktoken) encode_tiktoken(piece, out);
      else encode_byte_level(piece, out);
    }
  }

  // Splits into pieces: each regex in turn splits every piece into its
  // matches and the gaps between them.
  std::vector<std::string> pretokenize(std::string_view text) const {
    std::vector<icu::UnicodeString> pieces{icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), text.size()))};
    for (const auto& pattern : patterns) {
      std::vector<icu::UnicodeString> next;
      for (const icu::UnicodeString& piece : pieces) {
        UErrorCode status = U_ZERO_ERROR;
        std::unique_ptr<icu::RegexMatcher> m(pattern->matcher(piece, status));
        int32_t last = 0;
        while (U_SUCCESS(status) && m->find(status)) {
          int32_t start = m->start(status), end = m->end(status);
          if (end == start) continue;
          if (start > last) next.push_back(icu::UnicodeString(piece, last, start - last));
          next.push_back(icu::UnicodeString(piece, start, end - start));
          last = end;
        }
        if (last < piece.length()) next.push_back(icu::UnicodeString(piece, last));
      }
      pieces = std::move(next);
    }
    std::vector<std::string> out;
    for (const auto& p : pieces) {
      std::string utf8;
      p.toUTF8String(utf8);
      out.push_back(std::move(utf8));
    }
    return out;
  }

  // Generic BPE: repeatedly merge the adjacent pair with the lowest key
  // (a merge rank, or minus a score); ties go to the leftmost pair.
  static constexpr double kNoMerge = 1e300;
  template <typename KeyOf>
  static void merge_lowest(std::vector<std::string>& symbols, KeyOf key_of) {
    while (symbols.size() > 1) {
      double best = kNoMerge;
      size_t at = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        double k = key_of(symbols[i], symbols[i + 1]);
        if (k < best) best = k, at = i;
      }
      if (best == kNoMerge) break;
      symbols[at] += symbols[at + 1];
      symbols.erase(symbols.begin() + at + 1);
    }
  }

  void byte_fallback(std::string_view bytes, std::vector<uint32_t>& out) const {
    const auto& ids = vocab->encoder_data().text_ids;
    for (char c : bytes) {
      auto it = ids.find(fmt::format("<0x{:02X}>", static_cast<unsigned char>(c)));
      if (it != ids.end()) out.push_back(it->second);
      else if (auto id = vocab->find(std::string_view(&c, 1))) out.push_back(*id);
    }
  }

  void encode_byte_level(std::string_view piece, std::vector<uint32_t>& out) const {
    const auto& data = vocab->encoder_data();
    std::string text;
    for (char c : piece) append_utf8(text, byte_to_unicode(static_cast<uint8_t>(c)));
    if (data.ignore_merges)
      if (auto it = data.text_ids.find(text); it != data.text_ids.end()) return out.push_back(it->second);
    std::vector<std::string> symbols;
    for (size_t pos = 0; pos < text.size();) {
      size_t at = pos;
      decode_utf8(text, pos);
      symbols.emplace_back(text.substr(at, pos - at));
    }
    merge_lowest(symbols, [&](const std::string& a, const std::string& b) {
      auto it = data.merge_rank.find(a + " " + b);
      return it == data.merge_rank.end() ? kNoMerge : double(it->second);
    });
    for (const std::string& s : symbols) {
      auto it = data.text_ids.find(s);
      if (it != data.text_ids.end()) out.push_back(it->second);
      else byte_fallback(*byte_level_decode(s), out);
    }
  }

  void encode_tiktoken(std::string_view piece, std::vector<uint32_t>& out) const {
    const auto& ranks = vocab->encoder_data().merge_rank;
    if (auto it = ranks.find(std::string(piece)); it != ranks.end()) return out.push_back(it->second);
    std::vector<std::string> symbols;
    for (char c : piece) symbols.emplace_back(1, c);
    merge_lowest(symbols, [&](const std::string& a, const std::string& b) {
      auto it = ranks.find(a + b);
      return it == ranks.end() ? kNoMerge : double(it->second);
    });
    for (const std::string& s : symbols) out.push_back(ranks.at(s));
  }

  // SentencePiece: '▁' for spaces; merges by score (GGUF) or by merge rank
  // (tokenizer.json); characters outside the vocabulary fall back to bytes.
  void encode_sentencepiece(std::string_view text, std::vector<uint32_t>& out, bool prefix_space) const {
    const auto& data = vocab->encoder_data();
    std::string normalized = data.add_prefix_space && prefix_space ? "\xE2\x96\x81" : "";
    for (char c : text) {
      if (c == ' ') normalized += "\xE2\x96\x81";
      else normalized += c;
    }
    std::vector<std::string> symbols;
    for (size_t pos = 0; pos < normalized.size();) {
      size_t at = pos;
      if (!decode_utf8(normalized, pos)) pos = at + 1;
      symbols.emplace_back(normalized.substr(at, pos - at));
    }
    if (!data.scores.empty()) {
      // Highest score first; ties go to the leftmost pair (llama.cpp's order).
      merge_lowest(symbols, [&](const std::string& a, const std::string& b) {
        auto it = data.text_ids.find(a + b);
        return it == data.text_ids.end() ? kNoMerge : -static_cast<double>(data.scores[it->second]);
      });
    } else {
      merge_lowest(symbols, [&](const std::string& a, const std::string& b) {
        auto it = data.merge_rank.find(a + " " + b);
        return it == data.merge_rank.end() ? kNoMerge : double(it->second);
      });
    }
    for (const std::string& s : symbols) {
      auto it = data.text_ids.find(s);
      if (it != data.text_ids.end() && !vocab->is_special(it->second)) out.push_back(it->second);
      else byte_fallback(s == "\xE2\x96\x81" ? std::string_view(" ") : std::string_view(s), out);
    }
  }
};

Encoder::Encoder(std::unique_ptr<State> state) : state_(std::move(state)) {}
Encoder::~Encoder() = default;

std::variant<std::unique_ptr<Encoder>, VocabularyError> Encoder::create(std::shared_ptr<const Vocabulary> vocab) {
  auto state = std::make_unique<State>();
  state->vocab = vocab;
  if (vocab->kind() == TokenizerKind::List)
    return VocabularyError{fmt::format("{}: a plain token list has no encoder", vocab->name())};
  if (vocab->kind() != TokenizerKind::SentencePiece) {
    auto patterns = patterns_for(vocab->encoder_data().pretokenizer);
    if (!patterns)
      return VocabularyError{fmt::format("{}: pre-tokenizer '{}' is not supported", vocab->name(),
                                         vocab->encoder_data().pretokenizer)};
    for (const std::string& source : *patterns) {
      UErrorCode status = U_ZERO_ERROR;
      UParseError parse_error;
      std::unique_ptr<icu::RegexPattern> pattern(icu::RegexPattern::compile(
          icu::UnicodeString::fromUTF8(source), 0, parse_error, status));
      if (U_FAILURE(status))
        return VocabularyError{fmt::format("{}: the pre-tokenizer regex does not compile ({})", vocab->name(),
                                           u_errorName(status))};
      state->patterns.push_back(std::move(pattern));
    }
  }
  return std::make_unique<Encoder>(std::move(state));
}

std::vector<uint32_t> Encoder::encode(std::string_view text) const { return encode_impl(text, true); }

std::vector<uint32_t> Encoder::encode_continuation(std::string_view text) const { return encode_impl(text, false); }

std::vector<uint32_t> Encoder::encode_impl(std::string_view text, bool dummy_prefix) const {
  std::vector<uint32_t> out;
  const State& s = *state_;
  // User-defined tokens are cut out first (longest first); BPE runs between them.
  const auto& added = s.vocab->encoder_data().added_tokens;
  size_t gap = 0;
  bool first = dummy_prefix;
  for (size_t pos = 0; pos < text.size();) {
    const std::pair<std::string, uint32_t>* best = nullptr;
    for (const auto& token : added)
      if (!token.first.empty() && text.substr(pos).starts_with(token.first) &&
          (!best || token.first.size() > best->first.size()))
        best = &token;
    if (!best) {
      ++pos;
      continue;
    }
    s.encode_span(text.substr(gap, pos - gap), out, first && gap == 0);
    out.push_back(best->second);
    pos += best->first.size();
    gap = pos;
    first = false;
  }
  s.encode_span(text.substr(gap), out, first);
  return out;
}

}  // namespace cgram

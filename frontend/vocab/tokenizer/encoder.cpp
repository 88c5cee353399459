#include "encoder.h"

#include "piece_automaton.h"

#include <fmt/format.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>

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

// Byte-pair merging over a linked list of symbols, with the candidate pairs
// in a priority queue: O(n log n) for a piece of n units, where rescanning
// every pair after each merge was O(n²) (a SentencePiece piece is the whole
// text: 90 KB took over a minute).
//
// The units are the text's initial symbols; unit k is work[w[k], w[k+1]).
// `key_of(a, b)` gives the key of merging adjacent symbols a and b (a merge
// rank, or minus a score), kNoMerge when they do not merge. The pair with
// the lowest key merges first, ties going to the leftmost pair: exactly the
// order of the quadratic algorithm, so the tokens are the same.
constexpr double kNoMerge = 1e300;

struct Symbol {
  uint32_t begin, end;  // units [begin, end); end == 0 once merged into its left neighbour
  int32_t prev, next;   // neighbours, -1 at the ends
};

struct NoMergeObserver {
  void operator()(uint32_t, uint32_t, double) const {}
};

// `on_merge(left, right, key)` sees each merge as it is made (symbol
// indices, before the right one is folded into the left).
template <typename KeyOf, typename OnMerge = NoMergeObserver>
std::vector<Symbol> merge_symbols(std::string_view work, const std::vector<uint32_t>& w, KeyOf&& key_of,
                                  OnMerge&& on_merge = {}) {
  const uint32_t n = static_cast<uint32_t>(w.size() - 1);
  std::vector<Symbol> symbols(n);
  for (uint32_t i = 0; i < n; ++i)
    symbols[i] = {i, i + 1, static_cast<int32_t>(i) - 1, i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  auto text = [&](const Symbol& s) { return work.substr(w[s.begin], w[s.end] - w[s.begin]); };
  struct Candidate {
    double key;
    uint32_t left, right;          // symbol indices (a symbol's index is its first unit)
    uint32_t left_end, right_end;  // their extents when queued: a changed one makes the candidate stale
  };
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.key > b.key || (a.key == b.key && a.left > b.left);
  };
  std::vector<Candidate> heap;
  heap.reserve(n);
  auto push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    double key = key_of(text(l), text(r));
    if (key >= kNoMerge) return;
    heap.push_back({key, static_cast<uint32_t>(left), static_cast<uint32_t>(right), l.end, r.end});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (uint32_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = symbols[c.left];
    Symbol& r = symbols[c.right];
    // Stale: one side grew or was merged away since the pair was queued.
    if (l.end != c.left_end || r.end != c.right_end || l.next != static_cast<int32_t>(c.right)) continue;
    on_merge(c.left, c.right, c.key);
    l.end = r.end;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = static_cast<int32_t>(c.left);
    r.end = 0;
    push(l.prev, static_cast<int32_t>(c.left));
    push(static_cast<int32_t>(c.left), l.next);
  }
  std::vector<Symbol> out;
  for (int32_t i = n ? 0 : -1; i >= 0; i = symbols[i].next) out.push_back(symbols[i]);
  return out;
}

// A piece prepared for merging: `work` is the text as the vocabulary stores
// it (through the byte-level table, '▁' for spaces), `original` the bytes it
// stands for; unit k is work[w[k], w[k+1]) and original[o[k], o[k+1]).
struct Units {
  std::string work, original;
  std::vector<uint32_t> w{0}, o{0};
  void add(std::string_view work_unit, std::string_view original_unit) {
    work += work_unit;
    original += original_unit;
    w.push_back(static_cast<uint32_t>(work.size()));
    o.push_back(static_cast<uint32_t>(original.size()));
  }
};

const char* regex_failure(UErrorCode status) {
  switch (status) {
    case U_REGEX_TIME_OUT: return "it ran past its time limit (a pattern that backtracks without end?)";
    case U_REGEX_STACK_OVERFLOW: return "it ran out of backtracking stack";
    default: return u_errorName(status);
  }
}

int32_t saturate(int64_t v) { return static_cast<int32_t>(std::min<int64_t>(v, INT32_MAX)); }

// Whether a regex may look at text outside the match it is making: anchors
// (^ $ \A \z \Z \G), word boundaries (\b \B) or look-behind. Conservative:
// a named group "(?<name>" counts too. A '^' right after '[' negates a class.
bool looks_outside_match(std::string_view pattern) {
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 < pattern.size() && std::string_view("bBAzZG").find(pattern[i + 1]) != std::string_view::npos) return true;
      ++i;
    } else if (c == '$' || (c == '^' && (i == 0 || pattern[i - 1] != '['))) {
      return true;
    } else if (c == '(' && pattern.substr(i, 3) == "(?<") {
      return true;
    }
  }
  return false;
}

// The number of UTF-8 bytes in the first `units16` UTF-16 units of `text`
// (valid UTF-8).
size_t utf8_length_of_utf16_prefix(std::string_view text, int32_t units16) {
  size_t pos = 0;
  for (int32_t seen = 0; seen < units16 && pos < text.size();) {
    const size_t at = pos;
    auto cp = decode_utf8(text, pos);
    if (!cp) pos = at + 1;
    seen += cp && *cp > 0xFFFF ? 2 : 1;
  }
  return pos;
}

}  // namespace

struct Encoder::State {
  std::shared_ptr<const Vocabulary> vocab;
  EncoderOptions options;
  std::vector<std::unique_ptr<icu::RegexPattern>> patterns;
  Encoder::PieceRule piece_rule = Encoder::PieceRule::WholeText;
  // The one regex as an automaton (OneRegex only; null where it cannot model it).
  std::shared_ptr<const PieceAutomaton> piece_automaton;
  // The token that spells each single byte, when there is one.
  std::array<std::optional<uint32_t>, 256> byte_ids;
  // User-defined tokens by their first byte, longest first.
  std::array<std::vector<uint32_t>, 256> added_by_byte;

  // One encoding call: the tokens so far, and the first error.
  struct Run {
    std::vector<uint32_t> out;
    std::optional<Error> error;
    bool dummy_prefix = false;  // a SentencePiece dummy-prefix space was added
    std::string key;            // scratch for merge lookups
    bool fail(std::string message, ErrorCode code = ErrorCode::InvalidInput) {
      if (!error) error = Error{code, std::move(message)};
      return false;
    }
  };

  // The id of a token stored as `text`, when it spells exactly `original`
  // and is text (never a special or control token).
  std::optional<uint32_t> text_token(std::string_view text, std::string_view original) const {
    const auto& ids = vocab->encoder_data().text_ids;
    auto it = ids.find(std::string(text));
    if (it == ids.end() || vocab->is_special(it->second) || vocab->bytes(it->second) != original) return std::nullopt;
    return it->second;
  }

  // `offset` is the byte's offset in the caller's text; SIZE_MAX for the
  // dummy-prefix space, which is not in it.
  bool byte_token(uint8_t byte, size_t offset, Run& run) const {
    if (byte_ids[byte]) {
      run.out.push_back(*byte_ids[byte]);
      return true;
    }
    if (offset == SIZE_MAX)
      return run.fail(fmt::format("{}: the vocabulary cannot spell byte 0x{:02X}, the space SentencePiece adds "
                                  "before the text",
                                  vocab->name(), byte));
    return run.fail(
        fmt::format("{}: the vocabulary cannot spell byte 0x{:02X} at offset {}", vocab->name(), byte, offset));
  }

  bool byte_tokens(std::string_view bytes, size_t offset, Run& run) const {
    for (size_t i = 0; i < bytes.size(); ++i)
      if (!byte_token(static_cast<uint8_t>(bytes[i]), offset == SIZE_MAX ? SIZE_MAX : offset + i, run)) return false;
    return true;
  }

  // Valid UTF-8 runs are encoded as the tokenizer would; each byte that is
  // not part of a whole character (a prefix cut inside one, or invalid
  // text) becomes its own byte token, so the tokens' bytes are exactly the
  // text's. Only valid UTF-8 reaches the regexes: ICU would turn the rest
  // into U+FFFD, and the tokens would spell other bytes.
  bool encode_span(std::string_view text, size_t base, bool first, Run& run) const {
    size_t start = 0;
    for (size_t pos = 0; pos < text.size();) {
      const size_t at = pos;
      if (decode_utf8(text, pos)) continue;
      if (!encode_valid(text.substr(start, at - start), base + start, first && start == 0, run)) return false;
      pos = at + 1;
      if (!byte_token(static_cast<uint8_t>(text[at]), base + at, run)) return false;
      start = pos;
    }
    return encode_valid(text.substr(start), base + start, first && start == 0, run);
  }

  bool encode_valid(std::string_view text, size_t base, bool first, Run& run) const {
    if (text.empty()) return true;
    if (vocab->kind() == TokenizerKind::SentencePiece) return encode_sentencepiece(text, base, first, run);
    std::vector<std::pair<std::string, size_t>> pieces;
    if (!pretokenize(text, base, pieces, run)) return false;
    for (const auto& [piece, offset] : pieces) {
      if (!encode_piece(piece, offset, run)) return false;
    }
    return true;
  }

  // The one regex's pieces as the piece automaton cuts them, one first
  // piece after another (the pattern has no anchors or look-behind, so a
  // match found from where the last ended is the first piece of the rest);
  // false, with `out` as it was, where ICU must cut.
  bool pretokenize_by_automaton(std::string_view text, size_t base,
                                std::vector<std::pair<std::string, size_t>>& out) const {
    if (!piece_automaton) return false;
    const size_t kept = out.size();
    for (size_t pos = 0; pos < text.size();) {
      const auto piece = piece_automaton->first(text.substr(pos));
      if (!piece) {
        out.resize(kept);
        return false;
      }
      out.emplace_back(std::string(text.substr(pos, piece->length)), base + pos);
      pos += piece->length;
    }
    return true;
  }

  // Splits into pieces, each with its offset: each regex in turn splits
  // every piece into its matches and the gaps between them, so the pieces
  // always cover the text, in order.
  bool pretokenize(std::string_view text, size_t base, std::vector<std::pair<std::string, size_t>>& out,
                   Run& run) const {
    if (pretokenize_by_automaton(text, base, out)) return true;
    std::vector<icu::UnicodeString> pieces{icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), text.size()))};
    for (const auto& pattern : patterns) {
      std::vector<icu::UnicodeString> next;
      for (size_t k = 0; k < pieces.size(); ++k) {
        const icu::UnicodeString& piece = pieces[k];
        UErrorCode status = U_ZERO_ERROR;
        std::unique_ptr<icu::RegexMatcher> m(pattern->matcher(piece, status));
        // ICU counts time over all the matches of one matcher, so the limit
        // grows with the piece; the stack too (a long run of spaces).
        const int64_t length = piece.length();
        if (U_SUCCESS(status))
          m->setTimeLimit(saturate(options.regex_time_limit + length / std::max(options.regex_chars_per_time_unit, 1)),
                          status);
        if (U_SUCCESS(status))
          m->setStackLimit(saturate(std::max<int64_t>(8 << 20, length * options.regex_stack_bytes_per_char)), status);
        int32_t last = 0;
        while (U_SUCCESS(status) && m->find(status)) {
          int32_t start = m->start(status), end = m->end(status);
          if (end == start) continue;
          if (start > last) next.push_back(icu::UnicodeString(piece, last, start - last));
          next.push_back(icu::UnicodeString(piece, start, end - start));
          last = end;
        }
        if (U_FAILURE(status)) {
          size_t offset = base;
          for (size_t j = 0; j < k; ++j) {
            std::string utf8;
            offset += pieces[j].toUTF8String(utf8).size();
          }
          const bool bounded = status == U_REGEX_TIME_OUT || status == U_REGEX_STACK_OVERFLOW;
          return run.fail(fmt::format("{}: the pre-tokenizer regex failed on the text at offset {}: {}",
                                      vocab->name(), offset, regex_failure(status)),
                          bounded ? ErrorCode::Limit : ErrorCode::Internal);
        }
        if (last < piece.length()) next.push_back(icu::UnicodeString(piece, last));
      }
      pieces = std::move(next);
    }
    size_t offset = base;
    for (const auto& p : pieces) {
      std::string utf8;
      p.toUTF8String(utf8);
      const size_t size = utf8.size();
      out.emplace_back(std::move(utf8), offset);
      offset += size;
    }
    return true;
  }

  // The merged symbols as tokens: a symbol that is a token spelling its
  // original bytes is that token; any other falls back to byte tokens.
  template <typename TokenOf>
  bool emit(const Units& units, const std::vector<Symbol>& symbols, size_t base, bool dummy, Run& run,
            TokenOf&& token_of) const {
    for (const Symbol& s : symbols) {
      std::string_view work = std::string_view(units.work).substr(units.w[s.begin], units.w[s.end] - units.w[s.begin]);
      std::string_view original =
          std::string_view(units.original).substr(units.o[s.begin], units.o[s.end] - units.o[s.begin]);
      if (auto id = token_of(work, original)) {
        run.out.push_back(*id);
        continue;
      }
      // With a dummy prefix, original byte 0 is the added space, not the text's.
      if (dummy && units.o[s.begin] == 0) {
        if (!byte_token(static_cast<uint8_t>(original[0]), SIZE_MAX, run)) return false;
        if (!byte_tokens(original.substr(1), base, run)) return false;
      } else if (!byte_tokens(original, base + units.o[s.begin] - (dummy ? 1 : 0), run)) {
        return false;
      }
    }
    return true;
  }

  // --- The merges of each kind, shared by encoding and derive() ---------

  static constexpr std::string_view kSpace = "\xE2\x96\x81";  // ▁, SentencePiece's space

  // A piece's units as the merges see them: bytes through the byte-level
  // table, raw bytes (tiktoken), or characters with '▁' for spaces
  // (SentencePiece, without the dummy prefix).
  Units units_of(std::string_view piece) const {
    Units units;
    add_units(piece, units);
    return units;
  }

  void add_units(std::string_view piece, Units& units) const {
    switch (vocab->kind()) {
      case TokenizerKind::Tiktoken:
        for (const char& c : piece) units.add(std::string_view(&c, 1), std::string_view(&c, 1));
        break;
      case TokenizerKind::SentencePiece:
        for (size_t pos = 0; pos < piece.size();) {
          size_t at = pos;
          if (!decode_utf8(piece, pos)) pos = at + 1;  // not reached: the text is valid UTF-8
          std::string_view c = piece.substr(at, pos - at);
          units.add(c == " " ? kSpace : c, c);
        }
        break;
      default: {
        std::string mapped;
        for (const char& c : piece) {
          mapped.clear();
          append_utf8(mapped, byte_to_unicode(static_cast<uint8_t>(c)));
          units.add(mapped, std::string_view(&c, 1));
        }
      }
    }
  }

  // The key of merging adjacent symbols `a` and `b`: a merge rank, a
  // tiktoken rank, or minus a SentencePiece score (GGUF: highest score
  // first, ties to the leftmost pair, llama.cpp's order); kNoMerge when
  // they do not merge.
  double merge_key(std::string_view a, std::string_view b, std::string& scratch) const {
    const auto& data = vocab->encoder_data();
    if (vocab->kind() == TokenizerKind::Tiktoken ||
        (vocab->kind() == TokenizerKind::SentencePiece && !data.scores.empty())) {
      scratch.assign(a).append(b);
      if (vocab->kind() == TokenizerKind::Tiktoken) {
        auto it = data.merge_rank.find(scratch);
        return it == data.merge_rank.end() ? kNoMerge : double(it->second);
      }
      auto it = data.text_ids.find(scratch);
      return it == data.text_ids.end() || it->second >= data.scores.size() ? kNoMerge
                                                                           : -static_cast<double>(data.scores[it->second]);
    }
    scratch.assign(a).append(" ").append(b);
    auto it = data.merge_rank.find(scratch);
    return it == data.merge_rank.end() ? kNoMerge : double(it->second);
  }

  // The token a merged symbol is, if any (else it falls back to bytes).
  std::optional<uint32_t> symbol_token(std::string_view work, std::string_view original, std::string& scratch) const {
    if (vocab->kind() != TokenizerKind::Tiktoken) return text_token(work, original);
    const auto& ranks = vocab->encoder_data().merge_rank;
    scratch.assign(work);
    auto it = ranks.find(scratch);
    if (it == ranks.end() || vocab->is_special(it->second) || vocab->bytes(it->second) != work) return std::nullopt;
    return it->second;
  }

  // The token a whole piece is written as without merging: tiktoken, and
  // byte-level BPE with ignore_merges, take a piece that is a token as is.
  std::optional<uint32_t> whole_piece_token(const Units& units, std::string& scratch) const {
    if (!takes_whole_pieces()) return std::nullopt;
    return symbol_token(units.work, units.original, scratch);
  }

  bool takes_whole_pieces() const {
    return vocab->kind() == TokenizerKind::Tiktoken ||
           (vocab->kind() == TokenizerKind::ByteLevelBpe && vocab->encoder_data().ignore_merges);
  }

  std::vector<Symbol> merge(const Units& units, std::string& scratch) const {
    return merge_symbols(units.work, units.w,
                         [&](std::string_view a, std::string_view b) { return merge_key(a, b, scratch); });
  }

  // One piece of byte-level BPE or tiktoken.
  bool encode_piece(std::string_view piece, size_t base, Run& run) const {
    const Units units = units_of(piece);
    if (auto id = whole_piece_token(units, run.key)) return run.out.push_back(*id), true;
    return emit(units, merge(units, run.key), base, false, run, [&](std::string_view work, std::string_view original) {
      return symbol_token(work, original, run.key);
    });
  }

  // SentencePiece: the whole text is one piece; characters outside the
  // vocabulary fall back to bytes. A '▁' in the text itself is not a space:
  // a symbol holding one is not its token (the bytes differ) and falls back
  // to bytes.
  bool encode_sentencepiece(std::string_view text, size_t base, bool first, Run& run) const {
    const bool dummy = vocab->encoder_data().add_prefix_space && first;
    Units units;
    if (dummy) {
      run.dummy_prefix = true;
      units.add(kSpace, " ");
    }
    add_units(text, units);
    return emit(units, merge(units, run.key), base, dummy, run, [&](std::string_view work, std::string_view original) {
      return symbol_token(work, original, run.key);
    });
  }

  // The check every result passes: the tokens are text tokens and spell
  // exactly the text (after the dummy-prefix space).
  std::optional<std::string> check(const std::vector<uint32_t>& tokens, std::string_view text, bool dummy) const {
    std::string expected = dummy ? " " : "";
    expected += text;
    size_t at = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string_view bytes = vocab->bytes(tokens[i]);
      if (vocab->is_special(tokens[i]))
        return fmt::format("token {} (id {}) is not text", i, tokens[i]);
      if (std::string_view(expected).substr(at, bytes.size()) != bytes)
        return fmt::format("token {} (id {}, '{}') does not spell the text's bytes at offset {}", i, tokens[i],
                           vocab->display(tokens[i]), at);
      at += bytes.size();
    }
    if (at != expected.size()) return fmt::format("the tokens spell {} bytes of {}", at, expected.size());
    return std::nullopt;
  }
};

Encoder::Encoder(std::unique_ptr<State> state) : state_(std::move(state)) {}
Encoder::~Encoder() = default;

Result<std::unique_ptr<Encoder>> Encoder::create(std::shared_ptr<const Vocabulary> vocab,
                                                 const EncoderOptions& options) {
  auto state = std::make_unique<State>();
  state->vocab = vocab;
  state->options = options;
  if (vocab->kind() == TokenizerKind::List)
    return Error{ErrorCode::Unsupported, fmt::format("{}: a plain token list has no encoder", vocab->name())};
  if (vocab->kind() != TokenizerKind::SentencePiece) {
    auto patterns = patterns_for(vocab->encoder_data().pretokenizer);
    if (!patterns)
      return Error{ErrorCode::Unsupported, fmt::format("{}: pre-tokenizer '{}' is not supported", vocab->name(),
                                                       vocab->encoder_data().pretokenizer)};
    for (const std::string& source : *patterns) {
      UErrorCode status = U_ZERO_ERROR;
      UParseError parse_error;
      std::unique_ptr<icu::RegexPattern> pattern(icu::RegexPattern::compile(
          icu::UnicodeString::fromUTF8(source), 0, parse_error, status));
      if (U_FAILURE(status))
        return Error{ErrorCode::InvalidInput, fmt::format("{}: the pre-tokenizer regex does not compile ({})",
                                                          vocab->name(), u_errorName(status))};
      state->patterns.push_back(std::move(pattern));
    }
    state->piece_rule = patterns->size() == 1 && !looks_outside_match((*patterns)[0]) ? PieceRule::OneRegex
                                                                                      : PieceRule::Other;
    if (state->piece_rule == PieceRule::OneRegex)
      if (auto automaton = PieceAutomaton::compile((*patterns)[0])) state->piece_automaton = std::move(*automaton);
  }
  // Byte fallback: SentencePiece's <0xNN> tokens when they spell the byte,
  // else any text token of that one byte.
  const auto& ids = vocab->encoder_data().text_ids;
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    if (vocab->kind() == TokenizerKind::SentencePiece) {
      auto it = ids.find(fmt::format("<0x{:02X}>", b));
      if (it != ids.end() && !vocab->is_special(it->second) && vocab->bytes(it->second) == std::string_view(&c, 1)) {
        state->byte_ids[b] = it->second;
        continue;
      }
    }
    state->byte_ids[b] = vocab->find(std::string_view(&c, 1));
  }
  const auto& added = vocab->encoder_data().added_tokens;
  // Only those that are text and spell their own text (an added token made
  // an end-of-sequence id by the caller is no longer text).
  for (uint32_t i = 0; i < added.size(); ++i)
    if (!added[i].first.empty() && !vocab->is_special(added[i].second) && vocab->bytes(added[i].second) == added[i].first)
      state->added_by_byte[static_cast<uint8_t>(added[i].first[0])].push_back(i);
  for (auto& list : state->added_by_byte)
    std::stable_sort(list.begin(), list.end(),
                     [&](uint32_t a, uint32_t b) { return added[a].first.size() > added[b].first.size(); });
  return std::make_unique<Encoder>(std::move(state));
}

EncodeResult Encoder::try_encode(std::string_view text) const { return encode_impl(text, true); }

EncodeResult Encoder::try_encode_continuation(std::string_view text) const { return encode_impl(text, false); }

std::vector<uint32_t> Encoder::encode(std::string_view text) const {
  auto result = encode_impl(text, true);
  auto* tokens = result.if_value();
  return tokens ? std::move(*tokens) : std::vector<uint32_t>{};
}

std::vector<uint32_t> Encoder::encode_continuation(std::string_view text) const {
  auto result = encode_impl(text, false);
  auto* tokens = result.if_value();
  return tokens ? std::move(*tokens) : std::vector<uint32_t>{};
}

EncodeResult Encoder::encode_impl(std::string_view text, bool dummy_prefix) const {
  const State& s = *state_;
  State::Run run;
  // User-defined tokens are cut out first (longest first); BPE runs between them.
  const auto& added = s.vocab->encoder_data().added_tokens;
  size_t gap = 0;
  bool first = dummy_prefix;
  bool ok = true;
  for (size_t pos = 0; ok && pos < text.size();) {
    const std::pair<std::string, uint32_t>* best = nullptr;
    for (uint32_t i : s.added_by_byte[static_cast<uint8_t>(text[pos])])
      if (text.substr(pos).starts_with(added[i].first)) {
        best = &added[i];
        break;
      }
    if (!best) {
      ++pos;
      continue;
    }
    ok = s.encode_span(text.substr(gap, pos - gap), gap, first && gap == 0, run);
    run.out.push_back(best->second);
    pos += best->first.size();
    gap = pos;
    first = false;
  }
  if (ok) ok = s.encode_span(text.substr(gap), gap, first, run);
  if (!ok) return *run.error;
  if (auto wrong = s.check(run.out, text, run.dummy_prefix))
    return Error{ErrorCode::Internal, fmt::format("{}: internal error: the encoder's tokens do not spell the text: {}",
                                                  s.vocab->name(), *wrong)};
  return std::move(run.out);
}

std::vector<uint32_t> Encoder::merge_piece(std::string_view bytes) const {
  const State& s = *state_;
  State::Run run;
  const Units units = s.units_of(bytes);
  if (units.w.size() < 2) return {};
  if (!s.emit(units, s.merge(units, run.key), 0, false, run,
              [&](std::string_view work, std::string_view original) { return s.symbol_token(work, original, run.key); }))
    return {};
  return std::move(run.out);
}

Encoder::Derivation Encoder::derive(uint32_t token) const {
  const State& s = *state_;
  Derivation d;
  if (token >= s.vocab->size() || s.vocab->is_special(token)) return d;
  const std::string_view bytes = s.vocab->bytes(token);
  const Units units = s.units_of(bytes);
  std::string scratch;
  const size_t n = units.w.size() - 1;
  if (n == 0) return d;
  // Symbols by index (their first unit): the key that made each, and the
  // edges as they grow.
  constexpr double kUnit = -std::numeric_limits<double>::infinity();
  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<double> made(n, kUnit);
  std::vector<double> highest(n, kUnit);  // the largest key merged into each symbol
  std::vector<uint32_t> end(n);
  for (uint32_t i = 0; i < n; ++i) end[i] = i + 1;
  auto work = [&](uint32_t begin, uint32_t stop) {
    return std::string(std::string_view(units.work).substr(units.w[begin], units.w[stop] - units.w[begin]));
  };
  d.left.push_back({work(0, 1), kUnit, kNever, kNever});
  d.right.push_back({work(static_cast<uint32_t>(n - 1), static_cast<uint32_t>(n)), kUnit, kNever, kNever});
  uint32_t right_edge = static_cast<uint32_t>(n - 1);
  auto symbols = merge_symbols(units.work, units.w,
                               [&](std::string_view a, std::string_view b) { return s.merge_key(a, b, scratch); },
                               [&](uint32_t l, uint32_t r, double key) {
                                 if (key < made[l] || key < made[r]) d.monotone = false;
                                 if (l == 0) {
                                   d.left.back().consumed = key;
                                   d.left.back().gone_by = std::max(key, highest[r]);
                                 }
                                 if (r == right_edge) {
                                   d.right.back().consumed = key;
                                   d.right.back().gone_by = std::max(key, highest[l]);
                                 }
                                 made[l] = key;
                                 highest[l] = std::max({highest[l], highest[r], key});
                                 end[l] = end[r];
                                 if (l == 0) d.left.push_back({work(0, end[l]), key, kNever, kNever});
                                 if (r == right_edge) {
                                   d.right.push_back({work(l, end[l]), key, kNever, kNever});
                                   right_edge = l;
                                 }
                               });
  // What the merged symbols are written as: tokens, or byte fallbacks (a
  // one-byte token no symbol is, like SentencePiece's <0x0A>).
  State::Run run;
  d.merges_give_token = s.emit(units, symbols, 0, false, run,
                               [&](std::string_view w, std::string_view o) { return s.symbol_token(w, o, scratch); }) &&
                        run.out.size() == 1 && run.out[0] == token;
  const auto whole = s.whole_piece_token(units, scratch);
  d.piece_gives_token = whole ? *whole == token : d.merges_give_token;
  if (!d.merges_give_token) d.left.clear(), d.right.clear();
  return d;
}

void Encoder::for_each_merge(
    const std::function<void(std::string_view left, std::string_view right, double key)>& f) const {
  const State& s = *state_;
  const auto& data = s.vocab->encoder_data();
  if (s.vocab->kind() == TokenizerKind::Tiktoken) {
    for (const auto& [bytes, rank] : data.merge_rank)
      for (size_t k = 1; k < bytes.size(); ++k)
        f(std::string_view(bytes).substr(0, k), std::string_view(bytes).substr(k), double(rank));
  } else if (s.vocab->kind() == TokenizerKind::SentencePiece && !data.scores.empty()) {
    for (const auto& [piece, id] : data.text_ids) {
      if (id >= data.scores.size()) continue;
      const std::string_view p(piece);
      for (size_t pos = 0; pos < p.size();) {  // splits between characters (the units)
        const size_t at = pos;
        if (!decode_utf8(p, pos)) pos = at + 1;
        if (at > 0) f(p.substr(0, at), p.substr(at), -static_cast<double>(data.scores[id]));
      }
    }
  } else {
    for (const auto& [pair, rank] : data.merge_rank)  // "a b"; every space could be the separator
      for (size_t k = pair.find(' '); k != std::string::npos; k = pair.find(' ', k + 1))
        f(std::string_view(pair).substr(0, k), std::string_view(pair).substr(k + 1), double(rank));
  }
}

Encoder::PieceRule Encoder::piece_rule() const { return state_->piece_rule; }

bool Encoder::takes_whole_pieces() const { return state_->takes_whole_pieces(); }

struct Encoder::PieceFinder::Impl {
  std::unique_ptr<icu::RegexPattern> owned_pattern;  // piece_finder_for's; the matcher refers to it
  std::unique_ptr<icu::RegexMatcher> matcher;
  icu::UnicodeString text;
  EncoderOptions options;
  std::shared_ptr<const PieceAutomaton> automaton;
};

Encoder::PieceFinder::PieceFinder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Encoder::PieceFinder::~PieceFinder() = default;

std::optional<Encoder::FirstPiece> Encoder::PieceFinder::first(std::string_view text) {
  if (impl_->automaton)
    if (auto piece = impl_->automaton->first(text)) return FirstPiece{piece->length, piece->open};
  return icu_first(text);
}

const PieceAutomaton* Encoder::PieceFinder::automaton() const { return impl_->automaton.get(); }

std::optional<Encoder::FirstPiece> Encoder::PieceFinder::icu_first(std::string_view text) {
  Impl& m = *impl_;
  m.text = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UErrorCode status = U_ZERO_ERROR;
  m.matcher->reset(m.text);
  const int64_t length = m.text.length();
  m.matcher->setTimeLimit(
      saturate(m.options.regex_time_limit + length / std::max(m.options.regex_chars_per_time_unit, 1)), status);
  // The first non-empty match, as the pre-tokenizer cuts: the piece is the
  // gap before it, or the match; no match leaves the whole text one piece.
  int32_t end16 = m.text.length();
  while (U_SUCCESS(status) && m.matcher->find(status)) {
    const int32_t start = m.matcher->start(status), stop = m.matcher->end(status);
    if (U_FAILURE(status)) break;
    if (stop == start) continue;
    end16 = start > 0 ? start : stop;
    break;
  }
  if (U_FAILURE(status)) return std::nullopt;
  return FirstPiece{utf8_length_of_utf16_prefix(text, end16), m.matcher->hitEnd() != 0};
}

namespace {
std::unique_ptr<Encoder::PieceFinder> make_finder(const icu::RegexPattern& pattern, const EncoderOptions& options,
                                                  const std::shared_ptr<const PieceAutomaton>& automaton,
                                                  std::unique_ptr<icu::RegexPattern> owned = nullptr) {
  auto impl = std::make_unique<Encoder::PieceFinder::Impl>();
  impl->owned_pattern = std::move(owned);
  UErrorCode status = U_ZERO_ERROR;
  impl->matcher.reset(pattern.matcher(status));
  if (U_FAILURE(status) || !impl->matcher) return nullptr;
  impl->options = options;
  impl->automaton = automaton;
  return std::make_unique<Encoder::PieceFinder>(std::move(impl));
}
}  // namespace

std::unique_ptr<Encoder::PieceFinder> Encoder::piece_finder() const {
  if (state_->piece_rule != PieceRule::OneRegex) return nullptr;
  return make_finder(*state_->patterns[0], state_->options, state_->piece_automaton);
}

Result<std::unique_ptr<Encoder::PieceFinder>> Encoder::piece_finder_for(std::string_view pattern,
                                                                        const EncoderOptions& options) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse_error;
  std::unique_ptr<icu::RegexPattern> compiled(icu::RegexPattern::compile(
      icu::UnicodeString::fromUTF8(icu::StringPiece(pattern.data(), static_cast<int32_t>(pattern.size()))), 0,
      parse_error, status));
  if (U_FAILURE(status)) return Error{ErrorCode::InvalidInput, fmt::format("the regex does not compile ({})", u_errorName(status))};
  std::shared_ptr<const PieceAutomaton> automaton;
  if (auto a = PieceAutomaton::compile(pattern)) automaton = std::move(*a);
  const icu::RegexPattern& compiled_ref = *compiled;
  auto finder = make_finder(compiled_ref, options, automaton, std::move(compiled));
  if (!finder) return Error{ErrorCode::Internal, "ICU made no matcher for the regex"};
  return finder;
}

}  // namespace cgram

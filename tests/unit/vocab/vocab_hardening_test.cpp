// Vocabularies and encoders under hostile or unusual input: every limit at
// its value and just past it, claimed counts refused before anything is
// allocated, files that are not regular files, ids out of range, bytes the
// vocabulary cannot spell, byte-exact encodings, near-linear BPE and a
// pre-tokenizer regex that backtracks without end. Each case is the smallest
// reproducer of an issue.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "encoder.h"
#include "helpers.h"
#include "utf8.h"
#include "vocab_trie.h"
#include "vocabulary.h"

using namespace cgram;

namespace {

const std::string kSharedVocab = test::shared_dir() + "/vocab/";
const std::string kTestData = std::string(CGRAM_SOURCE_DIR) + "/tests/data/";

bool cl100k_available() { return std::filesystem::exists(kSharedVocab + "cl100k_base.tiktoken"); }

std::shared_ptr<const Vocabulary> loaded(VocabularyResult result) {
  if (auto* e = result.if_error()) FAIL(e->message);
  return (*result);
}

std::shared_ptr<const Vocabulary> from_memory(std::string_view content, const VocabularyOptions& options = {}) {
  return loaded(Vocabulary::from_memory(content, "test", options));
}

std::string error_of(VocabularyResult result) {
  REQUIRE(!result.ok());
  return result.error().message;
}

std::string load_error_with(std::string_view content, const VocabularyOptions& options = {}) {
  return error_of(Vocabulary::from_memory(content, "test", options));
}

std::unique_ptr<Encoder> make_encoder(std::shared_ptr<const Vocabulary> vocab, const EncoderOptions& options = {}) {
  auto created = Encoder::create(std::move(vocab), options);
  if (auto* e = created.if_error()) FAIL(e->message);
  return std::move(*created);
}

std::vector<uint32_t> tokens_of(EncodeResult result) {
  if (auto* e = result.if_error()) FAIL(e->message);
  return (*result);
}

std::string encode_error(EncodeResult result) {
  REQUIRE(!result.ok());
  return result.error().message;
}

std::string spelled(const Vocabulary& vocab, const std::vector<uint32_t>& tokens) {
  std::string out;
  for (uint32_t id : tokens) out += vocab.bytes(id);
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out + "\"";
}

std::string base64(std::string_view in) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<uint8_t>(in[i + 2]);
    out += table[v >> 18];
    out += table[(v >> 12) & 63];
    out += i + 1 < in.size() ? table[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? table[v & 63] : '=';
  }
  return out;
}

// A tiktoken file: token i has bytes tokens[i].
std::string tiktoken(const std::vector<std::string>& tokens) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) out += fmt::format("{} {}\n", base64(tokens[i]), i);
  return out;
}

// A JSON token list of plain strings.
std::string token_list(const std::vector<std::string>& tokens) {
  std::string out = "[";
  for (size_t i = 0; i < tokens.size(); ++i) out += (i ? ", " : "") + json_string(tokens[i]);
  return out + "]";
}

std::string byte_level_text(std::string_view bytes) {
  std::string out;
  for (char c : bytes) append_utf8(out, byte_to_unicode(static_cast<uint8_t>(c)));
  return out;
}

// A byte-level BPE tokenizer.json: token i has bytes tokens[i]; `pattern`,
// when given, is its Split pre-tokenizer.
std::string byte_level_tokenizer(const std::vector<std::string>& tokens, const std::vector<std::string>& merges = {},
                                 const std::string& pattern = "") {
  std::string vocab;
  for (size_t i = 0; i < tokens.size(); ++i)
    vocab += fmt::format("{}{}: {}", i ? ", " : "", json_string(byte_level_text(tokens[i])), i);
  std::string merge_list;
  for (size_t i = 0; i < merges.size(); ++i) merge_list += (i ? ", " : "") + json_string(merges[i]);
  std::string pre = R"({"type": "ByteLevel"})";
  if (!pattern.empty())
    pre = fmt::format(R"({{"type": "Sequence", "pretokenizers": [{{"type": "Split", "pattern": {{"Regex": {}}}}}, {}]}})",
                      json_string(pattern), pre);
  return fmt::format(R"({{"model": {{"type": "BPE", "vocab": {{{}}}, "merges": [{}]}}, "pre_tokenizer": {}}})", vocab,
                     merge_list, pre);
}

std::vector<std::string> all_bytes() {
  std::vector<std::string> out;
  for (int b = 0; b < 256; ++b) out.emplace_back(1, static_cast<char>(b));
  return out;
}

// A GGUF file built key by key.
struct Gguf {
  std::string body;
  uint64_t entries = 0;

  template <typename T>
  static void put(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void key(std::string_view k, uint32_t type) {
    put<uint64_t>(body, k.size());
    body += k;
    put<uint32_t>(body, type);
    ++entries;
  }
  void string_value(std::string_view v) {
    put<uint64_t>(body, v.size());
    body += v;
  }
  Gguf& string(std::string_view k, std::string_view v) {
    key(k, 8);
    string_value(v);
    return *this;
  }
  Gguf& strings(std::string_view k, const std::vector<std::string>& list) {
    key(k, 9);
    put<uint32_t>(body, 8);
    put<uint64_t>(body, list.size());
    for (const auto& v : list) string_value(v);
    return *this;
  }
  Gguf& i32s(std::string_view k, const std::vector<int32_t>& list) {
    key(k, 9);
    put<uint32_t>(body, 5);
    put<uint64_t>(body, list.size());
    for (int32_t v : list) put(body, v);
    return *this;
  }
  Gguf& f32s(std::string_view k, const std::vector<float>& list) {
    key(k, 9);
    put<uint32_t>(body, 6);
    put<uint64_t>(body, list.size());
    for (float v : list) put(body, v);
    return *this;
  }
  template <typename T>
  Gguf& scalar(std::string_view k, uint32_t type, T v) {
    key(k, type);
    put(body, v);
    return *this;
  }
  // An array header claiming `count` elements, with nothing after it.
  Gguf& array_header(std::string_view k, uint32_t element, uint64_t count) {
    key(k, 9);
    put<uint32_t>(body, element);
    put<uint64_t>(body, count);
    return *this;
  }
  std::string bytes(std::optional<uint64_t> claimed_entries = std::nullopt) const {
    std::string out = "GGUF";
    put<uint32_t>(out, 3);
    put<uint64_t>(out, 0);
    put<uint64_t>(out, claimed_entries.value_or(entries));
    return out + body;
  }
};

// The smallest SentencePiece GGUF vocabulary: "llama" with these tokens.
Gguf llama_gguf(const std::vector<std::string>& tokens) {
  Gguf g;
  g.string("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", tokens);
  return g;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cgram-vocab-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()));
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, std::string_view content) const {
    std::string file = (path / name).string();
    std::ofstream(file, std::ios::binary) << content;
    return file;
  }
};

}  // namespace

// ---------------------------------------------------------------------------
// 1. Limits, each at its value and just past it.

TEST_CASE("the token count limit", "[vocab][limits]") {
  VocabularyOptions options;
  options.max_tokens = 3;
  CHECK(from_memory(token_list({"a", "b", "c"}), options)->size() == 3);
  CHECK(load_error_with(token_list({"a", "b", "c", "d"}), options) == "test: token id 3 is out of range (the limit is 3 ids)");
  CHECK(from_memory(tiktoken({"a", "b", "c"}), options)->size() == 3);
  CHECK(load_error_with(tiktoken({"a", "b", "c", "d"}), options) == "test: token id 3 is out of range (the limit is 3 ids)");
  CHECK(load_error_with(llama_gguf({"a", "b", "c", "d"}).bytes(), options) ==
        "test: tokenizer.ggml.tokens has 4 entries; the limit is 3");
  // One id far past the others costs nothing before it is refused.
  CHECK(load_error_with(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 4294967296}}})") ==
        "test: token id 4294967296 is out of range (the limit is 4194304 ids)");
  CHECK(VocabularyOptions{}.max_tokens == (size_t(1) << 22));
}

TEST_CASE("the token length limit", "[vocab][limits]") {
  // The longest tokens of the real vocabularies are 128 bytes (cl100k,
  // o200k, Llama 3); the default leaves room for eight times that.
  const size_t limit = VocabularyOptions{}.max_token_bytes;
  CHECK(limit == 1024);
  std::string at(limit, 'x'), past(limit + 1, 'x');
  CHECK(from_memory(tiktoken({"a", at}))->bytes(1).size() == limit);
  CHECK(load_error_with(tiktoken({"a", past})) == "test: token 1 is 1025 bytes long; the limit is 1024 bytes per token");
  CHECK(from_memory(token_list({at}))->bytes(0).size() == limit);
  CHECK(load_error_with(token_list({past})) == "test: token 0 is 1025 bytes long; the limit is 1024 bytes per token");
  CHECK(from_memory(llama_gguf({at}).bytes())->bytes(0).size() == limit);
  CHECK(load_error_with(llama_gguf({past}).bytes()) == "test: token 0 is 1025 bytes long; the limit is 1024 bytes per token");
  CHECK(from_memory(byte_level_tokenizer({at}))->bytes(0).size() == limit);
  CHECK(load_error_with(byte_level_tokenizer({past})) ==
        "test: token 0 is 1025 bytes long; the limit is 1024 bytes per token");
  // A gigantic tiktoken line is refused before it is decoded.
  std::string huge = std::string(4 << 20, 'Q') + " 0\n";
  CHECK(load_error_with(huge) == "test:1: the token is about 3145728 bytes long; the limit is 1024 bytes per token");
  // A GGUF token text longer than any spelling of the limit is refused before it is copied.
  CHECK(load_error_with(llama_gguf({std::string(3 * limit + 7, 'x')}).bytes()) ==
        "test: entry 0 of tokenizer.ggml.tokens is 3079 bytes long; the limit is 3078");
}

TEST_CASE("the total token bytes limit bounds the trie", "[vocab][limits]") {
  VocabularyOptions options;
  options.max_total_token_bytes = 6;
  CHECK(from_memory(token_list({"ab", "cd", "ef"}), options)->size() == 3);
  CHECK(load_error_with(token_list({"ab", "cd", "efg"}), options) ==
        "test: the tokens' bytes add up to more than the limit of 6 bytes");
  CHECK(VocabularyOptions{}.max_total_token_bytes == (size_t(1) << 24));

  // The trie holds one node per distinct prefix, allocated once at its
  // exact size: root, a, ab, ac, b.
  auto vocab = from_memory(token_list({"ab", "ac", "b", "a"}));
  const VocabTrie& trie = vocab->trie();
  CHECK(trie.size() == 5);
  CHECK(trie.memory_bytes() == 5 + (5 + 5 + 6 + 4) * 4);
}

TEST_CASE("the merge count limit", "[vocab][limits]") {
  VocabularyOptions options;
  options.max_merges = 2;
  std::vector<std::string> tokens{"a", "b", "ab", "abb"};
  CHECK(from_memory(byte_level_tokenizer(tokens, {"a b", "ab b"}), options)->size() == 4);
  CHECK(load_error_with(byte_level_tokenizer(tokens, {"a b", "ab b", "b b"}), options) == "test: 3 merges; the limit is 2");
  Gguf g = llama_gguf(tokens);
  g.strings("tokenizer.ggml.merges", {"a b", "ab b"});
  CHECK(from_memory(g.bytes(), options)->size() == 4);
  Gguf past = llama_gguf(tokens);
  past.strings("tokenizer.ggml.merges", {"a b", "ab b", "b b"});
  CHECK(load_error_with(past.bytes(), options) == "test: tokenizer.ggml.merges has 3 entries; the limit is 2");
}

TEST_CASE("the GGUF metadata entry limit", "[vocab][limits]") {
  VocabularyOptions options;
  options.max_gguf_entries = 3;
  Gguf g = llama_gguf({"a", "b"});
  g.string("general.name", "x");
  CHECK(from_memory(g.bytes(), options)->size() == 2);
  g.string("general.license", "y");
  CHECK(load_error_with(g.bytes(), options) == "test: the file claims 4 metadata entries; the limit is 3");
  CHECK(load_error_with(g.bytes(uint64_t(1) << 62)) ==
        "test: the file claims 4611686018427387904 metadata entries; the limit is 65536");
}

TEST_CASE("GGUF counts and lengths are checked against the bytes left before any allocation", "[vocab][limits]") {
  // Each claim would need terabytes if it were reserved or copied; each is
  // refused by comparing it with what the file holds.
  VocabularyOptions huge;
  huge.max_tokens = huge.max_merges = SIZE_MAX;
  Gguf tokens;
  tokens.string("tokenizer.ggml.model", "llama").array_header("tokenizer.ggml.tokens", 8, uint64_t(1) << 40);
  std::string message = load_error_with(tokens.bytes(), huge);
  CHECK(message.starts_with("test: corrupt GGUF file: truncated: an array of 1099511627776 string values, but 0 bytes are left"));

  Gguf types = llama_gguf({"a"});
  types.array_header("tokenizer.ggml.token_type", 5, uint64_t(1) << 40);
  CHECK(load_error_with(types.bytes(), huge)
            .starts_with("test: corrupt GGUF file: truncated: an array of 1099511627776 i32 values"));

  Gguf other = llama_gguf({"a"});
  other.array_header("general.anything", 12, uint64_t(1) << 61);
  CHECK(load_error_with(other.bytes()).starts_with("test: corrupt GGUF file: truncated: an array of 2305843009213693952 f64 values"));

  Gguf nested = llama_gguf({"a"});
  nested.array_header("general.nested", 9, uint64_t(1) << 50);
  CHECK(load_error_with(nested.bytes()).starts_with("test: corrupt GGUF file: truncated: an array of 1125899906842624 array values"));

  Gguf string;
  string.key("tokenizer.ggml.model", 8);
  Gguf::put<uint64_t>(string.body, uint64_t(1) << 62);
  CHECK(load_error_with(string.bytes())
            .starts_with("test: corrupt GGUF file: truncated: a string of 4611686018427387904 bytes, but 0 bytes are left"));

  Gguf token;
  token.string("tokenizer.ggml.model", "llama").key("tokenizer.ggml.tokens", 9);
  Gguf::put<uint32_t>(token.body, 8);
  Gguf::put<uint64_t>(token.body, 1);
  Gguf::put<uint64_t>(token.body, uint64_t(1) << 62);
  CHECK(load_error_with(token.bytes(), huge).starts_with("test: corrupt GGUF file: truncated: a string of 4611686018427387904 bytes"));

  Gguf type = llama_gguf({"a"});
  type.array_header("general.odd", 99, 1);
  CHECK(load_error_with(type.bytes()).starts_with("test: corrupt GGUF file: unknown array element type 99"));

  CHECK(load_error_with(Gguf{}.bytes(uint64_t(1000))) ==
        "test: corrupt GGUF file: truncated: 1000 metadata entries claimed, but 0 bytes are left at byte 24");
}

// ---------------------------------------------------------------------------
// 2, 3. A byte the vocabulary cannot spell is an error, never an exception
// and never dropped.

TEST_CASE("tiktoken: a byte without a token is an error value", "[vocab][encoder]") {
  auto vocab = from_memory(tiktoken({"a", "b", "ab"}));
  auto enc = make_encoder(vocab);
  CHECK(tokens_of(enc->try_encode_continuation("abab")) == std::vector<uint32_t>{2, 2});
  CHECK(encode_error(enc->try_encode_continuation("abc")) == "test: the vocabulary cannot spell byte 0x63 at offset 2");
  CHECK(encode_error(enc->try_encode("ab\xFF")) == "test: the vocabulary cannot spell byte 0xFF at offset 2");
  // The convenience form gives no tokens rather than some of them.
  CHECK(enc->encode_continuation("abc").empty());
}

TEST_CASE("byte-level BPE and SentencePiece never drop a byte", "[vocab][encoder]") {
  auto byte_level = from_memory(byte_level_tokenizer({"a", "b", " ", "ab"}, {"a b"}));
  auto enc = make_encoder(byte_level);
  CHECK(tokens_of(enc->try_encode_continuation("ab a")) == std::vector<uint32_t>{3, 2, 0});
  CHECK(encode_error(enc->try_encode_continuation("ab c")) == "test: the vocabulary cannot spell byte 0x63 at offset 3");
  CHECK(encode_error(enc->try_encode_continuation("a\xC3\xA9")) ==
        "test: the vocabulary cannot spell byte 0xC3 at offset 1");

  // SentencePiece with scores (GGUF): byte fallback where the tokens exist.
  Gguf g = llama_gguf({"<unk>", "\xE2\x96\x81", "a", "<0x7A>"});
  g.i32s("tokenizer.ggml.token_type", {2, 1, 1, 6}).f32s("tokenizer.ggml.scores", {0, -1, -2, -3});
  auto sp = from_memory(g.bytes());
  auto sp_enc = make_encoder(sp);
  CHECK(tokens_of(sp_enc->try_encode_continuation("a z")) == std::vector<uint32_t>{2, 1, 3});
  CHECK(encode_error(sp_enc->try_encode_continuation("a y")) == "test: the vocabulary cannot spell byte 0x79 at offset 2");
  CHECK(tokens_of(sp_enc->try_encode("a")) == std::vector<uint32_t>{1, 2});  // the dummy prefix

  // No token for a space: the dummy prefix cannot be spelled.
  auto no_space = from_memory(llama_gguf({"a", "b"}).bytes());
  CHECK(encode_error(make_encoder(no_space)->try_encode("ab")) ==
        "test: the vocabulary cannot spell byte 0x20, the space SentencePiece adds before the text");
  CHECK(tokens_of(make_encoder(no_space)->try_encode_continuation("ab")) == std::vector<uint32_t>{0, 1});
}

TEST_CASE("a byte-level vocabulary without every byte reports the byte", "[vocab][encoder][shared]") {
  if (!cl100k_available()) return test::skip_without_shared("cl100k_base.tiktoken");
  // DeepSeek has no token for 0xFF (never in UTF-8): it used to be dropped.
  auto vocab = loaded(Vocabulary::load(kSharedVocab + "gguf/ggml-vocab-deepseek-llm.gguf"));
  std::string message = encode_error(make_encoder(vocab)->try_encode_continuation("a\xFF"));
  CHECK(message.ends_with(": the vocabulary cannot spell byte 0xFF at offset 1"));
}

// ---------------------------------------------------------------------------
// 4. Byte-exact encodings: the tokens spell exactly the input.

TEST_CASE("encodings are byte-exact on invalid UTF-8 and a literal '▁'", "[vocab][encoder]") {
  auto phi3 = loaded(Vocabulary::bundled());
  auto enc = make_encoder(phi3);
  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::string text;
    size_t length = rng() % 40;
    for (size_t i = 0; i < length; ++i) {
      // Mostly ASCII and pieces of characters, some bytes never in UTF-8.
      static const char* parts[] = {"a", " ", "\xFF", "\xC3", "\xA9", "\xE2\x96\x81", "\xE2\x96", "\n", "\xF0\x9F\x99\x82", "<s>"};
      text += parts[rng() % std::size(parts)];
    }
    INFO(round);
    CHECK(spelled(*phi3, tokens_of(enc->try_encode_continuation(text))) == text);
    // The dummy-prefix space comes before text that starts with a character.
    size_t pos = 0;
    const bool dummy = !text.empty() && decode_utf8(text, pos);
    CHECK(spelled(*phi3, tokens_of(enc->try_encode(text))) == (dummy ? " " + text : text));
  }
  // '▁' (U+2581) in the text is not a space: its bytes are spelled as they are.
  auto tokens = tokens_of(enc->try_encode_continuation("a\xE2\x96\x81" "b"));
  CHECK(spelled(*phi3, tokens) == "a\xE2\x96\x81" "b");
}

TEST_CASE("cl100k and every shared vocabulary spell 0xFF and cut characters exactly", "[vocab][encoder][shared]") {
  if (!cl100k_available()) return test::skip_without_shared("cl100k_base.tiktoken");
  for (std::string file : {"cl100k_base.tiktoken", "o200k_base.tiktoken", "llama3-tokenizer.json",
                           "gemma-tokenizer.json", "gguf/ggml-vocab-gpt-2.gguf", "gguf/ggml-vocab-llama-spm.gguf"}) {
    auto vocab = loaded(Vocabulary::load(kSharedVocab + file));
    auto enc = make_encoder(vocab);
    for (std::string text : {std::string("\xFF"), std::string("{\"a\": \"\xFF\xFE\"}"), std::string("\"ab\xE7"),
                             std::string("x\xED\xA0\x80y"), std::string("\xC0\xAF \xE2\x96\x81\xE2\x96\x81 z")}) {
      INFO(file << ": " << text);
      CHECK(spelled(*vocab, tokens_of(enc->try_encode_continuation(text))) == text);
    }
  }
}

// ---------------------------------------------------------------------------
// 5. BPE in O(n log n): the same tokens as the quadratic algorithm, fast.

namespace {

// The quadratic algorithm the encoder had, for SentencePiece with scores:
// merge the adjacent pair of highest score, leftmost first, until none.
std::vector<uint32_t> quadratic_sentencepiece(const Vocabulary& vocab, std::string_view text) {
  const auto& data = vocab.encoder_data();
  std::vector<std::string> symbols;
  for (size_t pos = 0; pos < text.size();) {
    size_t at = pos;
    decode_utf8(text, pos);
    std::string_view c = text.substr(at, pos - at);
    symbols.emplace_back(c == " " ? "\xE2\x96\x81" : std::string(c));
  }
  while (symbols.size() > 1) {
    double best = 1e300;
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = data.text_ids.find(symbols[i] + symbols[i + 1]);
      double k = it == data.text_ids.end() ? 1e300 : -static_cast<double>(data.scores[it->second]);
      if (k < best) best = k, at = i;
    }
    if (best == 1e300) break;
    symbols[at] += symbols[at + 1];
    symbols.erase(symbols.begin() + at + 1);
  }
  std::vector<uint32_t> out;
  for (const std::string& s : symbols) {
    auto it = data.text_ids.find(s);
    if (it != data.text_ids.end() && !vocab.is_special(it->second)) {
      out.push_back(it->second);
      continue;
    }
    for (char c : s == "\xE2\x96\x81" ? std::string(" ") : s)
      out.push_back(data.text_ids.at(fmt::format("<0x{:02X}>", static_cast<unsigned char>(c))));
  }
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("SentencePiece merging matches the quadratic algorithm", "[vocab][encoder]") {
  auto phi3 = loaded(Vocabulary::bundled());
  auto enc = make_encoder(phi3);
  std::string texts = read_bytes(kTestData + "ggml-vocab-phi-3.gguf.inp");
  REQUIRE(!texts.empty());
  std::vector<std::string> samples;
  for (size_t pos = 0; pos < texts.size();) {
    size_t end = std::min(texts.find("\n__ggml_vocab_test__\n", pos), texts.size());
    samples.push_back(texts.substr(pos, end - pos));
    pos = end + 21;
  }
  samples.push_back(read_bytes(std::string(CGRAM_SOURCE_DIR) + "/README.md").substr(0, 3000));
  samples.push_back(read_bytes(std::string(CGRAM_SOURCE_DIR) + "/frontend/vocab/tokenizer/encoder.cpp").substr(0, 3000));
  size_t compared = 0;
  for (const std::string& text : samples) {
    if (first_invalid_utf8(text) || text.find("\xE2\x96\x81") != std::string::npos) continue;
    INFO(text.substr(0, 80));
    CHECK(tokens_of(enc->try_encode_continuation(text)) == quadratic_sentencepiece(*phi3, text));
    ++compared;
  }
  CHECK(compared >= 40);
}

TEST_CASE("BPE is near-linear: 120,000 characters in one SentencePiece piece", "[vocab][encoder]") {
  auto phi3 = loaded(Vocabulary::bundled());
  auto enc = make_encoder(phi3);
  std::string text;
  std::mt19937 rng(7);
  static const char* words[] = {"the ", "grammar ", "token", "s ", "{\"key\": ", "42, ", "\n", "élan ", "日本 "};
  while (text.size() < 120000) text += words[rng() % std::size(words)];
  auto start = std::chrono::steady_clock::now();
  auto tokens = tokens_of(enc->try_encode_continuation(text));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(spelled(*phi3, tokens) == text);
  // The quadratic algorithm took over a minute; this takes well under a second.
  CHECK(seconds < 10);
}

// ---------------------------------------------------------------------------
// 6. A pre-tokenizer regex that backtracks without end.

TEST_CASE("a hostile split regex stops at ICU's time limit", "[vocab][encoder]") {
  auto vocab = from_memory(byte_level_tokenizer(all_bytes(), {}, "(a|a)+c"));
  auto enc = make_encoder(vocab);
  auto start = std::chrono::steady_clock::now();
  std::string message = encode_error(enc->try_encode_continuation(std::string(40, 'a')));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(message ==
        "test: the pre-tokenizer regex failed on the text at offset 0: it ran past its time limit (a pattern that "
        "backtracks without end?)");
  CHECK(seconds < 5);  // 2^40 steps without the limit
  // A tighter limit stops sooner; the same text within the limit is fine.
  EncoderOptions tight;
  tight.regex_time_limit = 1;
  CHECK(!(make_encoder(vocab, tight)->try_encode_continuation(std::string(40, 'a'))).ok());
  CHECK(spelled(*vocab, tokens_of(enc->try_encode_continuation("aaac"))) == "aaac");
}

TEST_CASE("a Split pre-tokenizer without a pattern loads, never throws (fuzz finding F5)", "[vocab]") {
  // simdjson's value() threw out of the loader on a Split with no "pattern"
  // (the vocab fuzz target); such a Split has no regex of its own.
  std::string json = byte_level_tokenizer(all_bytes(), {}, "x");
  const std::string with_pattern = R"("pattern": {"Regex": "x"})";
  REQUIRE(json.find(with_pattern) != std::string::npos);
  json.replace(json.find(with_pattern), with_pattern.size(), R"("paetrnt": {"Regex": "x"})");
  VocabularyResult loaded = Vocabulary::from_memory(json, "test");
  REQUIRE(loaded.ok());
  CHECK((*loaded)->size() == 256);
}

TEST_CASE("long runs of whitespace fit the regex's limits", "[vocab][encoder]") {
  // GPT-2's pattern backtracks once per space of a run: ICU's default 8 MiB
  // stack held about 250,000 of them, and the rest of the text was lost.
  auto vocab = from_memory(byte_level_tokenizer(all_bytes()));
  auto enc = make_encoder(vocab);
  std::string text = "a" + std::string(600000, ' ') + "b\n" + std::string(300000, '\n') + "c";
  CHECK(spelled(*vocab, tokens_of(enc->try_encode_continuation(text))) == text);
}

// ---------------------------------------------------------------------------
// 7. GGUF integers in range, keys once.

TEST_CASE("GGUF: ids out of range and repeated keys are errors", "[vocab]") {
  Gguf wide = llama_gguf({"a", "b"});
  wide.scalar<uint64_t>("tokenizer.ggml.eos_token_id", 10, (uint64_t(1) << 32) + 1);
  CHECK(load_error_with(wide.bytes()) == "test: tokenizer.ggml.eos_token_id is 4294967297, not a token id (the limit is 4194304 ids)");

  Gguf negative = llama_gguf({"a", "b"});
  negative.scalar<int32_t>("tokenizer.ggml.eos_token_id", 5, -1);
  CHECK(load_error_with(negative.bytes()) == "test: tokenizer.ggml.eos_token_id is negative");

  Gguf text = llama_gguf({"a", "b"});
  text.string("tokenizer.ggml.eos_token_id", "1");
  CHECK(load_error_with(text.bytes()) == "test: tokenizer.ggml.eos_token_id has type string; expected an integer");

  Gguf fits = llama_gguf({"a", "b"});
  fits.scalar<uint16_t>("tokenizer.ggml.eos_token_id", 2, 1);
  CHECK(from_memory(fits.bytes())->eos_ids() == std::vector<uint32_t>{1});

  Gguf twice = llama_gguf({"a", "b"});
  twice.strings("tokenizer.ggml.tokens", {"a", "b"});
  CHECK(load_error_with(twice.bytes()) == "test: GGUF key 'tokenizer.ggml.tokens' appears twice");

  Gguf eos_twice = llama_gguf({"a", "b"});
  eos_twice.scalar<uint32_t>("tokenizer.ggml.eos_token_id", 4, 1).scalar<uint32_t>("tokenizer.ggml.eos_token_id", 4, 0);
  CHECK(load_error_with(eos_twice.bytes()) == "test: GGUF key 'tokenizer.ggml.eos_token_id' appears twice");

  Gguf type = llama_gguf({"a", "b"});
  type.i32s("tokenizer.ggml.token_type", {1, 7});
  CHECK(load_error_with(type.bytes()) == "test: token 1 has type 7 (the known types are 0 to 6)");

  Gguf nan = llama_gguf({"a", "b"});
  nan.f32s("tokenizer.ggml.scores", {0, std::nanf("")});
  CHECK(load_error_with(nan.bytes()) == "test: the score of token 1 is not a number");

  Gguf not_array = llama_gguf({"a"});
  not_array.string("tokenizer.ggml.merges", "a b");
  CHECK(load_error_with(not_array.bytes()) == "test: tokenizer.ggml.merges has type string; expected array");

  Gguf wrong_element;
  wrong_element.string("tokenizer.ggml.model", "llama").i32s("tokenizer.ggml.tokens", {1});
  CHECK(load_error_with(wrong_element.bytes()) == "test: tokenizer.ggml.tokens is an array of i32; expected an array of string");
}

// ---------------------------------------------------------------------------
// 8. A vocabulary with no end-of-sequence token says so.

TEST_CASE("a vocabulary without an end-of-sequence token carries a warning", "[vocab]") {
  auto list = from_memory(token_list({"a", "b"}));
  REQUIRE(list->warnings().size() == 1);
  CHECK(list->warnings()[0] ==
        "test: the vocabulary has no end-of-sequence token: no token can end a sequence, so generation stops only at "
        "a length limit");
  CHECK(from_memory(R"(["a", {"text": "<eos>", "eos": true}])")->warnings().empty());
  // The caller who says "none" is not warned.
  VocabularyOptions none;
  none.eos_ids = std::vector<uint32_t>{};
  CHECK(from_memory(token_list({"a", "b"}), none)->warnings().empty());

  // A tiktoken file cut at a line boundary: not a known encoding, no specials.
  auto cut = from_memory(tiktoken({"a", "b", "c"}));
  REQUIRE(cut->warnings().size() == 2);
  CHECK(cut->warnings()[0] ==
        "test: 3 ranks is not a tiktoken encoding cgram knows (cl100k_base has 100256, o200k_base 199998): no special "
        "tokens were added and the cl100k_base pre-tokenizer is used");
  CHECK(cut->warnings()[1].starts_with("test: the vocabulary has no end-of-sequence token"));

  CHECK(loaded(Vocabulary::bundled())->warnings().empty());
  if (cl100k_available()) {
    CHECK(loaded(Vocabulary::load(kSharedVocab + "cl100k_base.tiktoken"))->warnings().empty());
    std::string cl100k = read_bytes(kSharedVocab + "cl100k_base.tiktoken");
    std::string_view half(cl100k.data(), cl100k.find('\n', cl100k.size() / 2) + 1);
    auto truncated = loaded(Vocabulary::from_memory(half, "cut"));
    CHECK(truncated->eos_ids().empty());
    CHECK(truncated->warnings().size() == 2);
  }
}

// ---------------------------------------------------------------------------
// 9. Ids out of range.

TEST_CASE("bytes, display and is_special are safe for any id", "[vocab]") {
  auto vocab = from_memory(token_list({"a", "\n"}));
  CHECK(vocab->bytes(1) == "\n");
  CHECK(vocab->bytes(2).empty());
  CHECK(vocab->bytes(UINT32_MAX).empty());
  CHECK(vocab->display(1) == "\\n");
  CHECK(vocab->display(2) == "<invalid id 2>");
  CHECK(vocab->display(UINT32_MAX) == "<invalid id 4294967295>");
  CHECK(vocab->is_special(2));
  CHECK(vocab->is_special(UINT32_MAX));
  CHECK_FALSE(vocab->is_special(0));
}

// ---------------------------------------------------------------------------
// 10. Only regular files, read within the limit.

TEST_CASE("Vocabulary::load reads only regular files, within the limit", "[vocab]") {
  TempDir dir;
  CHECK(error_of(Vocabulary::load(dir.path.string())) ==
        fmt::format("cannot read vocabulary '{}': it is a directory", dir.path.string()));

  std::string fifo = (dir.path / "fifo.tiktoken").string();
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto start = std::chrono::steady_clock::now();
  CHECK(error_of(Vocabulary::load(fifo)) ==
        fmt::format("cannot read vocabulary '{}': it is a FIFO, not a regular file", fifo));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));  // no writer was waited for

  if (std::filesystem::exists("/dev/zero"))
    CHECK(error_of(Vocabulary::load("/dev/zero")) ==
          "cannot read vocabulary '/dev/zero': it is a character device, not a regular file");

  std::string content = token_list({"a", "b"});
  std::string file = dir.write("list.json", content);
  VocabularyOptions options;
  options.max_file_bytes = content.size();
  CHECK(loaded(Vocabulary::load(file, options))->size() == 2);
  options.max_file_bytes = content.size() - 1;
  CHECK(error_of(Vocabulary::load(file, options)) ==
        fmt::format("vocabulary '{}' is {} bytes; the limit is {} bytes", file, content.size(), content.size() - 1));

  // The tokenizer_config.json beside a tokenizer.json is read the same way.
  std::string tokenizer = dir.write("tokenizer.json", byte_level_tokenizer({"a", "b"}));
  CHECK(loaded(Vocabulary::load(tokenizer))->size() == 2);
  std::string config = (dir.path / "tokenizer_config.json").string();
  REQUIRE(mkfifo(config.c_str(), 0600) == 0);
  CHECK(error_of(Vocabulary::load(tokenizer)) ==
        fmt::format("cannot read tokenizer config '{}': it is a FIFO, not a regular file", config));
  std::filesystem::remove(config);
  dir.write("tokenizer_config.json", R"({"eos_token": "b"})");
  CHECK(loaded(Vocabulary::load(tokenizer))->size() == 2);
}

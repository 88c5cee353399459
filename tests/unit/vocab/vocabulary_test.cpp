// Vocabularies: every real file loads with exact bytes per id; specials and
// end-of-sequence ids come from the tokenizer's data; bad files give precise
// errors; the encoders reproduce the tokenizers' own test vectors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "encoder.h"
#include "helpers.h"
#include "vocabulary.h"

using namespace cgram;

namespace {

const std::string kShared = test::shared_dir() + "/vocab/";
const std::string kData = std::string(CGRAM_SOURCE_DIR) + "/tests/data/";

std::shared_ptr<const Vocabulary> load(const std::string& path) {
  VocabularyResult result = Vocabulary::load(path);
  if (auto* e = result.if_error()) FAIL(e->message);
  return (*result);
}

std::string load_error(std::string_view content, std::string_view name = "test") {
  VocabularyResult result = Vocabulary::from_memory(content, name);
  REQUIRE(!result.ok());
  return result.error().message;
}

bool shared_available() { return std::filesystem::exists(kShared + "llama3-tokenizer.json"); }

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The llama.cpp test vectors: texts separated by "__ggml_vocab_test__" lines,
// and one line of expected ids per text.
size_t check_vectors(const Vocabulary& vocab, const std::string& inp, const std::string& out) {
  auto created = Encoder::create(std::shared_ptr<const Vocabulary>(&vocab, [](const Vocabulary*) {}));
  REQUIRE(created.ok());
  const Encoder& encoder = *(*created);
  std::string texts = read(inp);
  std::istringstream expected(read(out));
  const std::string separator = "\n__ggml_vocab_test__\n";
  size_t checked = 0;
  for (size_t pos = 0; pos < texts.size();) {
    size_t end = texts.find(separator, pos);
    if (end == std::string::npos) end = texts.size();
    std::string text = texts.substr(pos, end - pos);
    pos = end + separator.size();
    std::string line;
    REQUIRE(std::getline(expected, line));
    std::vector<uint32_t> want;
    std::istringstream ids(line);
    for (uint32_t id; ids >> id;) want.push_back(id);
    INFO(vocab.name() << ": '" << text << "'");
    CHECK(encoder.encode(text) == want);
    ++checked;
  }
  return checked;
}

}  // namespace

TEST_CASE("the bundled vocabulary loads and encodes like its tokenizer", "[vocab]") {
  VocabularyResult result = Vocabulary::bundled();
  REQUIRE(result.ok());
  auto vocab = *result;
  CHECK(vocab->size() == 32064);
  CHECK(vocab->kind() == TokenizerKind::SentencePiece);
  CHECK(vocab->eos_ids() == std::vector<uint32_t>{32000});
  CHECK(vocab->is_special(32000));
  CHECK(vocab->is_special(1));  // <s>
  CHECK(vocab->bytes(3 + 0x0A) == "\n");  // <0x0A>, a byte-fallback token
  CHECK(vocab->find(" the").has_value());
  CHECK(check_vectors(*vocab, kData + "ggml-vocab-phi-3.gguf.inp", kData + "ggml-vocab-phi-3.gguf.out") == 46);
}

TEST_CASE("every vocabulary in shared/vocab loads", "[vocab][shared]") {
  if (!shared_available()) return test::skip_without_shared("llama3-tokenizer.json");
  struct Expect {
    std::string file;
    size_t size;
    TokenizerKind kind;
    std::vector<uint32_t> eos;
  };
  for (const Expect& e : std::vector<Expect>{
           {"llama3-tokenizer.json", 128256, TokenizerKind::ByteLevelBpe, {128001}},
           {"gemma-tokenizer.json", 256000, TokenizerKind::SentencePiece, {1}},
           {"cl100k_base.tiktoken", 100277, TokenizerKind::Tiktoken, {100257}},
           {"o200k_base.tiktoken", 200019, TokenizerKind::Tiktoken, {199999}},
           {"gguf/ggml-vocab-gpt-2.gguf", 50257, TokenizerKind::ByteLevelBpe, {50256}},
           {"gguf/ggml-vocab-llama-spm.gguf", 32000, TokenizerKind::SentencePiece, {2}},
           {"gguf/ggml-vocab-phi-3.gguf", 32064, TokenizerKind::SentencePiece, {32000}},
           {"gguf/ggml-vocab-deepseek-llm.gguf", 102400, TokenizerKind::ByteLevelBpe, {100001}},
       }) {
    INFO(e.file);
    auto vocab = load(kShared + e.file);
    CHECK(vocab->size() == e.size);
    CHECK(vocab->kind() == e.kind);
    CHECK(vocab->eos_ids() == e.eos);
  }
}

TEST_CASE("token bytes are exact: byte-level, SentencePiece, tiktoken", "[vocab][shared]") {
  if (!shared_available()) return test::skip_without_shared("llama3-tokenizer.json");
  auto llama = load(kShared + "llama3-tokenizer.json");
  CHECK(llama->bytes(220) == " ");   // "Ġ"
  CHECK(llama->bytes(198) == "\n");  // "Ċ"
  CHECK(llama->bytes(128000) == "<|begin_of_text|>");
  CHECK(llama->is_special(128000));
  CHECK_FALSE(llama->is_special(220));
  // Ids whose bytes are not valid UTF-8 alone: a lone continuation byte.
  CHECK(llama->find("\x80").has_value());
  CHECK(llama->find(" world").has_value());

  auto gemma = load(kShared + "gemma-tokenizer.json");
  auto newline = gemma->find("\n");
  REQUIRE(newline);
  CHECK(gemma->find(" the").has_value());
  CHECK(gemma->bytes(*newline) == "\n");

  auto cl100k = load(kShared + "cl100k_base.tiktoken");
  CHECK(cl100k->bytes(0) == "!");
  CHECK(cl100k->bytes(100257) == "<|endoftext|>");
  CHECK(cl100k->is_special(100257));
  // Ranks 100256 is unused in cl100k: an id with no token is never allowed.
  CHECK(cl100k->is_special(100256));
}

TEST_CASE("several ids with the same bytes all keep their bytes", "[vocab][shared]") {
  if (!shared_available()) return test::skip_without_shared("llama3-tokenizer.json");
  auto deepseek = load(kShared + "gguf/ggml-vocab-deepseek-llm.gguf");
  // DeepSeek has a user-defined "ü" besides the byte-level one.
  CHECK(deepseek->bytes(100014) == deepseek->bytes(2874));
  CHECK_FALSE(deepseek->is_special(100014));
  CHECK_FALSE(deepseek->is_special(2874));
}

TEST_CASE("the encoders reproduce the llama.cpp test vectors", "[vocab][shared][encoder]") {
  if (!shared_available()) return test::skip_without_shared("llama3-tokenizer.json");
  for (std::string name : {"gpt-2", "deepseek-llm", "llama-spm", "phi-3"}) {
    std::string base = kShared + "gguf/ggml-vocab-" + name + ".gguf";
    auto vocab = load(base);
    CHECK(check_vectors(*vocab, base + ".inp", base + ".out") == 46);
  }
}

TEST_CASE("encoding then decoding gives the text back", "[vocab][shared][encoder]") {
  if (!shared_available()) return test::skip_without_shared("llama3-tokenizer.json");
  std::string texts = read(kShared + "gguf/ggml-vocab-gpt-2.gguf.inp");
  for (std::string file : {"llama3-tokenizer.json", "gemma-tokenizer.json", "cl100k_base.tiktoken", "o200k_base.tiktoken"}) {
    auto vocab = load(kShared + file);
    auto created = Encoder::create(vocab);
    REQUIRE(created.ok());
    std::string decoded;
    for (uint32_t id : (*created)->encode(texts)) {
      CHECK_FALSE(vocab->is_special(id));
      decoded += vocab->bytes(id);
    }
    INFO(file);
    CHECK(decoded == texts);
  }
}

TEST_CASE("bad vocabulary files give precise errors", "[vocab]") {
  CHECK((Vocabulary::load("/nonexistent/tokenizer.json")).error().message ==
        "cannot read vocabulary '/nonexistent/tokenizer.json': No such file or directory");
  CHECK(load_error("") == "test: the file is empty");
  CHECK(load_error("hello world\n") ==
        "test:1: not a tiktoken line (expected \"base64 rank\"), and not any other vocabulary format cgram knows");
  CHECK(load_error("IQ== 0\nIg== 0\n") == "test: inconsistent ids: id 0 is defined twice");
  CHECK(load_error("IQ== 0\nIg== 5\n") == "test: inconsistent ids: 2 ranks but the highest is 5");
  CHECK(load_error("{\"model\": {\"type\": \"Unigram\"}}") ==
        "test: unsupported tokenizer model type 'Unigram' (cgram loads BPE models)");
  CHECK(load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}}}") ==
        "test: the id of token 'a' is not a non-negative integer");
  CHECK(load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}}}") ==
        "test: inconsistent ids: id 0 is defined twice");
  CHECK(load_error("{\"model\": ") .rfind("test: not valid JSON", 0) == 0);
  CHECK(load_error("[\"a\", 3]") == "test: token 1 is neither a string nor an object with \"text\" or \"hex\"");

  // A GGUF file cut anywhere is refused, never read past its end.
  std::string gguf = read(kData + "../../frontend/vocab/bundled/ggml-vocab-phi-3.gguf");
  REQUIRE(gguf.size() > 100000);
  for (size_t cut : {size_t(5), size_t(20), size_t(100), size_t(1000), gguf.size() / 2, gguf.size() - 10}) {
    std::string message = load_error(std::string_view(gguf).substr(0, cut));
    INFO("cut at " << cut << ": " << message);
    CHECK(message.find("corrupt GGUF file") != std::string::npos);
  }
  std::string bad_version = gguf;
  bad_version[4] = 9;
  CHECK(load_error(bad_version) == "test: GGUF version 9 is not supported (cgram reads versions 2 and 3)");
}

TEST_CASE("plain token lists and the caller's end-of-sequence ids", "[vocab]") {
  auto result = Vocabulary::from_memory(R"(["a", "bc", {"hex": "e282"}, {"text": "<eos>", "eos": true}])", "list");
  REQUIRE(result.ok());
  auto vocab = *result;
  CHECK(vocab->size() == 4);
  CHECK(vocab->bytes(2) == "\xE2\x82");
  CHECK(vocab->eos_ids() == std::vector<uint32_t>{3});
  CHECK(vocab->is_special(3));
  VocabularyOptions options;
  options.eos_ids = std::vector<uint32_t>{1};
  auto overridden = (*Vocabulary::from_memory(R"(["a", "bc", "d"])", "list", options));
  CHECK(overridden->eos_ids() == std::vector<uint32_t>{1});
  options.eos_ids = std::vector<uint32_t>{7};
  CHECK((Vocabulary::from_memory(R"(["a"])", "list", options)).error().message ==
        "list: end-of-sequence id 7 is not in the vocabulary (1 ids)");
}

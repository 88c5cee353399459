// Canonical mode: a token may follow another only where the tokenizer itself
// would write the two that way.
//  - Soundness: every random walk that ends (end of sequence) has generated
//    exactly the tokenizer's own encoding of its text.
//  - Completeness: the tokenizer's encoding of every valid document (the
//    examples' and the benchmark suite's) is accepted token by token.
// Masks, is_allowed and advance agree in canonical mode too.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>

#include "canonical.h"
#include "encoder.h"
#include "helpers.h"
#include "matcher.h"
#include "shared_object.h"
#include "utf8.h"
#include "vocab_context.h"

using namespace cgram;

namespace {

std::shared_ptr<const CompiledGrammar> compile_canonical(const std::string& source,
                                                         std::shared_ptr<const Vocabulary> vocab = test::bundled_vocabulary()) {
  CompileOptions options;
  options.canonical = true;
  auto result = CompiledGrammar::compile(test::grammar(source), std::move(vocab), options);
  INFO((!result.ok() ? result.error().message : ""));
  REQUIRE(result.ok());
  return (*result);
}

const Encoder& encoder_of(const CompiledGrammar& g) {
  auto enc = g.encoder();
  REQUIRE(enc.ok());
  return *(*enc);
}

struct WalkCounts {
  size_t walks = 0, ended = 0, dead_ends = 0, steps = 0, masks = 0;
};

std::shared_ptr<const CompiledGrammar> compile_plain(const std::string& source,
                                                     std::shared_ptr<const Vocabulary> vocab = test::bundled_vocabulary()) {
  auto result = CompiledGrammar::compile(test::grammar(source), std::move(vocab));
  REQUIRE(result.ok());
  return (*result);
}

// The canonical matcher's full mask: within the plain one, and equal to
// is_allowed on every token of the plain one.
std::vector<uint32_t> checked_mask(Matcher& canonical, Matcher& plain) {
  const std::vector<uint32_t> allowed = canonical.current_possible_tokens();
  const std::vector<uint32_t> grammar = plain.current_possible_tokens();
  REQUIRE(std::includes(grammar.begin(), grammar.end(), allowed.begin(), allowed.end()));
  for (uint32_t t : grammar)
    REQUIRE(canonical.is_allowed(t) == std::binary_search(allowed.begin(), allowed.end(), t));
  return allowed;
}

// Random walks in canonical mode, beside a plain matcher of the same
// grammar: the next token is drawn from the grammar's mask until the
// canonical matcher allows one (the full canonical mask is built, and
// checked, every few steps and wherever none is found).
// `prefer_long`: each step the longest of up to 16 allowed tokens drawn, as a
// model that likes long tokens would (runs of white space, of punctuation):
// the previous tokens whose rows a uniform draw rarely meets.
void sound_walks(const std::string& source, std::shared_ptr<const Vocabulary> vocab, uint64_t seed, size_t walks,
                 size_t max_steps, WalkCounts& counts, bool prefer_long = false) {
  auto g = compile_canonical(source, vocab);
  auto plain_grammar = compile_plain(source, vocab);
  const Encoder& encoder = encoder_of(*g);
  std::mt19937_64 rng(seed);
  for (size_t w = 0; w < walks; ++w) {
    Matcher m(g), plain(plain_grammar);
    std::vector<uint32_t> tokens;
    std::string text;
    ++counts.walks;
    for (size_t step = 0;; ++step) {
      if (m.canonical_dead_end()) {
        // Nothing canonical is left though the grammar goes on: the
        // matcher yields to the grammar, its mask the plain one.
        ++counts.dead_ends;
        REQUIRE(m.current_possible_tokens() == plain.current_possible_tokens());
        for (uint32_t t : plain.current_possible_tokens()) REQUIRE(m.is_allowed(t));
        CHECK(m.can_end() == plain.can_end());
        break;
      }
      std::vector<uint32_t> candidates = plain.current_possible_tokens();
      const bool can_end = m.can_end();
      std::erase_if(candidates, [&](uint32_t t) { return vocab->is_eos(t); });
      std::shuffle(candidates.begin(), candidates.end(), rng);
      if (candidates.size() > 64) candidates.resize(64);
      std::optional<uint32_t> next;
      size_t drawn = 0;
      for (uint32_t t : candidates)
        if (m.is_allowed(t)) {
          if (!next || vocab->bytes(t).size() > vocab->bytes(*next).size()) next = t;
          if (!prefer_long || ++drawn == 16) break;
        }
      if (!next || step % 8 == 3) {
        ++counts.masks;
        std::vector<uint32_t> allowed = checked_mask(m, plain);
        std::erase_if(allowed, [&](uint32_t t) { return vocab->is_eos(t); });
        if (!next && !allowed.empty()) next = allowed[rng() % allowed.size()];
      }
      if (can_end && (!next || step >= max_steps || rng() % 8 == 0)) {
        REQUIRE(m.advance(vocab->eos_ids()[0]) == AdvanceResult::Finished);
        INFO("text '" << text << "'");
        REQUIRE(encoder.encode_continuation(text) == tokens);  // the tokenizer's own encoding
        ++counts.ended;
        break;
      }
      if (!next) break;  // the grammar itself is stuck
      if (step >= 4 * max_steps) break;  // a grammar that cannot end soon
      REQUIRE(m.advance(*next) == AdvanceResult::Ongoing);
      REQUIRE(plain.advance(*next) == AdvanceResult::Ongoing);
      tokens.push_back(*next);
      text += vocab->bytes(*next);
      ++counts.steps;
    }
  }
}

// The document's own encoding, token by token: each allowed (the full mask
// checked every few tokens), accepted, and the end allowed after the last.
size_t accept_document(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  const std::vector<uint32_t> tokens = encoder_of(*g).encode_continuation(text);
  Matcher m(g);
  std::vector<uint32_t> mask(m.mask_words());
  for (size_t i = 0; i < tokens.size(); ++i) {
    INFO("token " << i << " '" << g->vocabulary().display(tokens[i]) << "'");
    if (i % 128 == 5) {
      REQUIRE(m.fill_mask(mask));
      REQUIRE((mask[tokens[i] / 32] >> (tokens[i] % 32) & 1));
    }
    REQUIRE(m.is_allowed(tokens[i]));
    REQUIRE(m.advance(tokens[i]) == AdvanceResult::Ongoing);
  }
  CHECK(m.can_end());
  return tokens.size();
}

// Runs of white space of every length before words: the longest tokens of
// byte-level vocabularies, and the pairs and triples the pre-tokenizer's
// look-ahead decides (`\s+(?!\S)` leaves a run's last space to the word).
std::string white_space_runs() {
  std::string text = "start";
  for (size_t n : {1, 2, 3, 7, 16, 31, 32, 33, 64, 65, 100, 127, 128, 129, 200}) {
    text += std::string(n, ' ') + "word" + std::string(n, '\n') + "line" + std::string(n % 9, '\t') + "tab";
    for (size_t i = 0; i < n % 7; ++i) text += "\xE3\x80\x80";  // ideographic space
    text += "cjk";
    for (size_t i = 0; i < n % 5; ++i) text += "\xC2\xA0";      // no-break space
    text += "nb";
    for (size_t i = 0; i < n % 4; ++i) text += "\xE2\x80\x83";  // em space
    text += "em";
    for (size_t i = 0; i < n % 3; ++i) text += "\xE2\x81\x9F";  // medium mathematical space
    text += "mm " + std::string(n, ' ') + "\n" + std::string(n, ' ') + "x";
  }
  return text + std::string(40, ' ');
}

// Previous tokens of every kind: the tokens of varied texts (words, code,
// digits, white space runs, punctuation, accents and CJK), then tokens
// spread over the vocabulary.
std::vector<uint32_t> sample_previous_tokens(const Encoder& encoder, const Vocabulary& vocab, size_t spread) {
  std::vector<uint32_t> prevs;
  for (const char* text : {"The quick brown fox's tale, isn't it?", "  if (x == 10) {\n    return y;\n  }\n",
                           "{\"key\": [1, 2.5e-3, \"caf\xC3\xA9\"]}", "12345678 + 0.25 =", "\t\t\n\n   x  ",
                           "'%@example.com \xE4\xBD\xA0\xE5\xA5\xBD", "...!?---:)",
                           // Gujarati, Devanagari, Cyrillic: letters and marks o200k's
                           // pieces reach past before giving back.
                           "\xE0\xAA\x97\xE0\xAB\x81\xE0\xAA\x9C\xE0\xAA\xB0\xE0\xAA\xBE\xE0\xAA\xA4\xE0\xAB\x80 "
                           "\xE0\xA4\xAD\xE0\xA4\xBE\xE0\xA4\xB7\xE0\xA4\xBE \xD0\xA0\xD1\x83\xD1\x81\xD1\x81\xD0\xBA\xD0\xB8\xD0\xB9"})
    for (uint32_t t : encoder.encode_continuation(text)) prevs.push_back(t);
  // Runs of white space before a word: the longest tokens of a byte-level
  // vocabulary, whose piece the pre-tokenizer ends a character early.
  for (const std::string& text : {std::string(128, ' ') + "word", std::string(40, ' ') + "x", std::string(9, '\n') + "y",
                                  std::string("\xE3\x80\x80\xE3\x80\x80\xE3\x80\x80z"),
                                  std::string(" \xC2\xA0\xC2\xA0\xC2\xA0w")})
    for (uint32_t t : encoder.encode_continuation(text)) prevs.push_back(t);
  for (size_t i = 0; i < spread; ++i) prevs.push_back(static_cast<uint32_t>((i * 7919 + 13) % vocab.size()));
  std::sort(prevs.begin(), prevs.end());
  prevs.erase(std::unique(prevs.begin(), prevs.end()), prevs.end());
  return prevs;
}

// Tokens that end in a run of one byte (`ss`, `----`, `%%%%`): next to a
// token that begins with the same byte, merges of equal keys meet on both
// sides of the pair, where the leftmost goes first. Up to `count`, one per
// last byte and run length.
std::vector<uint32_t> run_ending_tokens(const Vocabulary& vocab, size_t count) {
  std::vector<uint32_t> out;
  std::set<std::pair<char, size_t>> seen;
  for (uint32_t t = 0; t < vocab.size() && out.size() < count; ++t) {
    if (vocab.is_special(t)) continue;
    const std::string_view bytes = vocab.bytes(t);
    size_t run = 0;
    while (run < bytes.size() && bytes[bytes.size() - 1 - run] == bytes.back()) ++run;
    if (run >= 2 && static_cast<unsigned char>(bytes.back()) < 0x80 && seen.insert({bytes.back(), std::min<size_t>(run, 4)}).second)
      out.push_back(t);
  }
  return out;
}

// Every pair the fast path decides (pieces by hitEnd, merges by the edge
// index) is the encoder's own answer; `stride` thins the next tokens.
void fast_path_equals_encoder(const CompiledGrammar& g, std::span<const uint32_t> prevs, uint32_t stride) {
  const CanonicalPairs* pairs = g.canonical_pairs();
  REQUIRE(pairs);
  REQUIRE(pairs->has_fast_path());
  const auto n = static_cast<uint32_t>(g.vocabulary().size());
  size_t checked = 0, allowed = 0;
  for (uint32_t prev : prevs) {
    for (uint32_t next = prev % stride; next < n; next += stride) {
      const int decided = pairs->decided_pair(prev, next);
      const int reference = pairs->reference_pair(prev, next);
      if (decided != reference) {
        FAIL_CHECK("pair '" << g.vocabulary().display(prev) << "' (" << prev << "), '" << g.vocabulary().display(next)
                            << "' (" << next << "): fast path " << decided << ", encoder " << reference);
      }
      ++checked;
      allowed += reference != 2;
    }
  }
  CHECK(allowed > 0);
  CHECK(allowed < checked);
  WARN("fast path equals the encoder on " << checked << " pairs (" << allowed << " allowed)");
}

}  // namespace

// Where the first piece of three tokens settles their answer (it ends
// inside a token, or with the middle one), it is the encoder's; each
// (before, prev) is met with many next tokens, so that what the first
// left for the pair is used by the others. Returns the triples decided.
size_t pieces_equal_encoder_on_triples(const CompiledGrammar& g, const std::vector<std::string>& texts,
                                       uint32_t stride) {
  const CanonicalPairs* pairs = g.canonical_pairs();
  REQUIRE(pairs);
  const Encoder& encoder = encoder_of(g);
  const auto n = static_cast<uint32_t>(g.vocabulary().size());
  size_t decided = 0, never = 0;
  for (const std::string& text : texts) {
    const std::vector<uint32_t> tokens = encoder.encode_continuation(text);
    for (size_t i = 0; i + 1 < tokens.size(); ++i)
      for (uint32_t next = (tokens[i] + tokens[i + 1]) % stride; next < n; next += stride) {
        const int fast = pairs->decided_triple(tokens[i], tokens[i + 1], next);
        if (fast < 0) continue;
        ++decided;
        never += fast == 2;
        const int reference = pairs->reference_triple(tokens[i], tokens[i + 1], next);
        if (fast != reference)
          FAIL_CHECK("'" << g.vocabulary().display(tokens[i]) << "' '" << g.vocabulary().display(tokens[i + 1]) << "' '"
                         << g.vocabulary().display(next) << "': pieces " << fast << ", encoder " << reference);
      }
  }
  CHECK(never > 0);
  CHECK(never < decided);  // some decided at the middle token's end, not refused
  return decided;
}

// Texts whose token pairs share a piece, or end one: white space runs of
// every kind before words, operators, tabs.
std::vector<std::string> piece_texts() {
  return {std::string(70, ' ') + "word", "x" + std::string(3, '\n') + "  y", "tab\t\t\tz",
          "a\xE3\x80\x80\xE3\x80\x80\xE3\x80\x80" "b", "a\xC2\xA0\xC2\xA0\xC2\xA0" "b", "q\xE2\x80\x83\xE2\x80\x83r",
          "x   = y", "'%@example.com", "  if (x == 10) {\n    return y;\n  }\n"};
}

// A byte-level BPE vocabulary written here (GPT-2's byte alphabet and split
// pattern): the 256 bytes, U+3000 (ideographic space) and two of them.
std::shared_ptr<const Vocabulary> ideographic_space_vocabulary() {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::vector<uint32_t> shown(256);
  for (int b : bs) shown[static_cast<size_t>(b)] = static_cast<uint32_t>(b);
  uint32_t extra = 256;
  for (int b = 0; b < 256; ++b)
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) shown[static_cast<size_t>(b)] = extra++;
  auto text = [&](std::string_view bytes) {
    std::string out;
    for (char c : bytes) append_utf8(out, shown[static_cast<uint8_t>(c)]);
    return out;
  };
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[text(std::string(1, static_cast<char>(b)))] = b;
  const std::string space = "\xE3\x80\x80";
  vocab[text("\xE3\x80")] = 256;
  vocab[text(space)] = 257;
  vocab[text(space + space)] = 258;
  const nlohmann::json merges = {text("\xE3") + " " + text("\x80"), text("\xE3\x80") + " " + text("\x80"),
                                 text(space) + " " + text(space)};
  const nlohmann::json tokenizer = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}}},
      {"added_tokens", {{{"id", 259}, {"content", "<eos>"}, {"special", true}}}}};
  auto loaded = Vocabulary::from_memory(tokenizer.dump(), "ideographic-space");
  INFO((!loaded.ok() ? loaded.error().message : ""));
  REQUIRE(loaded.ok());
  return *loaded;
}

TEST_CASE("canonical mode: white space after a pair is Unicode's, as pre-tokenizers read it", "[canonical]") {
  // After a letter, two U+3000 before a word are two tokens: `\s+(?!\S)`
  // takes the first, `\s+` the second. At the end of the text they merge,
  // so the pair is written so only before some text, which must be tried
  // after any white space, not only ASCII's.
  auto g = compile_canonical(R"(start ::= any!* ;)", ideographic_space_vocabulary());
  const std::vector<uint32_t> tokens = encoder_of(*g).encode_continuation("b\xE3\x80\x80\xE3\x80\x80" "c");
  REQUIRE(tokens == std::vector<uint32_t>{'b', 257, 257, 'c'});
  CHECK(accept_document(g, "b\xE3\x80\x80\xE3\x80\x80" "c") == 4);
  CHECK(encoder_of(*g).encode_continuation("\xE3\x80\x80\xE3\x80\x80") == std::vector<uint32_t>{258});
}

TEST_CASE("canonical mode: the fast path decides every pair as the encoder does", "[canonical]") {
  auto g = compile_canonical(R"(start ::= any!* ;)");
  fast_path_equals_encoder(*g, sample_previous_tokens(encoder_of(*g), g->vocabulary(), 24), 3);
  fast_path_equals_encoder(*g, run_ending_tokens(g->vocabulary(), 40), 1);
}

TEST_CASE("canonical mode: merges of equal keys across a pair go leftmost first, as the encoder's",
          "[canonical][long]") {
  for (const char* name : {"llama3-tokenizer.json", "cl100k_base.tiktoken", "o200k_base.tiktoken", "gemma-tokenizer.json"}) {
    INFO(name);
    if (!test::shared_vocab(name)) return test::skip_without_shared(name);
    auto vocab = (*(Vocabulary::load(*test::shared_vocab(name))));
    auto g = compile_canonical(R"(start ::= any!* ;)", vocab);
    const std::vector<uint32_t> prevs = run_ending_tokens(*vocab, 48);
    CHECK(prevs.size() > 20);
    fast_path_equals_encoder(*g, prevs, 3);
  }
}

TEST_CASE("canonical mode is sound: every ended walk is the tokenizer's own encoding", "[canonical]") {
  WalkCounts counts;
  for (const char* name : {"json.cgram", "record.cgram", "csv.cgram", "arithmetic.cgram", "markup.cgram"}) {
    INFO(name);
    sound_walks(test::read_example(name), test::bundled_vocabulary(), std::hash<std::string>()(name), 10, 20, counts);
    sound_walks(test::read_example(name), test::bundled_vocabulary(), std::hash<std::string>()(name) + 1, 4, 40,
                counts, true);
  }
  CHECK(counts.ended > 0);
  WARN("canonical walks (bundled vocabulary): " << counts.walks << " walks, " << counts.ended << " ended, "
                                                << counts.dead_ends << " dead ends, " << counts.steps << " steps, "
                                                << counts.masks << " full masks checked");
}

TEST_CASE("canonical mode is complete: every valid document's own encoding is accepted", "[canonical]") {
  size_t tokens = 0, documents = 0;
  for (const test::SuiteGrammar& s : test::suite_grammars()) {
    INFO(s.label);
    auto g = compile_canonical(s.source);
    for (const std::string& doc : s.documents) {
      tokens += accept_document(g, doc);
      ++documents;
    }
  }
  WARN("canonical completeness (bundled vocabulary): " << documents << " documents, " << tokens << " tokens");
}

TEST_CASE("canonical mode: a non-canonical spelling is refused, the canonical one taken", "[canonical]") {
  auto g = compile_canonical(R"(start ::= #'[a-z ]+' ;)");
  const Encoder& encoder = encoder_of(*g);
  const std::vector<uint32_t> own = encoder.encode_continuation("hello world");
  REQUIRE(own.size() < 11);  // merged tokens exist
  // Spelling it letter by letter is refused at the first letter that would merge.
  const uint32_t h = encoder.encode_continuation("h").at(0), e = encoder.encode_continuation("e").at(0);
  REQUIRE(encoder.encode_continuation("he").size() == 1);  // "he" is one token
  Matcher m(g);
  REQUIRE(m.advance(h) == AdvanceResult::Ongoing);
  CHECK_FALSE(m.is_allowed(e));
  CHECK(m.advance(e) == AdvanceResult::Rejected);
  // The plain (non-canonical) grammar allows it.
  Matcher p(compile_plain(R"(start ::= #'[a-z ]+' ;)"));
  REQUIRE(p.advance(h) == AdvanceResult::Ongoing);
  CHECK(p.advance(e) == AdvanceResult::Ongoing);
  // The canonical encoding is taken whole.
  Matcher again(g);
  for (uint32_t t : own) REQUIRE(again.advance(t) == AdvanceResult::Ongoing);
}

TEST_CASE("canonical mode: refused for a plain token list; kept by AOT objects", "[canonical]") {
  auto list = (*(Vocabulary::from_tokens({"a", "b", "</s>"}, {2})));
  CompileOptions options;
  options.canonical = true;
  auto refused = CompiledGrammar::compile(test::grammar("start ::= 'ab' ;"), list, options);
  REQUIRE(!refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("canonical mode needs a merge-based vocabulary"));

  auto g = compile_canonical(test::read_example("json.cgram"));
  const std::string path = (std::filesystem::temp_directory_path() / "cgram_canonical_test.so").string();
  REQUIRE(save_shared_object(*g, path).ok());
  auto loaded = load_shared_object(path, test::bundled_vocabulary());
  std::filesystem::remove(path);
  REQUIRE(loaded.ok());
  auto aot = *loaded;
  CHECK(aot->is_canonical());
  Matcher a(g), b(aot);
  const std::vector<uint32_t> tokens = encoder_of(*g).encode_continuation(R"({"a": [1, 2]})");
  for (uint32_t t : tokens) {
    CHECK(a.current_possible_tokens() == b.current_possible_tokens());
    REQUIRE(a.advance(t) == AdvanceResult::Ongoing);
    REQUIRE(b.advance(t) == AdvanceResult::Ongoing);
  }
}

TEST_CASE("canonical mode with Llama 3: sound walks and complete documents", "[canonical][long]") {
  if (!test::shared_vocab("llama3-tokenizer.json")) return test::skip_without_shared("llama3-tokenizer.json");
  const std::string path = *test::shared_vocab("llama3-tokenizer.json");
  auto vocab = (*(Vocabulary::load(path)));
  {
    auto g = compile_canonical(R"(start ::= any!* ;)", vocab);
    fast_path_equals_encoder(*g, sample_previous_tokens(encoder_of(*g), *vocab, 16), 5);
    WARN("three tokens decided by their first piece, as the encoder does: "
         << pieces_equal_encoder_on_triples(*g, piece_texts(), 7));
  }
  WalkCounts counts;
  for (const char* name : {"json.cgram", "record.cgram", "csv.cgram"})
    sound_walks(test::read_example(name), vocab, 5, 4, 16, counts);
  for (const char* name : {"json.cgram", "record.cgram", "markup.cgram"})
    sound_walks(test::read_example(name), vocab, 9, 4, 60, counts, true);
  WARN("canonical walks (Llama 3): " << counts.walks << " walks, " << counts.ended << " ended, " << counts.dead_ends
                                     << " dead ends");
  size_t tokens = 0;
  for (const test::SuiteGrammar& s : test::suite_grammars()) {
    if (s.label.find("regex") == std::string::npos) continue;  // one spelling per format
    INFO(s.label);
    auto g = compile_canonical(s.source, vocab);
    for (const std::string& doc : s.documents) tokens += accept_document(g, doc);
  }
  tokens += accept_document(compile_canonical(R"(start ::= any!* ;)", vocab), white_space_runs());
  WARN("canonical completeness (Llama 3): " << tokens << " tokens");
}

TEST_CASE("canonical mode's fast path with tiktoken and SentencePiece merges", "[canonical][long]") {
  // cl100k and o200k (tiktoken ranks, each its own pre-tokenizer regex) and
  // Gemma (SentencePiece with merges and byte fallback, no pre-tokenizer).
  for (const char* name : {"cl100k_base.tiktoken", "o200k_base.tiktoken", "gemma-tokenizer.json"}) {
    INFO(name);
    if (!test::shared_vocab(name)) return test::skip_without_shared(name);
    const std::string path = *test::shared_vocab(name);
    auto vocab = (*(Vocabulary::load(path)));
    auto g = compile_canonical(R"(start ::= any!* ;)", vocab);
    fast_path_equals_encoder(*g, sample_previous_tokens(encoder_of(*g), *vocab, 8), 7);
    if (g->vocabulary().kind() != TokenizerKind::SentencePiece) pieces_equal_encoder_on_triples(*g, piece_texts(), 11);
    size_t tokens = 0;
    for (const test::SuiteGrammar& s : test::suite_grammars()) {
      if (s.label != "json/regex" && s.label != "sql/regex") continue;
      INFO(s.label);
      auto sg = compile_canonical(s.source, vocab);
      for (const std::string& doc : s.documents) tokens += accept_document(sg, doc);
    }
    tokens += accept_document(g, white_space_runs());
    CHECK(tokens > 0);
    WalkCounts counts;
    sound_walks(test::read_example("record.cgram"), vocab, 13, 3, 60, counts, true);
    CHECK(counts.walks == 3);
  }
}

TEST_CASE("canonical mode: rows made whole from the piece automaton equal the encoder, class by class",
          "[canonical][long]") {
  // Every previous token in one class (the same automaton state after it)
  // shares how next tokens' pieces are cut; four of each class, against
  // every third next token.
  for (const char* name : {"llama3-tokenizer.json", "cl100k_base.tiktoken", "o200k_base.tiktoken"}) {
    INFO(name);
    if (!test::shared_vocab(name)) return test::skip_without_shared(name);
    auto vocab = (*(Vocabulary::load(*test::shared_vocab(name))));
    auto g = compile_canonical(R"(start ::= any!* ;)", vocab);
    size_t classes = 0;
    const std::vector<uint32_t> prevs = g->canonical_pairs()->row_class_samples(4, &classes);
    CHECK(classes > 10);
    fast_path_equals_encoder(*g, prevs, 3);
    WARN(name << ": " << classes << " classes of previous tokens");
  }
}

TEST_CASE("canonical mode: rows made whole after two tokens equal the one-by-one decisions", "[canonical][long]") {
  // The token before matters where it shares a piece with the previous one
  // (runs of spaces, of punctuation, long words, digits, CJK): every next
  // token's verdict after each such pair, whole rows against one by one.
  for (const char* name : {"llama3-tokenizer.json", "cl100k_base.tiktoken", "o200k_base.tiktoken"}) {
    INFO(name);
    if (!test::shared_vocab(name)) return test::skip_without_shared(name);
    auto vocab = (*(Vocabulary::load(*test::shared_vocab(name))));
    auto g = compile_canonical(R"(start ::= any!* ;)", vocab);
    const Encoder& encoder = encoder_of(*g);
    auto whole = CanonicalPairs::create(vocab, encoder);
    auto one_by_one = CanonicalPairs::create(vocab, encoder);
    REQUIRE(whole);
    REQUIRE(one_by_one);
    (*one_by_one)->make_rows_whole(false);
    std::vector<std::string> texts = piece_texts();
    for (const char* text : {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "((((((((((((((((((((", "12345678901234567",
                             "!!!!!!!!!!!!!!!!!!!!!!!!!", "  \n\n\t  x", "isn't can't you're 'S 's", "'''''''s",
                             "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C\xE4\xBD\xA0\xE5\xA5\xBD",
                             "    return x;\n}\n\n\n", ".....,,,,,;;;;;----", "__init__.py::TestCase"})
      texts.emplace_back(text);
    std::vector<std::pair<uint32_t, uint32_t>> pairs;
    for (const std::string& text : texts) {
      const std::vector<uint32_t> tokens = encoder.encode_continuation(text);
      for (size_t i = 1; i < tokens.size(); ++i) pairs.emplace_back(tokens[i - 1], tokens[i]);
    }
    // Runs of one character, the longest tokens: two of them together.
    std::vector<uint32_t> runs;
    for (uint32_t t = 0; t < vocab->size(); ++t) {
      const std::string_view bytes = vocab->bytes(t);
      if (bytes.size() >= 2 && !vocab->is_special(t) &&
          bytes.find_first_not_of(bytes[0]) == std::string_view::npos)
        runs.push_back(t);
    }
    std::mt19937 rng(5);
    for (size_t i = 0; i < 60 && !runs.empty(); ++i) {
      const uint32_t a = runs[rng() % runs.size()];
      auto same = std::find_if(runs.begin() + static_cast<long>(rng() % runs.size()), runs.end(),
                               [&](uint32_t b) { return vocab->bytes(b)[0] == vocab->bytes(a)[0]; });
      pairs.emplace_back(a, same != runs.end() ? *same : a);
    }
    const size_t words = (vocab->size() + 31) / 32;
    for (const auto& [before, prev] : pairs) {
      std::vector<uint32_t> a(words, ~0u), b(words, ~0u);
      (*whole)->filter(before, prev, a);
      (*one_by_one)->filter(before, prev, b);
      INFO("after '" << vocab->display(before) << "', '" << vocab->display(prev) << "'");
      CHECK(test::set_bits(a) == test::set_bits(b));
    }
    WARN(name << ": whole rows equal one-by-one decisions after " << pairs.size() << " pairs of tokens");
  }
}

namespace {
// Every mask after a few pairs of tokens, as a filter gives it.
std::vector<std::set<uint32_t>> masks_after(const CanonicalPairs& pairs, const Vocabulary& vocab,
                                            const std::vector<uint32_t>& tokens) {
  std::vector<std::set<uint32_t>> out;
  for (size_t i = 1; i < tokens.size(); ++i) {
    std::vector<uint32_t> words((vocab.size() + 31) / 32, ~0u);
    pairs.filter(tokens[i - 1], tokens[i], words);
    out.push_back(test::set_bits(words));
  }
  return out;
}

void saved_context_round_trip(const std::shared_ptr<const Vocabulary>& vocab, const std::string& text) {
  auto encoder = Encoder::create(vocab);
  REQUIRE(encoder);
  auto made = CanonicalPairs::create(vocab, **encoder);
  REQUIRE(made);
  const std::string bytes = (*made)->save();
  auto loaded = CanonicalPairs::load(vocab, **encoder, bytes);
  INFO((loaded ? "" : loaded.error().message));
  REQUIRE(loaded);
  CHECK((*loaded)->classes() == (*made)->classes());
  CHECK((*loaded)->save() == bytes);
  const std::vector<uint32_t> tokens = (*encoder)->encode_continuation(text);
  REQUIRE(tokens.size() > 3);
  CHECK(masks_after(**loaded, *vocab, tokens) == masks_after(**made, *vocab, tokens));
}
}  // namespace

TEST_CASE("canonical: the vocabulary's context saved and loaded decides as made", "[canonical]") {
  // SentencePiece (the bundled vocabulary: one piece, merges alone) and a
  // byte-level BPE with a pre-tokenizer (piece cuts by class).
  saved_context_round_trip(test::bundled_vocabulary(), "The quick brown fox, 12 times: \"ok\"\n  done.");
  saved_context_round_trip(ideographic_space_vocabulary(),
                           "b\xE3\x80\x80\xE3\x80\x80" "c  d\n\ne's 123 x\xE3\x80\x80");
}

TEST_CASE("canonical: a saved context is refused for another vocabulary, or damaged", "[canonical]") {
  auto vocab = test::bundled_vocabulary();
  auto encoder = Encoder::create(vocab);
  REQUIRE(encoder);
  const std::string bytes = (*CanonicalPairs::create(vocab, **encoder))->save();
  auto refused = [&](std::shared_ptr<const Vocabulary> v, const Encoder& e, std::string_view b,
                     std::string_view why) {
    auto loaded = CanonicalPairs::load(std::move(v), e, b);
    REQUIRE(!loaded);
    CHECK(loaded.error().code == ErrorCode::InvalidInput);
    INFO(loaded.error().message);
    CHECK(loaded.error().message.find(why) != std::string::npos);
  };
  auto other = ideographic_space_vocabulary();
  auto other_encoder = Encoder::create(other);
  REQUIRE(other_encoder);
  refused(other, **other_encoder, bytes, "another vocabulary");
  refused(vocab, **encoder, std::string_view(bytes).substr(0, bytes.size() / 2), "checksum");
  std::string flipped = bytes;
  flipped[flipped.size() / 3] ^= 0x10;
  refused(vocab, **encoder, flipped, "checksum");
  refused(vocab, **encoder, "", "checksum");
  refused(vocab, **encoder, std::string(64, 'x'), "checksum");
}

TEST_CASE("canonical: a context saved under CGRAM_VOCAB_DIR is found by fingerprint", "[canonical]") {
  const auto dir = std::filesystem::temp_directory_path() / "cgram-vocab-dir-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ::setenv("CGRAM_VOCAB_DIR", dir.c_str(), 1);
  auto fresh = [] { return *Vocabulary::bundled(); };  // a new object: a context of its own
  {
    auto vocab = fresh();
    const std::string path = VocabularyContext::saved_path(*vocab);
    REQUIRE(path.starts_with(dir.string()));
    auto encoder = Encoder::create(vocab);
    REQUIRE(encoder);
    std::ofstream(path, std::ios::binary) << (*CanonicalPairs::create(vocab, **encoder))->save();
    auto context = VocabularyContext::of(vocab);
    REQUIRE(context->canonical_pairs());
    CHECK(context->saved_note().empty());
  }
  {
    // A damaged file is passed over, said so, and the filter made anew.
    auto vocab = fresh();
    std::ofstream(VocabularyContext::saved_path(*vocab), std::ios::binary) << "not a context";
    auto context = VocabularyContext::of(vocab);
    REQUIRE(context->canonical_pairs());
    CHECK(context->saved_note().find("made anew") != std::string::npos);
    // Once made, a saved one is refused rather than swapped in under users.
    CHECK(!context->use_saved_canonical("x"));
  }
  {
    // A saved file that is a symlink loop: no exception, a note, made anew.
    auto vocab = fresh();
    const std::string path = VocabularyContext::saved_path(*vocab);
    std::filesystem::remove(path);
    std::filesystem::create_symlink(path, path);
    auto context = VocabularyContext::of(vocab);
    REQUIRE(context->canonical_pairs());
    CHECK(context->saved_note().find("made anew") != std::string::npos);
    std::filesystem::remove(path);
  }
  {
    // A directory whose name is longer than a file name may be: the same.
    ::setenv("CGRAM_VOCAB_DIR", (dir / std::string(300, 'd')).c_str(), 1);
    auto vocab = fresh();
    auto context = VocabularyContext::of(vocab);
    REQUIRE(context->canonical_pairs());
    CHECK(context->saved_note().find("made anew") != std::string::npos);
  }
  ::unsetenv("CGRAM_VOCAB_DIR");
  std::filesystem::remove_all(dir);
}

TEST_CASE("canonical: the encoder and the pairs are built once per vocabulary, shared by its grammars",
          "[canonical]") {
  auto a = compile_canonical("start ::= #'[a-z]+' ;");
  auto b = compile_canonical("start ::= 'x' #'[0-9]+' ;");
  CHECK(&a->vocabulary_context() == &b->vocabulary_context());
  CHECK(&encoder_of(*a) == &encoder_of(*b));
  REQUIRE(a->canonical_pairs());
  CHECK(a->canonical_pairs() == b->canonical_pairs());
  // A grammar compiled without canonical mode shares the context, not the filter.
  auto plain = (*CompiledGrammar::compile(test::grammar("start ::= 'y' ;"), test::bundled_vocabulary()));
  CHECK(&plain->vocabulary_context() == &a->vocabulary_context());
  CHECK(plain->canonical_pairs() == nullptr);
  // Another vocabulary (even with the same tokens) has a context of its own.
  auto copy = (*(Vocabulary::bundled()));
  auto other = compile_canonical("start ::= #'[a-z]+' ;", copy);
  CHECK(&other->vocabulary_context() != &a->vocabulary_context());
}

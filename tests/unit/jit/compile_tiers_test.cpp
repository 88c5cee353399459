// The compile tiers give the table tier's masks bit for bit: JIT kernels
// (installed before the first mask, and in the middle of a sequence:
// tier-up), and AOT shared objects, on every example and benchmark-suite
// grammar, on documents and random walks. Then every refusal of a
// mismatched or damaged shared object, and the Compiler (one call per tier, its cache).
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "binary_io.h"
#include "compiler.h"
#include "encoder.h"
#include "helpers.h"
#include "kernel_jit.h"
#include "matcher.h"
#include "shared_object.h"
#include "version.h"

using namespace cgram;
namespace fs = std::filesystem;

namespace {

struct TierCase {
  std::string label, source, document;
};

// Every example, and every spelling of every suite format with its first document.
std::vector<TierCase> tier_cases() {
  std::vector<TierCase> out;
  for (const std::string& name : test::example_names()) out.push_back({name, test::read_example(name), ""});
  for (const test::SuiteGrammar& g : test::suite_grammars())
    out.push_back({g.label, g.source, g.documents.empty() ? "" : g.documents[0]});
  return out;
}

std::shared_ptr<const CompiledGrammar> compile(const std::string& source, std::shared_ptr<const Vocabulary> vocab,
                                               bool eager = false) {
  CompileOptions options;
  options.eager_index = eager;
  auto result = CompiledGrammar::compile(test::grammar(source), std::move(vocab), options);
  REQUIRE(result.ok());
  return (*result);
}

std::shared_ptr<jit::KernelJit> kernel_jit() {
  static auto jit = [] {
    auto created = jit::KernelJit::create();
    REQUIRE(created.ok());
    return (*created);
  }();
  return jit;
}

void install_jit(const CompiledGrammar& g) {
  auto kernels = kernel_jit()->compile(g);
  INFO((!kernels.ok() ? kernels.error().message : ""));
  REQUIRE(kernels.ok());
  REQUIRE(g.install_kernels(*kernels));
}

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("cgram_tiers_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

// The same steps on both grammars: a document's tokens, then random picks
// from the reference mask. Masks, can_end and every advance must agree.
// `midway` runs once, after `midway_step` steps (tier-up in the middle).
size_t compare_tiers(const std::shared_ptr<const CompiledGrammar>& reference,
                     const std::shared_ptr<const CompiledGrammar>& other, const std::vector<uint32_t>& tokens,
                     uint64_t seed, size_t random_steps, size_t midway_step = SIZE_MAX,
                     const std::function<void()>& midway = {}) {
  Matcher a(reference), b(other);
  const Vocabulary& vocab = reference->vocabulary();
  std::vector<uint32_t> wa(a.mask_words()), wb(b.mask_words());
  std::mt19937_64 rng(seed);
  size_t steps = 0;
  for (size_t i = 0; i < tokens.size() + random_steps; ++i) {
    if (i == midway_step && midway) midway();
    a.fill_mask(wa);
    b.fill_mask(wb);
    INFO("step " << i);
    REQUIRE(wa == wb);
    REQUIRE(a.can_end() == b.can_end());
    ++steps;
    uint32_t token;
    if (i < tokens.size()) {
      token = tokens[i];
      if (!(wa[token / 32] >> (token % 32) & 1)) break;  // the document leaves the language
    } else {
      std::vector<uint32_t> allowed;
      for (uint32_t id = 0; id < vocab.size(); ++id)
        if ((wa[id / 32] >> (id % 32) & 1) && !vocab.is_eos(id)) allowed.push_back(id);
      if (allowed.empty()) break;
      token = allowed[rng() % allowed.size()];
    }
    REQUIRE(a.advance(token) == b.advance(token));
  }
  return steps;
}

std::vector<uint32_t> document_tokens(const std::shared_ptr<const Vocabulary>& vocab, const std::string& text,
                                      size_t limit) {
  if (text.empty()) return {};
  auto created = Encoder::create(vocab);
  REQUIRE(created.ok());
  std::vector<uint32_t> tokens = (*created)->encode_continuation(text);
  if (tokens.size() > limit) tokens.resize(limit);
  return tokens;
}

void jit_equals_table(const std::shared_ptr<const Vocabulary>& vocab, size_t doc_tokens, size_t random_steps) {
  size_t steps = 0;
  for (const TierCase& c : tier_cases()) {
    INFO(c.label << " with " << vocab->name());
    auto table = compile(c.source, vocab);
    auto jitted = compile(c.source, vocab);
    install_jit(*jitted);
    REQUIRE(std::string(jitted->tier()) == "jit");
    const auto tokens = document_tokens(vocab, c.document, doc_tokens);
    steps += compare_tiers(table, jitted, tokens, 1, random_steps);
    steps += compare_tiers(table, jitted, {}, 2, random_steps);
  }
  WARN("JIT against table tier, " << vocab->name() << ": " << steps << " steps, every mask equal");
}

void aot_equals_table(const std::shared_ptr<const Vocabulary>& vocab, size_t doc_tokens, size_t random_steps) {
  size_t steps = 0;
  const std::string path = temp_path("tier.so");
  for (const TierCase& c : tier_cases()) {
    INFO(c.label << " with " << vocab->name());
    auto table = compile(c.source, vocab);
    auto eager = compile(c.source, vocab, /*eager=*/true);
    auto saved = save_shared_object(*eager, path);
    INFO((!saved.ok() ? saved.error().message : ""));
    REQUIRE(saved.ok());
    auto loaded = load_shared_object(path, vocab);
    INFO((!loaded.ok() ? loaded.error().message : ""));
    REQUIRE(loaded.ok());
    auto aot = *loaded;
    REQUIRE(std::string(aot->tier()) == "aot");
    CHECK(aot->grammar() == nullptr);
    CHECK(aot->grammar_hash() == eager->grammar_hash());
    const auto tokens = document_tokens(vocab, c.document, doc_tokens);
    steps += compare_tiers(table, aot, tokens, 3, random_steps);
    steps += compare_tiers(table, aot, {}, 4, random_steps);
  }
  fs::remove(path);
  WARN("AOT against table tier, " << vocab->name() << ": " << steps << " steps, every mask equal");
}

const std::string& json_source() {
  static const std::string source = test::read_example("json.cgram");
  return source;
}

// A saved JSON object for the refusal tests (compiled once).
const std::string& json_object() {
  static const std::string path = [] {
    const std::string p = temp_path("json.so");
    auto g = compile(json_source(), test::bundled_vocabulary(), true);
    REQUIRE(save_shared_object(*g, p).ok());
    return p;
  }();
  return path;
}

std::string refusal(const std::string& path, std::shared_ptr<const Vocabulary> vocab = test::bundled_vocabulary(),
                    const SharedObjectLimits& limits = {}) {
  auto loaded = load_shared_object(path, std::move(vocab), limits);
  REQUIRE(!loaded.ok());
  return loaded.error().message;
}

// A copy of the JSON object with `edit` applied to its bytes.
std::string edited_copy(const std::string& name, const std::function<void(std::string&)>& edit) {
  std::string bytes = test::read_file(json_object());
  edit(bytes);
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

SharedObjectTrailer trailer_of(const std::string& bytes) {
  SharedObjectTrailer t;
  std::memcpy(&t, bytes.data() + bytes.size() - sizeof(t), sizeof(t));
  return t;
}

void set_trailer(std::string& bytes, const SharedObjectTrailer& t) {
  std::memcpy(bytes.data() + bytes.size() - sizeof(t), &t, sizeof(t));
}

}  // namespace

TEST_CASE("tiers: JIT kernels give the table tier's masks on every example and suite grammar", "[tiers][jit]") {
  jit_equals_table(test::bundled_vocabulary(), 24, 8);
}

TEST_CASE("tiers: a matcher tiers up in the middle of a sequence with the same masks", "[tiers][jit]") {
  auto vocab = test::bundled_vocabulary();
  for (const char* name : {"json.cgram", "c_subset.cgram", "reply.cgram"}) {
    INFO(name);
    const std::string source = test::read_example(name);
    auto reference = compile(source, vocab);
    auto tiered = compile(source, vocab);
    size_t steps = compare_tiers(reference, tiered, {}, 5, 30, 10, [&] {
      CHECK(std::string(tiered->tier()) == "table");
      install_jit(*tiered);
    });
    CHECK(std::string(tiered->tier()) == "jit");
    CHECK(steps > 10);
  }
}

TEST_CASE("tiers: kernels are installed once", "[tiers][jit]") {
  auto g = compile(json_source(), test::bundled_vocabulary());
  install_jit(*g);
  auto again = kernel_jit()->compile(*g);
  REQUIRE(again.ok());
  CHECK_FALSE(g->install_kernels(*again));
  CHECK_FALSE(g->install_kernels(nullptr));
  // Kernels bound to another grammar's tables are refused.
  auto other = compile(json_source(), test::bundled_vocabulary());
  auto foreign = kernel_jit()->compile(*g);
  REQUIRE(foreign.ok());
  CHECK_FALSE(other->install_kernels(*foreign));
}

TEST_CASE("tiers: AOT shared objects give the table tier's masks on every example and suite grammar",
          "[tiers][aot]") {
  aot_equals_table(test::bundled_vocabulary(), 24, 8);
}

TEST_CASE("tiers, exhaustive: JIT and AOT on three vocabulary kinds", "[long][tiers]") {
  if (!test::shared_vocab("llama3-tokenizer.json")) return test::skip_without_shared("llama3-tokenizer.json");
  const std::string shared = test::shared_dir() + "/vocab/";
  for (std::string file : {"llama3-tokenizer.json", "gemma-tokenizer.json", "cl100k_base.tiktoken"}) {
    auto vocab = (*(Vocabulary::load(shared + file)));
    jit_equals_table(vocab, 64, 24);
    aot_equals_table(vocab, 64, 24);
  }
}

TEST_CASE("AOT: the object holds what was compiled and loads without the grammar", "[aot]") {
  auto loaded = load_shared_object(json_object(), test::bundled_vocabulary());
  REQUIRE(loaded.ok());
  auto g = *loaded;
  CHECK(g->source_name() == "test.cgram");
  const std::string bytes = test::read_file(json_object());
  const SharedObjectTrailer t = trailer_of(bytes);
  CHECK(std::string(t.magic, 8) == "CGRAMAOT");
  CHECK(t.abi_version == kAbiVersion);
  CHECK(std::string(t.cgram_version) == kVersion);
  CHECK(t.vocab_fingerprint == test::bundled_vocabulary()->fingerprint());
  CHECK(t.body_size + sizeof(t) == bytes.size());
  CHECK(bytes.compare(0, 4, "\x7f" "ELF") == 0);
}

TEST_CASE("AOT refuses an object compiled for another vocabulary", "[aot]") {
  auto other = (*(Vocabulary::from_tokens({"a", "b", "{", "}"}, {})));
  const std::string message = refusal(json_object(), other);
  CHECK_THAT(message, Catch::Contains("another vocabulary"));
  // The same tokens with other end-of-sequence ids are another vocabulary too.
  auto eos = (*(Vocabulary::from_tokens({"a", "b", "{", "}"}, {1})));
  CHECK(eos->fingerprint() != other->fingerprint());
}

TEST_CASE("AOT refuses an object of another cgram version", "[aot]") {
  auto path = edited_copy("version.so", [](std::string& bytes) {
    SharedObjectTrailer t = trailer_of(bytes);
    std::memset(t.cgram_version, 0, sizeof(t.cgram_version));
    std::memcpy(t.cgram_version, "0.0.9", 5);
    set_trailer(bytes, t);
  });
  const std::string message = refusal(path);
  CHECK_THAT(message, Catch::Contains("made by cgram 0.0.9") && Catch::Contains("recompile"));
}

TEST_CASE("AOT refuses an object of another ABI version", "[aot]") {
  auto path = edited_copy("abi.so", [](std::string& bytes) {
    SharedObjectTrailer t = trailer_of(bytes);
    t.abi_version = kAbiVersion + 1;
    set_trailer(bytes, t);
  });
  CHECK_THAT(refusal(path), Catch::Contains("ABI version"));
}

TEST_CASE("AOT refuses a truncated object", "[aot]") {
  auto cut_end = edited_copy("cut_end.so", [](std::string& bytes) { bytes.resize(bytes.size() - 100); });
  CHECK_THAT(refusal(cut_end), Catch::Contains("truncated"));
  // Cut in the middle, the trailer moved back to the end: the size disagrees.
  auto cut_middle = edited_copy("cut_middle.so", [](std::string& bytes) {
    const SharedObjectTrailer t = trailer_of(bytes);
    bytes.resize(bytes.size() / 2);
    bytes.append(reinterpret_cast<const char*>(&t), sizeof(t));
  });
  CHECK_THAT(refusal(cut_middle), Catch::Contains("truncated"));
}

TEST_CASE("AOT refuses an edited object", "[aot]") {
  auto path = edited_copy("edited.so", [](std::string& bytes) { bytes[bytes.size() / 2] ^= 0x40; });
  CHECK_THAT(refusal(path), Catch::Contains("corrupted"));
}

TEST_CASE("AOT refuses what is not a cgram object", "[aot]") {
  const std::string text = temp_path("grammar.so");
  std::ofstream(text) << json_source();
  CHECK_THAT(refusal(text), Catch::Contains("not a cgram object"));
  const std::string empty = temp_path("empty.so");
  std::ofstream{empty};
  CHECK_THAT(refusal(empty), Catch::Contains("not a cgram object"));
  // An ELF shared object without the trailer.
  auto stripped = edited_copy("stripped.so", [](std::string& bytes) { bytes.resize(trailer_of(bytes).body_size); });
  CHECK_THAT(refusal(stripped), Catch::Contains("not a complete cgram object"));
  CHECK_THAT(refusal(temp_path("missing.so")), Catch::Contains("No such file"));
  SharedObjectLimits small;
  small.max_file_bytes = 1000;
  CHECK_THAT(refusal(json_object(), test::bundled_vocabulary(), small), Catch::Contains("limit"));
}

TEST_CASE("saved tables carry a checksum: any damage is refused with its own message", "[aot]") {
  auto g = compile(json_source(), test::bundled_vocabulary(), true);
  const std::string tables = g->save_tables();
  REQUIRE((CompiledGrammar::load_tables(tables, test::bundled_vocabulary())).ok());
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    std::string damaged = tables;
    const size_t at = rng() % damaged.size();
    damaged[at] = static_cast<char>(damaged[at] ^ (1 + rng() % 255));  // one byte, always changed
    auto result = CompiledGrammar::load_tables(damaged, test::bundled_vocabulary());
    REQUIRE(!result.ok());
    CHECK_THAT(result.error().message, Catch::Contains("checksum does not match"));
  }
  auto cut = CompiledGrammar::load_tables(std::string_view(tables).substr(0, tables.size() - 1), test::bundled_vocabulary());
  REQUIRE(!cut.ok());
  CHECK_THAT(cut.error().message, Catch::Contains("checksum"));
  auto empty = CompiledGrammar::load_tables("", test::bundled_vocabulary());
  REQUIRE(!empty.ok());
  CHECK_THAT(empty.error().message, Catch::Contains("too short"));
}

TEST_CASE("AOT: the tables are checked, never trusted (random damage with a valid checksum)", "[aot]") {
  auto g = compile(json_source(), test::bundled_vocabulary(), true);
  const std::string sealed = g->save_tables();
  const std::string tables = sealed.substr(0, sealed.size() - sizeof(uint64_t));  // the payload
  REQUIRE(CompiledGrammar::seal_tables(tables) == sealed);
  std::mt19937 rng(11);
  size_t refused = 0, accepted = 0;
  for (int i = 0; i < 300; ++i) {
    std::string damaged = tables;
    switch (i % 3) {
      case 0:
        damaged.resize(rng() % damaged.size());
        break;
      case 1:
        for (int k = 0; k < 4; ++k) damaged[rng() % damaged.size()] = static_cast<char>(rng());
        break;
      default: {
        // A count or an index in the first part (the lexer and LR tables).
        const size_t at = rng() % std::min<size_t>(damaged.size() - 4, 4096);
        const uint32_t v = rng() % 3 == 0 ? UINT32_MAX : rng() % 1000;
        std::memcpy(damaged.data() + at, &v, 4);
      }
    }
    auto result = CompiledGrammar::load_tables(CompiledGrammar::seal_tables(damaged), test::bundled_vocabulary());
    if (!result.ok()) {
      ++refused;
      continue;
    }
    // Accepted: every index was in range, so masking must not crash.
    ++accepted;
    Matcher m(*result);
    std::vector<uint32_t> words(m.mask_words());
    m.fill_mask(words);
  }
  CHECK(refused > 150);
  WARN("damaged tables: " << refused << " refused, " << accepted << " accepted (in range)");
}

namespace {

// A server's compiler: a cache, a background JIT thread.
CompilerOptions serving(size_t cache_bytes = size_t{512} << 20) {
  CompilerOptions options;
  options.cache_bytes = cache_bytes;
  options.jit_threads = 1;
  return options;
}

CompileRequest request(std::string_view text, std::string_view name, std::string start = "start") {
  CompileRequest r;
  r.text = text;
  r.filename = name;
  r.parse.start = std::move(start);
  r.tier = Tier::Background;
  return r;
}

}  // namespace

TEST_CASE("compiler: cached by text, vocabulary and options; tier-up in the background", "[service]") {
  Compiler service(serving());
  const std::string json = json_source();
  auto a = service.compile(request(json, "json.cgram"), test::bundled_vocabulary());
  auto b = service.compile(request(json, "json.cgram"), test::bundled_vocabulary());
  REQUIRE(a.ok());
  const auto ga = a.grammar;
  CHECK(ga == b.grammar);
  auto other_start = service.compile(request(json, "json.cgram", "value"), test::bundled_vocabulary());
  REQUIRE(other_start.ok());
  CHECK(other_start.grammar != ga);
  // Other limits for the same text: compiled apart, the cached one untouched.
  CompileRequest tighter = request(json, "json.cgram");
  tighter.compile.lr.max_states = 1u << 16;
  auto apart = service.compile(tighter, test::bundled_vocabulary());
  REQUIRE(apart.ok());
  CHECK(apart.grammar != ga);
  auto broken = service.compile(request("start ::= 'a' ", "broken.cgram"), test::bundled_vocabulary());
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.failure == CompileOutcome::Failure::Grammar);
  CHECK_THAT(broken.message, Catch::Contains("broken.cgram:") && Catch::Contains("error"));
  REQUIRE(broken.diagnostics);
  CHECK(broken.diagnostics->has_errors());
  service.wait_idle();
  CHECK(std::string(ga->tier()) == "jit");
  const CompilerStats s = service.stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 4);
  CHECK(s.jit_compiled == 3);
  CHECK(s.entries == 3);
}

TEST_CASE("compiler: one call per tier, errors as values, nothing cached by default", "[service]") {
  Compiler compiler;
  CompileRequest r;
  const std::string json = json_source();
  r.text = json;
  r.filename = "json.cgram";
  auto table = compiler.compile(r, test::bundled_vocabulary());
  REQUIRE(table.ok());
  CHECK(std::string(table.grammar->tier()) == "table");
  CHECK(table.times.parse_ms > 0);
  CHECK(table.times.compile_ms > 0);
  r.tier = Tier::Jit;
  auto jitted = compiler.compile(r, test::bundled_vocabulary());
  REQUIRE(jitted.ok());
  CHECK(jitted.grammar != table.grammar);
  CHECK(std::string(jitted.grammar->tier()) == "jit");
  CHECK(jitted.times.jit_ms() > 0);
  // Without background threads, a background grammar stays on the tables.
  r.tier = Tier::Background;
  auto background = compiler.compile(r, test::bundled_vocabulary());
  REQUIRE(background.ok());
  compiler.wait_idle();
  CHECK(std::string(background.grammar->tier()) == "table");
  CHECK(compiler.stats().entries == 0);
  // A GBNF grammar, and a limit that stops the compile.
  CompileRequest gbnf;
  gbnf.text = "root ::= \"a\" [0-9]+";
  gbnf.filename = "g.gbnf";
  gbnf.parse.format = GrammarFormat::Gbnf;
  REQUIRE(compiler.compile(gbnf, test::bundled_vocabulary()).ok());
  gbnf.compile.lr.max_states = 1;
  auto stopped = compiler.compile(gbnf, test::bundled_vocabulary());
  CHECK(stopped.failure == CompileOutcome::Failure::Compile);
  CHECK_FALSE(stopped.message.empty());
  CHECK(compiler.compile(r, nullptr).failure == CompileOutcome::Failure::Compile);
  // The diagnostics outlive the call: they point into the text, which the
  // outcome keeps (a JSON Schema's diagnostics point into the schema).
  CompileOutcome schema_error = [&] {
    const std::string schema = R"({"type": "object", "properties": {"a": {"type": "nonsense"}}})";
    CompileRequest s;
    s.text = schema;
    s.filename = "bad.json";
    s.parse.format = GrammarFormat::JsonSchema;
    return compiler.compile(s, test::bundled_vocabulary());
  }();
  REQUIRE(schema_error.failure == CompileOutcome::Failure::Grammar);
  REQUIRE(schema_error.diagnostics);
  CHECK_THAT(schema_error.diagnostics->render(false), Catch::Contains("bad.json:1:") && Catch::Contains("nonsense"));
  CHECK(tier_named("background") == Tier::Background);
  CHECK_FALSE(tier_named("aot"));
}

TEST_CASE("compiler: bounded by bytes, least recently used out, held grammars still work", "[service]") {
  Compiler service(serving(1));  // every new grammar evicts the others
  const std::string json = json_source();
  auto first = service.compile(request(json, "a"), test::bundled_vocabulary()).grammar;
  REQUIRE(first);
  Matcher held(first);
  for (int i = 0; i < 5; ++i)
    REQUIRE(service.compile(request("start ::= 'x'{" + std::to_string(i + 1) + "} ;", "b"), test::bundled_vocabulary()).ok());
  service.wait_idle();
  const CompilerStats s = service.stats();
  CHECK(s.entries == 1);
  CHECK(s.evictions == 5);
  // Evicted from the cache, alive in the matcher: it still masks, and a new
  // request compiles it again (a miss).
  std::vector<uint32_t> words(held.mask_words());
  held.fill_mask(words);
  CHECK(std::any_of(words.begin(), words.end(), [](uint32_t w) { return w != 0; }));
  auto again = service.compile(request(json, "a"), test::bundled_vocabulary()).grammar;
  CHECK(again != first);
  CHECK(service.stats().misses == 7);
}

TEST_CASE("compiler: many threads, twenty grammars, masks equal to the table tier", "[service]") {
  Compiler service(serving());
  std::vector<std::string> grammars;
  for (int i = 0; i < 20; ++i)
    grammars.push_back(fmt::format("start ::= item ( ',' item )* ; item ::= 'k{}' | #'[0-9]{{1,{}}}' ;", i, i % 5 + 1));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (size_t i = 0; i < grammars.size(); ++i) {
          auto got = service.compile(request(grammars[(i + t) % grammars.size()], "g"), test::bundled_vocabulary());
          if (!got.ok()) {
            ++failures;
            continue;
          }
          Matcher m(got.grammar);
          std::vector<uint32_t> words(m.mask_words());
          m.fill_mask(words);
          if (std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0; })) ++failures;
        }
    });
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  service.wait_idle();
  CHECK(service.stats().misses == 20);
  CHECK(service.stats().jit_compiled == 20);
  for (size_t i = 0; i < grammars.size(); i += 7) {
    auto jitted = service.compile(request(grammars[i], "g"), test::bundled_vocabulary()).grammar;
    REQUIRE(jitted);
    REQUIRE(std::string(jitted->tier()) == "jit");
    compare_tiers(compile(grammars[i], test::bundled_vocabulary()), jitted, {}, i, 12);
  }
}

TEST_CASE("AOT: a relative path loads that file, and a recompiled object replaces a loaded one", "[aot]") {
  const fs::path dir = fs::path(json_object()).parent_path();
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  auto relative = load_shared_object("json.so", test::bundled_vocabulary());
  fs::current_path(before);
  REQUIRE(relative.ok());
  // Same path, another grammar, while the first object is still loaded.
  const std::string path = temp_path("replaced.so");
  auto first_grammar = compile(json_source(), test::bundled_vocabulary(), true);
  REQUIRE((save_shared_object(*first_grammar, path)).ok());
  auto first = load_shared_object(path, test::bundled_vocabulary());
  REQUIRE(first.ok());
  auto second_grammar = compile("start ::= 'yes' | 'no' ;", test::bundled_vocabulary(), true);
  REQUIRE((save_shared_object(*second_grammar, path)).ok());
  auto second = load_shared_object(path, test::bundled_vocabulary());
  INFO((!second.ok() ? second.error().message : ""));
  REQUIRE(second.ok());
  CHECK((*second)->grammar_hash() == second_grammar->grammar_hash());
  compare_tiers(second_grammar, (*second), {}, 9, 4);
  compare_tiers(first_grammar, (*first), {}, 9, 8);
}

TEST_CASE("AOT: saves to one path at once never remove each other's files, and the last one loads whole", "[aot]") {
  // ctest runs test programs side by side; a server may save from threads.
  const std::string path = temp_path("contended.so");
  auto grammar = compile("start ::= 'yes' | 'no' ;", test::bundled_vocabulary(), true);
  std::vector<std::string> errors(4);
  {
    std::vector<std::thread> savers;
    for (size_t i = 0; i < errors.size(); ++i)
      savers.emplace_back([&, i] {
        auto saved = save_shared_object(*grammar, path);
        if (!saved.ok()) errors[i] = saved.error().message;
      });
    for (auto& t : savers) t.join();
  }
  for (const auto& e : errors) CHECK(e == "");
  auto loaded = load_shared_object(path, test::bundled_vocabulary());
  REQUIRE(loaded.ok());
  compare_tiers(grammar, *loaded, {}, 3, 4);
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path()))
    CHECK(entry.path().extension() != ".tmp");  // nothing left behind
}

namespace {
std::string load_error(const ir::LexicalGrammar& g) {
  ir::BinaryWriter out;
  g.save(out);
  ir::LexicalGrammar loaded;
  ir::BinaryReader in(out.bytes());
  REQUIRE_FALSE(ir::LexicalGrammar::load(in, loaded, ir::kDefaultLongestToken));
  return in.error();
}
}  // namespace

TEST_CASE("AOT: tables the matcher could not run are refused on load", "[aot]") {
  auto g = compile(test::read_example("reply.cgram"), test::bundled_vocabulary());
  {
    ir::LexicalGrammar bad = g->lexical();
    for (ir::LexTerminal& t : bad.terminals)
      if (t.kind == ir::LexTerminal::Kind::Bytes) {
        t.dfa.set_start(ir::Dfa::kDead);  // no start state
        break;
      }
    CHECK_THAT(load_error(bad), Catch::Contains("no start state"));
  }
  {
    ir::LexicalGrammar bad = g->lexical();
    bool found = false;
    for (ir::LexTerminal& t : bad.terminals)
      if (t.kind == ir::LexTerminal::Kind::Except) {
        t.dfa = ir::literal_dfa("x");  // not its automaton's states
        found = true;
      }
    REQUIRE(found);
    CHECK_THAT(load_error(bad), Catch::Contains("does not match its automaton"));
  }
  {
    ir::LexicalGrammar bad = g->lexical();
    bad.productions.back().rhs.assign(70000, bad.productions.back().rhs.empty() ? ir::SkeletonSymbol{true, 0}
                                                                               : bad.productions.back().rhs[0]);
    CHECK_THAT(load_error(bad), Catch::Contains("longer than any grammar makes"));
  }
}

TEST_CASE("compiler: waiting is never stuck on a grammar evicted before its turn", "[service]") {
  Compiler service(serving(1));
  for (int i = 0; i < 20; ++i)
    service.compile(request("start ::= 'x'{" + std::to_string(i + 1) + "} ;", "g"), test::bundled_vocabulary());
  service.wait_idle();  // returns: every queued job was compiled or skipped
  const CompilerStats s = service.stats();
  CHECK(s.entries == 1);
  CHECK(s.jit_compiled + s.jit_failed <= 20);
  // No bytes left behind by evicted entries: what is counted is exactly the
  // last grammar, as a service that only ever saw it counts it.
  Compiler alone(serving(1));
  alone.compile(request("start ::= 'x'{20} ;", "g"), test::bundled_vocabulary());
  alone.wait_idle();
  CHECK(s.bytes == alone.stats().bytes);
}

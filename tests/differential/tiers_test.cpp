// Every tier against the oracle, in one loop: for each grammar (every
// example, a few hand-written shapes, a JSON Schema and a GBNF grammar) and
// each tier — the tables, the AOT shared object (saved and loaded back), the
// GPU kernels' logic on the host backend (gpu/gpu_masker.h), and the JIT
// kernels — the same documents and seeded random walks, every mask compared
// bit for bit with the oracle's (tests/support/oracle_mask.h). A tier that
// cannot run here says "cgram-skip:" with the reason; a tier that runs must
// report itself (CompiledGrammar::tier(), the host backend), so that a
// fallback to the tables cannot pass for it.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>

#include "compiled_grammar.h"
#include "encoder.h"
#include "gpu_masker.h"
#include "helpers.h"
#include "kernel_jit.h"
#include "matcher.h"
#include "oracle_mask.h"
#include "sentence_generator.h"
#include "shared_object.h"
#include "utf8.h"

using namespace cgram;
using namespace cgram::test;
namespace fs = std::filesystem;

namespace {

// The JIT comes last: installing kernels changes the tier of every matcher
// of the compiled grammar, and the other tiers use that same grammar.
enum class Tier { Table, Aot, GpuHost, Jit };
constexpr Tier kTiers[] = {Tier::Table, Tier::Aot, Tier::GpuHost, Tier::Jit};

const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::Table: return "table";
    case Tier::Aot: return "aot";
    case Tier::GpuHost: return "gpu-host";
    case Tier::Jit: return "jit";
  }
  return "?";
}

struct Subject {
  std::string label;
  std::shared_ptr<const Grammar> grammar;
  std::vector<std::string> documents;  // hand-written; generated sentences are added
};

std::shared_ptr<const Grammar> parse_as(std::string_view source, std::string_view filename, GrammarFormat format) {
  ParseOptions options;
  options.format = format;
  Grammar::Outcome outcome = Grammar::parse(source, filename, options);
  INFO(filename << "\n" << outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  return outcome.grammar;
}

// A sentence of each example (an example not listed gets generated ones only).
std::vector<std::string> example_documents(std::string_view name) {
  static const std::map<std::string_view, std::string> documents = {
      {"json.cgram", R"({"a": [1, 2.5e3, -0.5E-2, "x\u00e9\n"], "b": {}})"},
      {"record.cgram", "{\"name\":\"\",\"age\":0,\"email\":\"x@y.io\",\"tags\":[],\"active\":false}"},
      {"arithmetic.cgram", "-(1 + 2) * max(3, 4^2^-1) / x % 7"},
      {"c_subset.cgram", "int main(void) { int x = 1, *p; return x * 2 + f(1, \"a\"); }"},
      {"markup.cgram", "<p>caf\xC3\xA9 &#233; &#xE9;</p>"},
      {"csv.cgram", "a,b,\"c,\"\"d\"\"\"\r\n1,2,3\r\n"},
      {"chess.cgram", "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Bxc6+ dxc6 5. O-O f6"},
      {"delimited.cgram", "abc*[def]*"},
      {"reply.cgram", "<think>hmm</think>\nSure.\n\nbye"},
      {"reasoning_json.cgram", "Let me see: <b>1</b> < 2.</think>{\"a\": [1, true]}"},
      {"tool_calls.cgram",
       "Let me look.<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"cgram\"}}</tool_call>"},
  };
  auto at = documents.find(name);
  if (at == documents.end()) return {};
  return {at->second};
}

std::vector<Subject> subjects() {
  std::vector<Subject> out;
  for (const std::string& name : example_names())
    out.push_back({name, grammar(read_example(name)), example_documents(name)});
  out.push_back({"right recursion",
                 grammar("start ::= e ; e ::= t '+' e | t ; t ::= #'[0-9]+' | '(' e ')' | 'x' ',' t ;"),
                 {"1+(2+x,3)+45", "((7))"}});
  out.push_back({"dangling else",
                 grammar("start ::= stmt ; stmt ::= 'if c then ' stmt ( ' else ' stmt )? | 'x' | '{' stmt* '}' ;"),
                 {"if c then if c then x else x", "{if c then x}"}});
  out.push_back({"except!",
                 grammar("start ::= ( '\"' except!('\"', 6) '\"' ) ( ',' start )? ;\n"),
                 {"\"hello world\",\"\"", "\"caf\xC3\xA9\""}});
  out.push_back({"except! beside nullable parts", grammar("q ::= ( except!('y') ''* ) '-' ; start ::= q q | q '/' ;"),
                 {"a-b/-", "--/"}});
  // The emoji is four byte tokens in the bundled vocabulary: any! tokens that hold part of a character.
  out.push_back({"any!", grammar("start ::= 'say' any!{1,6} '.' ( '\\n' start )? ;"),
                 {"say hello world.", "say \xF0\x9F\x98\x80."}});
  // Counted lexemes (automata/counted.h): the JIT and the AOT code step
  // their windows' states, the matcher its own; strings up to the bound and
  // past it, longer than any token of the vocabulary.
  const std::string seventy(70, 'a');
  out.push_back({"counted lexeme",
                 grammar("start ::= '[' ( s ( ',' s )* )? ']' ; s ::= #'\"(?:[a-z ]|\\\\n){0,70}\"' ;"),
                 {"[\"" + seventy + "\"]", "[\"x\\ny\",\"" + seventy + "b\"]"}});
  out.push_back({"JSON Schema maxLength",
                 parse_as(R"({"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 70}})",
                          "max_length.json", GrammarFormat::JsonSchema),
                 {"[\"" + seventy + "\", \"ab\"]", "[\"" + seventy + "a\"]"}});
  out.push_back({"JSON Schema tool_call.json",
                 parse_as(read_file(std::string(CGRAM_SOURCE_DIR) + "/tests/data/schemas/tool_call.json"),
                          "tool_call.json", GrammarFormat::JsonSchema),
                 {R"({"name": "search", "arguments": {"city": "Paris", "days": 3}, "confidence": 0.5})"}});
  out.push_back({"GBNF list",
                 parse_as("root ::= \"[\" ws ( item ( \",\" ws item )* )? \"]\"\n"
                          "item ::= [a-z]+ | \"\\\"\" [^\"]* \"\\\"\" | root\n"
                          "ws ::= [ ]?\n",
                          "list.gbnf", GrammarFormat::Gbnf),
                 {"[abc, \"d e\", [x]]", "[]"}});
  return out;
}

// The oracle's masks, each computed once per history: every tier walks the
// same paths (the walks choose from the oracle's masks, seeded), so the
// oracle's cost is paid once per grammar, not once per tier.
class CachedOracle {
 public:
  CachedOracle(const Grammar& g, std::shared_ptr<const Vocabulary> vocab)
      : masker_(oracle_grammar(g), std::move(vocab)) {}
  const std::vector<uint32_t>& mask(const std::vector<uint32_t>& history) {
    auto [at, fresh] = masks_.try_emplace(history);
    if (fresh) at->second = masker_.mask(history);
    return at->second;
  }

 private:
  OracleMasker masker_;
  std::map<std::vector<uint32_t>, std::vector<uint32_t>> masks_;
};

// What one tier masks with: the compiled grammar its matchers run on, and
// for gpu-host the masker and its one-row bitmask (the grammar's words and
// one padding word).
struct TierMasker {
  Tier tier = Tier::Table;
  std::shared_ptr<const CompiledGrammar> grammar;
  std::unique_ptr<jit::GpuMasker> gpu;
  std::unique_ptr<jit::KernelMemory> bitmask;
};

// Builds `tier` from `compiled` (AOT: saved to `aot_path` and loaded back),
// and requires that the tier really is the one asked for.
TierMasker build_tier(Tier tier, const std::shared_ptr<const CompiledGrammar>& compiled,
                      const std::shared_ptr<const Vocabulary>& vocab, const std::string& aot_path) {
  TierMasker t;
  t.tier = tier;
  t.grammar = compiled;
  switch (tier) {
    case Tier::Table:
      REQUIRE(std::string(compiled->tier()) == "table");
      break;
    case Tier::Aot: {
      auto saved = save_shared_object(*compiled, aot_path);
      INFO((!saved.ok() ? saved.error().message : ""));
      REQUIRE(saved.ok());
      auto loaded = load_shared_object(aot_path, vocab);
      INFO((!loaded.ok() ? loaded.error().message : ""));
      REQUIRE(loaded.ok());
      t.grammar = *loaded;
      REQUIRE(std::string(t.grammar->tier()) == "aot");
      REQUIRE(t.grammar->grammar_hash() == compiled->grammar_hash());
      break;
    }
    case Tier::GpuHost: {
      REQUIRE(std::string(compiled->tier()) == "table");  // the host's part of a fill: the table tier's matcher
      auto backend = jit::host_kernel_backend(jit::gpu_kernel_shape(*compiled));
      INFO((!backend.ok() ? backend.error().message : ""));
      REQUIRE(backend.ok());
      REQUIRE_FALSE((*backend)->is_gpu());
      auto masker = jit::GpuMasker::create(compiled, std::move(*backend));
      INFO((!masker.ok() ? masker.error().message : ""));
      REQUIRE(masker.ok());
      t.gpu = std::move(*masker);
      auto memory = t.gpu->allocate((compiled->mask_words() + 1) * sizeof(uint32_t));
      REQUIRE(memory.ok());
      t.bitmask = std::move(*memory);
      break;
    }
    case Tier::Jit:
      test::require_no_error(jit::tier_up_now(*compiled));
      REQUIRE(std::string(compiled->tier()) == "jit");
      break;
  }
  return t;
}

// The mask of `matcher`'s next step, as `t`'s tier computes it. On
// gpu-host the row starts as a sentinel: the kernels must write all of it,
// and clear the padding word.
std::vector<uint32_t> tier_mask(TierMasker& t, Matcher& matcher) {
  const size_t words = matcher.mask_words();
  if (t.tier != Tier::GpuHost) {
    std::vector<uint32_t> mask(words);
    static_cast<void>(matcher.fill_mask(mask));  // false on an error, with every bit clear: compared all the same
    return mask;
  }
  std::vector<uint32_t> row(words + 1, 0xA5A5A5A5u);
  test::require_no_error(t.bitmask->upload(row.data(), row.size() * sizeof(uint32_t)));
  Matcher* const matchers[] = {&matcher};
  const uint32_t rows[] = {0};
  size_t rejected = 99;
  test::require_no_error(t.gpu->fill(matchers, rows, t.bitmask->address(), static_cast<uint32_t>(words + 1), nullptr, &rejected));
  test::require_no_error(t.bitmask->download(row.data(), row.size() * sizeof(uint32_t)));
  REQUIRE(rejected == 0);
  REQUIRE(row.back() == 0);
  row.pop_back();
  return row;
}

struct Tally {
  size_t masks = 0, pairs = 0, mismatches = 0;
  std::string first_mismatch;
  void add(const Tally& other) {
    masks += other.masks;
    pairs += other.pairs;
    mismatches += other.mismatches;
    if (first_mismatch.empty()) first_mismatch = other.first_mismatch;
  }
};

std::string escaped(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes)
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\' || c == '\'') out += std::string("\\") + char(c);
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02X}", c);
    else out += char(c);
  return out;
}

bool bit(const std::vector<uint32_t>& mask, uint32_t id) { return mask[id / 32] >> (id % 32) & 1; }

// One step: the tier's mask against the oracle's; returns the oracle's.
// `where` names the grammar, the tier and the walk.
const std::vector<uint32_t>& compare_step(TierMasker& t, Matcher& matcher, CachedOracle& oracle,
                                          const std::vector<uint32_t>& history, const std::string& where,
                                          Tally& tally) {
  const Vocabulary& vocab = t.grammar->vocabulary();
  const std::vector<uint32_t> mine = tier_mask(t, matcher);
  const std::vector<uint32_t>& want = oracle.mask(history);
  REQUIRE(mine.size() == want.size());
  ++tally.masks;
  tally.pairs += vocab.size();
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    const bool a = bit(mine, id), b = bit(want, id);
    if (a == b) continue;
    if (tally.mismatches++ == 0) {
      std::string text;
      for (uint32_t h : history) text += vocab.bytes(h);
      tally.first_mismatch = fmt::format("{}, step {} (after '{}'): token {} '{}': {} {}, oracle {}", where,
                                         history.size(), escaped(text), id, vocab.display(id),
                                         tier_name(t.tier), a ? "allows" : "forbids", b ? "allows" : "forbids");
    }
  }
  return want;
}

void refused(Tally& tally, const std::string& where, size_t step, uint32_t token, AdvanceResult result) {
  if (tally.mismatches++ == 0)
    tally.first_mismatch = fmt::format("{}, step {}: advance({}) gave {} for a token the oracle allows", where, step,
                                       token, static_cast<int>(result));
}

// A document's tokens, until it leaves the language; the tokens followed.
size_t walk_document(TierMasker& t, CachedOracle& oracle, const std::vector<uint32_t>& tokens, const std::string& where,
                     Tally& tally) {
  Matcher matcher(t.grammar);
  std::vector<uint32_t> history;
  for (uint32_t token : tokens) {
    const std::vector<uint32_t>& want = compare_step(t, matcher, oracle, history, where, tally);
    if (!bit(want, token)) return history.size();
    if (AdvanceResult r = matcher.advance(token); r != AdvanceResult::Ongoing) {
      refused(tally, where, history.size(), token, r);
      return history.size();
    }
    history.push_back(token);
  }
  compare_step(t, matcher, oracle, history, where, tally);
  return history.size();
}

bool whole_characters(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();)
    if (!decode_utf8(bytes, i)) return false;
  return true;
}

// Random picks from the oracle's mask (so the path is the same on every
// tier), as tests/support/differential.cpp's walk_random picks them.
void walk_random(TierMasker& t, CachedOracle& oracle, uint64_t seed, size_t max_steps, bool favour_partial_characters,
                 const std::string& where, Tally& tally) {
  Matcher matcher(t.grammar);
  const Vocabulary& vocab = t.grammar->vocabulary();
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> history;
  for (size_t step = 0; step < max_steps; ++step) {
    const std::vector<uint32_t>& want = compare_step(t, matcher, oracle, history, where, tally);
    std::vector<uint32_t> allowed, preferred, partial;
    for (uint32_t id = 0; id < vocab.size(); ++id)
      if (bit(want, id)) allowed.push_back(id);
    if (allowed.empty()) break;
    bool can_stop = false;
    for (uint32_t id : allowed) {
      std::string_view b = vocab.bytes(id);
      const bool blank = !b.empty() && b.find_first_not_of(" \t\r\n") == std::string_view::npos;
      can_stop = can_stop || vocab.is_eos(id);
      if (!blank && !vocab.is_eos(id)) preferred.push_back(id);
      if (favour_partial_characters && !vocab.is_eos(id) && !whole_characters(b)) partial.push_back(id);
    }
    const std::vector<uint32_t>& pool = !partial.empty() && rng() % 2 == 0     ? partial
                                        : !preferred.empty() && rng() % 5 != 0 ? preferred
                                                                               : allowed;
    uint32_t token = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
    if (can_stop && step > max_steps / 2 && rng() % 3 == 0) token = vocab.eos_ids().front();
    const AdvanceResult r = matcher.advance(token);
    if (r == AdvanceResult::Finished && vocab.is_eos(token)) break;
    if (r != AdvanceResult::Ongoing) return refused(tally, where, step, token, r);
    history.push_back(token);
  }
}

// Why each tier that cannot run here cannot (none: all run).
std::map<Tier, std::string> unavailable_tiers() {
  std::map<Tier, std::string> out;
  if (auto created = jit::KernelJit::create(); !created.ok()) {
    out[Tier::Jit] = "the LLVM JIT cannot start here: " + created.error().message;
    out[Tier::GpuHost] =
        "the host kernel backend needs the LLVM JIT, which cannot start here: " + created.error().message;
  }
  // jit/shared_object.cpp links with ld.lld (these paths) or the system's cc.
  bool linker = false;
  for (const char* candidate : {"/usr/bin/ld.lld-19", "/usr/lib/llvm-19/bin/ld.lld", "/usr/bin/ld.lld"})
    linker = linker || access(candidate, X_OK) == 0;
  if (const char* path = std::getenv("PATH"); !linker && path) {
    std::string_view rest = path;
    while (!linker && !rest.empty()) {
      const size_t colon = std::min(rest.find(':'), rest.size());
      const std::string dir(rest.substr(0, colon));
      linker = !dir.empty() && access((dir + "/cc").c_str(), X_OK) == 0;
      rest.remove_prefix(std::min(colon + 1, rest.size()));
    }
  }
  if (!linker) out[Tier::Aot] = "no linker to make the shared object (ld.lld-19, ld.lld or cc on the PATH)";
  return out;
}

}  // namespace

TEST_CASE("tiers against the oracle: table, AOT, GPU kernels on the host and JIT, every mask bit for bit",
          "[tiers-differential][differential]") {
  const auto started = std::chrono::steady_clock::now();
  const auto vocab = bundled_vocabulary();
  auto created = Encoder::create(vocab);
  INFO((!created.ok() ? created.error().message : ""));
  REQUIRE(created.ok());
  const Encoder& encoder = **created;

  const std::map<Tier, std::string> skipped = unavailable_tiers();
  for (const auto& [tier, reason] : skipped) {
    // One unwrapped line for CTest (SKIP_REGULAR_EXPRESSION) and scripts/test.sh.
    std::cout << "cgram-skip: the " << tier_name(tier) << " tier is not compared with the oracle: " << reason
              << std::endl;
    WARN("skipped: the " << tier_name(tier) << " tier: " << reason);
  }

  const fs::path dir = fs::temp_directory_path() / ("cgram_tiers_differential_" + std::to_string(getpid()));
  fs::create_directories(dir);
  // Small enough for the oracle (up to ~0.1 s a mask on arithmetic, c_subset
  // and csv) to keep the run within seconds: documents are cut to their
  // first tokens (generated sentences shorter), walks are short.
  constexpr size_t kDocumentTokens = 10, kGeneratedTokens = 6, kGeneratedDocuments = 1, kWalkSteps = 6;
  constexpr uint64_t kSeeds[] = {1, 2};  // the second favours tokens that hold part of a character

  std::map<Tier, Tally> totals;
  const std::vector<Subject> all = subjects();
  for (size_t index = 0; index < all.size(); ++index) {
    const Subject& subject = all[index];
    auto compiled_result = CompiledGrammar::compile(subject.grammar, vocab);
    INFO("grammar '" << subject.label << "': " << (!compiled_result.ok() ? compiled_result.error().message : ""));
    REQUIRE(compiled_result.ok());
    const std::shared_ptr<const CompiledGrammar> compiled = *compiled_result;
    CachedOracle oracle(*subject.grammar, vocab);

    std::vector<std::string> documents = subject.documents;
    SentenceGenerator generator(subject.grammar->ir(), 1000 + index);
    for (size_t i = 0; i < kGeneratedDocuments; ++i) documents.push_back(generator.generate(6));
    std::vector<std::vector<uint32_t>> tokenized;
    for (const std::string& d : documents) {
      std::vector<uint32_t> tokens = d.empty() ? std::vector<uint32_t>{} : encoder.encode_continuation(d);
      const size_t limit = tokenized.size() < subject.documents.size() ? kDocumentTokens : kGeneratedTokens;
      if (tokens.size() > limit) tokens.resize(limit);
      tokenized.push_back(std::move(tokens));
    }

    for (Tier tier : kTiers) {
      if (skipped.count(tier)) continue;
      const std::string where = fmt::format("grammar '{}', tier {}", subject.label, tier_name(tier));
      INFO(where);
      TierMasker t = build_tier(tier, compiled, vocab, (dir / fmt::format("{}.so", index)).string());
      Tally tally;
      for (size_t d = 0; d < tokenized.size(); ++d) {
        const size_t followed =
            walk_document(t, oracle, tokenized[d], fmt::format("{}, document {}", where, d + 1), tally);
        // A hand-written document stays in the language (a generated one may
        // not: except! and any! count tokens, the generator bytes).
        INFO("document " << d + 1 << ": '" << escaped(documents[d]) << "'");
        if (tier == Tier::Table && d < subject.documents.size()) CHECK(followed == tokenized[d].size());
      }
      for (uint64_t seed : kSeeds)
        walk_random(t, oracle, seed, kWalkSteps, seed == 2, fmt::format("{}, random walk {}", where, seed), tally);
      INFO(tally.first_mismatch);
      CHECK(tally.mismatches == 0);
      totals[tier].add(tally);
    }
  }
  fs::remove_all(dir);

  std::string summary;
  for (Tier tier : kTiers) {
    if (skipped.count(tier)) {
      summary += fmt::format("\n  {}: skipped ({})", tier_name(tier), skipped.at(tier));
      continue;
    }
    const Tally& t = totals[tier];
    INFO(tier_name(tier));
    CHECK(t.masks > 0);  // the tier ran,
    CHECK(t.masks == totals[Tier::Table].masks);  // on the same paths as the tables
    summary += fmt::format("\n  {}: {} masks, {} (step, token) pairs, {} mismatches{}", tier_name(tier), t.masks,
                           t.pairs, t.mismatches, t.first_mismatch.empty() ? "" : "; first: " + t.first_mismatch);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  WARN(all.size() << " grammars x " << std::size(kTiers) << " tiers against the oracle, "
                  << fmt::format("{:.1f}", seconds) << " s:" << summary);
}

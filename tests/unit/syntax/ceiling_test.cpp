// The nesting ceiling (kMaxNestingCeiling, docs/LIMITS.md) holds for every
// kind of nesting a user can write: at the ceiling the text is read, one
// past it is refused with the nesting error, and neither overflows the stack.
// Its own executable, so that CI's sanitizer pass runs it (scripts/sanitize.sh
// ci): ASan's frames are several times larger, and the ceiling must hold
// there too. Grammars are read on a stack of known size
// (support/large_stack.h), whatever thread calls.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <thread>

#include "grammar.h"
#include "json_schema.h"
#include "regex.h"

using namespace cgram;

namespace {

constexpr uint32_t kCeiling = kMaxNestingCeiling;

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

Grammar::Outcome read(std::string_view text, GrammarFormat format = GrammarFormat::Cgram) {
  ParseOptions options;
  options.format = format;
  options.syntax.max_nesting = kCeiling;
  return Grammar::parse(text, format == GrammarFormat::JsonSchema ? "ceiling.json" : "ceiling.cgram", options);
}

std::string errors(const Grammar::Outcome& outcome) { return outcome.diagnostics.render(false); }

// A grammar of `levels` levels of one kind, from `around` (the text at one
// depth, with {} where the next goes).
std::string nest(std::string_view open, std::string_view close, size_t levels, std::string_view inner) {
  return repeat(open, levels) + std::string(inner) + repeat(close, levels);
}

struct Kind {
  const char* name;
  std::function<std::string(size_t)> grammar;  // a grammar whose deepest item is `levels` deep
};

const Kind kinds[] = {
    {"groups", [](size_t n) { return "start ::= " + nest("(", ")", n - 1, "'a'") + ";"; }},
    {"brackets", [](size_t n) { return "start ::= " + nest("[", "]", n - 1, "'a'") + ";"; }},
    {"braces", [](size_t n) { return "start ::= " + nest("{", "}", n - 1, "'a'") + ";"; }},
    {"stacked quantifiers", [](size_t n) { return "start ::= 'a'" + repeat("?", n - 1) + ";"; }},
    {"except! arguments", [](size_t n) { return "start ::= except!(" + nest("(", ")", n - 2, "'a'") + ");"; }},
    {"regex groups", [](size_t n) { return "start ::= #'" + nest("(", ")", n, "a") + "';"; }},
    {"regex (?: ) groups", [](size_t n) { return "start ::= #'" + nest("(?:", ")", n, "a") + "';"; }},
};

}  // namespace

TEST_CASE("nesting ceiling: every kind is read at the ceiling and refused past it", "[ceiling]") {
  for (const Kind& kind : kinds) {
    INFO(kind.name);
    auto at = read(kind.grammar(kCeiling));
    CHECK(at.ok());
    INFO(errors(at));
    auto past = read(kind.grammar(kCeiling + 1));
    CHECK_FALSE(past.ok());
    CHECK_THAT(errors(past), Catch::Contains(fmt::format("deeper than {} levels", kCeiling)));
  }
}

TEST_CASE("nesting ceiling: the same from a thread with a small stack", "[ceiling]") {
  // A server's worker may have far less stack than the main thread (Rust's
  // default is 2 MiB, musl's 128 KiB); reading a grammar does not use it.
  for (const Kind& kind : kinds) {
    INFO(kind.name);
    bool ok = false;
    std::string past;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, 256 * 1024);
    struct Job {
      const Kind* kind;
      bool* ok;
      std::string* past;
    } job{&kind, &ok, &past};
    pthread_t thread;
    REQUIRE(pthread_create(
                &thread, &attributes,
                [](void* p) -> void* {
                  auto* j = static_cast<Job*>(p);
                  *j->ok = read(j->kind->grammar(kCeiling)).ok();
                  *j->past = errors(read(j->kind->grammar(kCeiling + 1)));
                  return nullptr;
                },
                &job) == 0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attributes);
    CHECK(ok);
    CHECK_THAT(past, Catch::Contains(fmt::format("deeper than {} levels", kCeiling)));
  }
}

TEST_CASE("nesting ceiling: GBNF groups, and JSON nesting in schemas", "[ceiling]") {
  auto gbnf = [](size_t n) { return "root ::= " + nest("(", ")", n, "\"a\"") + "\n"; };
  CHECK(read(gbnf(kCeiling - 1), GrammarFormat::Gbnf).ok());
  CHECK_THAT(errors(read(gbnf(kCeiling + 1), GrammarFormat::Gbnf)), Catch::Contains("deeper than"));
  // Arrays of arrays: each level of the schema is two levels of JSON
  // ({"items": …}); the translation nests too. Read or refused with the
  // nesting error, never a crash.
  auto schema = [](size_t levels) {
    return nest("{\"type\": \"array\", \"items\": ", "}", levels, "{\"type\": \"integer\"}");
  };
  for (size_t levels : {size_t{kCeiling / 4}, size_t{kCeiling - 1}, size_t{kCeiling}, size_t{kCeiling + 1}}) {
    INFO(levels << " levels of schema");
    auto outcome = read(schema(levels), GrammarFormat::JsonSchema);
    if (!outcome.ok()) CHECK_THAT(errors(outcome), Catch::Contains("deeper than"));
  }
  CHECK(read(schema(kCeiling / 4), GrammarFormat::JsonSchema).ok());
  CHECK_THAT(errors(read(schema(kCeiling + 1), GrammarFormat::JsonSchema)), Catch::Contains("deeper than"));
  // A pattern's groups inside a schema: the regex ceiling.
  auto pattern = [](size_t n) { return "{\"type\": \"string\", \"pattern\": \"^" + nest("(", ")", n, "a") + "$\"}"; };
  // (The translation wraps the pattern in a group or two of its own.)
  auto near = read(pattern(kCeiling - 4), GrammarFormat::JsonSchema);
  INFO(errors(near));
  CHECK(near.ok());
  CHECK_THAT(errors(read(pattern(kCeiling + 1), GrammarFormat::JsonSchema)), Catch::Contains("deeper than"));
}

TEST_CASE("nesting ceiling: a schema's chain of references, translated one inside another", "[ceiling]") {
  // Shallow text, deep translation: definition i refers to i + 1. At the
  // bound it is read, past it refused; never a crash (the sanitizers' pass
  // runs this too).
  auto chain = [](uint32_t length) {
    std::string defs;
    for (uint32_t i = 0; i < length; ++i) {
      const std::string next = i + 1 < length ? fmt::format("{{\"$ref\": \"#/$defs/d{}\"}}", i + 1) : "{\"type\": \"integer\"}";
      defs += fmt::format("{}\"d{}\": {{\"type\": \"array\", \"items\": {}}}", i ? ", " : "", i, next);
    }
    return fmt::format("{{\"$defs\": {{{}}}, \"$ref\": \"#/$defs/d0\"}}", defs);
  };
  // Each definition is two translations deep (the array, its items).
  const auto near = read(chain(kMaxReferenceNesting / 2 - 2), GrammarFormat::JsonSchema);
  INFO(errors(near));
  CHECK(near.ok());
  CHECK_THAT(errors(read(chain(kMaxReferenceNesting), GrammarFormat::JsonSchema)),
             Catch::Contains("followed through its references, nests deeper than"));
}

// Every documented limit (docs/LIMITS.md): a test at the limit and just past
// it, and the hostile inputs that used to crash, hang or exhaust memory.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <random>

#include "helpers.h"
#include "parse.h"
#include "encoder.h"
#include "except_automaton.h"
#include "batch.h"
#include "matcher.h"
#include "regex.h"

using namespace cgram;
using namespace cgram::test;

namespace {

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

Grammar::Outcome parse_with(std::string_view source, const ParseOptions& options) {
  return Grammar::parse(source, "limits.cgram", options);
}

// The single error of an outcome, or a failed test.
std::string only_error(const Grammar::Outcome& outcome) {
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.diagnostics.error_count() == 1);
  for (const Diagnostic& d : outcome.diagnostics.all())
    if (d.severity == Severity::Error) return d.message;
  return {};
}

// `levels` groups of the given kind around 'a' (with `a` itself one level).
std::string nested(std::string_view open, std::string_view close, size_t groups) {
  return "start ::= " + repeat(open, groups) + "'a'" + repeat(close, groups) + ";";
}

}  // namespace

TEST_CASE("nesting: 256 levels parse, 257 are refused, 100,000 never overflow the stack", "[limits]") {
  const std::pair<std::string_view, std::string_view> kinds[] = {{"(", ")"}, {"[", "]"}, {"{", "}"}};
  for (auto [open, close] : kinds) {
    INFO("group " << open << "..." << close);
    CHECK(parse(nested(open, close, kMaxNesting - 1)).ok());
    auto past = parse(nested(open, close, kMaxNesting));
    CHECK_THAT(only_error(past), Catch::Contains("nests deeper than 256 levels"));
    auto hostile = parse(nested(open, close, 100000));
    CHECK_THAT(only_error(hostile), Catch::Contains("nests deeper than 256 levels"));
  }
  // except! is a level too.
  CHECK(parse("start ::= except!(" + repeat("(", kMaxNesting - 2) + "'a'" + repeat(")", kMaxNesting - 2) + ");").ok());
  CHECK_THAT(only_error(parse("start ::= except!(" + repeat("(", kMaxNesting - 1) + "'a'" +
                              repeat(")", kMaxNesting - 1) + ");")),
             Catch::Contains("nests deeper"));
  // Stacked suffixes wrap the item once each.
  CHECK(parse("start ::= 'a'" + repeat("?", kMaxNesting - 1) + ";").ok());
  CHECK_THAT(only_error(parse("start ::= 'a'" + repeat("?", kMaxNesting) + ";")), Catch::Contains("nests deeper"));
  CHECK_THAT(only_error(parse("start ::= 'a'" + repeat("*", 100000) + ";")), Catch::Contains("nests deeper"));
  CHECK_THAT(only_error(parse("start ::= 'a'" + repeat("{1,2}", 100000) + ";")), Catch::Contains("nests deeper"));
  // Suffixes on groups count with what the groups hold.
  CHECK(parse("start ::= " + repeat("(", 127) + "'a'" + repeat(")?", 127) + ";").ok());
  CHECK_THAT(only_error(parse("start ::= " + repeat("(", 128) + "'a'" + repeat(")?", 128) + ";")),
             Catch::Contains("nests deeper"));
  // Each rule starts afresh.
  CHECK(parse(nested("(", ")", kMaxNesting - 1) + "\nb ::= start " + repeat("(", kMaxNesting - 1) + "'b'" +
              repeat(")", kMaxNesting - 1) + ";")
            .ok());
}

TEST_CASE("nesting: the limit is an option, capped where recursion stays safe", "[limits]") {
  ParseOptions options;
  options.syntax.max_nesting = 10;
  CHECK(parse_with(nested("(", ")", 9), options).ok());
  CHECK_THAT(only_error(parse_with(nested("(", ")", 10), options)), Catch::Contains("nests deeper than 10 levels"));
  options.syntax.max_nesting = 1000000;  // asks for more than is safe: the ceiling holds
  CHECK_THAT(only_error(parse_with(nested("(", ")", 100000), options)),
             Catch::Contains(fmt::format("nests deeper than {} levels", kMaxNestingCeiling)));
  CHECK(parse_with(nested("(", ")", kMaxNestingCeiling - 1), options).ok());
}

TEST_CASE("regex nesting: 256 groups parse, 257 are refused, 100,000 never overflow", "[limits][regex]") {
  auto regex_grammar = [](size_t groups) {
    return "start ::= #'" + repeat("(", groups) + "a" + repeat(")", groups) + "';";
  };
  CHECK(parse(regex_grammar(ir::kMaxRegexNesting)).ok());
  CHECK_THAT(only_error(parse(regex_grammar(ir::kMaxRegexNesting + 1))),
             Catch::Contains("nests groups deeper than 256 levels"));
  CHECK_THAT(only_error(parse(regex_grammar(100000))), Catch::Contains("nests groups deeper"));
  auto direct = ir::parse_regex(repeat("(?:", 100000) + "a" + repeat(")", 100000));
  REQUIRE(std::holds_alternative<ir::RegexError>(direct));
  CHECK(std::get<ir::RegexError>(direct).offset == 3 * ir::kMaxRegexNesting);
  ParseOptions options;
  options.syntax.max_nesting = 5;
  CHECK(parse_with(regex_grammar(5), options).ok());
  CHECK_THAT(only_error(parse_with(regex_grammar(6), options)), Catch::Contains("deeper than 5 levels"));
}

TEST_CASE("grammar text size: at the limit and past it", "[limits]") {
  ParseOptions options;
  const std::string base = "start ::= 'a';";
  options.syntax.max_source_bytes = base.size() + 10;
  CHECK(parse_with(base + std::string(10, ' '), options).ok());
  CHECK_THAT(only_error(parse_with(base + std::string(11, ' '), options)),
             Catch::Contains(fmt::format("the limit is {} bytes", base.size() + 10)));
}

TEST_CASE("repetition bounds: at the limit, past it, and absurd", "[limits]") {
  CHECK(parse("start ::= 'a'{0,10000};").ok());
  CHECK_THAT(only_error(parse("start ::= 'a'{0,10001};")), Catch::Contains("the limit is 10000"));
  CHECK_THAT(only_error(parse("start ::= 'a'{0,100000};")), Catch::Contains("the limit is 10000"));
  CHECK_THAT(only_error(parse("start ::= 'x'{4294967296};")), Catch::Contains("the limit is 10000"));
  CHECK_THAT(only_error(parse("start ::= 'x'{99999999999999999999999999};")), Catch::Contains("too large"));
  CHECK_THAT(only_error(parse("start ::= 'x'{5,0};")), Catch::Contains("the minimum is larger"));
  ParseOptions options;
  options.syntax.max_repeat_bound = 50;
  CHECK(parse_with("start ::= 'a'{50};", options).ok());
  CHECK_THAT(only_error(parse_with("start ::= 'a'{51};", options)), Catch::Contains("the limit is 50"));
  CHECK(parse("start ::= #'a{1000}';").ok());
  CHECK_THAT(only_error(parse("start ::= #'a{1001}';")), Catch::Contains("the limit is 1000"));
}

TEST_CASE("except! counts: at the limit and past it", "[limits]") {
  CHECK(parse("start ::= except!('x', 1000000);").ok());
  CHECK_THAT(only_error(parse("start ::= except!('x', 1000001);")), Catch::Contains("the limit is 1000000"));
  ParseOptions options;
  options.syntax.max_except_count = 7;
  CHECK(parse_with("start ::= except!('x', 7);", options).ok());
  CHECK_THAT(only_error(parse_with("start ::= except!('x', 8);", options)), Catch::Contains("the limit is 7"));
}

TEST_CASE("source locations: exact and linear on one long line", "[limits][diagnostics]") {
  // 25,000 literals on one line, then an error at the end: the column is
  // found without rescanning the line for every token.
  std::string line = "start ::= " + repeat("'a' ", 25000) + "@;";
  auto outcome = parse(line);
  REQUIRE(outcome.diagnostics.error_count() >= 1);
  const std::vector<Diagnostic> sorted = outcome.diagnostics.sorted();
  const Diagnostic& d = sorted.front();
  CHECK(d.range.begin.line == 1);
  CHECK(d.range.begin.column == line.find('@') + 1);
  // location_of and offset_of agree with a plain count on mixed UTF-8.
  std::mt19937 rng(7);
  const std::string_view pieces[] = {"a", "é", "€", "😀", "\n", " "};
  std::string text;
  for (int i = 0; i < 5000; ++i) text += pieces[rng() % 6];
  SourceFile file("t", text);
  uint32_t line_no = 1, column = 1;
  for (uint32_t offset = 0; offset < text.size(); ++offset) {
    if ((static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) continue;
    SourceLoc loc = file.location_of(offset);
    REQUIRE(loc.line == line_no);
    REQUIRE(loc.column == column);
    REQUIRE(file.offset_of(line_no, column) == offset);
    if (text[offset] == '\n') ++line_no, column = 1;
    else ++column;
  }
}

namespace {

CompileResult compile_with(std::string_view source, const CompileOptions& options) {
  return CompiledGrammar::compile(grammar(source), bundled_vocabulary(), options);
}

std::shared_ptr<const CompiledGrammar> compiled_with(std::string_view source, const CompileOptions& options = {}) {
  auto result = compile_with(source, options);
  if (auto* e = result.if_error()) FAIL(e->message);
  return (*result);
}

// Two compiled forms of one grammar give the same masks along the same
// random walk.
void expect_same_masks(const std::shared_ptr<const CompiledGrammar>& a, const std::shared_ptr<const CompiledGrammar>& b,
                       int steps, uint32_t seed) {
  Matcher ma(a), mb(b);
  std::mt19937 rng(seed);
  for (int step = 0; step < steps; ++step) {
    std::vector<uint32_t> allowed = ma.current_possible_tokens();
    REQUIRE(allowed == mb.current_possible_tokens());
    if (allowed.empty() || ma.is_finished()) break;
    uint32_t token = allowed[rng() % allowed.size()];
    REQUIRE(ma.advance(token) == mb.advance(token));
  }
}

// A compile limit at what `source` needs (it compiles) and one below (it is
// refused with `message`); `set` puts the value in the options.
template <typename SetLimit>
void expect_compile_limit(const std::string& source, size_t needed, SetLimit set, const std::string& message) {
  CompileOptions options;
  set(options, needed);
  CHECK(compile_with(source, options).ok());
  set(options, needed - 1);
  auto refused = compile_with(source, options);
  REQUIRE(!refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains(message));
}

}  // namespace

TEST_CASE("LR limits: states, and sparse rows where a dense table would be too big", "[limits][lr]") {
  const std::string json = read_example("json.cgram");
  auto dense = compiled_with(json);
  const size_t states = dense->table().state_count();
  expect_compile_limit(
      json, states, [](CompileOptions& o, size_t v) { o.lr.max_states = v; },
      fmt::format("needs more than {} states", states - 1));
  // No dense table at all: the rows are searched, with the same masks.
  CompileOptions sparse;
  sparse.lr.max_dense_cells = 0;
  auto searched = compiled_with(json, sparse);
  CHECK(searched->table().memory_bytes() < dense->table().memory_bytes());
  for (uint32_t seed = 1; seed <= 5; ++seed) expect_same_masks(dense, searched, 60, seed);
  // A non-regular chain of 3,000 rules: the goto table would have
  // states × rules cells; it is searched instead, and stays small.
  std::string chain = "start ::= r0;\n";
  for (int i = 0; i < 3000; ++i) chain += fmt::format("r{} ::= 'a' r{} 'b' | 'c';\n", i, i + 1);
  chain += "r3000 ::= 'z';\n";
  auto long_chain = compiled_with(chain);
  CHECK(long_chain->table().memory_bytes() < (64u << 20));
}

TEST_CASE("LR lookahead sets: at the limit and past it, and many recursive alternatives refused early", "[limits][lr]") {
  // Each alternative a recursive rule with a literal of its own: terminals
  // and rules grow together, and so do the lookahead bitsets.
  auto alternatives = [](int n) {
    std::string source = "start ::= r0";
    for (int i = 1; i < n; ++i) source += fmt::format(" | r{}", i);
    source += ";\n";
    for (int i = 0; i < n; ++i) source += fmt::format("r{0} ::= 'x' r{0} 'y' | 'k{0}';\n", i);
    return source;
  };
  const std::string source = alternatives(300);
  auto built = compiled_with(source);
  const size_t needed = built->table().lookahead_bytes();
  CHECK(needed > 0);
  expect_compile_limit(
      source, needed, [](CompileOptions& o, size_t v) { o.lr.max_lookahead_bytes = v; },
      "lookahead sets need more than");
  // 20,000 of them (900 MB before this limit; 30,000 took 1.7 GB) are
  // refused by the default, before any set is built.
  auto huge = compile_with(alternatives(20000), {});
  REQUIRE(!huge.ok());
  CHECK_THAT(huge.error().message, Catch::Contains("LrLimits::max_lookahead_bytes"));
}

TEST_CASE("the lexical-collapse budget: rules over it stay with the parser, with the same masks", "[limits][lexical]") {
  const std::string json = read_example("json.cgram");
  auto collapsed = compiled_with(json);
  CompileOptions options;
  options.collapse.max_total_states = 8;
  auto kept = compiled_with(json, options);
  bool spent = false;
  for (const std::string& why : kept->lexical().context_free_reasons)
    spent = spent || why.find("budget for collapsing rules") != std::string::npos;
  CHECK(spent);
  CHECK(kept->table().state_count() > collapsed->table().state_count());
  for (uint32_t seed = 1; seed <= 5; ++seed) expect_same_masks(collapsed, kept, 60, seed);
  // A finite chain of 2,000 regular rules: each would be a DFA of its own,
  // quadratic in all; the budget bounds the work.
  std::string chain = "start ::= r0;\n";
  for (int i = 0; i < 2000; ++i) chain += fmt::format("r{} ::= 'a' r{} 'b' | 'c';\n", i, i + 1);
  chain += "r2000 ::= 'z';\n";
  auto bounded = compiled_with(chain);
  CHECK(bounded->memory_bytes() < (256u << 20));
}

TEST_CASE("except! sets: string length, set size and total bytes, checked while expanding", "[limits][except]") {
  CHECK(parse("start ::= except!('" + std::string(256, 'a') + "');").ok());
  CHECK_THAT(only_error(parse("start ::= except!('" + std::string(257, 'a') + "');")),
             Catch::Contains("longer than 256 bytes"));
  // A product is refused before it is built.
  std::string hundred = "d ::= ";
  for (int i = 0; i < 100; ++i) hundred += fmt::format("{}'{:02}'", i ? " | " : "", i);
  hundred += ";\n";
  CHECK(parse("start ::= except!(d d);\n" + hundred).ok());
  auto product = parse("start ::= except!(d d e);\ne ::= 'x' | 'y';\n" + hundred);
  CHECK_THAT(only_error(product), Catch::Contains("more than 10000 strings"));
  auto huge = parse("start ::= except!(d d d d d d d d d d);\n" + hundred);
  CHECK_THAT(only_error(huge), Catch::Contains("more than 10000 strings"));
  // An alternation that doubles thirty times.
  std::string doubling = "start ::= except!(r30);\nr0 ::= 'a' | 'b';\n";
  for (int i = 1; i <= 30; ++i) doubling += fmt::format("r{} ::= r{} | r{};\n", i, i - 1, i - 1);
  CHECK_THAT(only_error(parse(doubling)), Catch::Contains("more than 10000 strings"));
  // Rules inside rules, walked recursively, are bounded like nesting.
  std::string chain = "start ::= except!(r0);\n";
  for (int i = 0; i < 300; ++i) chain += fmt::format("r{} ::= r{};\n", i, i + 1);
  chain += "r300 ::= 'q';\n";
  CHECK_THAT(only_error(parse(chain)), Catch::Contains("more than 256 rules"));
  // The total over every set is an option.
  ParseOptions options;
  options.limits.max_except_bytes = 6;
  CHECK(parse_with("start ::= except!('abc') except!('def');", options).ok());
  CHECK_THAT(only_error(parse_with("start ::= except!('abc') except!('defg');", options)),
             Catch::Contains("more than 6 bytes"));
}

TEST_CASE("except! at its longest string: built in bounded memory, pending occurrences exact", "[limits][except]") {
  // The pending remainders of 'a'×256 after k a's are a^(256-j) for j ≤ k:
  // all of them at once grow with the cube of the length; they are now
  // worked out per state when asked.
  const std::string s(256, 'a');
  auto compiled = compiled_with("start ::= except!('" + s + "') 'x';");
  CHECK(compiled->memory_bytes() < (64u << 20));
  const ir::ExceptAutomaton& ac = *compiled->lexical().excepts.at(0).automaton;
  uint32_t state = ac.dfa().start();
  for (size_t k = 1; k <= 255; ++k) {
    state = ac.dfa().next(state, 'a');
    REQUIRE(state != ir::Dfa::kDead);
    if (k % 50 != 0 && k != 255) continue;
    std::vector<std::string> pending = ac.pending(state);
    REQUIRE(pending.size() == k);
    for (size_t j = 1; j <= k; ++j) CHECK(std::binary_search(pending.begin(), pending.end(), std::string(256 - j, 'a')));
  }
  CHECK(ac.dfa().next(state, 'a') == ir::Dfa::kDead);
}

TEST_CASE("literals and the grammar's DFA states in all: at the limit and past it", "[limits]") {
  ParseOptions options;
  options.limits.max_dfa_states = 100;
  CHECK(parse_with("start ::= '" + std::string(99, 'x') + "';", options).ok());
  CHECK_THAT(only_error(parse_with("start ::= '" + std::string(100, 'x') + "';", options)),
             Catch::Contains("this literal is 100 bytes long; the limit is 99 bytes"));
  // The default: a 5 MB literal is refused at once (it once asked for 5 GB).
  CHECK_THAT(only_error(parse("start ::= '" + repeat("ab", 2500000) + "';")), Catch::Contains("the limit is 32767"));
  ParseOptions total;
  total.limits.max_total_dfa_states = 8;  // 'abc' and 'de' take 4 + 3 states
  CHECK(parse_with("start ::= 'abc' 'de';", total).ok());
  CHECK_THAT(only_error(parse_with("start ::= 'abc' 'de' 'f';", total)), Catch::Contains("more than 8 DFA states"));
}

TEST_CASE("matcher misuse is refused and leaves the state as it was", "[limits][matcher][misuse]") {
  auto g = compiled_with(read_example("json.cgram"));
  const Vocabulary& vocab = g->vocabulary();
  Matcher m(g);
  const uint32_t open = vocab.find("{").value();
  REQUIRE(m.advance(open) == AdvanceResult::Ongoing);
  const std::vector<uint32_t> before = m.current_possible_tokens();
  // Invalid ids: -1 as unsigned, the vocabulary's size, UINT32_MAX.
  for (uint32_t bad : {static_cast<uint32_t>(-1), static_cast<uint32_t>(vocab.size()), UINT32_MAX}) {
    CHECK(m.advance(bad) == AdvanceResult::Rejected);
    CHECK_FALSE(m.is_allowed(bad));
  }
  // A short mask span: nothing written.
  std::vector<uint32_t> words(m.mask_words() - 1, 0xDEADBEEF);
  CHECK_FALSE(m.fill_mask(words));
  CHECK(std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0xDEADBEEF; }));
  CHECK_FALSE(m.fill_mask({}));
  // A longer span: the words past the mask are left alone.
  std::vector<uint32_t> longer(m.mask_words() + 2, 0xDEADBEEF);
  CHECK(m.fill_mask(longer));
  CHECK(longer[m.mask_words()] == 0xDEADBEEF);
  // Rollback past what was accepted.
  CHECK_FALSE(m.rollback(2));
  CHECK(m.tokens_accepted() == 1);
  // Logits spans shorter than the vocabulary: refused before anything changes.
  std::vector<float> logits(vocab.size() - 1, 1.0f);
  CHECK_FALSE(m.update_logits_from_tokens(logits));
  CHECK(std::all_of(logits.begin(), logits.end(), [](float x) { return x == 1.0f; }));
  const uint32_t quote = vocab.find("\"").value();
  CHECK(m.modify_possible_logits(quote, logits) == AdvanceResult::Rejected);
  CHECK(m.tokens_accepted() == 1);
  // Padded logits (a model larger than its tokenizer): the padding is -inf.
  std::vector<float> padded(vocab.size() + 64, 1.0f);
  CHECK(m.update_logits_from_tokens(padded));
  CHECK(padded.back() == -std::numeric_limits<float>::infinity());
  CHECK(m.current_possible_tokens() == before);
  // A finished matcher allows nothing and accepts nothing, until rolled back.
  Matcher done(g);
  for (char c : std::string("{}")) REQUIRE(done.advance(vocab.find(std::string(1, c)).value()) == AdvanceResult::Ongoing);
  REQUIRE(done.advance(vocab.eos_ids().front()) == AdvanceResult::Finished);
  CHECK(done.current_possible_tokens().empty());
  CHECK(done.advance(open) == AdvanceResult::Rejected);
  CHECK(done.rollback(1));
  CHECK_FALSE(done.current_possible_tokens().empty());
}

TEST_CASE("a matcher without a grammar, and batches with bad rows, are refused", "[limits][matcher][misuse]") {
  Matcher none(nullptr);
  CHECK(none.has_error());
  CHECK_FALSE(none.has_grammar());
  CHECK(none.advance(0) == AdvanceResult::Rejected);
  CHECK_FALSE(none.is_allowed(0));
  CHECK(none.current_possible_tokens().empty());
  CHECK_FALSE(none.can_end());
  CHECK_FALSE(none.rollback(1));
  Matcher copy = none.clone();
  CHECK(copy.has_error());
  none.reset();
  CHECK(none.has_error());

  auto g = compiled_with(read_example("json.cgram"));
  Matcher a(g), b(g);
  ThreadPool pool(2);
  std::vector<Matcher*> matchers{&a, &b};
  std::vector<uint32_t> batch(2 * a.mask_words() - 1, 7);
  CHECK_FALSE(fill_masks(matchers, batch, pool));
  CHECK(std::all_of(batch.begin(), batch.end(), [](uint32_t w) { return w == 7; }));
  batch.resize(2 * a.mask_words());
  std::vector<Matcher*> twice{&a, &a};
  CHECK_FALSE(fill_masks(twice, batch, pool));
  std::vector<Matcher*> with_null{&a, nullptr};
  CHECK_FALSE(fill_masks(with_null, batch, pool));
  CHECK(fill_masks(matchers, batch, pool));
}

// Only compile and load_tables make a CompiledGrammar: its constructors take
// private keys that `{}` cannot make outside the class.
template <typename G, typename... Args>
concept ConstructibleFromEmptyKey = requires(Args... args) { G({}, args...); };

TEST_CASE("a CompiledGrammar cannot be constructed outside compile and load_tables", "[limits][misuse]") {
  STATIC_REQUIRE_FALSE(ConstructibleFromEmptyKey<CompiledGrammar, std::shared_ptr<const Vocabulary>>);
  STATIC_REQUIRE_FALSE(ConstructibleFromEmptyKey<CompiledGrammar, std::shared_ptr<const Grammar>,
                                                 std::shared_ptr<const Vocabulary>, CompileOptions>);
  STATIC_REQUIRE_FALSE(std::is_default_constructible_v<CompiledGrammar>);
  // The factories refuse what would make a half-built grammar.
  CHECK(!(CompiledGrammar::load_tables("", bundled_vocabulary())).ok());
}

TEST_CASE("GLR limits: a pathologically ambiguous grammar gets a sticky error, not unbounded growth", "[limits][matcher]") {
  auto ambiguous = CompiledGrammar::compile(grammar("s ::= s s | 'a' | '';", "s"), bundled_vocabulary());
  auto compiled = *ambiguous;
  const uint32_t a = compiled->vocabulary().find("a").value();
  MatcherOptions options;
  options.limits.max_work_per_call = 20000;
  Matcher m(compiled, options);
  size_t accepted = 0;
  while (accepted < 100000 && m.advance(a) == AdvanceResult::Ongoing) ++accepted;
  INFO("accepted " << accepted);
  REQUIRE(m.has_error());
  CHECK_THAT(m.error(), Catch::Contains("max_work_per_call"));
  CHECK(accepted > 5);
  // Sticky: nothing is allowed or accepted now.
  CHECK(m.advance(a) == AdvanceResult::Rejected);
  CHECK(m.current_possible_tokens().empty());
  std::vector<uint32_t> words(m.mask_words());
  CHECK_FALSE(m.fill_mask(words));
  CHECK(m.tokens_accepted() == accepted);
  // Back to a state before the limit: usable again.
  REQUIRE(m.rollback(accepted / 2));
  CHECK_FALSE(m.has_error());
  CHECK(m.is_allowed(a));
  m.reset();
  CHECK(m.advance(a) == AdvanceResult::Ongoing);
  // Memory per matcher: the stack elements held.
  MatcherOptions small;
  small.limits.max_stack_elements = 3000;
  Matcher n(compiled, small);
  accepted = 0;
  while (accepted < 100000 && n.advance(a) == AdvanceResult::Ongoing) ++accepted;
  REQUIRE(n.has_error());
  CHECK_THAT(n.error(), Catch::Contains("max_stack_elements"));
  // With the defaults a long walk on an ordinary grammar never trips them.
  auto json = compiled_with(read_example("json.cgram"));
  Matcher ok(json);
  for (int i = 0; i < 2000; ++i) REQUIRE(ok.advance(json->vocabulary().find("[").value()) == AdvanceResult::Ongoing);
  CHECK_FALSE(ok.has_error());
}

TEST_CASE("repetitions at the documented bound compile in bounded time, with exact masks", "[limits][lexical]") {
  // 'a'{0,10000}: 10,000 nested helpers, each too big to collapse once the
  // budget is spent; they stay with the parser (this took minutes).
  auto compiled = compiled_with("start ::= 'a'{0,10000};");
  const Vocabulary& vocab = compiled->vocabulary();
  Matcher m(compiled);
  std::vector<uint32_t> expected;
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    const std::string_view bytes = vocab.bytes(id);
    const bool all_a = !vocab.is_special(id) && !bytes.empty() &&
                       bytes.find_first_not_of('a') == std::string_view::npos;
    if (all_a || vocab.is_eos(id)) expected.push_back(id);
  }
  CHECK(m.current_possible_tokens() == expected);
}

TEST_CASE("a repetition of except! gets a warning, and is read as one except!", "[limits][except]") {
  for (const char* source : {"start ::= except!('q')* '!';", "start ::= except!('q'){2,3} '!';"}) {
    auto outcome = parse(source);
    REQUIRE(outcome.ok());
    REQUIRE(outcome.diagnostics.warning_count() == 1);
    CHECK_THAT(outcome.diagnostics.all().front().message, Catch::Contains("a repetition of except!"));
    // One production: except! then '!'.
    const ir::GrammarIR& ir = outcome.grammar->ir();
    REQUIRE(ir.nonterminals[ir.start].productions.size() == 1);
    CHECK(ir.productions[ir.nonterminals[ir.start].productions[0]].rhs.size() == 2);
  }
  // With a count, copies differ (each has its own tokens): kept, and they
  // meet each other.
  auto counted = parse("start ::= except!('q', 3)* '!';");
  REQUIRE(counted.diagnostics.warning_count() == 1);
  CHECK_THAT(counted.diagnostics.all().front().message, Catch::Contains("free text meets free text"));
  CHECK(parse("start ::= except!('q')? '!';").diagnostics.warning_count() == 0);
  // Free text after free text of its own kind is read once, not split every
  // way: masks stay cheap as the text grows.
  auto g = grammar("start ::= except!('z') start | 'y' ;");
  auto compiled = (*(CompiledGrammar::compile(g, bundled_vocabulary())));
  Matcher m(compiled);
  for (int i = 0; i < 200; ++i) REQUIRE(m.advance(*bundled_vocabulary()->find("a")) == AdvanceResult::Ongoing);
  std::vector<uint32_t> words(m.mask_words());
  REQUIRE(m.fill_mask(words));
  CHECK(m.peak_work() < 1'000'000);
}

TEST_CASE("the analyses are worklists: a long chain of rules in either order", "[limits]") {
  // Fixpoints that iterated until nothing changed took one pass per rule
  // when the rules came in the wrong order (100,000: more than 20 s). Both
  // orders must give the same grammar; a quadratic pass would make this
  // test take minutes.
  constexpr int n = 20000;
  std::string forward = "start ::= r0;\n", backward;
  for (int i = 0; i < n; ++i) forward += fmt::format("r{} ::= 'a' r{} | 'b';\n", i, i + 1);
  forward += fmt::format("r{} ::= 'z';\n", n);
  backward = fmt::format("r{} ::= 'z';\n", n);
  for (int i = n - 1; i >= 0; --i) backward += fmt::format("r{} ::= 'a' r{} | 'b';\n", i, i + 1);
  backward += "start ::= r0;\n";
  auto a = parse(forward);
  auto b = parse(backward);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a.grammar->ir().user_rule_count() == b.grammar->ir().user_rule_count());
  for (const char* text : {"b", "aab", "aaaz"}) {
    CHECK(verdict(oracle_grammar(*a.grammar), text) == verdict(oracle_grammar(*b.grammar), text));
  }
}

TEST_CASE("\"did you mean\" is bounded: long names and many misses", "[limits][diagnostics]") {
  // Two 100,000-character names once asked for an 80 GB matrix.
  auto outcome = parse("start ::= " + std::string(100000, 'a') + ";\n" + std::string(100000, 'b') + " ::= 'x';");
  CHECK_THAT(only_error(outcome), Catch::Contains("undefined rule"));
  CHECK(ir::edit_distance(std::string(20000, 'a'), std::string(20000, 'b')) == 20000);
  CHECK(ir::edit_distance("sting", "string") == 1);
  CHECK(ir::edit_distance("vaule", "value") == 1);  // a transposition
  // Suggestions still come for names people type.
  CHECK_THAT(only_error(parse("start ::= vaule; value ::= 'x';")), Catch::Contains("did you mean 'value'?"));
  // Thousands of undefined names against thousands of rules: no pairwise blowup.
  std::string many = "start ::= r0";
  for (int i = 0; i < 3000; ++i) many += fmt::format(" u{}", i);
  many += ";\n";
  for (int i = 0; i < 3000; ++i) many += fmt::format("r{} ::= 'x';\n", i);
  auto misses = parse(many);
  CHECK(misses.diagnostics.error_count() >= 100);
}

TEST_CASE("diagnostics: at most 100 kept, and a window of a long line", "[limits][diagnostics]") {
  // A million stray characters on one line: a million errors counted, the
  // first 100 kept and rendered, each with an excerpt of the line around it.
  const std::string source(1000000, '@');
  auto outcome = parse(source);
  CHECK(outcome.diagnostics.error_count() == 1000000);
  CHECK(outcome.diagnostics.all().size() == 100);
  CHECK(outcome.diagnostics.dropped() == 999900);
  const std::string rendered = outcome.diagnostics.render();
  CHECK(rendered.size() < 100 * 600);
  CHECK_THAT(rendered, Catch::Contains("999900 more diagnostics not shown"));
  ParseOptions options;
  options.syntax.max_errors = 3;
  CHECK(parse_with("start ::= @ @ @ @ @;", options).diagnostics.all().size() == 3);
  // The caret still points at the right character in the window.
  const std::string line = "start ::= " + repeat("'a' ", 5000) + "@ 'b';";
  auto one = parse(line);
  const std::string shown = one.diagnostics.render_one(one.diagnostics.sorted().front());
  const size_t first_newline = shown.find('\n'), second_newline = shown.find('\n', first_newline + 1);
  const std::string excerpt = shown.substr(first_newline + 1, second_newline - first_newline - 1);
  const std::string caret_line = shown.substr(second_newline + 1);
  CHECK(excerpt.substr(0, 3) == "...");
  CHECK(excerpt.size() < 200);
  CHECK(excerpt[caret_line.find('^')] == '@');
}

TEST_CASE("the matcher's work limit leaves a wide margin on every example and suite grammar", "[limits][matcher]") {
  // The documents of the suite, walked with masks at every step: the most
  // work one call takes stays far below EngineLimits::max_work_per_call.
  const EngineLimits defaults;
  size_t peak = 0;
  std::string peak_label;
  for (const SuiteGrammar& sg : suite_grammars()) {
    if (sg.documents.empty()) continue;
    auto compiled = compiled_with(sg.source);
    auto encoder = (*(Encoder::create(compiled->vocabulary_ptr())));
    Matcher m(compiled);
    std::vector<uint32_t> words(m.mask_words());
    auto tokens = encoder->try_encode_continuation(sg.documents.front().substr(0, 2000));
    if (!tokens.ok()) continue;
    for (uint32_t t : (*tokens)) {
      REQUIRE(m.fill_mask(words));
      if (m.advance(t) != AdvanceResult::Ongoing) break;
    }
    REQUIRE_FALSE(m.has_error());
    if (m.peak_work() > peak) peak = m.peak_work(), peak_label = sg.label;
  }
  INFO("peak work " << peak << " on " << peak_label);
  CHECK(peak > 0);
  CHECK(peak < defaults.max_work_per_call / 16);
  WARN("peak work per call on the suite: " << peak << " (" << peak_label << ")");
}

TEST_CASE("free text that meets other free text gets a warning naming the rule", "[limits][except]") {
  for (const char* source : {"a = except!('y') except!('az') ; start ::= a{2}{3} ;",
                             "start ::= t 'x' ; t ::= except!('q') [ except!('r') ] ;",
                             "start ::= except!('z', 3) start | 'y' ;"}) {
    auto outcome = parse(source);
    REQUIRE(outcome.ok());
    INFO(source);
    REQUIRE(outcome.diagnostics.warning_count() >= 1);
    CHECK_THAT(outcome.diagnostics.all().front().message, Catch::Contains("free text meets free text in rule"));
  }
  // The same except! twice is read once; a delimiter between two is fine.
  for (const char* source : {"start ::= except!('z') start | 'y' ;", "start ::= except!('y') ',' except!('az') ;",
                             "start ::= except!('</think>') '</think>' except!('<tool>') ;"}) {
    INFO(source);
    CHECK(parse(source).diagnostics.warning_count() == 0);
  }
}

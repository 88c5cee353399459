#include "random_differential.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <random>
#include <unordered_map>

#include "grammar.h"
#include "compiled_grammar.h"
#include "grammar_generator.h"
#include "matcher.h"
#include "oracle.h"
#include "oracle_mask.h"
#include "sentence_generator.h"
#include "text_match.h"
#include "utf8.h"

namespace cgram::test::random {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

bool valid_utf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();)
    if (!decode_utf8(bytes, i)) return false;
  return true;
}

// Bytes as a C string literal: controls, quotes and the comment closer
// escaped, UTF-8 kept unless the bytes are not valid UTF-8 (a token may
// hold part of a character; the reproducer must stay a valid .cgram file).
std::string escaped(std::string_view bytes) {
  const bool keep_utf8 = valid_utf8(bytes);
  std::string out;
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') out += std::string("\\") + c;
    else if (c == '\n') out += "\\n";
    else if (c == '*' || c == ')' || u < 0x20 || u == 0x7F || (u >= 0x80 && !keep_utf8))
      out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return "\"" + out + "\"";
}

std::string hex(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return out;
}

struct Parsed {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const oracle::OracleGrammar> oracle;
};

std::optional<Parsed> parse(const std::string& source, std::string* error = nullptr) {
  Grammar::Outcome outcome = Grammar::parse(source, "random.cgram");
  if (!outcome.ok()) {
    if (error) *error = outcome.diagnostics.render();
    return std::nullopt;
  }
  auto og = std::make_shared<const oracle::OracleGrammar>(oracle::OracleGrammar::from_ir(outcome.grammar->ir()));
  return Parsed{outcome.grammar, std::move(og)};
}

// One answer of the engine compared with the oracle's.
struct Answer {
  bool refused = false;  // the engine stopped at a limit
  bool agree = true;
  std::string what;
  double ms = 0;
  double oracle_ms = -1;  // a refused verdict: the oracle's time on the same text (the targets compare them)
};

Answer compare_verdict(const Parsed& p, std::string_view text, size_t work_per_byte) {
  Answer a;
  const auto t0 = Clock::now();
  const TextMatch mine = match_text(*p.grammar, text, work_per_byte);
  a.ms = ms_since(t0);
  const auto oracle_t0 = Clock::now();
  const oracle::MatchResult want = oracle::match_text(p.oracle, text);
  if (!mine.error.empty()) {
    a.refused = true;
    a.oracle_ms = ms_since(oracle_t0);
    a.what = mine.error;
    return a;
  }
  const bool same_verdict = static_cast<int>(mine.verdict) == static_cast<int>(want.verdict);
  a.agree = same_verdict && (want.verdict != oracle::Verdict::Rejected || mine.viable_bytes == want.viable_bytes);
  if (!a.agree) {
    auto say = [](const char* verdict, bool rejected, size_t at) {
      return rejected ? fmt::format("{} at byte {}", verdict, at) : std::string(verdict);
    };
    a.what = fmt::format("cgram match says {}, the oracle {}",
                         say(text_verdict_name(mine.verdict), mine.verdict == TextVerdict::Rejected, mine.viable_bytes),
                         say(oracle::verdict_name(want.verdict), want.verdict == oracle::Verdict::Rejected,
                             want.viable_bytes));
  }
  return a;
}

std::vector<uint32_t> ids_of(const Vocabulary& vocab, const std::vector<std::string>& tokens) {
  std::vector<uint32_t> ids;
  for (const std::string& t : tokens) ids.push_back(vocab.find(t).value_or(UINT32_MAX));
  return ids;
}

// A mask's first difference, described.
std::string mask_difference(const Vocabulary& vocab, std::span<const uint32_t> mine, std::span<const uint32_t> want,
                            size_t* differing) {
  std::string first;
  size_t count = 0;
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    const bool a = mine[id / 32] >> (id % 32) & 1, b = want[id / 32] >> (id % 32) & 1;
    if (a == b) continue;
    if (count++ == 0)
      first = fmt::format("token {} '{}': cgram {}, the oracle {}", id, vocab.display(id), a ? "allows" : "forbids",
                          b ? "allows" : "forbids");
  }
  if (differing) *differing = count;
  return count > 1 ? fmt::format("{} (and {} more tokens)", first, count - 1) : first;
}

// A token sequence through the matcher and the oracle: each token accepted
// or refused alike, end of sequence alike at the end, and the whole masks
// alike at the steps in `mask_at` (indices 0..tokens.size()).
struct TokenRun {
  Answer answer;
  std::string kind;  // of the disagreement
  size_t agreed_tokens = 0;
  size_t token_checks = 0, mask_checks = 0, mask_pairs = 0, queries = 0;
  double slowest_ms = 0;
  std::string slowest;
};

// Counts one mask comparison; on a difference, records it in `run`.
bool same_mask(TokenRun& run, const Vocabulary& vocab, std::span<const uint32_t> mine,
               std::span<const uint32_t> want) {
  ++run.mask_checks;
  run.mask_pairs += vocab.size();
  size_t differing = 0;
  const std::string diff = mask_difference(vocab, mine, want, &differing);
  if (differing == 0) return true;
  run.answer.agree = false;
  run.kind = "mask";
  run.answer.what = "the masks differ at " + diff;
  return false;
}

TokenRun run_tokens(const std::shared_ptr<const CompiledGrammar>& compiled, const Parsed& p,
                    const std::vector<uint32_t>& tokens, const std::vector<size_t>& mask_at,
                    const MatcherOptions& options) {
  TokenRun run;
  const Vocabulary& vocab = compiled->vocabulary();
  Matcher matcher(compiled, options);
  oracle::Recognizer recognizer(p.oracle, /*segmented=*/true);
  OracleMasker masker(p.oracle, compiled->vocabulary_ptr());
  std::vector<uint32_t> history;
  auto timed = [&](double ms, const char* what) {
    ++run.queries;
    if (ms > run.slowest_ms) run.slowest_ms = ms, run.slowest = fmt::format("{} after {} tokens", what, history.size());
  };
  auto refused = [&]() {
    run.answer.refused = true;
    run.answer.what = matcher.error();
    return run;
  };
  for (size_t i = 0; i <= tokens.size(); ++i) {
    if (std::find(mask_at.begin(), mask_at.end(), i) != mask_at.end()) {
      std::vector<uint32_t> mine(matcher.mask_words());
      const auto t0 = Clock::now();
      matcher.fill_mask(mine);
      timed(ms_since(t0), "mask");
      if (matcher.has_error()) return refused();
      if (!same_mask(run, vocab, mine, masker.mask(history))) {
        run.agreed_tokens = i;
        return run;
      }
    }
    if (i == tokens.size()) break;
    recognizer.push_token(vocab.bytes(tokens[i]));
    const bool oracle_accepts = !recognizer.dead() && recognizer.viable();
    const auto t0 = Clock::now();
    const AdvanceResult result = matcher.advance(tokens[i]);
    timed(ms_since(t0), "advance");
    if (matcher.has_error()) return refused();
    ++run.token_checks;
    const bool accepted = result == AdvanceResult::Ongoing;
    if (accepted != oracle_accepts) {
      run.answer.agree = false;
      run.kind = "token";
      run.agreed_tokens = i;
      run.answer.what = fmt::format("token {} '{}' (number {}): cgram {}, the oracle {}", tokens[i],
                                    vocab.display(tokens[i]), i + 1, accepted ? "accepts" : "refuses",
                                    oracle_accepts ? "accepts" : "refuses");
      return run;
    }
    if (!accepted) return run;
    history.push_back(tokens[i]);
  }
  const auto t0 = Clock::now();
  const bool can_end = matcher.can_end();
  timed(ms_since(t0), "can_end");
  if (matcher.has_error()) return refused();
  ++run.token_checks;
  if (can_end != recognizer.complete()) {
    run.answer.agree = false;
    run.kind = "token";
    run.answer.what = fmt::format("end of sequence after {} tokens: cgram {}, the oracle {}", tokens.size(),
                                  can_end ? "allows" : "forbids", recognizer.complete() ? "allows" : "forbids");
  }
  return run;
}

// A random walk that follows the oracle's masks; the matcher's mask is
// compared at every step.
TokenRun walk(const std::shared_ptr<const CompiledGrammar>& compiled, const Parsed& p, uint64_t seed, size_t steps,
              std::vector<uint32_t>& taken, const MatcherOptions& options) {
  TokenRun run;
  const Vocabulary& vocab = compiled->vocabulary();
  Matcher matcher(compiled, options);
  OracleMasker masker(p.oracle, compiled->vocabulary_ptr());
  std::mt19937_64 rng(seed);
  taken.clear();
  for (size_t step = 0; step < steps; ++step) {
    std::vector<uint32_t> mine(matcher.mask_words());
    const auto t0 = Clock::now();
    matcher.fill_mask(mine);
    const double ms = ms_since(t0);
    ++run.queries;
    if (ms > run.slowest_ms) run.slowest_ms = ms, run.slowest = fmt::format("walk mask after {} tokens", step);
    if (matcher.has_error()) {
      run.answer.refused = true;
      run.answer.what = matcher.error();
      return run;
    }
    const std::vector<uint32_t> want = masker.mask(taken);
    if (!same_mask(run, vocab, mine, want)) return run;
    std::vector<uint32_t> allowed;
    for (uint32_t id = 0; id < vocab.size(); ++id)
      if (want[id / 32] >> (id % 32) & 1 && !vocab.is_eos(id)) allowed.push_back(id);
    if (allowed.empty()) break;
    const uint32_t token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    if (matcher.advance(token) != AdvanceResult::Ongoing) {
      run.answer.refused = matcher.has_error();
      run.answer.agree = matcher.has_error();
      run.kind = "token";
      run.agreed_tokens = taken.size();
      taken.push_back(token);
      run.answer.what = matcher.has_error() ? matcher.error()
                                            : fmt::format("token {} '{}': cgram refuses what its mask allowed",
                                                          token, vocab.display(token));
      return run;
    }
    taken.push_back(token);
  }
  return run;
}

// A random segmentation of `text` into text tokens of the vocabulary
// (longest match more often than not); stops where no token fits.
std::vector<uint32_t> segment(const Vocabulary& vocab, std::string_view text, std::mt19937_64& rng) {
  std::vector<uint32_t> out;
  for (size_t pos = 0; pos < text.size();) {
    std::vector<uint32_t> fits;
    for (size_t len = 1; len <= 16 && pos + len <= text.size(); ++len)
      if (auto id = vocab.find(text.substr(pos, len)); id && !vocab.is_special(*id)) fits.push_back(*id);
    if (fits.empty()) break;
    const uint32_t id = rng() % 5 < 3 ? fits.back() : fits[rng() % fits.size()];
    out.push_back(id);
    pos += vocab.bytes(id).size();
  }
  return out;
}

// Texts for one grammar: sentences, prefixes, mutations, random strings.
std::vector<std::string> make_texts(const Grammar& grammar, const std::vector<std::string>& letters, uint64_t seed,
                                    const DifferentialOptions& o, std::vector<std::string>& sentences) {
  std::mt19937_64 rng(seed);
  SentenceGenerator generator(grammar.ir(), seed);
  auto cut = [&](std::string s) {
    if (s.size() > o.max_text_bytes) s.resize(o.max_text_bytes);
    return s;
  };
  std::vector<std::string> texts;
  for (size_t i = 0; i < o.sentences; ++i) sentences.push_back(cut(generator.generate(2 + rng() % 8)));
  auto random_letters = [&](size_t n) {
    std::string s;
    for (size_t k = 0; k < n && !letters.empty(); ++k) s += letters[rng() % letters.size()];
    return s;
  };
  for (const std::string& s : sentences) {
    texts.push_back(s);
    for (int k = 0; k < 2 && !s.empty(); ++k) texts.push_back(s.substr(0, rng() % s.size()));
    // Mutations: a byte or a letter inserted, a byte dropped or changed, a
    // piece repeated, a sentence after it.
    std::string m = s;
    const size_t at = m.empty() ? 0 : rng() % (m.size() + 1);
    switch (rng() % 5) {
      case 0: m.insert(at, random_letters(1)); break;
      case 1: if (!m.empty()) m.erase(std::min(at, m.size() - 1), 1); break;
      case 2: if (!m.empty()) m[std::min(at, m.size() - 1)] = static_cast<char>(rng() % 256); break;
      case 3: m.insert(at, m.substr(0, at)); break;
      default: m += sentences[rng() % sentences.size()]; break;
    }
    texts.push_back(cut(m));
  }
  for (int k = 0; k < 3; ++k) texts.push_back(random_letters(rng() % 12));
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  return texts;
}

// The letters a grammar's literals use (its texts' random strings draw on them).
std::vector<std::string> letters_of(const Grammar& grammar) {
  std::vector<std::string> letters;
  for (const ir::Terminal& t : grammar.ir().terminals)
    if (t.kind == ir::Terminal::Kind::Literal)
      for (size_t i = 0; i < t.text.size();) {
        size_t n = 1;
        while (i + n < t.text.size() && (static_cast<unsigned char>(t.text[i + n]) & 0xC0) == 0x80) ++n;
        letters.push_back(t.text.substr(i, n));
        i += n;
      }
  for (const ir::ExceptSpec& e : grammar.ir().excepts)
    for (const std::string& s : e.strings) letters.push_back(s);
  letters.push_back("q");
  std::sort(letters.begin(), letters.end());
  letters.erase(std::unique(letters.begin(), letters.end()), letters.end());
  return letters;
}

// The masks a shrunk token list compares: the original steps that are
// still within it, and its end for a mask disagreement.
std::vector<size_t> mask_positions(const std::vector<size_t>& original, size_t tokens, bool at_end) {
  std::vector<size_t> at;
  for (size_t m : original)
    if (m < tokens || (m == tokens && at_end)) at.push_back(m);
  if (at_end && (at.empty() || at.back() != tokens)) at.push_back(tokens);
  return at;
}

// Delta debugging: the smallest grammar (by greedy simplification) and the
// shortest text or token list (ddmin) that still disagree.
constexpr size_t kShrinkBudget = 4000;  // predicate evaluations

template <typename T>
std::vector<T> ddmin(std::vector<T> items, const std::function<bool(const std::vector<T>&)>& fails, size_t& budget) {
  for (size_t n = 2; items.size() >= 1 && budget > 0;) {
    const size_t chunk = (items.size() + n - 1) / n;
    bool removed = false;
    for (size_t start = 0; start < items.size() && budget > 0; start += chunk) {
      std::vector<T> candidate = items;
      candidate.erase(candidate.begin() + static_cast<long>(start),
                      candidate.begin() + static_cast<long>(std::min(items.size(), start + chunk)));
      --budget;
      if (fails(candidate)) {
        items = std::move(candidate);
        n = std::max<size_t>(n - 1, 2);
        removed = true;
        break;
      }
    }
    if (!removed) {
      if (chunk == 1) break;
      n = std::min(items.size(), n * 2);
    }
  }
  return items;
}

RandomGrammar shrink_grammar(RandomGrammar g, const std::function<bool(const std::string&)>& fails, size_t& budget) {
  for (bool progress = true; progress && budget > 0;) {
    progress = false;
    for (RandomGrammar& s : simplifications(g)) {
      if (budget == 0) break;
      --budget;
      if (fails(s.source())) {
        g = std::move(s);
        progress = true;
        break;
      }
    }
  }
  return g;
}

}  // namespace

std::shared_ptr<const Vocabulary> make_byte_vocabulary() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  const std::vector<std::string> letters = {"a", "b", "c", "x", "y", "z", "1", "-", " ", "\n", "é", "λ", "Ā", "文", "😀", "q"};
  for (const std::string& a : letters)
    for (const std::string& b : letters) tokens.push_back(a + b);
  for (std::string_view a : {"ab", "xy", "a b", "zz", "文文", "λλ"})
    for (const std::string& b : letters) tokens.push_back(std::string(a) + b);
  // Pieces of characters, as byte-level BPE has them.
  for (const std::string& c : letters)
    for (size_t k = 2; k < c.size(); ++k) tokens.push_back(c.substr(0, k)), tokens.push_back(c.substr(c.size() - k));
  std::sort(tokens.begin() + 256, tokens.end());
  tokens.erase(std::unique(tokens.begin() + 256, tokens.end()), tokens.end());
  tokens.erase(std::remove_if(tokens.begin() + 256, tokens.end(), [](const std::string& t) { return t.size() < 2; }),
               tokens.end());
  tokens.push_back("</s>");
  const auto eos = static_cast<uint32_t>(tokens.size() - 1);
  return (*(Vocabulary::from_tokens(std::move(tokens), {eos}, {eos})));
}

std::string Disagreement::reproducer() const {
  std::string out = fmt::format("(* cgram random differential: a {} disagreement\n   {}\n", kind, what);
  out += fmt::format("   text {}\n", escaped(text));
  if (!tokens.empty()) {
    out += fmt::format("   tokens ({} vocabulary):", vocabulary);
    for (const std::string& t : tokens) out += " " + escaped(t);
    out += "\n";
  }
  if (kind == "verdict") out += "   reproduce: cgram match FILE \"$(printf '" + escaped(text).substr(1, escaped(text).size() - 2) + "')\"\n";
  out += "   replay: random_differential --replay FILE *)\n";
  out += fmt::format("(* replay-kind: {} *)\n", kind);
  out += fmt::format("(* replay-text: {} *)\n", hex(text));
  if (kind != "verdict") {
    out += fmt::format("(* replay-vocabulary: {} *)\n(* replay-tokens:", vocabulary);
    for (const std::string& t : tokens) out += " " + hex(t);
    out += " *)\n(* replay-masks:";
    for (size_t m : mask_at) out += fmt::format(" {}", m);
    out += " *)\n";
  }
  return out + grammar;
}

MatcherOptions Differential::matcher_options() const {
  MatcherOptions o;
  if (options_.max_work_per_call) o.limits.max_work_per_call = options_.max_work_per_call;
  // Every mask that can be kept in the grammar's memo is, however cheap:
  // the masks it gives back are compared like the others.
  o.limits.mask_memo_min_work = 0;
  o.limits.cross_memo_min_work = 0;
  o.limits.walk_memo_min_work = 0;
  return o;
}

Differential::Differential(DifferentialOptions options) : options_(options), bytes_(make_byte_vocabulary()) {
  if (options_.bundled) bundled_ = (*(Vocabulary::bundled()));
}

GrammarReport Differential::check(uint64_t seed) {
  RandomGrammar g = generate_grammar(seed);
  // A regex over the size limit (a bounded repetition of a large class) is
  // refused by design, and says nothing: the seed draws again.
  for (uint64_t k = 1; k < 8 && g.source().size() < 100000; ++k) {
    std::string error;
    if (parse(g.source(), &error) || error.find("too large") == std::string::npos) break;
    g = generate_grammar(seed + k * shape_names().size() * 1000003u);  // the same shape
  }
  GrammarReport report = check_source(g.source(), seed, g.shape);
  if (!options_.shrink) return report;
  // Shrink each disagreement: the grammar (keeping the same query), then the
  // text or tokens, then the grammar again.
  for (Disagreement& d : report.disagreements) {
    size_t budget = kShrinkBudget;
    if (d.kind == "verdict") {
      auto fails = [&](const std::string& source, std::string_view text) {
        auto p = parse(source);
        if (!p) return false;
        Answer a = compare_verdict(*p, text, options_.match_work_per_byte);
        return !a.refused && !a.agree;
      };
      const std::string text = d.text;
      RandomGrammar small = shrink_grammar(g, [&](const std::string& s) { return fails(s, text); }, budget);
      std::vector<char> bytes(text.begin(), text.end());
      bytes = ddmin<char>(bytes, [&](const std::vector<char>& b) { return fails(small.source(), std::string(b.begin(), b.end())); }, budget);
      d.text.assign(bytes.begin(), bytes.end());
      small = shrink_grammar(small, [&](const std::string& s) { return fails(s, d.text); }, budget);
      d.grammar = small.source();
      if (auto p = parse(d.grammar)) d.what = compare_verdict(*p, d.text, options_.match_work_per_byte).what;
    } else {
      const auto& vocab = d.vocabulary == "bytes" ? bytes_ : bundled_;
      const bool mask = d.kind == "mask";
      auto fails = [&](const std::string& source, const std::vector<std::string>& tokens, std::string* what) {
        auto p = parse(source);
        if (!p) return false;
        auto compiled = CompiledGrammar::compile(p->grammar, vocab);
        if (!compiled.ok()) return false;
        const std::vector<uint32_t> ids = ids_of(*vocab, tokens);
        std::vector<size_t> at = mask_positions(d.mask_at, ids.size(), mask);
        TokenRun run = run_tokens(*compiled, *p, ids, at, matcher_options());
        if (what) *what = run.answer.what;
        return !run.answer.refused && !run.answer.agree;
      };
      std::vector<std::string> tokens = d.tokens;
      RandomGrammar small = shrink_grammar(g, [&](const std::string& s) { return fails(s, tokens, nullptr); }, budget);
      tokens = ddmin<std::string>(tokens, [&](const std::vector<std::string>& t) { return fails(small.source(), t, nullptr); }, budget);
      small = shrink_grammar(small, [&](const std::string& s) { return fails(s, tokens, nullptr); }, budget);
      d.grammar = small.source();
      d.mask_at = mask_positions(d.mask_at, tokens.size(), mask);
      d.tokens = tokens;
      d.text.clear();
      for (const std::string& t : tokens) d.text += t;
      fails(d.grammar, d.tokens, &d.what);
    }
  }
  return report;
}

GrammarReport Differential::check_source(const std::string& source, uint64_t seed, const std::string& shape) {
  GrammarReport report;
  report.seed = seed;
  report.shape = shape;
  report.source = source;
  auto parsed = parse(source, &report.parse_error);
  if (!parsed) return report;
  report.parsed = true;
  const Parsed& p = *parsed;
  auto note = [&](double ms, const std::string& what) {
    if (ms > report.slowest_ms) report.slowest_ms = ms, report.slowest = what;
    if (ms > options_.slow_ms) report.slow.push_back(fmt::format("{:.1f} ms: {}", ms, what));
  };

  // Whole texts.
  std::vector<std::string> sentences;
  const std::vector<std::string> texts = make_texts(*p.grammar, letters_of(*p.grammar), seed, options_, sentences);
  bool reported_verdict = false;  // one per grammar
  for (const std::string& text : texts) {
    Answer a = compare_verdict(p, text, options_.match_work_per_byte);
    ++report.queries;
    note(a.ms, "match of " + escaped(text));
    if (a.refused) {
      ++report.refusals;
      report.refused.push_back(fmt::format("match of {} ({} bytes; the oracle answered in {:.1f} ms)", escaped(text),
                                           text.size(), a.oracle_ms));
      continue;
    }
    ++report.verdict_checks;
    if (!a.agree && !reported_verdict) {
      reported_verdict = true;
      report.disagreements.push_back({"verdict", source, a.what, text, {}, {}, {}});
    }
  }

  // Token sequences, per vocabulary; one disagreement of each kind is
  // reported per grammar and vocabulary (the others are most often the same).
  auto reported = [&](const std::string& kind, std::string_view vocabulary) {
    return std::any_of(report.disagreements.begin(), report.disagreements.end(), [&](const Disagreement& d) {
      return d.kind == kind && d.vocabulary == vocabulary;
    });
  };
  std::mt19937_64 rng(seed ^ 0x5bd1e995u);
  // Masks: masks_per_text on each token sequence, or on the first only.
  auto run_vocabulary = [&](const std::shared_ptr<const Vocabulary>& vocab, const char* name, size_t masks_per_text,
                            bool first_only) {
    auto compiled = CompiledGrammar::compile(p.grammar, vocab);
    if (auto* e = compiled.if_error()) {
      report.disagreements.push_back({"compile", source, e->message, {}, {}, name, {}});
      return;
    }
    const auto& cg = *compiled;
    auto record = [&](const TokenRun& run, const std::vector<uint32_t>& ids, const std::vector<size_t>& mask_at) {
      report.token_checks += run.token_checks;
      report.mask_checks += run.mask_checks;
      report.mask_pairs += run.mask_pairs;
      report.queries += run.queries;
      note(run.slowest_ms, fmt::format("{} ({} vocabulary)", run.slowest, name));
      if (run.answer.refused) {
        ++report.refusals;
        report.refused.push_back(fmt::format("token run of {} tokens ({} vocabulary)", ids.size(), name));
      }
      if (run.answer.refused || run.answer.agree || reported(run.kind, name)) return;
      Disagreement d{run.kind, source, run.answer.what, {}, {}, name, {}};
      // The tokens up to the one refused differently, or before the mask that differs.
      const size_t keep = run.kind == "token" ? run.agreed_tokens + 1 : run.agreed_tokens;
      for (size_t i = 0; i < keep && i < ids.size(); ++i) d.tokens.emplace_back(vocab->bytes(ids[i]));
      for (size_t m : mask_at)
        if (m <= keep) d.mask_at.push_back(m);
      for (const std::string& t : d.tokens) d.text += t;
      report.disagreements.push_back(std::move(d));
    };
    for (size_t k = 0; k < options_.token_texts && k < sentences.size(); ++k) {
      const std::string& s = sentences[(k + rng()) % sentences.size()];
      std::vector<uint32_t> ids = segment(*vocab, s.substr(0, s.empty() ? 0 : rng() % (s.size() + 1)), rng);
      std::vector<size_t> at;
      for (size_t m = 0; m < masks_per_text && (k == 0 || !first_only); ++m) at.push_back(rng() % (ids.size() + 1));
      std::sort(at.begin(), at.end());
      at.erase(std::unique(at.begin(), at.end()), at.end());
      record(run_tokens(cg, p, ids, at, matcher_options()), ids, at);
    }
    if (std::string_view(name) == "bytes" && options_.walk_steps > 0) {
      std::vector<uint32_t> taken;
      TokenRun run = walk(cg, p, rng(), options_.walk_steps, taken, matcher_options());
      if (!run.answer.agree && !run.answer.refused && run.kind == "mask" && !reported("mask", name)) {
        // Replayed as a token run with the mask at its end.
        report.token_checks += run.token_checks;
        report.mask_checks += run.mask_checks;
        report.mask_pairs += run.mask_pairs;
        report.queries += run.queries;
        Disagreement d{"mask", source, run.answer.what, {}, {}, name, {}};
        for (uint32_t id : taken) d.tokens.emplace_back(vocab->bytes(id)), d.text += vocab->bytes(id);
        for (size_t m = 0; m <= taken.size(); ++m) d.mask_at.push_back(m);  // a walk compares every step
        report.disagreements.push_back(std::move(d));
      } else {
        std::vector<size_t> every(taken.size() + 1);
        for (size_t m = 0; m < every.size(); ++m) every[m] = m;
        record(run, taken, every);
      }
    }
    // How many of the masks compared came from the grammar's memo (a kept
    // mask is checked like any other: this says the checks reached it).
    const MaskMemo::Stats memo = cg->mask_memo().stats();
    report.memo_hits += memo.hits;
    report.memo_lookups += memo.hits + memo.misses;
  };
  run_vocabulary(bytes_, "bytes", options_.masks, false);
  if (bundled_) run_vocabulary(bundled_, "bundled", options_.bundled_masks, true);
  return report;
}

namespace {
std::optional<std::string> header(const std::string& text, std::string_view key) {
  const std::string marker = fmt::format("(* {}:", key);
  const auto at = text.find(marker);
  if (at == std::string::npos) return std::nullopt;
  const auto end = text.find("*)", at);
  if (end == std::string::npos) return std::nullopt;
  std::string value = text.substr(at + marker.size(), end - at - marker.size());
  while (!value.empty() && value.front() == ' ') value.erase(0, 1);
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

std::optional<std::string> unhex(std::string_view h) {
  if (h.size() % 2) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < h.size(); i += 2) {
    unsigned v = 0;
    if (std::sscanf(std::string(h.substr(i, 2)).c_str(), "%2x", &v) != 1) return std::nullopt;
    out += static_cast<char>(v);
  }
  return out;
}
}  // namespace

bool Differential::replay(const std::string& reproducer, std::string& out) {
  const auto kind = header(reproducer, "replay-kind");
  const auto text_hex = header(reproducer, "replay-text");
  const auto text = text_hex ? unhex(*text_hex) : std::nullopt;
  if (!kind || !text) {
    out = "not a reproducer: no replay-kind or replay-text line";
    return false;
  }
  std::string error;
  auto p = parse(reproducer, &error);
  if (!p) {
    out = "the grammar does not parse: " + error;
    return false;
  }
  if (*kind == "verdict") {
    const Answer a = compare_verdict(*p, *text, options_.match_work_per_byte);
    const TextMatch mine = match_text(*p->grammar, *text, options_.match_work_per_byte);
    out = a.refused ? fmt::format("refused (the oracle answered in {:.1f} ms): {}", a.oracle_ms, a.what)
                    : fmt::format("cgram match: {} ({} viable bytes); {}", text_verdict_name(mine.verdict),
                                  mine.viable_bytes, a.agree ? "the oracle agrees" : a.what);
    return !a.refused && a.agree;
  }
  const auto vocabulary = header(reproducer, "replay-vocabulary");
  const auto token_list = header(reproducer, "replay-tokens");
  if (!vocabulary || !token_list || (*vocabulary != "bytes" && *vocabulary != "bundled")) {
    out = "no replay-vocabulary (bytes or bundled) or replay-tokens line";
    return false;
  }
  const auto& vocab = *vocabulary == "bytes" ? bytes_ : bundled_;
  std::vector<std::string> tokens;
  std::istringstream words(*token_list);
  for (std::string w; words >> w;) {
    auto t = unhex(w);
    if (!t) {
      out = "a token that is not hexadecimal: " + w;
      return false;
    }
    tokens.push_back(*t);
  }
  auto compiled = CompiledGrammar::compile(p->grammar, vocab);
  if (auto* e = compiled.if_error()) {
    out = "compile error: " + e->message;
    return false;
  }
  const std::vector<uint32_t> ids = ids_of(*vocab, tokens);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == UINT32_MAX) {
      out = fmt::format("token {} ({}) is not in the {} vocabulary", i + 1, escaped(tokens[i]), *vocabulary);
      return false;
    }
  std::vector<size_t> mask_at;
  if (const auto masks = header(reproducer, "replay-masks")) {
    std::istringstream list(*masks);
    for (size_t m; list >> m;) mask_at.push_back(m);
  }
  if (mask_at.empty() && *kind == "mask") mask_at.push_back(ids.size());
  TokenRun run = run_tokens(*compiled, *p, ids, mask_at, matcher_options());
  out = run.answer.refused ? "refused: " + run.answer.what
        : run.answer.agree ? fmt::format("{} tokens, the masks and every token agree", ids.size())
                           : run.answer.what;
  return !run.answer.refused && run.answer.agree;
}

}  // namespace cgram::test::random

#include "text_match.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "compiled_grammar.h"
#include "engine.h"

namespace cgram {
namespace {

// The grammar as `match` reads it without a vocabulary, over a vocabulary of
// the 256 single bytes: there any! (one token) would span exactly one byte,
// where the command promises any non-empty text. That is any!+, one or more
// byte tokens, so every any! becomes a helper rule `any!+ ::= any! | any!+
// any!`; except! token counts are not checked, so they are dropped.
ir::GrammarIR unsegmented(ir::GrammarIR ir) {
  if (ir.uses_any_token()) {
    const ir::Symbol any{ir::Symbol::Kind::AnyToken, 0};
    const ir::Symbol many{ir::Symbol::Kind::Nonterminal, static_cast<uint32_t>(ir.nonterminals.size())};
    for (ir::Production& p : ir.productions)
      for (ir::Symbol& s : p.rhs)
        if (s.kind == ir::Symbol::Kind::AnyToken) s = many;
    ir::Nonterminal helper;
    helper.name = "any!+";
    for (std::vector<ir::Symbol> rhs : {std::vector<ir::Symbol>{any}, std::vector<ir::Symbol>{many, any}}) {
      helper.productions.push_back(static_cast<uint32_t>(ir.productions.size()));
      ir.productions.push_back({many.index, std::move(rhs)});
    }
    ir.nonterminals.push_back(std::move(helper));
  }
  for (ir::ExceptSpec& e : ir.excepts) e.max_tokens.reset();
  ir::analyze(ir);
  return ir;
}

}  // namespace

const char* text_verdict_name(TextVerdict v) {
  switch (v) {
    case TextVerdict::Complete: return "complete";
    case TextVerdict::Prefix: return "prefix";
    case TextVerdict::Rejected: return "rejected";
  }
  return "rejected";
}

// The engine runs over single-byte tokens, one byte a step: the first byte
// that leaves the language is the offset of a rejection. (The reference recognizer of the tests, an Earley parser, was
// used here before: unbounded, it took minutes and gigabytes on large or
// ambiguous inputs; the engine is the code that runs in production and
// agrees with it exactly, which the differential tests check.)
TextMatch match_text(const Grammar& source, std::string_view text, size_t max_work_per_byte) {
  TextMatch out;
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  VocabularyResult vocab = Vocabulary::from_tokens(std::move(bytes), {});
  if (auto* e = vocab.if_error()) {
    out.error = e->message;
    return out;
  }
  auto grammar = std::make_shared<const Grammar>(source.file_ptr(), unsegmented(source.ir()));
  auto compiled = CompiledGrammar::compile(grammar, *vocab);
  if (auto* e = compiled.if_error()) {
    out.error = e->message;
    return out;
  }
  // The engine's limits bound a pathologically ambiguous grammar. Its work
  // is budgeted over the text, amortised: kMatchSlackBytes times
  // --max-work-per-byte, and that more for each byte read (the grammars of
  // bench/suite need under 512 units a byte). On an ambiguous grammar the
  // work of a byte grows with the text before it (`s ::= s s | 'a'`: with
  // the square of its length, as an Earley parser's does), so a per-byte
  // bound would refuse a text whose whole reading takes a fraction of a
  // second. Its stack keeps every step: it may hold 4 nodes and edges per
  // text byte (JSON needs 2.2), so that the text limit (--max-text-bytes),
  // not the stack, decides how long a text can be.
  EngineLimits limits;
  limits.max_stack_elements = std::max(limits.max_stack_elements, 4 * text.size());
  limits.max_work_per_call = SIZE_MAX;  // the sequence's budget bounds each call
  limits.max_work_per_byte = max_work_per_byte;
  limits.sequence_work_slack =
      max_work_per_byte > SIZE_MAX / kMatchSlackBytes ? SIZE_MAX / 2 : kMatchSlackBytes * max_work_per_byte;
  Engine engine(**compiled, limits);
  auto exhausted = [&](size_t at) {
    out.error = fmt::format("cannot match the text at byte {}: {}; match is bounded by --max-work-per-byte ({}) "
                            "and --max-text-bytes",
                            at, engine.budget().why(), max_work_per_byte);
    return out;
  };
  std::vector<Head> heads = engine.initial_heads(), next;
  engine.budget().start_sequence();
  for (size_t i = 0; i < text.size(); ++i) {
    engine.budget().grant_bytes(1);
    engine.step_token(heads, text.substr(i, 1), next);
    if (engine.exhausted()) return exhausted(i);
    if (next.empty()) {
      out.viable_bytes = i;
      return out;
    }
    heads.swap(next);
  }
  // Ending may reduce the whole stack at once (a repetition lowered to
  // nested rules, 5,000 deep after 5,000 bytes): the end-of-text check gets
  // the budget of the whole text again, so the total stays within twice it.
  engine.budget().grant_bytes(std::max<size_t>(1, text.size()));
  const bool complete = engine.can_end(heads);
  if (engine.exhausted()) return exhausted(text.size());
  out.viable_bytes = text.size();
  out.verdict = complete ? TextVerdict::Complete : TextVerdict::Prefix;
  return out;
}


}  // namespace cgram

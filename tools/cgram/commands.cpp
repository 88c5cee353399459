#include "commands.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "compile.h"
#include "embedded_grammar.h"
#include "io.h"
#include "lr.h"
#include "compiled_grammar.h"
#include "engine.h"

namespace cgram::cli {
namespace {

using nlohmann::json;

json diagnostics_json(const Diagnostics& diags) {
  json list = json::array();
  for (const Diagnostic& d : diags.sorted()) {
    json item = {{"severity", severity_name(d.severity)}};
    put_bytes(item, "message", d.message);
    if (d.range.begin.line != 0) {
      item["line"] = d.range.begin.line;
      item["column"] = d.range.begin.column;
      item["end_line"] = d.range.end.line;
      item["end_column"] = d.range.end.column;
    }
    list.push_back(item);
  }
  return list;
}

json summary_json(const ir::GrammarIR& ir, const std::string& start) {
  json out = {{"rules", ir.user_rule_count()},
              {"productions", ir.productions.size()},
              {"terminals", ir.terminals.size()},
              {"except_sets", ir.excepts.size()},
              {"dfa_states", ir.total_dfa_states()}};
  put_bytes(out, "start", start);
  return out;
}

// Loads and checks a grammar, printing its diagnostics to stderr (in text
// mode). Returns the outcome; `io_error` is set when the file is unreadable.
Grammar::Outcome load(const std::string& file, const std::string& start, const GrammarInput& format, bool json_mode,
                      std::string& io_error) {
  std::string text;
  if (auto error = read_grammar_file(file, text)) {
    io_error = std::move(*error);
    return Grammar::Outcome{nullptr, Diagnostics(nullptr), nullptr};
  }
  Grammar::Outcome outcome = Grammar::parse(text, file, grammar_options(file, start, format));
  if (!json_mode) std::cerr << outcome.diagnostics.render(isatty(STDERR_FILENO));
  return outcome;
}

void print_io_error(const std::string& message, bool json_mode) {
  if (json_mode) {
    json out = {{"ok", false}};
    put_bytes(out, "error", message);
    std::cout << dump_json(out) << "\n";
  } else
    print_error(message);
}

// 1-based line and column (in characters) of byte `offset` in `text`.
std::pair<size_t, size_t> line_column(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line, column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return {line, column};
}

enum class Verdict { Complete, Prefix, Rejected };

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Complete: return "complete";
    case Verdict::Prefix: return "prefix";
    case Verdict::Rejected: return "rejected";
  }
  return "rejected";
}

struct MatchResult {
  Verdict verdict = Verdict::Rejected;
  size_t viable_bytes = 0;  // the longest viable prefix (all of the text unless rejected)
  std::string error;        // the text could not be matched at all
};

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

// Matches `text` with the matcher's engine over single-byte tokens, one byte
// a step: the first byte that leaves the language is the offset of a
// rejection. (The reference recognizer of the tests, an Earley parser, was
// used here before: unbounded, it took minutes and gigabytes on large or
// ambiguous inputs; the engine is the code that runs in production and
// agrees with it exactly, which the differential tests check.)
MatchResult match_text(const Grammar::Outcome& outcome, std::string_view text,
                       size_t max_work_per_byte = kDefaultMatchWorkPerByte) {
  MatchResult out;
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  VocabularyResult vocab = Vocabulary::from_tokens(std::move(bytes), {});
  if (auto* e = std::get_if<VocabularyError>(&vocab)) {
    out.error = e->message;
    return out;
  }
  auto grammar = std::make_shared<const Grammar>(outcome.file, unsegmented(outcome.grammar->ir()));
  auto compiled = CompiledGrammar::compile(grammar, std::get<std::shared_ptr<const Vocabulary>>(vocab));
  if (auto* e = std::get_if<CompileError>(&compiled)) {
    out.error = e->message;
    return out;
  }
  // The engine's limits bound a pathologically ambiguous grammar. Its work
  // limit is per call, and here a call is a byte: --max-work-per-byte (the
  // grammars of bench/suite need under 512 units; `s ::= s s | 'a'` grows
  // with the text and stops within a hundred bytes). Its stack keeps every
  // step: it may hold 4 nodes and edges per text byte (JSON needs 2.2), so
  // that the text limit (--max-text-bytes), not the stack, decides how long
  // a text can be.
  EngineLimits limits;
  limits.max_stack_elements = std::max(limits.max_stack_elements, 4 * text.size());
  limits.max_work_per_call = max_work_per_byte;
  Engine engine(*std::get<std::shared_ptr<const CompiledGrammar>>(compiled), limits);
  auto exhausted = [&](size_t at) {
    out.error = fmt::format("cannot match the text at byte {}: {}; match is bounded by --max-work-per-byte ({}) "
                            "and --max-text-bytes",
                            at, engine.exhaustion(), max_work_per_byte);
    return out;
  };
  std::vector<Head> heads = engine.initial_heads(), next;
  for (size_t i = 0; i < text.size(); ++i) {
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
  // the budget of the whole text, so the total stays within twice that.
  const size_t whole_text_budget =
      text.size() > SIZE_MAX / max_work_per_byte ? SIZE_MAX : max_work_per_byte * std::max<size_t>(1, text.size());
  engine.set_work_limit(whole_text_budget);
  const bool complete = engine.can_end(heads);
  if (engine.exhausted()) return exhausted(text.size());
  out.viable_bytes = text.size();
  out.verdict = complete ? Verdict::Complete : Verdict::Prefix;
  return out;
}

}  // namespace

int run_check(const CheckArgs& args) {
  std::string io_error;
  Grammar::Outcome outcome = load(args.file, args.start, args, args.json, io_error);
  if (!io_error.empty()) {
    print_io_error(io_error, args.json);
    return 1;
  }
  const Diagnostics& diags = outcome.diagnostics;
  // By the grammar's own name: a GBNF grammar starts at root, not at the
  // entry rule its translation adds.
  const std::string start_name = grammar_options(args.file, args.start, args).entry_rule();
  if (args.json) {
    json out = {{"ok", outcome.ok()},
                {"errors", diags.error_count()},
                {"warnings", diags.warning_count()},
                {"diagnostics", diagnostics_json(diags)}};
    put_bytes(out, "file", args.file);
    if (outcome.ok()) out["summary"] = summary_json(outcome.grammar->ir(), start_name);
    std::cout << dump_json(out, 2) << "\n";
    return outcome.ok() ? 0 : 1;
  }
  if (!outcome.ok()) {
    std::cerr << fmt::format("{} error{} generated.\n", diags.error_count(),
                             diags.error_count() == 1 ? "" : "s");
    return 1;
  }
  const ir::GrammarIR& ir = outcome.grammar->ir();
  std::cout << fmt::format("{}: ok: {} rules, {} terminals, {} except! sets, {} DFA states; start rule '{}'{}\n",
                           printable(args.file), ir.user_rule_count(), ir.terminals.size(), ir.excepts.size(),
                           ir.total_dfa_states(), printable(start_name),
                           diags.warning_count() ? fmt::format(" ({} warning{})", diags.warning_count(), diags.warning_count() == 1 ? "" : "s") : "");
  if (args.dump_ir) {
    // The desugared rules, then what the matcher runs: the lexical
    // terminals (regular rules collapsed into DFAs) and the LR skeleton.
    ir::LexicalGrammar lexical = ir::lower_lexical(ir);
    ir::LrTable table(lexical);
    std::cout << "== grammar IR\n" << ir.dump() << "== skeleton over " << lexical.terminals.size()
              << " lexical terminals\n" << lexical.dump() << "== rules kept context-free, and why\n";
    for (size_t n = 0; n < ir.nonterminals.size(); ++n)
      if (!lexical.context_free_reasons[n].empty())
        std::cout << ir.nonterminals[n].name << ": " << lexical.context_free_reasons[n] << "\n";
    std::cout
              << fmt::format("== LALR(1): {} states, {} conflicting cells (run generalised)\n", table.state_count(),
                             table.conflict_count());
  }
  return 0;
}

int run_match(const MatchArgs& args) {
  constexpr int kGrammarErrors = 3;
  std::string io_error;
  std::string text;
  if (args.text_file) {
    if (auto error = read_regular_file(*args.text_file, "text", args.max_text_bytes, text)) {
      print_io_error(*error, args.json);
      return kExitUsage;
    }
  } else {
    text = args.text.value_or("");
  }
  Grammar::Outcome outcome = load(args.file, args.start, args, args.json, io_error);
  if (!io_error.empty()) {
    print_io_error(io_error, args.json);
    return kGrammarErrors;
  }
  if (!outcome.ok()) {
    if (args.json)
      std::cout << dump_json(json{{"ok", false}, {"diagnostics", diagnostics_json(outcome.diagnostics)}}, 2) << "\n";
    return kGrammarErrors;
  }
  const ir::GrammarIR& ir = outcome.grammar->ir();
  const MatchResult result = match_text(outcome, text, args.max_work_per_byte);
  if (!result.error.empty()) {
    print_io_error(result.error, args.json);
    return kGrammarErrors;
  }
  const bool token_rules = ir.uses_any_token() || ir.uses_token_counts();
  auto [line, column] = line_column(text, result.viable_bytes);
  if (args.json) {
    json out = {{"ok", true}, {"verdict", verdict_name(result.verdict)}, {"bytes", text.size()}};
    if (result.verdict == Verdict::Rejected) {
      out["offset"] = result.viable_bytes;
      out["line"] = line;
      out["column"] = column;
    }
    if (token_rules) out["note"] = "text matched without a vocabulary: any! spans any text and except! counts are not checked";
    std::cout << dump_json(out, 2) << "\n";
  } else {
    switch (result.verdict) {
      case Verdict::Complete: std::cout << "complete\n"; break;
      case Verdict::Prefix: std::cout << "prefix (viable, not complete)\n"; break;
      case Verdict::Rejected: {
        std::cout << fmt::format("rejected at byte {} (line {}, column {})\n", result.viable_bytes, line, column);
        size_t from = result.viable_bytes > 20 ? result.viable_bytes - 20 : 0;
        std::string before = printable(std::string_view(text).substr(from, result.viable_bytes - from));
        std::string after = printable(std::string_view(text).substr(result.viable_bytes, 20));
        // One space per character before the caret (not per byte: `before`
        // may hold multi-byte characters).
        size_t width = std::count_if(before.begin(), before.end(),
                                     [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
        std::cout << fmt::format("  {}{}\n  {}^\n", before, after, std::string(width, ' '));
        break;
      }
    }
    if (token_rules)
      std::cout << "note: matched without a vocabulary: any! spans any text and except! counts are not checked\n";
  }
  switch (result.verdict) {
    case Verdict::Complete: return 0;
    case Verdict::Prefix: return 1;
    case Verdict::Rejected: return 2;
  }
  return 2;
}

int run_convert(const ConvertArgs& args) {
  const GrammarFormat format = grammar_options(args.file, "start", args).format;
  if (format == GrammarFormat::Cgram) {
    print_error(fmt::format("convert reads GBNF (.gbnf) or a JSON Schema (.json): give --format gbnf or "
                            "--format json-schema for '{}'",
                            args.file));
    return kExitUsage;
  }
  std::string text;
  if (auto error = read_grammar_file(args.file, text)) {
    print_error(*error);
    return 1;
  }
  // The whole pipeline first, so that what is written is a grammar that
  // works, and every problem is reported at its position in the input.
  Grammar::Outcome outcome = Grammar::parse(text, args.file, grammar_options(args.file, "start", args));
  std::cerr << outcome.diagnostics.render(isatty(STDERR_FILENO));
  if (!outcome.ok()) return 1;
  // A translated grammar is built from its translation: that is its source text.
  const std::string converted =
      (format == GrammarFormat::Gbnf ? "(* converted from GBNF by cgram convert *)\n" : "") +
      std::string(outcome.grammar->file().text());
  return write_output(args.output, converted);
}

int run_demo() {
  std::cout << "cgram demo: the bundled JSON grammar (examples/json.cgram)\n\n";
  std::cout << kEmbeddedJsonGrammar << "\n";
  Grammar::Outcome outcome = Grammar::parse(kEmbeddedJsonGrammar, "json.cgram");
  std::cerr << outcome.diagnostics.render(isatty(STDERR_FILENO));
  if (!outcome.ok()) return 1;
  const ir::GrammarIR& ir = outcome.grammar->ir();
  std::cout << fmt::format("$ cgram check json.cgram\njson.cgram: ok: {} rules, {} terminals, {} DFA states\n\n",
                           ir.user_rule_count(), ir.terminals.size(), ir.total_dfa_states());
  struct Sample {
    std::string text;
    Verdict expected;
  };
  const Sample samples[] = {
      {R"({"name": "cgram", "tags": ["exact", "fast"], "version": 0.1})", Verdict::Complete},
      {R"({"name": "cgram", "tags": ["exa)", Verdict::Prefix},
      {R"({"name": "cgram", "tags": ["exact",]})", Verdict::Rejected},
  };
  bool all_expected = true;
  for (const Sample& s : samples) {
    const MatchResult r = match_text(outcome, s.text);
    if (!r.error.empty()) {
      print_error(r.error);
      return 1;
    }
    std::cout << fmt::format("$ cgram match json.cgram '{}'\n{}", s.text, verdict_name(r.verdict));
    if (r.verdict == Verdict::Rejected) {
      auto [line, column] = line_column(s.text, r.viable_bytes);
      std::cout << fmt::format(" at byte {} (line {}, column {})", r.viable_bytes, line, column);
    }
    std::cout << "\n\n";
    all_expected = all_expected && r.verdict == s.expected;
  }
  std::cout << (all_expected ? "demo: every verdict is as expected\n" : "demo: UNEXPECTED verdict\n");
  return all_expected ? 0 : 1;
}

}  // namespace cgram::cli

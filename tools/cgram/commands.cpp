#include "commands.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "grammar.h"
#include "embedded_grammar.h"
#include "io.h"
#include "lr.h"
#include "compiled_grammar.h"
#include "engine.h"
#include "text_match.h"

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
  auto read = read_grammar_file(file);
  if (!read) {
    io_error = read.error().message;
    return Grammar::Outcome{nullptr, Diagnostics(nullptr), nullptr};
  }
  const std::string& text = *read;
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

using Verdict = TextVerdict;

}  // namespace

namespace {

// `check --dump PASS`: the grammar compiled for a vocabulary, then each
// named pass's part of it.
int print_pass_dumps(const CheckArgs& args, const std::shared_ptr<const Grammar>& grammar) {
  VocabularyResult vocab = args.vocab.empty() ? Vocabulary::bundled() : Vocabulary::load(args.vocab);
  if (!vocab) {
    print_error(vocab.error().message);
    return 1;
  }
  CompileResult compiled = CompiledGrammar::compile(grammar, *vocab);
  if (!compiled) {
    print_error(compiled.error().message);
    return 1;
  }
  for (const std::string& name : args.dump_passes) {
    const Pass pass = *pass_named(name);
    std::cout << fmt::format("== pass {} ({}, {:.1f} ms)\n", name, pass_info(pass).job,
                             (*compiled)->timings().pass_ms[static_cast<size_t>(pass)])
              << (*compiled)->dump(pass);
  }
  return 0;
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
  if (!args.dump_passes.empty()) return print_pass_dumps(args, outcome.grammar);
  return 0;
}

int run_match(const MatchArgs& args) {
  constexpr int kGrammarErrors = 3;
  std::string io_error;
  std::string text;
  if (args.text_file) {
    auto read = read_regular_file(*args.text_file, "text", args.max_text_bytes);
    if (!read) {
      print_io_error(read.error().message, args.json);
      return kExitUsage;
    }
    text = std::move(*read);
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
  const TextMatch result = match_text(*outcome.grammar, text, args.max_work_per_byte);
  if (!result.error.empty()) {
    print_io_error(result.error, args.json);
    return kGrammarErrors;
  }
  const bool token_rules = ir.uses_any_token() || ir.uses_token_counts();
  auto [line, column] = line_column(text, result.viable_bytes);
  if (args.json) {
    json out = {{"ok", true}, {"verdict", text_verdict_name(result.verdict)}, {"bytes", text.size()}};
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
    print_error(fmt::format("convert reads GBNF (.gbnf), Lark (.lark) or a JSON Schema (.json): give --format "
                            "gbnf, lark or json-schema for '{}'",
                            args.file));
    return kExitUsage;
  }
  auto read = read_grammar_file(args.file);
  if (!read) {
    print_error(read.error().message);
    return 1;
  }
  const std::string& text = *read;
  // The whole pipeline first, so that what is written is a grammar that
  // works, and every problem is reported at its position in the input.
  Grammar::Outcome outcome = Grammar::parse(text, args.file, grammar_options(args.file, "start", args));
  std::cerr << outcome.diagnostics.render(isatty(STDERR_FILENO));
  if (!outcome.ok()) return 1;
  // A translated grammar is built from its translation: that is its source text.
  const std::string converted =
      (format == GrammarFormat::Gbnf   ? "(* converted from GBNF by cgram convert *)\n"
       : format == GrammarFormat::Lark ? "(* converted from Lark by cgram convert *)\n"
       : format == GrammarFormat::Tools ? fmt::format("(* written by cgram tools --format {} *)\n", args.tool_format)
                                       : "") +
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
    const TextMatch r = match_text(*outcome.grammar, s.text);
    if (!r.error.empty()) {
      print_error(r.error);
      return 1;
    }
    std::cout << fmt::format("$ cgram match json.cgram '{}'\n{}", s.text, text_verdict_name(r.verdict));
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

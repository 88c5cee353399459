#include "grammar.h"

#include <cctype>
#include <exception>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "gbnf.h"
#include "lark.h"
#include "large_stack.h"
#include "parse.h"

namespace cgram {
namespace {
// After a missing ';', error recovery reads the next rule's name as part of
// the previous rule; "undefined rule" for that name would only be an echo.
bool starts_definition(std::string_view source, const Diagnostic& d) {
  if (d.message.rfind("undefined rule", 0) != 0) return false;
  size_t i = d.range.end.offset;
  while (i < source.size() && isspace(static_cast<unsigned char>(source[i]))) ++i;
  return source.substr(i).starts_with("::=") || source.substr(i).starts_with("=");
}

// Rule names quoted in a message ('name'), in the source's spelling (GBNF's
// `my-rule` for `my_rule`, `root` for the entry rule the translation adds).
// Only a quote that follows a non-word character opens a name (not the one
// of "grammar's").
std::string with_source_names(std::string_view message, const std::map<std::string, std::string>& gbnf_of) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const bool opens = message[i] == '\'' && (i == 0 || !word(message[i - 1]));
    size_t close = opens ? message.find('\'', i + 1) : std::string_view::npos;
    if (close != std::string_view::npos) {
      const std::string quoted(message.substr(i + 1, close - i - 1));
      auto found = gbnf_of.find(quoted);
      if (found != gbnf_of.end()) {
        out += '\'' + found->second + '\'';
        i = close + 1;
        continue;
      }
    }
    out += message[i++];
  }
  return out;
}

// A diagnostic of the translated text, placed at the source token it came
// from (those of an added entry rule at the source's start rule).
Diagnostic to_source(const Diagnostic& d, const Translation& translation, const SourceFile& source,
                     const std::map<std::string, std::string>& source_of) {
  Diagnostic out = d;
  out.message = with_source_names(d.message, source_of);
  if (d.range.begin.line == 0) return out;  // no location (a missing start rule, say)
  if (d.range.begin.offset < translation.header_bytes) {
    out.range.begin = out.range.end = source.location_of(translation.entry_offset);
    return out;
  }
  out.range.begin = source.location_of(translation.source_offset(d.range.begin.offset));
  out.range.end = source.location_of(translation.source_offset(d.range.end.offset));
  if (out.range.end.offset < out.range.begin.offset) out.range.end = out.range.begin;
  return out;
}

// An outcome for `source` with no diagnostics yet.
Grammar::Outcome new_outcome(std::string_view source, std::string_view filename, const ParseOptions& options) {
  Grammar::Outcome out;
  out.file = std::make_shared<const SourceFile>(std::string(filename), std::string(source));
  out.diagnostics = Diagnostics(out.file.get());
  out.diagnostics.set_max_kept(options.syntax.max_errors);
  return out;
}

// A translation's .cgram text, parsed from its start rule.
Grammar::Outcome parse_translation(const std::string& cgram, const std::string& start, std::string_view filename,
                                   const ParseOptions& options) {
  ParseOptions inner = options;
  inner.format = GrammarFormat::Cgram;
  inner.start = start;
  return Grammar::parse(cgram, filename, inner);
}

// A JSON Schema: its translation parsed as .cgram, each diagnostic placed
// at the schema value its rule came from.
Grammar::Outcome parse_json_schema(std::string_view source, std::string_view filename, const ParseOptions& options) {
  Grammar::Outcome out = new_outcome(source, filename, options);
  std::optional<SchemaTranslation> translation =
      translate_json_schema(*out.file, out.diagnostics, options.schema, options.syntax);
  if (!translation) return out;
  Grammar::Outcome translated = parse_translation(translation->cgram, translation->start, filename, options);
  for (const Diagnostic& d : translated.diagnostics.all()) {
    Diagnostic placed = d;
    if (d.range.begin.line != 0) {
      placed.range.begin = placed.range.end = out.file->location_of(translation->schema_offset(d.range.begin.offset));
    }
    out.diagnostics.add(std::move(placed));
  }
  out.grammar = translated.grammar;
  return out;
}

// GBNF or Lark: the translation parsed as .cgram, each diagnostic placed at
// the source token it came from, with the source's rule names.
Grammar::Outcome parse_translated(std::string_view source, std::string_view filename, const ParseOptions& options) {
  Grammar::Outcome out = new_outcome(source, filename, options);
  const std::string entry = options.entry_rule();
  std::optional<Translation> translation =
      options.format == GrammarFormat::Gbnf ? translate_gbnf(*out.file, out.diagnostics, options.syntax, entry)
                                            : translate_lark(*out.file, out.diagnostics, options.syntax, entry,
                                                             options.schema);
  if (!translation) return out;
  Grammar::Outcome translated = parse_translation(translation->cgram, translation->start, filename, options);
  std::map<std::string, std::string> source_of{{translation->start, entry}};
  for (const auto& [source_name, cgram_name] : translation->names) source_of[cgram_name] = source_name;
  // An added entry rule can repeat what its rule says (an empty language,
  // say) at the same place: each diagnostic once.
  std::set<std::tuple<uint32_t, int, std::string>> seen;
  for (const Diagnostic& d : translated.diagnostics.all()) {
    Diagnostic placed = to_source(d, *translation, *out.file, source_of);
    if (seen.emplace(placed.range.begin.offset, static_cast<int>(placed.severity), placed.message).second)
      out.diagnostics.add(std::move(placed));
  }
  out.grammar = translated.grammar;
  return out;
}

// A list of tools: the reply grammar, parsed as .cgram; its diagnostics (a
// tool's schema refused, say) name the tool.
Grammar::Outcome parse_tools(std::string_view source, std::string_view filename, const ParseOptions& options) {
  Grammar::Outcome out = new_outcome(source, filename, options);
  std::optional<ToolsTranslation> translation =
      translate_tools(*out.file, out.diagnostics, options.tools(), options.syntax);
  if (!translation) return out;
  Grammar::Outcome translated = parse_translation(translation->cgram, translation->start, filename, options);
  if (!translated.grammar && translated.diagnostics.render().find("unproductive") != std::string::npos) {
    // Some tool accepts no finite call: translated again, it is left out
    // (import/tools.h, find_dead_tools), or named in the error.
    ToolsOptions finding = options.tools();
    finding.find_dead_tools = true;
    Grammar::Outcome again = new_outcome(source, filename, options);
    translation = translate_tools(*again.file, again.diagnostics, finding, options.syntax);
    if (!translation) return again;
    out = std::move(again);
    translated = parse_translation(translation->cgram, translation->start, filename, options);
  }
  for (const Diagnostic& d : translated.diagnostics.all()) {
    Diagnostic placed = d;
    placed.range = {};
    placed.range.begin.line = placed.range.end.line = 0;
    out.diagnostics.add(std::move(placed));
  }
  out.grammar = translated.grammar;
  return out;
}

}  // namespace

const char* grammar_format_name(GrammarFormat format) {
  switch (format) {
    case GrammarFormat::Cgram: return "cgram";
    case GrammarFormat::Gbnf: return "gbnf";
    case GrammarFormat::Lark: return "lark";
    case GrammarFormat::JsonSchema: return "json-schema";
    case GrammarFormat::Tools: return "tools";
  }
  return "?";
}

std::optional<GrammarFormat> grammar_format(std::string_view name, std::string_view path) {
  for (GrammarFormat f : {GrammarFormat::Cgram, GrammarFormat::Gbnf, GrammarFormat::Lark, GrammarFormat::JsonSchema,
                          GrammarFormat::Tools})
    if (name == grammar_format_name(f)) return f;
  if (name != "auto") return std::nullopt;
  if (is_gbnf_path(path)) return GrammarFormat::Gbnf;
  if (is_lark_path(path)) return GrammarFormat::Lark;
  if (is_json_schema_path(path)) return GrammarFormat::JsonSchema;
  return GrammarFormat::Cgram;
}

Grammar::Grammar(std::shared_ptr<const SourceFile> file, ir::GrammarIR ir)
    : file_(std::move(file)), ir_(std::move(ir)), memory_bytes_(file_->text().size() + ir_.memory_bytes()) {}

namespace {
// Set on the thread that reads a grammar: a translation's text (GBNF, a
// JSON Schema) is parsed inside the parse of its source, on the same stack
// and budget.
thread_local bool reading_grammar = false;
}  // namespace

Grammar::Outcome Grammar::parse(std::string_view source, std::string_view filename,
                                const ParseOptions& options) {
  if (reading_grammar) return parse_within_budget(source, filename, options);
  // On a stack of known size (support/large_stack.h), so that the nesting
  // ceilings hold whatever thread calls. Nothing is thrown across the
  // thread: what is not an error of the grammar is handed back and
  // rethrown here.
  Outcome out;
  std::exception_ptr failure;
  const bool ran = run_on_large_stack([&]() noexcept {
    reading_grammar = true;
    MemoryBudget budget(options.max_memory_bytes);
    MemoryBudgetScope scope(budget);
    try {
      try {
        out = parse_within_budget(source, filename, options);
      } catch (const MemoryLimitReached& limit) {
        out = new_outcome(source, filename, options);
        out.diagnostics.error_at_file(limit.message("ParseOptions::max_memory_bytes"));
      } catch (const std::bad_alloc&) {
        const std::string stage = failed_memory_stage();
        out = new_outcome(source, filename, options);
        out.diagnostics.error_at_file("out of memory while " + stage);
      }
    } catch (...) {
      failure = std::current_exception();
    }
    reading_grammar = false;
  });
  if (failure) std::rethrow_exception(failure);
  if (!ran) {
    out = new_outcome(source, filename, options);
    out.diagnostics.error_at_file(fmt::format("cannot start a thread to read the grammar on (a stack of {} MiB): the "
                                              "process is at its limit of threads or memory",
                                              kLargeStackBytes >> 20));
  }
  return out;
}

Grammar::Outcome Grammar::parse_within_budget(std::string_view source, std::string_view filename,
                                              const ParseOptions& options) {
  if (options.format == GrammarFormat::Gbnf || options.format == GrammarFormat::Lark)
    return parse_translated(source, filename, options);
  if (options.format == GrammarFormat::JsonSchema) return parse_json_schema(source, filename, options);
  if (options.format == GrammarFormat::Tools) return parse_tools(source, filename, options);
  Outcome out = new_outcome(source, filename, options);
  ast::Grammar tree = parse_grammar(*out.file, out.diagnostics, options.syntax);
  if (out.diagnostics.has_errors() && tree.rules.empty()) return out;
  ir::LowerOptions lower_options;
  lower_options.start = options.start;
  lower_options.limits = options.limits;
  lower_options.max_regex_nesting = options.syntax.max_nesting;
  // Lowering runs even after syntax errors, so that one run reports as much as it can.
  Diagnostics lowering(out.file.get());
  lowering.set_max_kept(options.syntax.max_errors);
  std::optional<ir::GrammarIR> ir = ir::lower(tree, *out.file, lower_options, lowering);
  for (const Diagnostic& d : lowering.all()) {
    // A syntax error can make a rule look undefined or missing: keep only the
    // lowering diagnostics that cannot be echoes of it.
    if (out.diagnostics.has_errors() &&
        (d.severity != Severity::Error || d.range.begin.line == 0 || starts_definition(source, d)))
      continue;
    out.diagnostics.add(d);
  }
  if (!out.diagnostics.has_errors() && ir)
    out.grammar = std::make_shared<const Grammar>(out.file, std::move(*ir));
  return out;
}

}  // namespace cgram

#include "compile.h"

#include <map>

#include "gbnf.h"
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
}  // namespace

namespace {

// Rule names quoted in a message ('name'), in the GBNF spelling: `my-rule`
// for `my_rule`, `root` for the entry rule the translation adds.
std::string with_gbnf_names(std::string_view message, const std::map<std::string, std::string>& gbnf_of) {
  std::string out;
  for (size_t i = 0; i < message.size();) {
    const size_t open = message.find('\'', i);
    const size_t close = open == std::string_view::npos ? open : message.find('\'', open + 1);
    if (close == std::string_view::npos) {
      out.append(message.substr(i));
      break;
    }
    out.append(message.substr(i, open + 1 - i));
    const std::string quoted(message.substr(open + 1, close - open - 1));
    auto found = gbnf_of.find(quoted);
    out += found != gbnf_of.end() ? found->second : quoted;
    out += '\'';
    i = close + 1;
  }
  return out;
}

// A diagnostic of the translated text, placed at the GBNF token it came from.
Diagnostic to_gbnf(const Diagnostic& d, const GbnfTranslation& translation, const SourceFile& gbnf,
                   const std::map<std::string, std::string>& gbnf_of) {
  Diagnostic out = d;
  out.message = with_gbnf_names(d.message, gbnf_of);
  if (d.range.begin.line == 0) return out;  // no location (a missing start rule, say)
  out.range.begin = gbnf.location_of(translation.gbnf_offset(d.range.begin.offset));
  out.range.end = gbnf.location_of(translation.gbnf_offset(d.range.end.offset));
  if (out.range.end.offset < out.range.begin.offset) out.range.end = out.range.begin;
  return out;
}

Grammar::Outcome parse_gbnf(std::string_view source, std::string_view filename, const ParseOptions& options) {
  Grammar::Outcome out;
  out.file = std::make_shared<const SourceFile>(std::string(filename), std::string(source));
  out.diagnostics = Diagnostics(out.file.get());
  out.diagnostics.set_max_kept(options.syntax.max_errors);
  std::optional<GbnfTranslation> translation = translate_gbnf(*out.file, out.diagnostics, options.syntax);
  if (!translation) return out;
  ParseOptions inner = options;
  inner.format = GrammarFormat::Cgram;
  if (options.start != "start") {
    auto named = translation->names.find(options.start);
    inner.start = named != translation->names.end() ? named->second : options.start;
  }
  Grammar::Outcome translated = Grammar::parse(translation->cgram, filename, inner);
  std::map<std::string, std::string> gbnf_of{{translation->start, "root"}};
  for (const auto& [gbnf_name, cgram_name] : translation->names) gbnf_of[cgram_name] = gbnf_name;
  for (const Diagnostic& d : translated.diagnostics.all()) {
    const Diagnostic placed = to_gbnf(d, *translation, *out.file, gbnf_of);
    if (d.severity == Severity::Error) out.diagnostics.error(placed.range, placed.message);
    else if (d.severity == Severity::Warning) out.diagnostics.warning(placed.range, placed.message);
    else out.diagnostics.note(placed.range, placed.message);
  }
  out.grammar = translated.grammar;
  return out;
}

}  // namespace

Grammar::Outcome Grammar::parse(std::string_view source, std::string_view filename,
                                const ParseOptions& options) {
  if (options.format == GrammarFormat::Gbnf) return parse_gbnf(source, filename, options);
  Outcome out;
  out.file = std::make_shared<const SourceFile>(std::string(filename), std::string(source));
  out.diagnostics = Diagnostics(out.file.get());
  out.diagnostics.set_max_kept(options.syntax.max_errors);
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
    if (d.severity == Severity::Error) out.diagnostics.error(d.range, d.message);
    else if (d.severity == Severity::Warning) out.diagnostics.warning(d.range, d.message);
    else out.diagnostics.note(d.range, d.message);
  }
  if (!out.diagnostics.has_errors() && ir)
    out.grammar = std::make_shared<const Grammar>(out.file, std::move(*ir));
  return out;
}

}  // namespace cgram

#include "compile.h"

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

Grammar::Outcome Grammar::parse(std::string_view source, std::string_view filename,
                                const ParseOptions& options) {
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

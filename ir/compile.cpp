#include "compile.h"

#include "parse.h"

namespace cgram {

Grammar::Outcome Grammar::parse(std::string_view source, std::string_view filename,
                                const ParseOptions& options) {
  Outcome out;
  out.file = std::make_shared<const SourceFile>(std::string(filename), std::string(source));
  out.diagnostics = Diagnostics(out.file.get());
  ast::Grammar tree = parse_grammar(*out.file, out.diagnostics);
  if (out.diagnostics.has_errors() && tree.rules.empty()) return out;
  ir::LowerOptions lower_options;
  lower_options.start = options.start;
  lower_options.limits = options.limits;
  // Lowering runs even after syntax errors, so that one run reports as much as it can.
  Diagnostics lowering(out.file.get());
  std::optional<ir::GrammarIR> ir = ir::lower(tree, *out.file, lower_options, lowering);
  for (const Diagnostic& d : lowering.all()) {
    // A syntax error can make a rule look undefined or missing: keep only the
    // lowering diagnostics that cannot be echoes of it.
    if (out.diagnostics.has_errors() && d.range.begin.line == 0) continue;
    if (d.severity == Severity::Error) out.diagnostics.error(d.range, d.message);
    else if (d.severity == Severity::Warning) out.diagnostics.warning(d.range, d.message);
    else out.diagnostics.note(d.range, d.message);
  }
  if (!out.diagnostics.has_errors() && ir)
    out.grammar = std::make_shared<const Grammar>(out.file, std::move(*ir));
  return out;
}

}  // namespace cgram

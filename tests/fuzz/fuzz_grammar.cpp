// Target "grammar": .cgram text through the whole front end (ANTLR parse,
// AST, lowering, checks), then, when the grammar is valid, compiled for the
// bundled vocabulary (lexical lowering, LALR(1) table, token index) and one
// or two masks computed. The library's own limits (ParseOptions defaults)
// bound every input; diagnostics are rendered as the CLI would. An input
// whose first line starts with "#gbnf" (a GBNF comment) is read as GBNF;
// one whose first line is "#json-schema" is a JSON Schema after that line
// (the layout picked by the second line's length); one whose first line
// starts with "//lark" (a Lark comment) is Lark; one whose first line is
// "#tools" a list of tools after it (the call format picked by the second
// line's length).
#include <algorithm>

#include "fuzz_common.h"

using namespace cgram;

CGRAM_FUZZ_TARGET(grammar) {
  if (size > (64u << 10)) return 0;  // scripts/fuzz.sh passes -max_len=4096
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseOptions options;
  if (text.starts_with("#gbnf")) options.format = GrammarFormat::Gbnf;
  if (text.starts_with("//lark")) options.format = GrammarFormat::Lark;
  static constexpr std::string_view kTools = "#tools\n";
  if (text.starts_with(kTools)) {
    text.remove_prefix(kTools.size());
    options.format = GrammarFormat::Tools;
    const size_t line = std::min(text.find('\n'), text.size());
    options.tool_format = static_cast<ToolFormat>(line % 5);
  }
  static constexpr std::string_view kSchema = "#json-schema\n";
  if (text.starts_with(kSchema)) {
    text.remove_prefix(kSchema.size());
    options.format = GrammarFormat::JsonSchema;
    const size_t line = std::min(text.find('\n'), text.size());
    options.schema.whitespace = static_cast<JsonWhitespace>(line % 3);
  }
  fuzz::check_grammar(text, options);
  return 0;
}

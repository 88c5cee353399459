// Target "grammar": .cgram text through the whole front end (ANTLR parse,
// AST, lowering, checks), then, when the grammar is valid, compiled for the
// bundled vocabulary (lexical lowering, LALR(1) table, token index) and one
// or two masks computed. The library's own limits (ParseOptions defaults)
// bound every input; diagnostics are rendered as the CLI would. An input
// whose first line starts with "#gbnf" (a GBNF comment) is read as GBNF;
// one whose first line is "#json-schema" is a JSON Schema after that line
// (the layout picked by the second line's length).
#include <algorithm>
#include <variant>

#include "fuzz_common.h"
#include "matcher.h"

using namespace cgram;

CGRAM_FUZZ_TARGET(grammar) {
  if (size > (64u << 10)) return 0;  // scripts/fuzz.sh passes -max_len=4096
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseOptions options;
  if (text.starts_with("#gbnf")) options.format = GrammarFormat::Gbnf;
  static constexpr std::string_view kSchema = "#json-schema\n";
  if (text.starts_with(kSchema)) {
    text.remove_prefix(kSchema.size());
    options.format = GrammarFormat::JsonSchema;
    const size_t line = std::min(text.find('\n'), text.size());
    options.schema.whitespace = static_cast<JsonWhitespace>(line % 3);
  }
  Grammar::Outcome outcome = Grammar::parse(text, "fuzz.cgram", options);
  if (!outcome.ok()) {
    FUZZ_CHECK(outcome.diagnostics.has_errors());
    std::string rendered = outcome.diagnostics.render();
    FUZZ_CHECK(!rendered.empty());
    return 0;
  }
  const auto& vocab = fuzz::bundled_vocabulary();
  auto compiled = CompiledGrammar::compile(outcome.grammar, vocab);
  if (auto* error = std::get_if<CompileError>(&compiled)) {
    FUZZ_CHECK(!error->message.empty());
    return 0;
  }
  Matcher matcher(std::get<std::shared_ptr<const CompiledGrammar>>(compiled));
  std::vector<uint32_t> mask(matcher.mask_words());
  // The first mask, then one step on an allowed token and the next mask.
  matcher.fill_mask(mask);
  fuzz::check_mask(mask, vocab->size());
  std::vector<uint32_t> allowed = matcher.current_possible_tokens();
  for (uint32_t t : allowed) FUZZ_CHECK(t < vocab->size());
  auto text_token = std::find_if(allowed.begin(), allowed.end(), [&](uint32_t t) { return !vocab->is_eos(t); });
  if (text_token != allowed.end()) {
    // The last allowed text token: usually a long one, unlike the first.
    uint32_t t = *std::find_if(allowed.rbegin(), allowed.rend(), [&](uint32_t t) { return !vocab->is_eos(t); });
    FUZZ_CHECK(matcher.is_allowed(t));
    FUZZ_CHECK(matcher.advance(t) == AdvanceResult::Ongoing);
    matcher.fill_mask(mask);
    fuzz::check_mask(mask, vocab->size());
  }
  return 0;
}

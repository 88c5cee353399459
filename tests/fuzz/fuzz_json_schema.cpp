// Target "json_schema": a JSON Schema through the converter (import/
// json_schema.h: $ref, allOf merges, anyOf, patterns, formats) and the rest
// of the pipeline (fuzz_common.cpp, check_grammar), under the library's
// default limits and memory budget. The input's length picks the layout, so
// that a schema file is a seed as it is; seeds are real schemas
// (JSONSchemaBench, corpus/json_schema).
#include "fuzz_common.h"

using namespace cgram;

CGRAM_FUZZ_TARGET(json_schema) {
  if (size > (64u << 10)) return 0;
  ParseOptions options;
  options.format = GrammarFormat::JsonSchema;
  options.schema.whitespace = static_cast<JsonWhitespace>(size % 3);
  fuzz::check_grammar(std::string_view(reinterpret_cast<const char*>(data), size), options);
  return 0;
}

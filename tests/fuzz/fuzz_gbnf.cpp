// Target "gbnf": llama.cpp's GBNF through the translator (import/gbnf.h:
// character classes, repetitions, rule names, comments) and the rest of the
// pipeline (fuzz_common.cpp, check_grammar), under the library's default
// limits and memory budget. Seeds: corpus/gbnf (llama.cpp-style grammars).
#include "fuzz_common.h"

using namespace cgram;

CGRAM_FUZZ_TARGET(gbnf) {
  if (size > (64u << 10)) return 0;
  ParseOptions options;
  options.format = GrammarFormat::Gbnf;
  fuzz::check_grammar(std::string_view(reinterpret_cast<const char*>(data), size), options);
  return 0;
}

// Target "tables": CompiledGrammar::load_tables, the payload parser of AOT
// shared objects (the lexical terminals and their DFAs, the LALR(1) table,
// the whole token index, the any! token sets), on bytes made for the tiny
// vocabulary (fuzz_common.cpp). The loader must refuse anything it cannot
// run with a message; tables it accepts are run a few steps. The input is
// sealed with its checksum first: the fuzzer explores the checks behind it
// (a damaged checksum is refused at once, tests/unit/jit/compile_tiers_test.cpp).
#include <variant>

#include "fuzz_common.h"

using namespace cgram;

CGRAM_FUZZ_TARGET(tables) {
  const std::string bytes = CompiledGrammar::seal_tables(std::string(reinterpret_cast<const char*>(data), size));
  CompileResult loaded = CompiledGrammar::load_tables(bytes, fuzz::tiny_vocabulary());
  if (auto* error = loaded.if_error()) {
    FUZZ_CHECK(!error->message.empty());
    return 0;
  }
  fuzz::exercise_loaded(*loaded, uint32_t(size));
  return 0;
}

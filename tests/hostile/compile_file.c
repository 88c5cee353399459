/* The C API's compile entry point on a grammar file, for the hostile-input
 * test (hostile_test.sh): compiles FILE (.cgram) for the bundled vocabulary.
 * Exit 0 compiled, 1 refused with a message (printed), 2 anything else. */
#include <stdio.h>
#include <stdlib.h>

#include "cgram.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: compile_file FILE\n");
    return 2;
  }
  FILE* file = fopen(argv[1], "rb");
  if (!file) return 2;
  fseek(file, 0, SEEK_END);
  const long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  char* source = malloc(size > 0 ? (size_t)size : 1);
  if (!source || fread(source, 1, (size_t)size, file) != (size_t)size) return 2;
  fclose(file);
  cgram_vocab* vocab = NULL;
  if (cgram_vocab_bundled(NULL, 0, &vocab) != CGRAM_OK) return 2;
  cgram_grammar* grammar = NULL;
  char* diagnostics = NULL;
  const cgram_status status = cgram_grammar_compile(vocab, source, (size_t)size, NULL, &grammar, &diagnostics);
  free(source);
  int exit_code = 0;
  if (status != CGRAM_OK) {
    const char* message = cgram_last_error();
    fprintf(stderr, "cgram_grammar_compile: status %d: %s\n", (int)status, message ? message : "(no message)");
    exit_code = message && *message ? 1 : 2;
  }
  cgram_string_free(diagnostics);
  cgram_grammar_free(grammar);
  cgram_vocab_free(vocab);
  return exit_code;
}

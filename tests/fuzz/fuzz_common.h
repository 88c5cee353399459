#pragma once
// Shared by the fuzz targets (docs/FUZZING.md): the entry point macro, the
// check that turns a broken invariant into a crash libFuzzer reports, the
// vocabularies and grammars the targets use, and a reader of fuzz bytes.
//
// Each target is one function. Built for libFuzzer (-DCGRAM_FUZZ=ON) it is
// LLVMFuzzerTestOneInput; in fuzz_replay (every build) it is
// cgram_fuzz_NAME, run on the seed corpora and the saved crashes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar.h"
#include "compiled_grammar.h"
#include "vocabulary.h"

#ifdef CGRAM_FUZZ_REPLAY
#define CGRAM_FUZZ_TARGET(name) extern "C" int cgram_fuzz_##name(const uint8_t* data, size_t size)
#else
#define CGRAM_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#endif

// A broken invariant: the message, then a trap (libFuzzer saves the input).
#define FUZZ_CHECK(cond)                                                          \
  do {                                                                            \
    if (!(cond)) ::cgram::fuzz::check_failed(#cond, __FILE__, __LINE__);          \
  } while (0)

namespace cgram::fuzz {

[[noreturn]] void check_failed(const char* what, const char* file, int line);

// Phi-3, compiled into cgram (32,064 ids).
const std::shared_ptr<const Vocabulary>& bundled_vocabulary();
// A small vocabulary (every byte, some words, one end-of-sequence id) that
// keeps saved tables and shared objects small.
const std::shared_ptr<const Vocabulary>& tiny_vocabulary();

// The text of examples/NAME (read from the source tree).
std::string read_example(std::string_view name);
// Parses and compiles, or traps: for the grammars the targets fix.
std::shared_ptr<const CompiledGrammar> compile_or_die(std::string_view text, std::string_view name,
                                                      const std::shared_ptr<const Vocabulary>& vocab,
                                                      bool eager_index = false);

// A grammar's text through the whole front end (parse, translation for GBNF
// and JSON Schemas, lowering, checks) and, when it is valid, compiled for the
// bundled vocabulary with one or two masks: errors must come with a message,
// masks must stay inside the vocabulary. The grammar, gbnf and json_schema
// targets share it.
void check_grammar(std::string_view text, const ParseOptions& options);

// Checks a mask: no bit at or past the vocabulary's size. Returns how many
// bits are set.
size_t check_mask(std::span<const uint32_t> mask, size_t vocab_size);
uint64_t hash_words(std::span<const uint32_t> words);

// Runs a compiled grammar that was loaded (saved tables or a shared object)
// a few steps, `seed` picking the tokens: whatever passed the loader's
// checks must run, and its masks must agree with is_allowed and advance.
void exercise_loaded(const std::shared_ptr<const CompiledGrammar>& grammar, uint32_t seed);

// Fuzz bytes read front to back; past the end everything reads as zero.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return uint16_t(byte() | byte() << 8); }
  uint32_t u32() { return uint32_t(u16()) | uint32_t(u16()) << 16; }
  // The rest of the input.
  std::string_view rest() {
    std::string_view r(reinterpret_cast<const char*>(data_) + pos_, pos_ < size_ ? size_ - pos_ : 0);
    pos_ = size_;
    return r;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace cgram::fuzz

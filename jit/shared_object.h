#pragma once
// AOT shared objects: one grammar compiled for one vocabulary, written by
// `cgram compile` and loaded with no compile cost.
//
// The file is an ELF shared object (LLVM object emission, linked by
// ld.lld-19 or the system compiler driver) holding the generated kernels
// and, as constant data, the tables and the whole token index
// (`cgram_payload`). A trailer after the ELF image records the cgram and ABI
// versions, the vocabulary's fingerprint, the grammar's hash and a checksum
// of the whole file.
//
// Loading checks everything it can: the trailer, the size and the checksum
// before the file is mapped (through the descriptor that was read, so the
// bytes checked are the bytes mapped); then every table index against the
// vocabulary. Each refusal is a message, never a crash. A shared object is
// native code all the same: dlopen runs it, and the kernels are trusted to
// be the ones cgram generated. Load only objects you (or your build) made;
// the checks catch accidents, wrong vocabularies and versions, truncated and
// edited files, not a forger.
#include <memory>
#include <string>
#include <variant>

#include "compiled_grammar.h"
#include "error.h"

namespace cgram {

struct SharedObjectTimings {
  double codegen_ms = 0;  // IR, codegen::optimize, object emission
  double link_ms = 0;
  size_t bytes = 0;  // the file's size
};

struct SharedObjectLimits {
  size_t max_file_bytes = size_t(2) << 30;
};

// Writes `grammar` (its whole index is built first) to `path`. The error
// is a message.
Result<void> save_shared_object(const CompiledGrammar& grammar, const std::string& path,
                                SharedObjectTimings* timings = nullptr);

CompileResult load_shared_object(const std::string& path, std::shared_ptr<const Vocabulary> vocab,
                                 const SharedObjectLimits& limits = {});

// The trailer's layout (little-endian), for tests and tools.
struct SharedObjectTrailer {
  char magic[8];             // "CGRAMAOT"
  uint32_t abi_version;
  uint32_t trailer_size;     // sizeof(SharedObjectTrailer)
  char cgram_version[16];    // NUL-padded
  uint64_t vocab_fingerprint;
  uint64_t grammar_hash;
  uint64_t payload_hash;     // of the tables, as mapped by the loader
  uint64_t body_size;        // bytes before the trailer
  uint64_t file_hash;        // of the body and the trailer up to this field
};
static_assert(sizeof(SharedObjectTrailer) == 72);

}  // namespace cgram

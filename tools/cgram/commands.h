#pragma once
// The `cgram` subcommands. Each returns the process exit code.
#include <optional>
#include <string>
#include <vector>

#include "json_schema.h"
#include "mask_memo.h"
#include "memory_budget.h"
#include "text_match.h"

namespace cgram::cli {

inline constexpr int kExitUsage = 64;
// cgram gpu: no CUDA driver, or no device (the CPU path is used).
inline constexpr int kExitNoGpu = 3;
// Texts read from files (match --file, mask --prefix-file and --tokens,
// bench --docs and --tokens, each file of a folder): at most this many bytes
// each, unless --max-text-bytes says otherwise. As much as a grammar: match
// spends about 45 bytes of memory per text byte (docs/LIMITS.md).
inline constexpr size_t kDefaultMaxTextBytes = size_t(16) << 20;
inline constexpr size_t kMaxTextBytesCeiling = size_t(1) << 40;
// generate --max-tokens: 1 to this many.
inline constexpr size_t kMaxGenerateTokens = 100'000'000;

// How a grammar file is read: its format (auto: by the extension, .gbnf is
// GBNF, .lark Lark and .json a JSON Schema; or cgram, gbnf, lark,
// json-schema, tools) and, for a JSON Schema, the documents' whitespace and
// whether ignored keywords are errors; for a list of tools, the call format.
struct GrammarInput {
  std::string format = "auto";
  std::string tool_format = "hermes";
  bool open_tool_arguments = false;
  std::string whitespace = "flexible";
  std::string property_order = "schema";
  std::string max_whitespace = std::to_string(kDefaultMaxWhitespace);  // a number, or "unbounded"
  bool strict = false;
  size_t max_memory_mib = kDefaultCompileMemoryBytes >> 20;  // the compile's memory budget
};

struct CheckArgs : GrammarInput {
  std::string file;
  std::string start = "start";
  bool json = false;
  bool dump_ir = false;
  std::vector<std::string> dump_passes;  // --dump PASS: compile, then print what each named pass made
  std::string vocab;                     // for --dump (empty: the bundled vocabulary)
};
int run_check(const CheckArgs& args);

struct MatchArgs : GrammarInput {
  std::string file;
  std::optional<std::string> text;
  std::optional<std::string> text_file;
  std::string start = "start";
  bool json = false;
  size_t max_text_bytes = kDefaultMaxTextBytes;
  size_t max_work_per_byte = kDefaultMatchWorkPerByte;
};
// Exit codes: 0 complete, 1 prefix, 2 rejected, 3 the grammar has errors (or
// the engine gave up: a grammar too ambiguous for --max-work-per-byte).
int run_match(const MatchArgs& args);

// Writes the .cgram equivalent of a GBNF grammar (comments kept) or of a
// JSON Schema (`cgram schema`).
struct ConvertArgs : GrammarInput {
  std::string file;
  std::string output;  // empty: standard output
};
int run_convert(const ConvertArgs& args);

// cgram gpu: the devices the CUDA driver sees (exit kExitNoGpu, with the
// reason, when there is no driver or no device), or with --emit-ptx ARCH the
// mask kernels' PTX.
struct GpuArgs {
  std::string library = "libcuda.so.1";
  std::string emit_ptx;  // "sm_80", "sm_90"...; empty: report the devices
  std::string output;    // for --emit-ptx; empty: standard output
};
int run_gpu(const GpuArgs& args);

// cgram vocab build V -o FILE: what canonical mode makes once per
// vocabulary, saved (vocab/canonical.h, CanonicalPairs::save); without -o,
// into $CGRAM_VOCAB_DIR under the vocabulary's fingerprint, where every
// command (and the library) finds it.
struct VocabBuildArgs {
  std::string vocab;
  std::string output;
};
int run_vocab_build(const VocabBuildArgs& args);

// The main job on the embedded default: check the bundled JSON grammar and
// match a few texts against it. Exit 0 when every verdict is the expected one.
int run_demo();

// Commands that need a vocabulary (the bundled one when `vocab` is empty).
struct VocabArgs : GrammarInput {
  std::string file;
  std::string start = "start";
  std::string vocab;
  bool json = false;
  bool eager_index = false;  // build the whole token index at compile time
  bool background_index = true;  // CompileOptions::background_index (with a lazy index)
  size_t mask_memo_bytes = kDefaultMaskMemoBytes;  // CompileOptions::mask_memo_bytes
  bool canonical = false;    // canonical tokenization (CompileOptions::canonical)
  // "table", or "jit": compile the kernels with the JIT before running. A
  // FILE ending in .so is an AOT object made by `cgram compile` (tier "aot").
  std::string tier = "table";
  size_t max_text_bytes = kDefaultMaxTextBytes;  // mask and bench: texts and token id files
};

struct CompileArgs : VocabArgs {
  std::string output;
};
// Writes an AOT shared object. Exit 0, or 3 on any error.
int run_compile(const CompileArgs& args);

struct MaskArgs : VocabArgs {
  std::string prefix;       // bytes, tokenized by the vocabulary's encoder
  std::string prefix_file;  // the same from a file (any bytes, NUL included)
  std::string tokens_file;  // the prefix as token ids
  size_t show = 40;
};
int run_mask(const MaskArgs& args);

struct GenerateArgs : VocabArgs {
  uint64_t seed = 1;
  size_t max_tokens = 256;
  std::string corpus;  // documents to sample like (a trigram model); empty: uniform
};
int run_generate(const GenerateArgs& args);

struct BenchArgs : VocabArgs {
  std::vector<std::string> vocabs;  // --vocab, repeatable with --suite
  std::string suite;                // a suite folder: FORMAT/*.cgram and FORMAT/docs/
  std::string only;                 // one format of the suite
  std::string docs;
  std::string tokens_file;  // documents as token ids, one a line
  // --gpu: the GPU masker and logits kernels on a batch of matchers standing
  // inside the documents (--gpu-host: their host build, no GPU needed).
  bool jump_forward = false;  // --jump-forward: the share of tokens jump-forward saves
  bool speculate = false;     // --speculate: count-based drafts, trained on half the documents
  size_t draft_tokens = 4;
  bool gpu = false;
  bool gpu_host = false;
  std::string cuda_library = "libcuda.so.1";
  size_t rows = 64;
  size_t logits_width = 0;  // 0: the vocabulary's size
  size_t runs = 200;
  // The grammar's memo of masks (compiled/mask_memo.h): "document" empties
  // it before each document (each is measured as the first text a fresh
  // grammar sees), "shared" keeps it across the documents as a server keeps
  // it across requests, "off" works every mask out.
  std::string mask_memo = "document";
  // --slowest N: the N slowest mask steps, each with its document, step and
  // the text around it (a long step is a user's stall: where is it?).
  size_t slowest = 0;
  // --model-step-ms X: X ms of untimed wait before each mask, as a model's
  // forward pass would take (0: masks back to back).
  double model_step_ms = 0;
  // --walks N: N random walks through the grammar instead of documents,
  // each mask timed as the walk makes it (--walk-tokens long at most,
  // --prefer-long for the longest of several allowed tokens, --seed).
  size_t walks = 0;
  size_t walk_tokens = 300;
  bool prefer_long = false;
  uint64_t seed = 1;
};
int run_bench(const BenchArgs& args);

}  // namespace cgram::cli

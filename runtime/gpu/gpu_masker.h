#pragma once
// Masks and masked logits on a device, for the matchers of one compiled
// grammar.
//
// The grammar's precomputed token sets (gpu/mask_plan.h) live in device
// memory, uploaded as masks first use them (again only when the buffer
// grows). For a batch, the host walks only what needs the parse stack and
// sends set ids and a few tokens per row; cgram_fill ORs the sets into the bitmask rows on the device and
// cgram_set_bits merges the host's tokens. apply() then masks the logits in
// place. The bitmask has the int32 layout of vLLM and SGLang: one row of
// `out_words` 32-bit words per sequence, bit t % 32 of word t / 32.
//
// Runs on any KernelBackend: the GPU, or the host build of the same kernels
// (how it is tested without a GPU). Not thread-safe: one masker per thread
// (they may share a compiled grammar; each holds its own copy of the sets).
// The work goes on the backend's own stream: a caller whose logits come from
// another stream synchronizes between them (synchronize(), or its own
// stream's), as with any library that launches on its own stream.
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "batch.h"
#include "error.h"
#include "kernel_backend.h"
#include "mask_plan.h"

namespace cgram::jit {

struct GpuMaskerOptions {
  // The most device memory the token sets may take (beyond, sets are ORed
  // on the host and sent as tokens: docs/LIMITS.md).
  size_t max_set_bytes = TokenSetTable::kDefaultMaxBytes;
};

class GpuMasker {
  struct Key {};

 public:
  // Refused: a null grammar or backend, or a backend specialised for
  // another set width than this grammar's (gpu_kernel_shape(grammar)).
  static Result<std::unique_ptr<GpuMasker>> create(std::shared_ptr<const CompiledGrammar> grammar,
                                                   std::unique_ptr<KernelBackend> backend,
                                                   const GpuMaskerOptions& options = {});
  GpuMasker(Key, std::shared_ptr<const CompiledGrammar> grammar, std::unique_ptr<KernelBackend> backend,
            const GpuMaskerOptions& options);
  ~GpuMasker();
  GpuMasker(const GpuMasker&) = delete;
  GpuMasker& operator=(const GpuMasker&) = delete;

  // Bitmask row out_rows[i] (at device address `bitmask`, rows of
  // `out_words` words, out_words >= the grammar's mask words) gets
  // matchers[i]'s mask; other rows are untouched. Padding words past the
  // grammar's are cleared. Asynchronous: ordered before later launches,
  // finished by synchronize(). A matcher with an error or of another
  // grammar gets an all-clear row; `rejected_rows` (optional) counts them.
  // Refused: a matcher or a row given twice, a null matcher, more than
  // 65,535 rows.
  // With a pool, the host's part of the rows is computed on its threads.
  std::optional<Error> fill(std::span<Matcher* const> matchers, std::span<const uint32_t> out_rows, uint64_t bitmask,
                            uint32_t out_words, ThreadPool* pool = nullptr, size_t* rejected_rows = nullptr);
  // Logits row rows[i] (or i, with no list, for i < row_count) gets -inf
  // wherever bitmask row rows[i] (or i) has a clear bit, and past
  // 32 × words. `logits` holds rows of `row_stride` elements of `type`.
  std::optional<Error> apply(LogitsType type, uint64_t logits, int64_t row_stride, uint32_t vocab, uint64_t bitmask,
                             uint32_t words, std::span<const uint32_t> rows, uint32_t row_count);
  // The last fill's kernels again, with no work on the host: how the
  // device's part of a fill is timed.
  std::optional<Error> launch_plan();
  std::optional<Error> synchronize() { return backend_->synchronize(); }

  KernelBackend& backend() { return *backend_; }
  const TokenSetTable& sets() const { return table_; }
  size_t sets_on_device() const { return sets_uploaded_; }
  // The last batch: what the host sent (set ids, tokens), and how long the
  // host took to work it out (microseconds).
  const MaskPlan& last_plan() const { return plan_; }
  double last_plan_us() const { return plan_us_; }
  // Where the device memory for `bytes` more of something comes from.
  Result<std::unique_ptr<KernelMemory>> allocate(size_t bytes) { return backend_->allocate(bytes); }

 private:
  std::optional<Error> plan_rows(std::span<Matcher* const> matchers, std::span<const uint32_t> out_rows,
                                 ThreadPool* pool, size_t& rejected);
  std::optional<Error> upload_new_sets();
  std::optional<Error> upload_plan();
  // A buffer of at least `bytes` (grown by doubling; its content is lost).
  std::optional<Error> reserve(std::unique_ptr<KernelMemory>& memory, size_t bytes);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<KernelBackend> backend_;
  TokenSetTable table_;
  MaskPlan plan_;
  std::vector<MaskPlan> row_plans_;  // per row, with a pool
  std::deque<MaskPlanner> planners_;  // the first for a batch planned here, one per row on a pool
  std::vector<char> filled_;
  std::vector<Matcher*> sorted_matchers_;  // the refusal checks' scratch
  std::vector<uint32_t> sorted_rows_;
  std::vector<uint32_t> staging_, row_staging_;  // pageable: safe to reuse once an upload returns
  size_t max_set_bytes_;
  size_t sets_uploaded_ = 0;
  double plan_us_ = 0;
  bool launchable_ = false;  // the plan on the device is the last fill's
  uint64_t bitmask_ = 0;
  uint32_t out_words_ = 0;
  // Device memory (declared after backend_: freed before it).
  std::unique_ptr<KernelMemory> sets_, plan_memory_, rows_;
};

// The kernel shape for `grammar`: its set width fixed.
codegen::GpuKernelShape gpu_kernel_shape(const CompiledGrammar& grammar);

}  // namespace cgram::jit

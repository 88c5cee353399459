#include "gpu_masker.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace cgram::jit {

codegen::GpuKernelShape gpu_kernel_shape(const CompiledGrammar& grammar) {
  return {static_cast<unsigned>(grammar.mask_words())};
}

namespace {
constexpr size_t kMaxRows = 65535;  // the grid's y dimension
}

Result<std::unique_ptr<GpuMasker>> GpuMasker::create(std::shared_ptr<const CompiledGrammar> grammar,
                                                     std::unique_ptr<KernelBackend> backend,
                                                     const GpuMaskerOptions& options) {
  if (!grammar) return Error{ErrorCode::Backend, "a GPU masker needs a compiled grammar"};
  if (!backend) return Error{ErrorCode::Backend, "a GPU masker needs a kernel backend"};
  if (backend->set_words() != 0 && backend->set_words() != grammar->mask_words())
    return Error{ErrorCode::Backend,
                 fmt::format("the kernels were made for token sets of {} words; this grammar's have {}",
                             backend->set_words(), grammar->mask_words())};
  return std::make_unique<GpuMasker>(Key{}, std::move(grammar), std::move(backend), options);
}

GpuMasker::GpuMasker(Key, std::shared_ptr<const CompiledGrammar> grammar, std::unique_ptr<KernelBackend> backend,
                     const GpuMaskerOptions& options)
    : grammar_(std::move(grammar)),
      backend_(std::move(backend)),
      table_(grammar_, options.max_set_bytes),
      max_set_bytes_(options.max_set_bytes) {}

GpuMasker::~GpuMasker() {
  // Launches in flight may still read the buffers.
  if (backend_) backend_->synchronize();
}

std::optional<Error> GpuMasker::reserve(std::unique_ptr<KernelMemory>& memory, size_t bytes) {
  if (memory && memory->bytes() >= bytes) return std::nullopt;
  if (memory) {
    // Launches in flight may read the old buffer.
    if (auto error = backend_->synchronize()) return error;
  }
  const size_t grown = std::max(bytes, memory ? memory->bytes() * 2 : size_t{4096});
  memory.reset();
  auto allocated = backend_->allocate(grown);
  if (auto* error = allocated.if_error()) return *error;
  memory = std::move(*allocated);
  return std::nullopt;
}

std::optional<Error> GpuMasker::plan_rows(std::span<Matcher* const> matchers, std::span<const uint32_t> out_rows,
                                          ThreadPool* pool, size_t& rejected) {
  plan_.clear();
  // Planners keep their scratch between batches: one per row on a pool.
  const bool pooled = pool && pool->size() > 1 && matchers.size() > 1;
  while (planners_.size() < (pooled ? matchers.size() : 1)) planners_.emplace_back(table_);
  if (!pooled) {
    for (size_t i = 0; i < matchers.size(); ++i)
      if (!planners_[0].add_row(*matchers[i], out_rows[i], plan_)) ++rejected;
    return std::nullopt;
  }
  if (row_plans_.size() < matchers.size()) row_plans_.resize(matchers.size());
  filled_.assign(matchers.size(), 0);
  pool->run(matchers.size(), [&](size_t i) {
    row_plans_[i].clear();
    filled_[i] = planners_[i].add_row(*matchers[i], out_rows[i], row_plans_[i]);
  });
  for (size_t i = 0; i < matchers.size(); ++i) {
    const MaskPlan& row = row_plans_[i];
    if (!filled_[i]) ++rejected;
    plan_.set_ids.insert(plan_.set_ids.end(), row.set_ids.begin(), row.set_ids.end());
    plan_.row_offsets.push_back(static_cast<uint32_t>(plan_.set_ids.size()));
    plan_.out_rows.push_back(row.out_rows[0]);
    plan_.tokens.insert(plan_.tokens.end(), row.tokens.begin(), row.tokens.end());
    plan_.token_rows.insert(plan_.token_rows.end(), row.token_rows.begin(), row.token_rows.end());
  }
  return std::nullopt;
}

std::optional<Error> GpuMasker::upload_new_sets() {
  const size_t registered = table_.size();
  const size_t set_bytes = table_.words() * sizeof(uint32_t);
  if (registered == sets_uploaded_ && sets_) return std::nullopt;
  const bool regrow = !sets_ || sets_->bytes() < registered * set_bytes;
  if (regrow) {
    // Doubling, but never past the table's own limit.
    const size_t needed = std::max<size_t>(registered, 1) * set_bytes;
    const size_t cap = std::max(needed, max_set_bytes_ / set_bytes * set_bytes);
    const size_t grown = std::min(std::max(needed, sets_ ? sets_->bytes() * 2 : needed), cap);
    if (auto error = reserve(sets_, grown)) return error;
    sets_uploaded_ = 0;  // a new buffer: every set again
  }
  staging_.clear();
  const size_t count = table_.copy_from(sets_uploaded_, staging_);
  if (auto error = sets_->upload(staging_.data(), staging_.size() * sizeof(uint32_t), sets_uploaded_ * set_bytes))
    return error;
  sets_uploaded_ += count;
  return std::nullopt;
}

std::optional<Error> GpuMasker::upload_plan() {
  staging_.clear();
  for (const auto* part : {&plan_.set_ids, &plan_.row_offsets, &plan_.out_rows, &plan_.tokens, &plan_.token_rows})
    staging_.insert(staging_.end(), part->begin(), part->end());
  if (auto error = reserve(plan_memory_, staging_.size() * sizeof(uint32_t))) return error;
  return plan_memory_->upload(staging_.data(), staging_.size() * sizeof(uint32_t));
}

std::optional<Error> GpuMasker::fill(std::span<Matcher* const> matchers, std::span<const uint32_t> out_rows,
                                     uint64_t bitmask, uint32_t out_words, ThreadPool* pool, size_t* rejected_rows) {
  if (matchers.size() != out_rows.size())
    return Error{ErrorCode::Backend, fmt::format("{} matchers for {} bitmask rows", matchers.size(), out_rows.size())};
  if (out_words < table_.words())
    return Error{ErrorCode::Backend,
                 fmt::format("bitmask rows of {} words; the vocabulary needs {}", out_words, table_.words())};
  if (matchers.size() > kMaxRows)
    return Error{ErrorCode::Backend, fmt::format("{} rows in one batch; at most {}", matchers.size(), kMaxRows)};
  for (size_t i = 0; i < matchers.size(); ++i)
    if (!matchers[i]) return Error{ErrorCode::Backend, fmt::format("matcher {} is null", i)};
  // One matcher on two rows would be filled from two threads at once.
  // Checked on sorted copies kept between batches (no allocation once warm).
  sorted_matchers_.assign(matchers.begin(), matchers.end());
  std::sort(sorted_matchers_.begin(), sorted_matchers_.end());
  if (auto twice = std::adjacent_find(sorted_matchers_.begin(), sorted_matchers_.end());
      twice != sorted_matchers_.end()) {
    const size_t second = static_cast<size_t>(
        std::find(std::find(matchers.begin(), matchers.end(), *twice) + 1, matchers.end(), *twice) - matchers.begin());
    return Error{ErrorCode::Backend, fmt::format("matcher {} appears twice", second)};
  }
  sorted_rows_.assign(out_rows.begin(), out_rows.end());
  std::sort(sorted_rows_.begin(), sorted_rows_.end());
  if (auto twice = std::adjacent_find(sorted_rows_.begin(), sorted_rows_.end()); twice != sorted_rows_.end())
    return Error{ErrorCode::Backend, fmt::format("bitmask row {} is given twice", *twice)};
  if (bitmask == 0 && !matchers.empty()) return Error{ErrorCode::Backend, "the bitmask's address is null"};
  size_t rejected = 0;
  launchable_ = false;
  const auto planning = std::chrono::steady_clock::now();
  if (auto error = plan_rows(matchers, out_rows, pool, rejected)) return error;
  plan_us_ = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - planning).count();
  if (rejected_rows) *rejected_rows = rejected;
  if (matchers.empty()) return std::nullopt;
  if (plan_.tokens.size() > UINT32_MAX || plan_.set_ids.size() > UINT32_MAX)
    return Error{ErrorCode::Backend,
                 fmt::format("a batch of {} host tokens: at most {}", plan_.tokens.size(), UINT32_MAX)};
  if (auto error = upload_new_sets()) return error;
  if (auto error = upload_plan()) return error;
  bitmask_ = bitmask;
  out_words_ = out_words;
  launchable_ = true;
  return launch_plan();
}

std::optional<Error> GpuMasker::launch_plan() {
  if (!launchable_) return Error{ErrorCode::Backend, "no batch was planned (or the last one failed)"};
  const uint64_t bitmask = bitmask_;
  const uint32_t out_words = out_words_;
  const uint64_t base = plan_memory_->address();
  auto at = [&](size_t words) { return base + words * sizeof(uint32_t); };
  const size_t ids = plan_.set_ids.size(), rows = plan_.rows(), tokens = plan_.tokens.size();
  FillLaunch fill;
  fill.sets = sets_->address();
  fill.set_ids = at(0);
  fill.row_offsets = at(ids);
  fill.out_rows = at(ids + rows + 1);
  fill.out = bitmask;
  fill.words = static_cast<uint32_t>(table_.words());
  fill.out_words = out_words;
  fill.rows = static_cast<uint32_t>(rows);
  if (auto error = backend_->fill(fill)) return error;
  SetBitsLaunch bits;
  bits.out = bitmask;
  bits.out_words = out_words;
  bits.tokens = at(ids + 2 * rows + 1);
  bits.token_rows = at(ids + 2 * rows + 1 + tokens);
  bits.count = static_cast<uint32_t>(tokens);
  return backend_->set_bits(bits);
}

std::optional<Error> GpuMasker::apply(LogitsType type, uint64_t logits, int64_t row_stride, uint32_t vocab,
                                      uint64_t bitmask, uint32_t words, std::span<const uint32_t> rows,
                                      uint32_t row_count) {
  if (row_count > kMaxRows)
    return Error{ErrorCode::Backend, fmt::format("{} rows in one launch; at most {}", row_count, kMaxRows)};
  if (!rows.empty() && rows.size() != row_count)
    return Error{ErrorCode::Backend, fmt::format("{} rows listed for {} rows", rows.size(), row_count)};
  if (row_stride < static_cast<int64_t>(vocab))
    return Error{ErrorCode::Backend, fmt::format("logits rows of {} elements hold no {} tokens", row_stride, vocab)};
  if (row_count > 0 && (logits == 0 || bitmask == 0))
    return Error{ErrorCode::Backend, "the logits' or bitmask's address is null"};
  ApplyLaunch launch;
  launch.type = type;
  launch.logits = logits;
  launch.row_stride = row_stride;
  launch.vocab = vocab;
  launch.bitmask = bitmask;
  launch.words = words;
  launch.row_count = row_count;
  if (!rows.empty()) {
    // Uploaded from a pageable copy: the caller's rows may be pinned memory
    // it reuses before the launch has run.
    row_staging_.assign(rows.begin(), rows.end());
    if (auto error = reserve(rows_, rows.size() * sizeof(uint32_t))) return error;
    if (auto error = rows_->upload(row_staging_.data(), row_staging_.size() * sizeof(uint32_t))) return error;
    launch.rows = rows_->address();
  }
  return backend_->apply(launch);
}

}  // namespace cgram::jit

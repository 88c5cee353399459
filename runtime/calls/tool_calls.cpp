#include "tool_calls.h"

#include <fmt/format.h>

#include <algorithm>

#include "logits_mask.h"

namespace cgram {

namespace {

constexpr size_t kNoTool = SIZE_MAX;

// Every mask of a cut is looked up in, and kept in, its grammar's memo of
// masks. The engine's default asks the memo only for masks that take
// parse work, but a cut's costly masks are free text and JSON strings,
// whose cost is the walk over the vocabulary, and each call starts a new
// matcher: without the memo, the first masks of every call were made anew
// (40-100 µs each with Llama 3; 7 µs at the 99th percentile with it,
// docs/BENCHMARKS.md).
MatcherOptions cut_options() {
  MatcherOptions options;
  options.limits.mask_memo_min_work = 0;
  return options;
}

uint64_t verdict_key(size_t tool, uint32_t token) { return (static_cast<uint64_t>(tool) << 32) | token; }

}  // namespace

// ---------------------------------------------------------------------------
// ToolCallsGrammar

Result<std::shared_ptr<ToolCallsGrammar>> ToolCallsGrammar::create(std::string_view tools_json,
                                                                   std::string_view filename,
                                                                   std::shared_ptr<const Vocabulary> vocab,
                                                                   const ToolCallsOptions& options) {
  if (!vocab) return Error{ErrorCode::InvalidInput, "no vocabulary"};
  SourceFile file{std::string(filename), std::string(tools_json)};
  Diagnostics diags(&file);
  std::optional<ToolSegments> segments = ToolSegments::read(file, diags, options.parse.tools(), options.parse.syntax);
  if (!segments) return Error{ErrorCode::InvalidInput, diags.render()};
  std::shared_ptr<ToolCallsGrammar> grammar(new ToolCallsGrammar());  // private constructor
  grammar->vocab_ = std::move(vocab);
  grammar->segments_ = std::move(*segments);
  grammar->options_ = options;
  grammar->filename_ = std::string(filename);
  for (size_t k = 0; k < grammar->segments_.size(); ++k) {
    grammar->sorted_names_.emplace_back(grammar->segments_.name(k), k);
    grammar->longest_name_ = std::max(grammar->longest_name_, grammar->segments_.name(k).size());
  }
  std::sort(grammar->sorted_names_.begin(), grammar->sorted_names_.end());
  auto start = grammar->compile_cut(grammar->segments_.start_grammar(),
                                    fmt::format("{} (the reply up to a call's name)", filename));
  if (!start) return std::move(start).error();
  grammar->start_ = std::move(*start);
  grammar->index_tokens();
  return grammar;
}

Result<std::shared_ptr<const CompiledGrammar>> ToolCallsGrammar::compile_cut(std::string_view text,
                                                                            std::string_view name) const {
  CompileRequest request;
  request.text = text;
  request.filename = name;
  request.parse.syntax = options_.parse.syntax;  // .cgram text, within the list's limits
  request.parse.limits = options_.parse.limits;
  request.parse.max_memory_bytes = options_.parse.max_memory_bytes;
  request.compile = options_.compile;
  CompileOutcome outcome = Compiler().compile(request, vocab_);
  if (!outcome.ok()) return Error{outcome.code, outcome.message};
  return std::shared_ptr<const CompiledGrammar>(std::move(outcome.grammar));
}

std::optional<size_t> ToolCallsGrammar::tool_named(std::string_view name) const {
  auto at = first_name_from(name);
  return at != sorted_names_.end() && at->first == name ? std::optional<size_t>(at->second) : std::nullopt;
}

std::vector<std::pair<std::string, size_t>>::const_iterator ToolCallsGrammar::first_name_from(
    std::string_view prefix) const {
  return std::lower_bound(sorted_names_.begin(), sorted_names_.end(), prefix,
                          [](const auto& entry, std::string_view text) { return entry.first < text; });
}

void ToolCallsGrammar::index_tokens() {
  const char open = segments_.open(), close = segments_.close();
  const Vocabulary& vocab = *vocab_;
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.is_special(id)) continue;
    const std::string_view bytes = vocab.bytes(id);
    const size_t first_close = bytes.find(close);
    if (first_close == std::string_view::npos) continue;
    if (first_close + 1 < bytes.size()) by_head_[std::string(bytes.substr(0, first_close + 1))].push_back(id);
    // Whole names inside the token, with more after their closing delimiter.
    for (size_t open_at = bytes.find(open); open_at != std::string_view::npos; open_at = bytes.find(open, open_at + 1)) {
      const size_t name_end = bytes.find(close, open_at + 1);
      if (name_end == std::string_view::npos || name_end + 1 >= bytes.size()) break;
      if (auto tool = tool_named(bytes.substr(open_at + 1, name_end - open_at - 1)))
        inner_.push_back({id, static_cast<uint32_t>(name_end + 1), *tool});
    }
  }
}

size_t ToolCallsGrammar::compiled_tools() const {
  std::lock_guard lock(mutex_);
  return after_name_by_key_.size();
}

size_t ToolCallsGrammar::memory_bytes() const {
  std::lock_guard lock(mutex_);
  size_t bytes = start_->memory_bytes();
  for (const auto& [key, grammar] : after_name_by_key_) bytes += grammar->memory_bytes();
  for (const auto& [head, tokens] : by_head_) bytes += head.size() + tokens.size() * sizeof(uint32_t) + 64;
  return bytes + inner_.size() * sizeof(Inner) + tail_verdicts_.size() * 24;
}

Result<std::shared_ptr<const CompiledGrammar>> ToolCallsGrammar::after_name(size_t k) const {
  const std::string& key = segments_.after_name_key(k);
  {
    std::lock_guard lock(mutex_);
    if (auto found = after_name_by_key_.find(key); found != after_name_by_key_.end()) return found->second;
  }
  // One compile at a time (the translation reuses the list's reader), while
  // other matchers go on reading the memos.
  std::lock_guard compiling(compile_mutex_);
  {
    std::lock_guard lock(mutex_);
    if (auto found = after_name_by_key_.find(key); found != after_name_by_key_.end()) return found->second;
  }
  const std::string name = fmt::format("{} (after the name '{}')", filename_, segments_.name(k));
  SourceFile file(name, "");
  Diagnostics diags(&file);
  std::optional<std::string> text = segments_.after_name_grammar(k, diags);
  if (!text) return Error{ErrorCode::InvalidInput, diags.render()};
  auto compiled = compile_cut(*text, name);
  if (!compiled && compiled.error().message.find("unproductive") != std::string::npos) {
    // No finite call of this tool: the translation says so by its name.
    Diagnostics finding(&file);
    if (!segments_.after_name_grammar(k, finding, true)) return Error{ErrorCode::InvalidInput, finding.render()};
  }
  if (!compiled) return compiled;
  std::lock_guard lock(mutex_);
  after_name_by_key_.emplace(key, *compiled);
  return compiled;
}

std::optional<size_t> ToolCallsGrammar::name_ending(std::string_view text) const {
  if (text.empty() || text.back() != segments_.close()) return std::nullopt;
  const size_t open_at = text.rfind(segments_.open(), text.size() - 2);
  if (open_at == std::string_view::npos || text.size() - open_at - 2 > longest_name_) return std::nullopt;
  return tool_named(text.substr(open_at + 1, text.size() - open_at - 2));
}

std::optional<std::string_view> ToolCallsGrammar::name_begun(std::string_view text) const {
  const size_t from = text.size() > longest_name_ + 1 ? text.size() - longest_name_ - 1 : 0;
  const size_t open_at = text.rfind(segments_.open());
  if (open_at == std::string_view::npos || open_at < from) return std::nullopt;
  const std::string_view begun = text.substr(open_at + 1);
  if (begun.find(segments_.close()) != std::string_view::npos) return std::nullopt;
  // Some name must begin with it.
  auto at = first_name_from(begun);
  if (at == sorted_names_.end() || std::string_view(at->first).substr(0, begun.size()) != begun) return std::nullopt;
  return begun;
}

const std::vector<ToolCallsGrammar::Finishers>& ToolCallsGrammar::finishers(std::string_view begun) const {
  std::lock_guard lock(mutex_);
  if (auto found = finishers_.find(begun); found != finishers_.end()) return found->second;
  std::vector<Finishers>& groups = finishers_[std::string(begun)];
  for (auto at = first_name_from(begun);
       at != sorted_names_.end() && std::string_view(at->first).substr(0, begun.size()) == begun; ++at) {
    std::string key = at->first.substr(begun.size()) + segments_.close();
    auto tokens = by_head_.find(key);
    if (tokens != by_head_.end()) groups.push_back({at->second, std::move(key), &tokens->second});
  }
  return groups;
}

int ToolCallsGrammar::tail_verdict(size_t k, uint32_t token) const {
  std::lock_guard lock(mutex_);
  auto found = tail_verdicts_.find(verdict_key(k, token));
  return found == tail_verdicts_.end() ? -1 : found->second;
}

void ToolCallsGrammar::remember_tail_verdict(size_t k, uint32_t token, bool viable) const {
  std::lock_guard lock(mutex_);
  tail_verdicts_[verdict_key(k, token)] = viable;
}

const std::vector<uint32_t>* ToolCallsGrammar::finished_by(const Finishers& group) const {
  std::lock_guard lock(mutex_);
  auto found = finished_by_.find(&group);
  return found == finished_by_.end() ? nullptr : &found->second;  // entries are never erased
}

void ToolCallsGrammar::remember_finished_by(const Finishers& group, std::vector<uint32_t> tokens) const {
  std::lock_guard lock(mutex_);
  finished_by_.try_emplace(&group, std::move(tokens));
}

// ---------------------------------------------------------------------------
// ToolCallsMatcher

ToolCallsMatcher::ToolCallsMatcher(std::shared_ptr<const ToolCallsGrammar> grammar) : grammar_(std::move(grammar)) {
  reset();
}

ToolCallsMatcher::ToolCallsMatcher(const ToolCallsMatcher& other)
    : grammar_(other.grammar_), steps_(other.steps_), text_(other.text_), error_(other.error_),
      finished_(other.finished_) {
  for (const auto& cut : other.cuts_) cuts_.push_back(std::make_unique<Cut>(*cut));
}

void ToolCallsMatcher::reset() {
  cuts_.clear();
  cuts_.push_back(std::make_unique<Cut>(Cut{Matcher(grammar_->start_grammar(), cut_options()), kNoTool, 0}));
  steps_.clear();
  text_.clear();
  error_.clear();
  finished_ = false;
}

std::optional<size_t> ToolCallsMatcher::current_tool() const {
  const size_t tool = cuts_.back()->tool;
  return tool == kNoTool ? std::nullopt : std::optional<size_t>(tool);
}

bool ToolCallsMatcher::push_cut(size_t tool) {
  auto grammar = grammar_->after_name(tool);
  if (!grammar) {
    error_ = grammar.error().message;
    return false;
  }
  cuts_.push_back(std::make_unique<Cut>(Cut{Matcher(*grammar, cut_options()), tool, text_.size()}));
  return true;
}

bool ToolCallsMatcher::only_end_left(Matcher& m) {
  if (!m.can_end()) return false;
  scratch_.resize(m.mask_words());
  m.fill_mask(scratch_);
  for (uint32_t id : m.grammar().vocabulary().eos_ids()) scratch_[id / 32] &= ~(1u << (id % 32));
  return std::all_of(scratch_.begin(), scratch_.end(), [](uint32_t w) { return w == 0; });
}

std::optional<size_t> ToolCallsMatcher::ends_with_name(Matcher& m, std::string_view before, std::string_view head) {
  // Enough of the text before for the longest name and its opening delimiter.
  const size_t keep = std::min(before.size(), grammar_->longest_name() + 2);
  probe_text_.assign(before.substr(before.size() - keep)).append(head);
  const std::optional<size_t> tool = grammar_->name_ending(probe_text_);
  if (!tool || m.advance_text(head) != AdvanceResult::Ongoing) return std::nullopt;
  const bool ends = only_end_left(m);
  m.rollback(1);
  return ends ? tool : std::nullopt;
}

bool ToolCallsMatcher::enter_named_cut() {
  const std::optional<size_t> tool = grammar_->name_ending(cut_text());
  if (!tool || !only_end_left(top())) return true;
  return push_cut(*tool);
}

bool ToolCallsMatcher::take_text(std::string_view bytes, int cuts_left) {
  if (top().advance_text(bytes) == AdvanceResult::Ongoing) {
    text_.append(bytes);
    return enter_named_cut();
  }
  return take_crossing(bytes, cuts_left);
}

bool ToolCallsMatcher::take_crossing(std::string_view bytes, int cuts_left) {
  if (cuts_left == 0) return false;
  for (size_t p = 0; p + 1 < bytes.size(); ++p) {
    const std::string_view head = bytes.substr(0, p + 1);
    if (head.back() != grammar_->close()) continue;
    const std::optional<size_t> tool = ends_with_name(top(), cut_text(), head);
    if (!tool) continue;
    const size_t text_before = text_.size(), cuts_before = cuts_.size();
    top().advance_text(head);
    text_.append(head);
    if (push_cut(*tool) && take_text(bytes.substr(p + 1), cuts_left - 1)) return true;
    cuts_.resize(cuts_before);
    text_.resize(text_before);
    top().rollback(1);
    if (has_error()) return false;
  }
  return false;
}

AdvanceResult ToolCallsMatcher::advance(uint32_t token) {
  if (finished_ || has_error()) return AdvanceResult::Rejected;
  const Vocabulary& vocab = grammar_->vocabulary();
  if (token >= vocab.size()) return AdvanceResult::Rejected;
  const Step step{cuts_.size(), text_.size()};
  if (vocab.is_eos(token) || vocab.is_special(token)) {
    const AdvanceResult result = top().advance(token);
    if (result == AdvanceResult::Rejected) return result;
    steps_.push_back(step);
    finished_ = result == AdvanceResult::Finished;
    return result;
  }
  const std::string_view bytes = vocab.bytes(token);
  bool taken = false;
  if (top().advance(token) == AdvanceResult::Ongoing) {
    text_.append(bytes);
    taken = true;
    if (!enter_named_cut()) {  // the named tool's grammar failed: error_ says why
      top().rollback(1);
      text_.resize(step.text_before);
      return AdvanceResult::Rejected;
    }
  } else {
    if (top().has_error()) error_ = top().error();
    taken = !has_error() && take_crossing(bytes, kMaxCutsPerToken);
  }
  if (!taken) return AdvanceResult::Rejected;
  steps_.push_back(step);
  return AdvanceResult::Ongoing;
}

bool ToolCallsMatcher::rollback(size_t n) {
  if (n > steps_.size()) return false;
  for (; n > 0; --n) {
    const Step step = steps_.back();
    steps_.pop_back();
    cuts_.resize(step.cuts_before);
    top().rollback(1);
    text_.resize(step.text_before);
  }
  finished_ = false;
  error_.clear();
  return true;
}

bool ToolCallsMatcher::is_allowed(uint32_t token) {
  if (has_error()) return false;
  if (advance(token) == AdvanceResult::Rejected) {
    error_.clear();  // a tool's grammar that failed to compile refuses the token; a query keeps no error
    return false;
  }
  rollback(1);
  return true;
}

size_t ToolCallsMatcher::validate_tokens(std::span<const uint32_t> tokens) {
  const std::string error = error_;
  size_t accepted = 0;
  for (uint32_t token : tokens) {
    const AdvanceResult result = advance(token);
    if (result == AdvanceResult::Rejected) break;
    ++accepted;
    if (result == AdvanceResult::Finished) break;
  }
  rollback(accepted);
  error_ = error;
  return accepted;
}

std::string ToolCallsMatcher::forced_text(size_t limit) {
  return finished_ || has_error() ? std::string() : top().forced_text(limit);
}

bool ToolCallsMatcher::fill_row(std::span<uint32_t> row) {
  if (row.size() < mask_words()) return false;
  const bool ok = fill_mask(row);
  std::fill(row.begin() + static_cast<std::ptrdiff_t>(mask_words()), row.end(), 0u);
  return ok;
}

AdvanceResult ToolCallsMatcher::modify_possible_logits(uint32_t token, std::span<float> logits) {
  if (logits.size() < grammar_->vocabulary().size()) return AdvanceResult::Rejected;
  const AdvanceResult result = advance(token);
  if (result == AdvanceResult::Ongoing) update_logits_from_tokens(logits);
  return result;
}

bool ToolCallsMatcher::update_logits_from_tokens(std::span<float> logits) {
  if (logits.size() < grammar_->vocabulary().size()) return false;
  logits_words_.resize(mask_words());
  if (!fill_mask(logits_words_)) return false;
  apply_mask_to_logits(logits.data(), LogitsType::Float32, logits.size(), logits_words_);
  return true;
}

bool ToolCallsMatcher::can_end() { return !finished_ && !has_error() && top().can_end(); }

bool ToolCallsMatcher::viable(Matcher& m, std::string_view before, std::string_view bytes, int cuts_left) {
  if (m.accepts_text(bytes)) return true;
  if (cuts_left == 0) return false;
  for (size_t p = 0; p + 1 < bytes.size(); ++p) {
    const std::string_view head = bytes.substr(0, p + 1);
    if (head.back() != grammar_->close()) continue;
    const std::optional<size_t> tool = ends_with_name(m, before, head);
    if (tool && tail_viable(*tool, bytes.substr(p + 1), cuts_left - 1)) return true;
  }
  return false;
}

bool ToolCallsMatcher::tail_viable(size_t k, std::string_view bytes, int cuts_left) {
  auto grammar = grammar_->after_name(k);
  if (!grammar) {
    error_ = grammar.error().message;
    return false;
  }
  // The cut at its start is one state: one probe matcher per tool, as
  // long as no probe of the same tool is under way (a token spanning two
  // calls of one tool).
  auto [entry, added] = starts_.try_emplace(k);
  if (added) entry->second = std::make_unique<Matcher>(*grammar);
  std::unique_ptr<Matcher> probe = std::move(entry->second);
  if (!probe) probe = std::make_unique<Matcher>(*grammar);
  const bool result = viable(*probe, {}, bytes, cuts_left);
  starts_[k] = std::move(probe);
  return result;
}

void ToolCallsMatcher::add_crossings(std::span<uint32_t> words) {
  const Vocabulary& vocab = grammar_->vocabulary();
  Matcher& m = top();
  const std::string_view before = cut_text();
  auto allow = [&](uint32_t id) { words[id / 32] |= 1u << (id % 32); };
  // A name begun before the token: its rest, the closing delimiter and
  // more, in one token.
  if (const std::optional<std::string_view> begun = grammar_->name_begun(before)) {
    for (const ToolCallsGrammar::Finishers& group : grammar_->finishers(*begun)) {
      if (ends_with_name(m, before, group.key) != group.tool) continue;
      const std::vector<uint32_t>* taken = grammar_->finished_by(group);
      if (!taken) {
        std::vector<uint32_t> tokens;
        for (uint32_t id : *group.tokens)
          if (tail_viable(group.tool, vocab.bytes(id).substr(group.key.size()), kMaxCutsPerToken - 1))
            tokens.push_back(id);
        grammar_->remember_finished_by(group, std::move(tokens));
        taken = grammar_->finished_by(group);
      }
      for (uint32_t id : *taken) allow(id);
    }
  }
  // A whole name inside the token.
  for (const ToolCallsGrammar::Inner& inner : grammar_->inner_names()) {
    if (words[inner.token / 32] >> (inner.token % 32) & 1) continue;
    const std::string_view bytes = vocab.bytes(inner.token);
    if (ends_with_name(m, before, bytes.substr(0, inner.cut)) != inner.tool) continue;
    int verdict = grammar_->tail_verdict(inner.tool, inner.token);
    if (verdict < 0) {
      verdict = tail_viable(inner.tool, bytes.substr(inner.cut), kMaxCutsPerToken - 1);
      grammar_->remember_tail_verdict(inner.tool, inner.token, verdict);
    }
    if (verdict) allow(inner.token);
  }
}

bool ToolCallsMatcher::fill_mask(std::span<uint32_t> words) {
  const size_t n = mask_words();
  if (words.size() < n) return false;
  if (has_error()) {
    std::fill(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(n), 0u);
    return false;
  }
  if (!top().fill_mask(words)) {
    error_ = top().error();
    return false;
  }
  if (finished_) return true;
  add_crossings(words.first(n));
  if (has_error()) {
    std::fill(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(n), 0u);
    return false;
  }
  return true;
}

}  // namespace cgram

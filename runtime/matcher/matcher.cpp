#include "matcher.h"

#include "encoder.h"
#include "logits_mask.h"

#include <bit>
#include <limits>

namespace cgram {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar, const MatcherOptions& options)
    : grammar_(std::move(grammar)), max_rollback_(options.max_rollback_tokens) {
  if (grammar_) {
    engine_.emplace(*grammar_, options.limits);
    canonical_ = grammar_->canonical_pairs();
  }
  reset();
}

Matcher::Matcher(const Matcher& other)
    : grammar_(other.grammar_),
      canonical_(other.canonical_),
      engine_(other.engine_),
      error_(other.error_),
      head_pool_(other.head_pool_),
      history_(other.history_),
      dropped_(other.dropped_),
      floor_(other.floor_),
      max_rollback_(other.max_rollback_),
      current_(other.current_),
      finished_(other.finished_) {}

bool Matcher::stopped(Engine::Mark before) {
  if (!engine_->exhausted()) return false;
  error_ = engine_->budget().why();
  engine_->budget().clear_exhausted();
  engine_->truncate(before);
  return true;
}

void Matcher::push_step(const std::vector<Head>& heads, bool finished, uint32_t token) {
  size_t begin = head_pool_.size();
  head_pool_.insert(head_pool_.end(), heads.begin(), heads.end());
  history_.push_back({begin, head_pool_.size(), engine_ ? engine_->mark() : Engine::Mark{}, finished, token});
  current_.assign(heads.begin(), heads.end());
}

void Matcher::reset() {
  history_.clear();
  head_pool_.clear();
  dropped_ = floor_ = 0;
  finished_ = false;
  if (!engine_) {
    error_ = "the matcher was made without a compiled grammar";
    push_step({}, false, kNoToken);
    return;
  }
  error_.clear();
  engine_->budget().start_sequence();
  std::vector<Head> heads = engine_->initial_heads();
  push_step(heads, false, kNoToken);
}

bool Matcher::grammar_can_end() {
  if (finished_ || has_error()) return false;
  const Engine::Mark before = engine_->mark();
  const bool result = engine_->can_end(current_);
  return !stopped(before) && result;
}

bool Matcher::can_end() {
  if (canonical_ && !canonical_->may_end(token_before(1), token_before(0)) && !canonical_dead_end()) return false;
  return grammar_can_end();
}

bool Matcher::canonical_dead_end() {
  if (!canonical_ || has_error() || finished_) return false;
  if (history_.back().dead_end < 0) {
    mask_scratch_.resize(mask_words());
    fill_mask(mask_scratch_);  // decides it
  }
  return history_.back().dead_end > 0;
}

AdvanceResult Matcher::advance(uint32_t token) {
  const AdvanceResult result = step(token);
  if (result != AdvanceResult::Rejected && max_rollback_) {
    // Tokens older than the window, from the furthest point reached, are
    // out of reach from now on (rolling back does not bring them back).
    floor_ = std::max(floor_, tokens_accepted() - std::min(tokens_accepted(), *max_rollback_));
    drop_old_history();
  }
  return result;
}

size_t Matcher::validate_tokens(std::span<const uint32_t> tokens) {
  const std::string error = error_;  // a limit met on the way is not kept
  size_t accepted = 0;
  for (uint32_t token : tokens) {
    const AdvanceResult result = step(token);
    if (result == AdvanceResult::Rejected) break;
    ++accepted;
    if (result == AdvanceResult::Finished) break;
  }
  undo(accepted);
  error_ = error;
  return accepted;
}

void Matcher::drop_old_history() {
  // The steps a rollback can reach, and two before them: canonical mode
  // reads the two tokens before the next one. A copy of what is kept every
  // so many tokens, not every token.
  constexpr size_t kTokensBefore = 2;
  const size_t reachable_from = floor_ - dropped_;  // in history_
  if (reachable_from < kTokensBefore + std::max<size_t>(64, *max_rollback_ + 3)) return;
  const size_t drop = reachable_from - kTokensBefore;
  const size_t heads_base = history_[drop].heads_begin;
  head_pool_.erase(head_pool_.begin(), head_pool_.begin() + static_cast<std::ptrdiff_t>(heads_base));
  history_.erase(history_.begin(), history_.begin() + static_cast<std::ptrdiff_t>(drop));
  dropped_ += drop;
  std::vector<Engine::Mark*> marks;
  marks.reserve(history_.size());
  for (Step& s : history_) {
    s.heads_begin -= heads_base;
    s.heads_end -= heads_base;
    marks.push_back(&s.mark);
  }
  engine_->compact(head_pool_, marks);
  current_.assign(head_pool_.begin() + static_cast<std::ptrdiff_t>(history_.back().heads_begin), head_pool_.end());
}

AdvanceResult Matcher::step(uint32_t token) {
  if (has_error()) return AdvanceResult::Rejected;
  const Vocabulary& vocab = grammar_->vocabulary();
  if (finished_ || token >= vocab.size()) return AdvanceResult::Rejected;
  if (vocab.is_eos(token)) {
    if (!can_end()) return AdvanceResult::Rejected;
    scratch_.assign(current_.begin(), current_.end());
    push_step(scratch_, true, token);
    finished_ = true;
    return AdvanceResult::Finished;
  }
  if (vocab.is_special(token)) return AdvanceResult::Rejected;
  if (canonical_ && !canonical_->allows(token_before(1), token_before(0), token) && !canonical_dead_end())
    return AdvanceResult::Rejected;
  return step_bytes(vocab.bytes(token), token);
}

AdvanceResult Matcher::step_bytes(std::string_view bytes, uint32_t token) {
  Engine::Mark before = engine_->mark();
  engine_->step_token(current_, bytes, scratch_);
  if (stopped(before)) return AdvanceResult::Rejected;
  if (scratch_.empty()) {
    engine_->truncate(before);
    return AdvanceResult::Rejected;
  }
  engine_->budget().grant_bytes(bytes.size());
  push_step(scratch_, false, token);
  return AdvanceResult::Ongoing;
}

AdvanceResult Matcher::advance_text(std::string_view bytes) {
  if (has_error() || finished_ || canonical_ || bytes.empty()) return AdvanceResult::Rejected;
  const AdvanceResult result = step_bytes(bytes, kNoToken);
  if (result != AdvanceResult::Rejected && max_rollback_) {
    floor_ = std::max(floor_, tokens_accepted() - std::min(tokens_accepted(), *max_rollback_));
    drop_old_history();
  }
  return result;
}

bool Matcher::accepts_text(std::string_view bytes) {
  if (has_error() || finished_ || canonical_ || bytes.empty()) return false;
  return viable_after(bytes);
}

bool Matcher::viable_after(std::string_view bytes) {
  Engine::Mark before = engine_->mark();
  engine_->step_token(current_, bytes, scratch_);
  if (stopped(before)) return false;
  engine_->truncate(before);
  return !scratch_.empty();
}

bool Matcher::fill_row(std::span<uint32_t> row) {
  if (row.size() < mask_words()) return false;
  const bool ok = fill_mask(row);
  std::fill(row.begin() + static_cast<std::ptrdiff_t>(mask_words()), row.end(), 0u);
  return ok;
}

bool Matcher::fill_mask(std::span<uint32_t> words, TokenSetSink* sink) {
  const size_t n = mask_words();
  if (words.size() < n || !engine_) return false;
  std::fill(words.begin(), words.begin() + static_cast<ptrdiff_t>(n), 0u);
  if (has_error()) return false;
  if (finished_) return true;
  const Engine::Mark before = engine_->mark();
  engine_->fill_text_tokens(current_, words.first(n), canonical_ ? nullptr : sink, /*words_are_zero=*/true);
  if (stopped(before)) {
    std::fill(words.begin(), words.begin() + static_cast<ptrdiff_t>(n), 0u);
    return false;
  }
  if (canonical_) {
    Step& step = history_.back();
    if (step.dead_end != 1) canonical_->filter(token_before(1), token_before(0), words.first(n));
    if (step.dead_end < 0) {
      const bool none = std::all_of(words.begin(), words.begin() + static_cast<ptrdiff_t>(n),
                                    [](uint32_t w) { return w == 0; });
      const bool ends = canonical_->may_end(token_before(1), token_before(0)) && grammar_can_end();
      step.dead_end = none && !ends ? 1 : 0;
      if (step.dead_end) {  // yield to the grammar: its own mask again
        std::fill(words.begin(), words.begin() + static_cast<ptrdiff_t>(n), 0u);
        engine_->fill_text_tokens(current_, words.first(n), nullptr, /*words_are_zero=*/true);
        if (stopped(before)) {
          std::fill(words.begin(), words.begin() + static_cast<ptrdiff_t>(n), 0u);
          return false;
        }
      }
    }
  }
  if (can_end())
    for (uint32_t id : grammar_->vocabulary().eos_ids()) words[id / 32] |= 1u << (id % 32);
  if (has_error()) {
    std::fill(words.begin(), words.begin() + static_cast<ptrdiff_t>(n), 0u);
    return false;
  }
  return true;
}

std::vector<uint32_t> Matcher::current_possible_tokens() {
  mask_scratch_.resize(mask_words());
  fill_mask(mask_scratch_);
  std::vector<uint32_t> out;
  for (uint32_t w = 0; w < mask_scratch_.size(); ++w)
    for (uint32_t bits = mask_scratch_[w]; bits; bits &= bits - 1) out.push_back(w * 32 + std::countr_zero(bits));
  return out;
}

bool Matcher::is_allowed(uint32_t token) {
  if (has_error()) return false;
  const Vocabulary& vocab = grammar_->vocabulary();
  if (finished_ || token >= vocab.size()) return false;
  if (vocab.is_eos(token)) return can_end();
  if (vocab.is_special(token)) return false;
  if (canonical_ && !canonical_->allows(token_before(1), token_before(0), token) && !canonical_dead_end()) return false;
  return viable_after(vocab.bytes(token));
}

uint32_t Matcher::token_before(size_t back) const {
  return history_.size() > back + 1 ? history_[history_.size() - 1 - back].token : CanonicalPairs::kStart;
}

Engine::Forced Matcher::forced(size_t limit) {
  if (has_error() || finished_ || !engine_) return {};
  const Engine::Mark before = engine_->mark();
  Engine::Forced forced = engine_->forced_text(current_, limit);
  if (engine_->exhausted()) {  // a query: no sticky error, nothing claimed
    engine_->budget().clear_exhausted();
    engine_->truncate(before);
    return {};
  }
  return forced;
}

std::string Matcher::forced_text(size_t limit) { return forced(limit).text; }

bool Matcher::accepts_all(std::span<const uint32_t> tokens) {
  size_t accepted = 0;
  for (uint32_t t : tokens) {
    if (step(t) != AdvanceResult::Ongoing) break;
    ++accepted;
  }
  undo(accepted);
  return accepted == tokens.size();
}

Result<Matcher::JumpForward> Matcher::jump_forward(size_t limit) {
  JumpForward none;
  if (has_error() || finished_ || !engine_) return none;
  auto encoder = grammar_->encoder();
  if (!encoder) return encoder.error();
  const Encoder& enc = **encoder;
  Engine::Forced forced = this->forced(limit);
  if (forced.text.empty()) return none;
  none.forced = forced.text;
  const Vocabulary& vocab = grammar_->vocabulary();
  // Heal the last token first (re-encoded with the forced text, it may
  // merge into a longer one); without it when that gains nothing.
  const size_t reachable = rollback_depth();
  for (size_t back : {size_t{1}, size_t{0}}) {
    if (back > reachable) continue;
    std::string text;
    std::vector<uint32_t> taken;
    for (size_t i = history_.size() - back; i < history_.size(); ++i) {
      taken.push_back(history_[i].token);
      text += vocab.bytes(history_[i].token);
    }
    const size_t kept_bytes = text.size();
    text += forced.text;
    auto encoded = enc.try_encode_continuation(text);
    if (!encoded.ok()) continue;
    std::vector<uint32_t> tokens = std::move(*encoded);
    // The last token could merge with the text after it, unless none can come.
    if (!forced.ends && !tokens.empty()) tokens.pop_back();
    size_t spelled = 0;
    for (uint32_t t : tokens) spelled += vocab.bytes(t).size();
    if (spelled <= kept_bytes) continue;  // no forced byte covered
    if (back > 0 && tokens.size() >= taken.size() && std::equal(taken.begin(), taken.end(), tokens.begin()))
      continue;  // the last token stays as it is: the plain jump says the same
    // Checked against the grammar from the state before the taken tokens.
    undo(back);
    const bool valid = accepts_all(tokens);
    for (uint32_t t : taken) step(t);
    if (!valid) continue;
    JumpForward jump;
    jump.rollback = back;
    jump.tokens = std::move(tokens);
    jump.forced = std::move(forced.text);
    return jump;
  }
  return none;
}

AdvanceResult Matcher::modify_possible_logits(uint32_t token, std::span<float> logits) {
  if (!grammar_ || logits.size() < grammar_->vocabulary().size()) return AdvanceResult::Rejected;
  AdvanceResult result = advance(token);
  if (result == AdvanceResult::Ongoing) update_logits_from_tokens(logits);
  return result;
}

bool Matcher::update_logits_from_tokens(std::span<float> logits) {
  if (!grammar_ || logits.size() < grammar_->vocabulary().size()) return false;
  mask_scratch_.resize(mask_words());
  if (!fill_mask(mask_scratch_)) return false;
  // Bits past the vocabulary are clear in a mask, so padding ids get -inf too.
  apply_mask_to_logits(logits.data(), LogitsType::Float32, logits.size(), mask_scratch_);
  return true;
}

size_t Matcher::rollback_depth() const { return max_rollback_ ? tokens_accepted() - floor_ : history_.size() - 1; }

bool Matcher::rollback(size_t n) {
  if (n > rollback_depth() || !engine_) return false;
  undo(n);
  return true;
}

void Matcher::undo(size_t n) {
  if (n == 0 || !engine_) return;
  error_.clear();  // back to a state no limit stopped
  history_.resize(history_.size() - n);
  const Step& last = history_.back();
  head_pool_.resize(last.heads_end);
  current_.assign(head_pool_.begin() + static_cast<ptrdiff_t>(last.heads_begin), head_pool_.end());
  engine_->truncate(last.mark);
  finished_ = last.finished;
}

}  // namespace cgram

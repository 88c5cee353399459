#pragma once
// One matcher per sequence: the allowed next tokens, exactly, at every step.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "canonical.h"
#include "compiled_grammar.h"
#include "engine.h"

namespace cgram {

enum class AdvanceResult { Ongoing, Finished, Rejected };

struct MatcherOptions {
  EngineLimits limits;
  // The most accepted tokens rollback() can undo. History before them is
  // dropped as the text grows (the parse stack's old nodes too), so a
  // matcher's memory stays bounded over any length of text; a rollback past
  // it is refused. nullopt: every token can be undone.
  std::optional<size_t> max_rollback_tokens;
};

// Misuse is refused, never undefined: every call below returns an error
// value or a documented result and leaves the state as it was.
//  - A matcher made without a grammar has an error (error()) and allows
//    nothing.
//  - Token ids out of range, special tokens that are not end of sequence,
//    and anything after end of sequence are Rejected.
//  - When an EngineLimits bound is hit (a pathologically ambiguous grammar),
//    the matcher holds a sticky error: it rejects every token and allows
//    nothing until reset() or a rollback to before the step that hit it.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar, const MatcherOptions& options = {});
  Matcher(const Matcher& other);
  Matcher& operator=(const Matcher&) = delete;

  // Accepts `token` if the mask allows it; Rejected leaves the state unchanged.
  AdvanceResult advance(uint32_t token);
  // Text that is not one whole token: a token's head, whose rest another
  // grammar takes (calls/tool_calls.h cuts a reply at each call's name).
  // One step, undone by rollback(1) as a token's is. Rejected for empty
  // text and in canonical mode (its pair rule reads whole tokens).
  AdvanceResult advance_text(std::string_view bytes);
  // Whether advance_text(bytes) would accept it; nothing changes.
  bool accepts_text(std::string_view bytes);
  // How many of `tokens`, in order, advance() would accept from here (an
  // end-of-sequence token counts and nothing after it does). Nothing
  // changes, whatever max_rollback_tokens is: how servers check a
  // speculative draft.
  size_t validate_tokens(std::span<const uint32_t> tokens);
  // Bit t % 32 of word t / 32 for every allowed token; words past
  // mask_words() are left alone. False, with nothing written, when `words`
  // is shorter than mask_words(); false with every bit clear when the
  // matcher has an error.
  bool fill_mask(std::span<uint32_t> words) { return fill_mask(words, nullptr); }
  // The same, leaving out of `words` the precomputed token sets `sink`
  // takes: the mask is `words` OR those sets (how a GPU fills masks:
  // gpu/mask_plan.h). The sink may have been given sets even when the
  // result is false. In canonical mode the sink is not used (the filter
  // needs every bit on the host).
  bool fill_mask(std::span<uint32_t> words, TokenSetSink* sink);
  // One row of a server's (batch, row words) bitmask: the mask, then every
  // word past mask_words() cleared (a model's padding ids, past the
  // tokenizer's, are never allowed). False, with nothing written, when the
  // row is shorter than mask_words(); false with the row clear on an error.
  bool fill_row(std::span<uint32_t> row);
  std::vector<uint32_t> current_possible_tokens();
  bool is_allowed(uint32_t token);
  // The bytes that must come next whatever the tokenization, at most
  // `limit`: the longest common prefix of every way the text can go on to
  // a complete sentence (`": "` after a key of a fixed-shape record, the
  // rest of `true` after `tr`). Empty where the text could end, where any!
  // could start, and where two bytes are possible. Nothing changes; a limit
  // met on the way (EngineLimits) gives empty text, not an error.
  std::string forced_text(size_t limit = kDefaultForcedTextLimit);
  static constexpr size_t kDefaultForcedTextLimit = 256;

  // Jump-forward with token healing: what to do so that the forced text is
  // in, tokenized as the tokenizer would. Take back `rollback` tokens, then
  // accept `tokens`; their bytes are the taken-back tokens' bytes followed by
  // the start of the forced text. They are the vocabulary's own encoding
  // of that text, accepted by the grammar (checked here), and the last
  // token of that encoding is left out unless the text must end there (it
  // could merge with what comes next). Empty when nothing is gained.
  // Nothing changes. Needs the vocabulary's encoder: a plain token list has
  // none (the error says so).
  struct JumpForward {
    size_t rollback = 0;
    std::vector<uint32_t> tokens;
    std::string forced;  // the forced text (tokens may cover less of it)
  };
  Result<JumpForward> jump_forward(size_t limit = kDefaultForcedTextLimit);
  // advance(token), then apply the new mask to `logits` (-inf where
  // disallowed); logits are untouched when the result is not Ongoing.
  // `logits` must cover the vocabulary (a model's padding ids past it are
  // set to -inf); a shorter span is Rejected before anything changes.
  AdvanceResult modify_possible_logits(uint32_t token, std::span<float> logits);
  // False, with logits untouched, when `logits` is shorter than the
  // vocabulary or the matcher has an error.
  bool update_logits_from_tokens(std::span<float> logits);
  // Where the text stands for the lexer and parser (Engine::context_key):
  // equal for equal states of any two matchers of one grammar.
  uint64_t context_key(int depth = 2) const { return engine_ ? engine_->context_key(current_, depth) : 0; }
  // Undoes the last n accepted tokens; false (and nothing undone) when n >
  // rollback_depth().
  bool rollback(size_t n);
  // How many tokens rollback() can undo now: every accepted one, or, with
  // MatcherOptions::max_rollback_tokens, those within that many of the
  // furthest point the text reached (after rolling back 3, at most
  // max_rollback_tokens - 3 more).
  size_t rollback_depth() const;
  std::optional<size_t> max_rollback_tokens() const { return max_rollback_; }
  void reset();
  Matcher clone() const { return Matcher(*this); }
  bool is_finished() const { return finished_; }
  bool can_end();
  // Canonical mode: whether no canonical continuation is left here though
  // the grammar goes on (the pair rule let through a token that only
  // non-canonical tokens can follow, such as 'h' where only 'e' may come
  // and the tokenizer writes 'he'). There the matcher yields to the grammar
  // (masks, is_allowed, advance and can_end are the plain ones), so a mask
  // is never empty while the grammar goes on. Builds the mask if needed.
  bool canonical_dead_end();
  size_t tokens_accepted() const { return dropped_ + history_.size() - 1; }
  size_t mask_words() const { return grammar_ ? grammar_->mask_words() : 0; }
  // The compiled grammar (check has_grammar() first on a matcher that may
  // have been made without one).
  const CompiledGrammar& grammar() const { return *grammar_; }
  bool has_grammar() const { return grammar_ != nullptr; }
  // Why the matcher stopped (a limit, or no grammar); empty when it did not.
  bool has_error() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  // The parse stack's nodes and edges held now (about 24 bytes each): they
  // grow with the text unless max_rollback_tokens bounds the history.
  size_t stack_elements() const { return engine_ ? engine_->stack_elements() : 0; }
  // The most work one call has done, against EngineLimits::max_work_per_call.
  size_t peak_work() const { return engine_ ? engine_->budget().peak() : 0; }

 private:
  // The heads of every step live in one pool (no allocation per token once
  // its capacity is reached; rollback and reset keep the capacity).
  struct Step {
    size_t heads_begin, heads_end;
    Engine::Mark mark;
    bool finished;
    uint32_t token;        // the token accepted to reach it (kNoToken for the start)
    int8_t dead_end = -1;  // canonical mode: 1 at a dead end, 0 not, -1 not known yet
  };
  bool grammar_can_end();
  static constexpr uint32_t kNoToken = UINT32_MAX;
  // advance() without dropping history (validation takes its steps back).
  AdvanceResult step(uint32_t token);
  // The engine's step over `bytes`, recorded as `token`'s.
  AdvanceResult step_bytes(std::string_view bytes, uint32_t token);
  // Whether the engine takes `bytes` from here; nothing changes.
  bool viable_after(std::string_view bytes);
  // Takes back the last n steps, whatever max_rollback_tokens says.
  void undo(size_t n);
  // With max_rollback_tokens: drops the history no rollback can reach, and
  // the stack nodes only it used, once it is as long again as what is kept
  // (amortized: a copy of what is kept every so many tokens).
  void drop_old_history();
  void push_step(const std::vector<Head>& heads, bool finished, uint32_t token);
  // The engine's forced text from here (empty, and no error kept, when a
  // limit stops it).
  Engine::Forced forced(size_t limit);
  // Whether every token of `tokens` is accepted in turn from here; the
  // state is as it was afterwards.
  bool accepts_all(std::span<const uint32_t> tokens);
  // After an engine call: when a limit stopped it, drops its partial work
  // (back to `before`) and keeps the error. True when it was stopped.
  bool stopped(Engine::Mark before);

  // The accepted token `back` places before the next one (0: the last);
  // CanonicalPairs::kStart where there is none.
  uint32_t token_before(size_t back) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  const CanonicalPairs* canonical_ = nullptr;  // canonical mode: the grammar's pair filter
  std::optional<Engine> engine_;  // none without a grammar
  std::string error_;
  std::vector<Head> head_pool_;
  std::vector<Step> history_;  // history_.back() is the current state
  size_t dropped_ = 0;         // accepted tokens whose steps were dropped
  size_t floor_ = 0;           // with max_rollback_tokens: no rollback goes below this many tokens
  std::optional<size_t> max_rollback_;
  std::vector<Head> current_;  // the current step's heads, contiguous
  bool finished_ = false;
  std::vector<Head> scratch_;
  std::vector<uint32_t> mask_scratch_;
};

}  // namespace cgram

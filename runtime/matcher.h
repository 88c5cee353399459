#pragma once
// One matcher per sequence: the allowed next tokens, exactly, at every step.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "compiled_grammar.h"
#include "engine.h"

namespace cgram {

enum class AdvanceResult { Ongoing, Finished, Rejected };

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);
  Matcher(const Matcher& other);
  Matcher& operator=(const Matcher&) = delete;

  // Accepts `token` if the mask allows it; Rejected leaves the state unchanged.
  AdvanceResult advance(uint32_t token);
  // words.size() must be at least mask_words(); bit t % 32 of word t / 32.
  void fill_mask(std::span<uint32_t> words);
  std::vector<uint32_t> current_possible_tokens();
  bool is_allowed(uint32_t token);
  // Tokens certain to come next (each the only allowed token in turn).
  std::vector<uint32_t> forced_tokens(size_t limit = 32);
  // advance(token), then apply the new mask to `logits` (-inf where
  // disallowed); logits are untouched when the result is not Ongoing.
  AdvanceResult modify_possible_logits(uint32_t token, std::span<float> logits);
  void update_logits_from_tokens(std::span<float> logits);
  // Undoes the last n accepted tokens (n <= tokens_accepted()).
  bool rollback(size_t n);
  void reset();
  Matcher clone() const { return Matcher(*this); }
  bool is_finished() const { return finished_; }
  bool can_end();
  size_t tokens_accepted() const { return history_.size() - 1; }
  size_t mask_words() const { return grammar_->mask_words(); }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  // The heads of every step live in one pool (no allocation per token once
  // its capacity is reached; rollback and reset keep the capacity).
  struct Step {
    size_t heads_begin, heads_end;
    Engine::Mark mark;
    bool finished;
  };
  void push_step(const std::vector<Head>& heads, bool finished);

  std::shared_ptr<const CompiledGrammar> grammar_;
  Engine engine_;
  std::vector<Head> head_pool_;
  std::vector<Step> history_;  // history_.back() is the current state
  std::vector<Head> current_;  // the current step's heads, contiguous
  bool finished_ = false;
  std::vector<Head> scratch_;
  std::vector<uint32_t> mask_scratch_;
};

}  // namespace cgram

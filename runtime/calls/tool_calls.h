#pragma once
// Many tools, compiled one at a time. The reply grammar of a tool list
// (import/tools.h) is cut at each call's name: one grammar from the reply's
// start to the end of a call's name, and for each tool one from just after
// its name to the end of the next call's name (ToolSegments). Only the first
// is compiled up front; a tool's is compiled when a call to it is written,
// or when a token could finish its name, and kept (tools of one schema share
// it). A server with hundreds of tools waits for tens of rules, not
// thousands.
//
// ToolCallsMatcher hands the text over from one cut to the next at a name's
// closing delimiter, and stays exact for the tokens that span it (`",`,
// `>\n`): the mask is the current cut's, plus every token whose head ends a
// name there and whose tail the named tool's cut takes from its start. Its
// masks are those of the whole grammar (translate_tools), which the tests
// check, with the whole grammar's oracle, along replies and random walks.
//
// A cut ends only where nothing may follow, at a name; a reply's own end is
// never such a place (free text may always go on, and the formats without
// it end at ']', '}' or '</tool_call>'). A token may span at most
// kMaxCutsPerToken names.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler.h"
#include "error.h"
#include "matcher.h"
#include "tools.h"

namespace cgram {

// How the list is read (its call format, the arguments' JSON layout,
// open_tool_arguments, limits: ParseOptions's fields for tools) and how
// each cut is compiled.
struct ToolCallsOptions {
  ParseOptions parse;
  CompileOptions compile;
};

class ToolCallsGrammar {
 public:
  // Reads the list and compiles the cut up to the first name. Errors: the
  // list's (as translate_tools gives them), a name the cut cannot delimit,
  // a compile that fails.
  static Result<std::shared_ptr<ToolCallsGrammar>> create(std::string_view tools_json, std::string_view filename,
                                                          std::shared_ptr<const Vocabulary> vocab,
                                                          const ToolCallsOptions& options = {});
  ToolCallsGrammar(const ToolCallsGrammar&) = delete;
  ToolCallsGrammar& operator=(const ToolCallsGrammar&) = delete;

  const Vocabulary& vocabulary() const { return *vocab_; }
  const std::shared_ptr<const Vocabulary>& vocabulary_ptr() const { return vocab_; }
  size_t mask_words() const { return (vocab_->size() + 31) / 32; }
  size_t tools() const { return segments_.size(); }
  char close() const { return segments_.close(); }
  const std::string& tool_name(size_t k) const { return segments_.name(k); }
  size_t longest_name() const { return longest_name_; }
  // Distinct after-name grammars compiled so far.
  size_t compiled_tools() const;
  // The compiled grammars' memory so far, and the indexes of the cuts.
  size_t memory_bytes() const;

  // What ToolCallsMatcher reads.
  const std::shared_ptr<const CompiledGrammar>& start_grammar() const { return start_; }
  // Tool k's after-name grammar, compiled on the first call (thread-safe).
  Result<std::shared_ptr<const CompiledGrammar>> after_name(size_t k) const;
  // The tool whose name, with its delimiters, ends `text`.
  std::optional<size_t> name_ending(std::string_view text) const;
  // The name begun before the next token: the text after the last opening
  // delimiter, when it could still be a name's beginning (or a whole name).
  std::optional<std::string_view> name_begun(std::string_view text) const;

  // Tokens that could finish a name begun before them: per tool whose name
  // begins with `begun`, its rest and closing delimiter (`key`) and the
  // tokens that begin with that and go on past it.
  struct Finishers {
    size_t tool;
    std::string key;
    const std::vector<uint32_t>* tokens;
  };
  const std::vector<Finishers>& finishers(std::string_view begun) const;
  // Tokens holding a whole name between its delimiters and more after it:
  // the token, the length of its head up to the closing delimiter, the
  // tool.
  struct Inner {
    uint32_t token;
    uint32_t cut;
    size_t tool;
  };
  const std::vector<Inner>& inner_names() const { return inner_; }

  // Remembered answers to "does tool k's cut take this token's tail from
  // its start" (exact: its start is one state). -1 unknown.
  int tail_verdict(size_t k, uint32_t token) const;
  void remember_tail_verdict(size_t k, uint32_t token, bool viable) const;
  // The same for a whole group of finishers (a tool and its key): the
  // tokens its cut takes, or null before they are known.
  const std::vector<uint32_t>* finished_by(const Finishers& group) const;
  void remember_finished_by(const Finishers& group, std::vector<uint32_t> tokens) const;

 private:
  ToolCallsGrammar() = default;
  void index_tokens();
  // A cut's .cgram text compiled for the vocabulary, within the list's limits.
  Result<std::shared_ptr<const CompiledGrammar>> compile_cut(std::string_view text, std::string_view name) const;
  // The tool of that name, looked up without a copy.
  std::optional<size_t> tool_named(std::string_view name) const;
  // The names in order, with their tools: the first at or after `prefix`.
  std::vector<std::pair<std::string, size_t>>::const_iterator first_name_from(std::string_view prefix) const;

  // Looks std::string keys up by string_view, without a copy.
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };

  std::shared_ptr<const Vocabulary> vocab_;
  ToolSegments segments_;
  ToolCallsOptions options_;
  std::string filename_;
  std::shared_ptr<const CompiledGrammar> start_;
  std::vector<std::pair<std::string, size_t>> sorted_names_;  // each name and its tool, in order
  size_t longest_name_ = 0;
  // Tokens by their text up to and including the first closing delimiter,
  // for those that go on past it.
  std::unordered_map<std::string, std::vector<uint32_t>> by_head_;
  std::vector<Inner> inner_;

  mutable std::mutex mutex_;          // the maps below
  mutable std::mutex compile_mutex_;  // a tool's grammar being compiled
  mutable std::unordered_map<std::string, std::shared_ptr<const CompiledGrammar>> after_name_by_key_;
  mutable std::unordered_map<std::string, std::vector<Finishers>, TextHash, std::equal_to<>> finishers_;
  mutable std::unordered_map<uint64_t, bool> tail_verdicts_;
  // By the group's address: finishers_'s lists never change once made.
  mutable std::unordered_map<const Finishers*, std::vector<uint32_t>> finished_by_;
};

class ToolCallsMatcher {
 public:
  static constexpr int kMaxCutsPerToken = 4;

  explicit ToolCallsMatcher(std::shared_ptr<const ToolCallsGrammar> grammar);
  ToolCallsMatcher(const ToolCallsMatcher& other);
  ToolCallsMatcher& operator=(const ToolCallsMatcher&) = delete;

  // As Matcher's (matcher/matcher.h): Rejected leaves the state unchanged.
  AdvanceResult advance(uint32_t token);
  bool fill_mask(std::span<uint32_t> words);
  // The mask, then every word past mask_words() cleared (a server's row).
  bool fill_row(std::span<uint32_t> row);
  bool is_allowed(uint32_t token);
  // How many of `tokens`, in order, advance() would accept; nothing changes.
  size_t validate_tokens(std::span<const uint32_t> tokens);
  // Bytes that must come next, as far as the current cut sees them (it
  // stops at a name's end, where the next cut begins).
  std::string forced_text(size_t limit = Matcher::kDefaultForcedTextLimit);
  bool can_end();
  bool rollback(size_t n);
  // Every accepted token can be undone (the cuts keep their whole history).
  size_t rollback_depth() const { return tokens_accepted(); }
  void reset();
  // Jump-forward is not offered across cuts: nothing gained, always.
  Result<Matcher::JumpForward> jump_forward(size_t = Matcher::kDefaultForcedTextLimit) {
    return Matcher::JumpForward{};
  }
  // As Matcher's: advance, then -inf for the tokens the new state refuses.
  AdvanceResult modify_possible_logits(uint32_t token, std::span<float> logits);
  bool update_logits_from_tokens(std::span<float> logits);
  bool is_finished() const { return finished_; }
  size_t tokens_accepted() const { return steps_.size(); }
  size_t mask_words() const { return grammar_->mask_words(); }
  // A tool's grammar that failed to compile, or a limit met.
  bool has_error() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  const ToolCallsGrammar& grammar() const { return *grammar_; }
  // Which tool's arguments the text is in or after (none before a call).
  std::optional<size_t> current_tool() const;

 private:
  struct Cut {
    Matcher matcher;
    size_t tool;        // SIZE_MAX: the reply's start
    size_t text_begin;  // where its text begins in text_
  };
  struct Step {
    size_t cuts_before;  // cuts_.size() before the token
    size_t text_before;
  };
  Matcher& top() { return cuts_.back()->matcher; }
  std::string_view cut_text() const { return std::string_view(text_).substr(cuts_.back()->text_begin); }
  bool push_cut(size_t tool);
  // The top cut takes `bytes`, crossing into the next cuts where it must;
  // false, with nothing changed, when it cannot.
  bool take_text(std::string_view bytes, int cuts_left);
  bool take_crossing(std::string_view bytes, int cuts_left);
  // After text ending a name: the cut for that name, when the top one ends
  // there.
  bool enter_named_cut();
  // The tool whose name `head` ends for `m` (whose own text is `before`),
  // where m's grammar ends there; m is as it was afterwards.
  std::optional<size_t> ends_with_name(Matcher& m, std::string_view before, std::string_view head);
  bool only_end_left(Matcher& m);
  // Whether tool k's cut, from its start, takes `bytes`.
  bool tail_viable(size_t k, std::string_view bytes, int cuts_left);
  bool viable(Matcher& m, std::string_view before, std::string_view bytes, int cuts_left);
  void add_crossings(std::span<uint32_t> words);

  std::shared_ptr<const ToolCallsGrammar> grammar_;
  std::vector<std::unique_ptr<Cut>> cuts_;
  std::vector<Step> steps_;
  std::string text_;
  std::string error_;
  bool finished_ = false;
  std::unordered_map<size_t, std::unique_ptr<Matcher>> starts_;  // tool → its cut at its start, for probes
  std::vector<uint32_t> scratch_;       // only_end_left's mask
  std::vector<uint32_t> logits_words_;  // update_logits_from_tokens's mask
  std::string probe_text_;              // ends_with_name's text
};

}  // namespace cgram

#pragma once
// The matcher's machinery: parser-directed lexing over a graph-structured
// stack (GLR on the LALR(1) table), byte by byte.
//
// A head is one way the consumed text can be read: a GSS node (the parse
// stacks), the terminal being lexed and its DFA state (or none: between
// lexemes, where `state` is the UTF-8 state of the character in progress,
// non-zero only after an any! token that ended inside a character), the
// except! occurrences still pending, and how many tokens the current lexeme
// touches (for except!(S, n)). A lexeme ends lazily, when the
// next byte shows that a new lexeme starts; reductions use the ended terminal
// as lookahead. Every head set is exact: a token is allowed iff some head
// survives its bytes.
//
// Parts held apart, each a class with its own unit tests: the stack
// graph (stack_graph.h), the except!
// occurrences pending (pending_excepts.h), the lexeme ends per node
// (end_cache.h) and by the stack states they read (end_memo.h), the memo
// by stack states (stack_memo.h), the shiftable sets with what each
// read (shiftable_sets.h), the nodes below a fork (nodes_below.h), the
// per-node marks of the stack walks (node_marks.h), the masks of free text
// (except_masks.h), the lookups of the current tier (tier_lookups.h), and
// the work budgets (work_budget.h).
#include <array>
#include <bitset>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiled_grammar.h"
#include "end_cache.h"
#include "end_memo.h"
#include "except_masks.h"
#include "key_set.h"
#include "mask_words.h"
#include "node_marks.h"
#include "nodes_below.h"
#include "pending_excepts.h"
#include "scratch.h"
#include "shiftable_sets.h"
#include "stack_graph.h"
#include "stack_memo.h"
#include "tier_lookups.h"
#include "token_set_sink.h"
#include "work_budget.h"

namespace cgram {

struct Head {
  static constexpr uint32_t kBetween = UINT32_MAX;  // no lexeme in progress
  uint32_t node = 0;
  uint32_t terminal = kBetween;
  uint32_t state = 0;
  uint32_t pending = 0;
  uint32_t lexeme_tokens = 0;
  // Between lexemes, right after a lexeme of an except! terminal without a
  // token count: that terminal, which may not start again here (kBetween:
  // none). Two such lexemes side by side read exactly the texts one reads,
  // and the first can always take the second's text while the second
  // matches nothing (every except! is optional), so those readings add no
  // sentence; without them, free text that may follow free text is not
  // cut up in every possible way (Engine::no_restart_after).
  uint32_t no_restart = kBetween;
  bool operator==(const Head&) const = default;
  auto operator<=>(const Head&) const = default;
};

// Bounds on the parser's work and memory (docs/LIMITS.md). A pathologically
// ambiguous grammar (`s ::= s s | 'a' | ''`) makes the graph-structured
// stack grow with the text; past these limits the engine stops and says so
// (the matcher then holds a sticky error), instead of growing without end.
struct EngineLimits {
  // Work in one call (one token accepted, one mask filled): stack nodes and
  // edges created, reduction paths walked, and readings carried over a byte
  // (the suite's grammars take at most 71,217 on the bundled vocabulary).
  size_t max_work_per_call = size_t{1} << 24;
  // Stack nodes and edges held at once (about 24 bytes each): every token's
  // stack is kept for rollback.
  size_t max_stack_elements = size_t{1} << 24;
  // Readings (heads) of the text after one token.
  size_t max_heads = size_t{1} << 16;
  // Distinct sets of pending except! occurrences met (each is kept).
  size_t max_pending_sets = size_t{1} << 16;
  // Work over a whole sequence, amortised: a matcher may spend
  // sequence_work_slack, and max_work_per_byte more for every byte of text
  // it accepts. On an ambiguous grammar whose work grows with the text
  // (`s ::= s s | 'a' | ''`), each call stays under max_work_per_call but
  // the calls together would not: this ends the sequence, with its error, in
  // a bounded time. 0 turns the bound off (the engine's own callers that
  // budget per byte themselves, as cgram match does).
  size_t max_work_per_byte = size_t{1} << 15;
  size_t sequence_work_slack = size_t{1} << 24;
  // Masks that take less work than this (on average, in this engine) are
  // made, not looked up in the grammar's memo of masks, and not kept there:
  // for them the lookup and the copy cost more than the work
  // (engine/remembered_masks.cpp). 0: every mask that can be is looked up and kept.
  size_t mask_memo_min_work = 16;
  // The same for the parts of a mask kept apart, each by a running average
  // of its own work: the tokens that cross lexeme ends after a stack node
  // (mask_between; averaged per LR state of the node: after a JSON value
  // about 50 units, cheaper made than looked up and recorded, after a C
  // operand 700), and the walks below the index's classified crossings
  // (runs of one operator: in markup and tool calls under 20 units, in C 400).
  size_t cross_memo_min_work = 128;
  size_t walk_memo_min_work = 64;
};

class Engine {
 public:
  explicit Engine(const CompiledGrammar& grammar, const EngineLimits& limits = {});
  Engine(const Engine&) = default;
  Engine& operator=(const Engine&) = delete;
  // Leaves its work averages to the grammar's memo, for the next matcher.
  ~Engine();

  // The work budgets (work_budget.h): whether a limit stopped the last call
  // (its results are then incomplete and must not be used), the peak work
  // of a call, and the sequence's allowance (start_sequence, grant_bytes).
  WorkBudget& budget() { return budget_; }
  const WorkBudget& budget() const { return budget_; }
  bool exhausted() const { return budget_.exhausted(); }
  // Walks below a trie node (runs of one operator, past the index's
  // classified crossings) answered from the grammar's memo, of those asked.
  uint64_t walks_remembered() const { return walks_remembered_; }
  uint64_t walks_looked_up() const { return walks_looked_up_; }
  // The same for the tokens that cross lexeme ends after a stack node
  // (mask_between: the operators after an operand).
  uint64_t crossings_remembered() const { return crossings_remembered_; }
  uint64_t crossings_looked_up() const { return crossings_looked_up_; }
  std::vector<Head> initial_heads();
  // The heads after the bytes of one token (empty: the token is not allowed).
  // Heads that cannot be completed (a character that no continuation can
  // finish) are dropped.
  void step_token(const std::vector<Head>& in, std::string_view bytes, std::vector<Head>& out);
  bool can_end(const std::vector<Head>& heads);
  // Sets the bit of every text token some head survives (not end of sequence).
  // With a sink, the precomputed sets it takes are left out of `words`.
  // `words_are_zero`: the caller cleared `words` (the mask is then written
  // in place, with no scratch copy).
  void fill_text_tokens(const std::vector<Head>& heads, std::span<uint32_t> words, TokenSetSink* sink = nullptr,
                        bool words_are_zero = false);

  // The bytes every continuation of the text read by `heads` must start
  // with, at most `limit` of them: the longest common prefix of the rests
  // of the sentences. The bytes are read as one token (the fewest tokens, so
  // except!(S, n) limits are the loosest: no byte is claimed that another
  // tokenization could avoid). It stops where the text could end, where any!
  // could start, and where two bytes are possible. `ends`: after the bytes
  // the text is complete and nothing may follow.
  struct Forced {
    std::string text;
    bool ends = false;
  };
  Forced forced_text(const std::vector<Head>& heads, size_t limit);

  // A hash of where the text stands for the lexer and the parser: per
  // reading, the LR states of the stack's top `depth` levels, the lexeme's
  // terminal and DFA state, and the pending except! occurrences. Equal for
  // equal states of any two matchers of one grammar (speculative drafts
  // learn next tokens by it: matcher/drafts.h).
  uint64_t context_key(const std::vector<Head>& heads, int depth = 2) const;

  // Where the engine stands: its stack, and the sequence's work allowance
  // (so that undoing a token takes back the budget its bytes granted).
  struct Mark {
    size_t nodes, edges, status;
    size_t allowance = SIZE_MAX;
  };
  Mark mark() const { return {graph_.node_count(), graph_.edge_count(), graph_.status_count(), budget_.allowance()}; }
  void truncate(Mark m);
  // Frees the stack nodes and edges no head of `heads` reaches (the
  // matcher's steps that can still be rolled back to), keeping the order of
  // the rest: each mark of `marks` is moved to the same place among them,
  // and the heads' nodes are renumbered. Bounds memory over long texts.
  void compact(std::span<Head> heads, std::span<Mark* const> marks);
  size_t stack_elements() const { return graph_.elements(); }
  // Entries of the memo of shiftable sets by stack states (stack_memo.h).
  size_t remembered_stacks() const { return shiftable_memo_.entries(); }
  // Entries of the memo of lexeme ends by stack states.
  size_t remembered_ends() const { return end_memo_.entries(); }

 private:
  // The graph-structured stack (stack_graph.h).
  StackGraph graph_;
  // Lexeme ends per node (end_cache.h).
  EndCache end_cache_;
  void remember_in_cache(EndCache::Entry& entry, uint32_t node, uint32_t terminal, const std::vector<uint32_t>& out);

  // The lookups of the hot walks, from the tables or the grammar's compiled
  // code (tier_, tier_lookups.h), picked up at each public call.
  // Every public call starts here: its own work budget, the current tier.
  void begin_call();
  template <class F>
  decltype(auto) with_lookups(F&& f) const {
    return tier_.with(std::forward<F>(f));
  }
  bool dfa_accepting(uint32_t terminal, uint32_t state) const { return tier_.dfa_accepting(terminal, state); }
  bool can_follow(uint32_t terminal, uint8_t byte) const { return tier_.can_follow(terminal, byte); }

  uint32_t new_node(uint32_t state);
  bool add_edge(uint32_t node, uint32_t parent);  // false when already there
  void push_edge(uint32_t node, uint32_t parent);  // one the node surely lacks
  // add_edge for a node of reduce_closure's scope (its `slot` there) in the
  // closure of that epoch.
  bool add_scope_edge(uint32_t slot, uint32_t node, uint32_t parent, uint32_t closure);
  // Per node: the closure epoch (high half) and the scope slots it is a parent of.
  NodeMarks<uint64_t> scope_parent_of_;
  // Reductions on lookahead `terminal` (or the end marker) from `tops`;
  // `result` gets the tops and every node the reductions created. `accepted`
  // is set when production 0 is reduced (only on the end marker).
  void reduce_closure(std::span<const uint32_t> tops, uint32_t terminal, bool* accepted, std::vector<uint32_t>& result);
  template <class Lookups>
  void reduce_closure_with(const Lookups& look, std::span<const uint32_t> tops, uint32_t terminal, bool* accepted,
                           std::vector<uint32_t>& result);
  // path_ends_ := every node exactly `levels` edges below `start`; the
  // nodes before `base` are final (their sets below may be remembered).
  void walk_down(uint32_t start, size_t levels, uint32_t base);
  // The nodes `levels` below a final node with several parents, remembered
  // (nodes_below.h); gather_below appends those below any final node.
  NodesBelow::Range below(uint32_t node, uint32_t levels);
  void gather_below(uint32_t node, uint32_t levels, std::vector<uint32_t>& out);
  NodesBelow nodes_below_;
  static constexpr size_t kMaxBelowDepth = 256;  // the memo's keys hold depths under it
  std::vector<uint32_t> below_found_;
  // Per node: the last found_epoch_ walk_down's result held it in.
  NodeMarks<> below_seen_;
  // Per node: the last unique_epoch_ a set made by below() held it in.
  NodeMarks<> below_unique_;
  // Reductions, then the shift of `terminal`: the nodes after it.
  void end_lexeme(std::span<const uint32_t> tops, uint32_t terminal, std::vector<uint32_t>& out);
  // The between-lexemes heads after `head`'s lexeme ends, whether or not it
  // can end in its current state (walks use them where it ends further on).
  void heads_after_lexeme(const Head& head, std::vector<Head>& out);
  const std::vector<uint32_t>& shiftable(uint32_t node);
  // shiftable() not remembered: as the union over the parents of the first
  // node below with several (fork_depth levels down; -1: none near enough,
  // or too many), or worked out.
  int32_t fork_depth(uint32_t node) const;
  uint32_t shiftable_by_parents(uint32_t node, uint32_t fork);
  uint32_t work_out_shiftable(uint32_t node);
  // The sets worked out, and what each read (shiftable_sets.h); a set's
  // reads are noted when an answer is used (note_shift_reads: one
  // terminal; note_set_reads: all), not when it is made or found in the
  // memo. Without depths (ShiftableSets::kUnknownDepths) the set's reads
  // were noted as it was made (a stack that is not linear, where levels do
  // not say which nodes were read), and the older rule holds: an answer
  // kept on an older node is worked out again once per recording.
  ShiftableSets shiftable_sets_;
  const std::vector<uint32_t>& set_of_reading(int32_t reading) const { return shiftable_sets_.set_of(reading); }
  bool depths_known(uint32_t node) const {
    return shiftable_index_[node] >= 0 && shiftable_sets_.reading(shiftable_index_[node]).depths >= 0;
  }
  // Whether the node's set may be used now: its reads can be noted, or were.
  bool set_usable(uint32_t node) const {
    return shiftable_index_[node] >= 0 && (depths_known(node) || kept_answer_usable(node));
  }
  void note_shift_reads(uint32_t node, uint32_t terminal);
  void note_set_reads(uint32_t node);
  // The byte's terminals (those with an action that can start with it).
  void note_byte_reads(uint32_t node, uint8_t byte);
  // The parents of every node less than `depth` levels below `node`.
  void note_levels_read(uint32_t node, uint32_t depth);
  // Levels already noted below a node while the same recordings were
  // active (note_stamp_ changes whenever one begins or ends): noting them
  // again changes nothing. Direct-mapped by the node's serial number.
  struct NotedLevels {
    uint32_t serial = 0, stamp = 0, depth = 0;
  };
  static constexpr size_t kNotedLevelsSize = 1024;
  std::array<NotedLevels, kNotedLevelsSize> noted_levels_{};
  uint32_t note_stamp_ = 1;
  // While a set is made, its reads are held here instead of being noted.
  bool holding_reads_ = false;
  std::vector<uint32_t> held_reads_;
  ScratchPool<uint8_t> depth_pool_;  // per-terminal depths while a set is made (nests: splits)
  static constexpr uint32_t kMaxForkDepth = 16, kMaxForkDegree = 16, kMaxSplitNesting = 3;
  uint32_t split_nesting_ = 0;
  // The chains shiftable_by_parents has copied, per nesting level: the
  // copies are nodes [begin, begin + size), the copy of chain[size - 1] first.
  // Reading a copy's parents is reading its original's (note_read maps
  // them), so the recordings see how deep the answer really read, not the
  // whole chain down to the fork (often ten levels of a C statement, which
  // made every memo key that deep).
  struct CopiedChain {
    uint32_t begin = 0, size = 0;
    const uint32_t* chain = nullptr;  // the original nodes, the asked one first
  };
  std::array<CopiedChain, kMaxSplitNesting> copied_{};
  // work_out_shiftable's closures, one per way of reducing: the (state,
  // reduction list) pairs each met, and the states of the nodes it made.
  struct TracedClosure {
    size_t trace_begin, trace_end, states_begin, states_end;
    uint32_t depth;  // levels read
  };
  std::vector<std::pair<uint32_t, uint32_t>> closure_traces_;
  std::vector<std::pair<uint32_t, uint32_t>>* closure_trace_ = nullptr;  // reduce_closure records there when set
  std::vector<uint32_t> closure_states_;
  std::vector<TracedClosure> traced_;
  // shiftable(node) from the memo: its reading's index, or -1.
  int32_t remembered_shiftable(uint32_t node);
  // Makes the node's shiftable set usable under the recordings now active, if
  // it can be had: worked out again where a recording must see its reads,
  // else taken from the memo (shiftable_index_ stays -1 when it has none).
  void settle_shiftable(uint32_t node);
  // The reductions read the parents of an older node: how deep that is.
  void probe_parents_read(uint32_t node);
  // Whether `terminal` can be shifted from `node` after reductions (cached per node).
  bool is_shiftable(uint32_t node, uint32_t terminal);

  // PendingExcepts' steps, with its kFull as the engine's limit error:
  // nullopt where a byte completes a pending string.
  std::optional<uint32_t> advance_pending(uint32_t pending, uint8_t byte) {
    return checked_pending(pending_excepts_.step(pending, byte));
  }
  std::optional<uint32_t> advance_pending(uint32_t pending, std::string_view bytes) {
    return checked_pending(pending_excepts_.step(pending, bytes));
  }
  uint32_t add_except_pending(uint32_t pending, uint32_t except_index, uint32_t ac_state) {
    return checked_pending(
               pending_excepts_.add(pending, except_index, ac_state, *lex_.excepts[except_index].automaton))
        .value_or(PendingExcepts::kNothing);
  }
  std::optional<uint32_t> checked_pending(uint32_t id);

  void step_token_unchecked(const std::vector<Head>& in, std::string_view bytes, std::vector<Head>& out);
  void step_byte(const std::vector<Head>& in, uint8_t byte, bool first_of_token, std::vector<Head>& out);
  // step_byte in two parts: the lexemes of `in` that can end here, ended
  // (the stack nodes between lexemes: the same whatever byte comes next),
  // then one byte: the lexemes that go on, and those that start after
  // `between`. A walk ends lexemes once for all the bytes after a prefix.
  struct Between {
    uint32_t node, pending, in_char, no_restart;
  };
  void end_lexemes(const std::vector<Head>& in, std::vector<Between>& out);
  void step_byte_after(const std::vector<Head>& in, const std::vector<Between>& between, uint8_t byte,
                       bool first_of_token, std::vector<Head>& out);
  // Lexemes that start with `byte` at `node`; `in_char` is the UTF-8 state
  // there (only except! text can continue a character begun by any!).
  void start_lexemes(uint32_t node, uint32_t pending, uint8_t in_char, uint8_t byte, std::vector<Head>& out,
                     uint32_t no_restart = Head::kBetween);
  // The terminal that may not start right after a lexeme of `terminal` ends
  // (Head::no_restart): itself for except! without a token count, else none.
  uint32_t no_restart_after(uint32_t terminal) const {
    if (terminal == Head::kBetween) return Head::kBetween;
    const ir::LexTerminal& t = lex_.terminals[terminal];
    return t.kind == ir::LexTerminal::Kind::Except && !lex_.excepts[t.except_index].max_tokens ? terminal
                                                                                              : Head::kBetween;
  }
  // Where the character stands for a head in except! text.
  uint8_t except_char_state(const Head& h) const;
  // Whether some continuation completes the text from one of these heads
  // (a token is allowed only then). Every head is (surely_viable), except
  // one inside a character (after an any! token, or in except! text near its
  // token limit) or with except! occurrences pending that its continuation
  // may be forced to complete: those are searched over the next bytes,
  // assuming (as the oracle does) that the vocabulary spells every byte.
  bool viable(const std::vector<Head>& heads);
  bool surely_viable(const Head& h);
  // can_end within a call (its work counted against the call's).
  bool ends_here(const std::vector<Head>& heads);
  // Where the text stands inside a character, from the heads that track it
  // (between lexemes, or in except! text); kUnknownCharState if none does.
  static constexpr uint8_t kUnknownCharState = 0xFE;
  uint8_t text_char_state(const std::vector<Head>& heads) const;
  // viable()'s search over continuations, at most `depth` bytes that end at
  // a character boundary (twice the longest except! string and one more, as
  // the reference recognizer searches).
  bool viable_search(const std::vector<Head>& heads, uint8_t char_state, bool free_token, int depth);
  int viable_search_depth_ = 1;
  // Whether an any! token shifted from `tops` that leaves the character in
  // state `in_char` can still be completed.
  bool viable_after_any(std::span<const uint32_t> tops, uint8_t in_char, uint32_t pending);
  // Whether an any! token shifted from `tops` may be followed by three more
  // any! tokens. Then an any! token that ends inside a character can always
  // be finished (by one-byte tokens, as the oracle assumes the vocabulary
  // has): viable_after_any holds for every state.
  bool any_follows_any(std::span<const uint32_t> tops);
  void keep_viable(std::vector<Head>& heads);
  bool can_continue_into_token(const Head& h) const;
  // Whether an any! token may start from one of these heads (its bytes are
  // then any token's).
  bool any_may_start(const std::vector<Head>& heads);
  // The one byte that can come next from `heads` (stepped into `next`), or
  // nullopt when none or several can; `several` tells which.
  std::optional<uint8_t> only_next_byte(const std::vector<Head>& heads, bool first_of_token, std::vector<Head>& next,
                                        bool& several);
  // The exact allowed text tokens, by walking the trie below `root` from
  // `heads` (which stand at the depth of `root`).
  void walk(uint32_t root, const std::vector<Head>& heads, std::span<uint32_t> words);
  // The same over the trie nodes [first, end), whose parent is at `parent_depth`.
  // `joining`: heads that join the walk at nodes inside the range (sorted
  // by node; their heads in deferred_heads_), read there as well.
  struct DeferredWalk {
    uint32_t node, first, count;  // heads: deferred_heads_[first, first + count)
  };
  void walk_range(uint32_t first, uint32_t end, uint32_t parent_depth, const std::vector<Head>& heads,
                  std::span<uint32_t> words, std::span<const DeferredWalk> joining = {});
  // Tokens that cross out of a lexeme at the crossing nodes: the rest of each
  // token is walked from `after` (the heads once the lexeme has ended), but
  // only below children whose byte can start a lexeme there.
  void walk_crossings(const StateIndex& index, const std::vector<Head>& after, std::span<uint32_t> words);
  // The same from the index's precomputed sets: the tokens that cross into
  // one next lexeme are OR'ed by the terminals the parser can shift, and
  // only those that cross a second lexeme end are walked.
  void cross_precomputed(const StateIndex& index, const std::vector<Head>& after, std::span<uint32_t> words);
  // The same for one level of the index's crossings (CrossInto), and the
  // levels below it: per next terminal the parser can shift, one OR.
  void cross_into(std::span<const CrossInto> into_list, const std::vector<Head>& after, std::span<uint32_t> words);
  // A walk below trie node `node` from `heads`, made by cross_precomputed
  // once every reading has brought its heads.
  void defer_walk(uint32_t node, const std::vector<Head>& heads);
  // Makes the walks deferred since (base, heads_base): once per trie node,
  // with the heads of every reading that brought one there, and a node
  // below another one's joining that walk.
  void walk_deferred(size_t base, size_t heads_base, std::span<uint32_t> words);
  std::vector<DeferredWalk> deferred_walks_;
  bool gathering_walks_ = false;  // compute_text_tokens makes the deferred walks at its end
  std::vector<Head> deferred_heads_;
  ScratchPool<DeferredWalk> walk_scratch_;
  // The mask of a head in except! text with no token limit and nothing
  // pending, from the index: inside tokens as a bitset, and only the
  // crossings walked. False when the head needs the whole walk.
  bool except_from_index(const Head& h, std::span<uint32_t> words);
  // h's mask (n_words): the tokens that stay inside its except! text, and
  // those in which the text ends (before the token, or inside it with a next
  // lexeme begun). Cached per (node, terminal, DFA state): the stack below a
  // node never changes, so the mask is exact for as long as the node lives
  // (checked by its serial).
  const std::vector<uint32_t>& except_mask(const Head& h, const StateIndex& ix, size_t n_words);
  // Adds to `words` the tokens in which h's except! text ends: before the
  // token (the next lexemes' tokens), or inside it with a next lexeme begun.
  void add_except_endings(const Head& h, const StateIndex& ix, std::span<uint32_t> words);
  // The fast road for one head inside a byte lexeme with nothing pending:
  // the subtree [first, end) is walked with the terminal's DFA alone, and
  // the parser is consulted only where the lexeme can end and the next byte
  // can start another one.
  void lexer_walk(uint32_t first, uint32_t end, uint32_t parent_depth, const Head& head, std::span<uint32_t> words);
  template <class Lookups>
  void lexer_walk_with(const Lookups& look, uint32_t first, uint32_t end, uint32_t parent_depth, const Head& head,
                       std::span<uint32_t> words);
  bool lexer_walk_applies(const std::vector<Head>& heads) const;
  // Bytes that can start a lexeme from these heads (all, when pending).
  std::bitset<256> startable_bytes(const std::vector<Head>& heads);
  // Tokens that start a new lexeme at these nodes (the exact walk when
  // except! occurrences are pending).
  void mask_between(const std::vector<uint32_t>& nodes, uint32_t pending, std::span<uint32_t> words,
                    uint32_t no_restart = Head::kBetween);
  // Every head that can be between lexemes now (as is, or once its lexeme
  // ends here), sorted by pending occurrences then node.
  void heads_between_lexemes(const std::vector<Head>& heads, std::vector<Head>& out);
  // The pending occurrences once h's lexeme ends (an except! lexeme adds its own).
  uint32_t pending_after(const Head& h);
  static void normalize(std::vector<Head>& heads);
  // Heads equal but for their nodes, whose nodes have one LR state, made
  // one head on a node with all their parents (from kMergeHeadsMin heads on).
  void merge_equal_heads(std::vector<Head>& heads);
  static constexpr size_t kMergeHeadsMin = 4;
  std::vector<uint32_t> merge_order_;

  // Counts work against the limits (budget_ says when one is passed).
  void charge(size_t units) { budget_.charge(units); }
  // words |= set, unless the sink of the current fill takes the set. The
  // set is the grammar's (its index, its any! sets: they live as long as the
  // grammar), and a whole-vocabulary one is noted as a base the mask may be
  // kept against (MaskMemo::insert).
  void or_set(std::span<uint32_t> words, std::span<const uint32_t> set) {
    if (sink_ && sink_->take(set)) return;
    or_words(words, set);
    if (set.size() == words.size()) note_base(set.data());
  }
  static constexpr size_t kMaxBases = 4;
  std::array<const uint32_t*, kMaxBases> bases_{};  // of the current public call
  size_t base_count_ = 0;
  void note_base(const uint32_t* set) {
    const auto noted = bases_.begin() + static_cast<std::ptrdiff_t>(base_count_);
    if (base_count_ < kMaxBases && std::find(bases_.begin(), noted, set) == noted) bases_[base_count_++] = set;
  }
  std::span<const uint32_t* const> bases() const { return {bases_.data(), base_count_}; }
  // A sink takes whole-vocabulary sets only: a few ids reach the mask itself.
  void or_set(std::span<uint32_t> words, const TokenSet& set) {
    if (set.dense()) return or_set(words, set.words());
    set.or_into(words);
  }
  void exhaust(std::string why) { budget_.exhaust(std::move(why)); }

  const CompiledGrammar& g_;
  EngineLimits limits_;
  WorkBudget budget_;
  TierLookups tier_;
  const ir::LexicalGrammar& lex_;
  const ir::LrTable& table_;
  TokenSetSink* sink_ = nullptr;  // during fill_text_tokens only
  std::optional<uint32_t> any_terminal_;
  uint8_t any_states_ = 0;  // bit c: some token leaves UTF-8 state c (the grammar's any! sets)
  std::vector<std::bitset<256>> first_bytes_;  // per terminal
  std::vector<uint8_t> counts_tokens_;          // per terminal: except!(S, n), whose heads count their tokens
  std::bitset<256> except_bytes_;               // bytes of except! strings (searched apart)
  ExceptMasks except_masks_;  // free text's masks, per node and DFA state (except_masks.h)
  std::vector<int32_t> shiftable_index_;  // per node: a reading of shiftable_sets_, -1 unknown
  // Shiftable sets by the stack states they read (stack_memo.h), and the
  // probe that finds how deep that is while a set is worked out.
  StackMemo shiftable_memo_{kShiftableMemoEntries};
  static constexpr size_t kShiftableMemoEntries = size_t{1} << 12;
  // Lexeme ends remembered the same way, under the terminal and the states
  // the reductions read (end_memo.h).
  EndMemo end_memo_;
  std::vector<uint32_t> end_chain_;  // the stack walked by a lookup, top first
  // end_lexeme of one node from the memo (false: not there).
  bool remembered_end(uint32_t node, uint32_t terminal, std::vector<uint32_t>& out);
  // Keeps the end just worked out from the probed node (nodes from `base` on are its own).
  void remember_end(uint32_t terminal, uint32_t base, const std::vector<uint32_t>& out);
  EndMemo::Delta end_delta_scratch_;
  struct DepthProbe {
    bool active = false;
    bool linear = true;  // one parent per node down to `depth`
    uint32_t base = 0;   // nodes before this index are older than the probe
    uint32_t depth = 0;  // the deepest level read: 0 the node, 1 its parent, ...
  } probe_;
  static constexpr uint32_t kNoParent = UINT32_MAX;
  std::vector<uint32_t> probe_chain_;  // the probed node, its parent, ... (kNoParent below the bottom)
  std::vector<uint32_t> probe_states_;
  PendingExcepts pending_excepts_{limits_.max_pending_sets};  // Head::pending's sets (after limits_)
  // Scratch buffers of the hot path (no allocation once warm).
  struct Ending {
    uint32_t terminal, pending, in_char, no_restart, node;
    auto operator<=>(const Ending&) const = default;
  };
  std::vector<Ending> ending_;
  std::vector<uint32_t> group_, reduced_, shifted_nodes_, closure_scratch_;
  std::vector<std::pair<uint32_t, uint32_t>> scope_, shift_scope_;
  // reduce_closure's work list (the rules are explained above it in engine.cpp).
  static constexpr uint32_t kAllPaths = StackGraph::kNoEdge;         // length > 0 paths through every edge
  static constexpr uint32_t kNoLongPaths = StackGraph::kNoEdge - 1;  // none: the node hangs on ε-edges only
  struct ReductionWork {
    uint32_t node;
    uint32_t via;  // the edge every length > 0 path starts with, or one of the two above
    bool empty_reductions;
  };
  std::vector<ReductionWork> work_;
  std::vector<uint32_t> path_ends_, path_next_;
  // Per node: the last visit_epoch_ a path walk reached it in (each level
  // of a walk is a set: a node reached twice is walked on once).
  NodeMarks<> visited_;
  std::deque<std::vector<Head>> crossing_heads_;  // one per nesting level of walk_crossings
  ScratchPool<Head> head_scratch_;
  ScratchPool<uint32_t> node_scratch_;
  std::vector<uint32_t> shiftable_scratch_;
  mutable std::vector<uint64_t> key_scratch_;  // context_key's readings
  // Scratch for the trie walk, one level per depth.
  std::vector<std::vector<Head>> levels_;
  std::vector<Mark> level_marks_;
  // Per level: its lexemes ended (end_lexemes), for which trie node, and
  // the mark after them; the trie node each level was stepped to.
  std::vector<std::vector<Between>> level_ends_;
  std::vector<uint32_t> level_ends_of_, trie_parent_;
  std::vector<Mark> ends_marks_;
  ScratchPool<Between> between_scratch_;
  int walk_depth_ = 0;  // nesting of walks: each nesting level has its own scratch
  int crossing_depth_ = 0;
  std::deque<std::vector<uint32_t>> lexer_states_;  // stable rows: walks nest
  std::deque<std::array<std::vector<Head>, 256>> lexer_next_;

  // The grammar's memo of masks (compiled/mask_memo.h). A mask it does not
  // hold is worked out while its reads of the older stack nodes are
  // recorded: how far below the heads they go (remembered_masks.cpp). The
  // same holds for the walk of one trie subtree within a mask
  // (walk_deferred): a run of one operator ("----------") is walked byte by
  // byte, mask after mask, from readings whose stacks differ only below
  // what the walk reads. Answers kept per node from earlier calls
  // (shiftable sets, shiftability, lexeme ends) hide their reads, so while
  // recording an older node's answer is worked out again once (`verified`),
  // and its reads are seen.
  struct MemoMark {
    uint32_t epoch = 0;     // the lookup whose stack walk reached the node
    uint32_t index = 0;     // its place in that walk (Recording::nodes)
    uint32_t level = 0;     // its level there: the fewest edges from a head
    uint32_t verified = 0;  // the recording its shiftable set was worked out in
  };
  // One answer looked up in the memo and, on a miss, recorded: its key (the
  // lexical part, then the stack walk level by level) and its reads.
  struct Recording {
    bool active = false;
    bool valid = false;  // every read was of a node the key can describe
    uint32_t base = 0;   // nodes below this index are older than the answer
    uint32_t depth = 0;  // levels read: the key describes levels 0..depth
    uint32_t epoch = 0;  // of this lookup and recording
    bool used_parts = false;  // answers of its parts came from the memo (their work is not counted)
    std::vector<MemoMark> marks;       // per older node
    std::vector<uint32_t> nodes;       // the walk: the heads' nodes, then level by level
    std::vector<uint32_t> level_ends;  // per level: where it ends in `nodes`
    std::vector<uint32_t> path;        // the key, as far as the walk has gone
    std::vector<uint32_t> path_ends;   // per level: the key's length once it is described
  };
  static constexpr uint32_t kMemoMaxDepth = 48;    // levels of stack a kept mask may read
  static constexpr uint32_t kMemoMaxNodes = 1024;  // stack nodes its key may describe
  static constexpr uint32_t kMemoMaxHeads = 16;
  // A subtree's walk is looked up from this many trie nodes (smaller ones
  // cost less than the lookup), with at most kWalkMemoMaxHeads readings.
  static constexpr uint32_t kWalkMemoMinNodes = 8;
  static constexpr uint32_t kWalkMemoMaxHeads = 64;
  // In a key, a level that is one node standing on one new parent: the
  // parent's state with this bit (states are far fewer than 2^31; the
  // other levels start with a count of parents, far fewer too).
  static constexpr uint32_t kMemoLinearLevel = 0x80000000u;
  // The first symbol of a walk's key (a mask's is its number of heads).
  static constexpr uint32_t kWalkKey = 0xFFFFFFFEu;
  static constexpr uint32_t kCrossKey = 0xFFFFFFFDu;  // a cross_from's
  int64_t mask_work_average_ = 0;  // of the masks made, a running average
  // Of the crossings made after a node (cross_from), per LR state of the
  // node: after a YAML key they are a few units, after a scalar hundreds,
  // and one average over both would keep the cheap ones too.
  std::vector<int64_t> cross_work_by_state_;  // sized by the constructor
  int64_t walk_work_average_ = 0;   // of the deferred walks made
  // Per terminal, whether its lexeme can end inside a token that starts it
  // (its start state's index entry crosses): -1 not asked yet (the index
  // builds its entries on first use). Sized by the constructor.
  std::vector<int8_t> start_crosses_;
  bool start_crosses(uint32_t terminal);
  void note_mask_work(size_t work);
  static void note_work(int64_t& average, size_t work);
  bool memo_applies(const std::vector<Head>& heads) const;
  // fill_text_tokens through the memo: true when it answered.
  bool remembered_mask(const std::vector<Head>& heads, std::span<uint32_t> words);
  void record_mask(const std::vector<Head>& heads, std::span<uint32_t> words, bool words_are_zero);
  // A deferred walk (`top`, and the walks joining it below) through the
  // memo.
  bool walk_memo_applies(const DeferredWalk& top, std::span<const DeferredWalk> joining) const;
  void walk_through_memo(const DeferredWalk& top, std::span<const DeferredWalk> joining, std::span<uint32_t> words);
  // The tokens that start a lexeme of one of `terminals` on node `v` and
  // cross its end (mask_between), through the memo: after an operand, the
  // same operators may follow whichever name or number it was.
  bool cross_memo_applies(uint32_t v) const;
  void note_cross_work(uint32_t v, size_t work);
  // The tokens that cross: per terminal its crossings from the index
  // (cross_precomputed); `walks_here`: the walks below them are made at its
  // end, not gathered by the mask.
  void cross_from(uint32_t v, std::span<const uint32_t> terminals, std::span<uint32_t> words, bool walks_here);
  void cross_from_through_memo(uint32_t v, std::span<const uint32_t> terminals, std::span<uint32_t> words);
  // Looks the key in `r` up; on a hit, the recordings around it read what
  // the answer read.
  bool remembered(Recording& r, std::span<uint32_t> words);
  void begin_recording(Recording& r);
  // Ends `r` and keeps `answer` (already ORed where it belongs) if it may be.
  void end_recording(Recording& r, std::span<const uint32_t> answer);
  // A part whose key `r` holds: from the memo, or made by `make` into a
  // cleared answer that is then kept; the work it took goes to `note`.
  template <class Make, class Note>
  void part_through_memo(Recording& r, uint64_t& looked_up, uint64_t& found, std::span<uint32_t> words, Make make,
                         Note note);
  // A key: started (a new epoch), its heads' lexical parts with their
  // nodes' places on level 0, level 0 closed with those nodes' states.
  void start_key(Recording& r);
  void key_heads(Recording& r, std::span<const Head> heads);
  void close_first_level(Recording& r);
  // Follows the key down the memo, extending the walk as it goes; the
  // level where it met a kept answer, or -1.
  int32_t look_up(Recording& r, std::span<uint32_t> words);
  // The stack walk the key describes, one level further (false: at a bound).
  bool extend_key_walk(Recording& r);
  void compute_text_tokens(const std::vector<Head>& heads, std::span<uint32_t> words);
  // Recordings nest: a mask's, a crossing's within it, a walk's within that.
  std::array<Recording*, 3> recordings() { return {&mask_rec_, &cross_rec_, &walk_rec_}; }
  std::array<const Recording*, 3> recordings() const { return {&mask_rec_, &cross_rec_, &walk_rec_}; }
  void note_read(uint32_t node) {
    if (recording_count_ == 0) return;
    for (uint32_t k = split_nesting_; k-- > 0;)
      if (const CopiedChain& c = copied_[k]; node >= c.begin && node - c.begin < c.size)
        node = c.chain[c.size - 1 - (node - c.begin)];
    if (holding_reads_) {
      held_reads_.push_back(node);
      return;
    }
    for (Recording* r : recordings())
      if (r->active && node < r->base) note_older_read(*r, node);
  }
  void note_older_read(Recording& r, uint32_t node);
  // Whether an answer kept on `node` by an earlier call may be used now.
  static bool usable_in(const Recording& r, uint32_t node) {
    return !r.active || node >= r.base || r.marks[node].verified == r.epoch;
  }
  bool kept_answer_usable(uint32_t node) const {
    return recording_count_ == 0 ||
           (usable_in(mask_rec_, node) && usable_in(cross_rec_, node) && usable_in(walk_rec_, node));
  }
  void mark_verified(uint32_t node) {
    if (recording_count_ == 0) return;
    for (Recording* r : recordings())
      if (r->active && node < r->base) r->marks[node].verified = r->epoch;
  }
  // Whether an answer kept on `node`, whose first result is `made`, was
  // made while every recording now active was (its reads were seen).
  bool made_while_recording(uint32_t node, uint32_t made) const {
    if (recording_count_ == 0) return true;
    for (const Recording* r : recordings())
      if (r->active && node < r->base && made < r->base) return false;
    return true;
  }
  // An answer kept on `node` whose reads cannot be seen again: a recording
  // older than the node cannot be kept.
  void note_unseen_reads(uint32_t node) {
    for (Recording* r : recordings())
      if (r->active && node < r->base) r->valid = false;
  }
  Recording mask_rec_, cross_rec_, walk_rec_;
  int recording_count_ = 0;  // of those active: none, on most masks of data grammars
  uint64_t walks_remembered_ = 0, walks_looked_up_ = 0;
  uint64_t crossings_remembered_ = 0, crossings_looked_up_ = 0;
  std::vector<uint32_t> memo_words_;
};

}  // namespace cgram

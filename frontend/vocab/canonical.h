#pragma once
// Canonical (proper) tokenization: a token may follow another only where the
// tokenizer itself would write the two that way.
//
// A BPE model was trained on its tokenizer's own encodings. An exact mask
// also allows other spellings of the same text ('"' then 'a' where the
// tokenizer writes '"a'), which skew the model and waste steps. In
// canonical mode (CompileOptions::canonical) a token t may follow the last
// accepted token p only when
//   - the tokenizer encodes t's bytes as t alone, and
//   - it encodes p's bytes followed by t's as exactly p, t;
// for BPE, a sequence whose adjacent pairs are all canonical is the
// canonical encoding of its text (docs/SERVING.md, "Canonical tokenization",
// says what is guaranteed and how it is tested).
//
// How a pair is decided. The vocabulary's own encoder is the reference.
// Asking it for every pair would cost a full encoding per token of the
// vocabulary for each new previous token. What depends on the vocabulary
// alone is made once (here, or loaded: save/load, `cgram vocab build`), and
// a previous token's row is made from it with word-wide operations:
//  - Pieces. The pre-tokenizer runs as an automaton (PieceAutomaton). Its
//    state after the previous token, and whether a match ended inside it,
//    is the token's class (50 for Llama 3); per class, bitsets say how every
//    next token's piece is cut: between the two, one piece, or the encoder
//    decides (PieceCuts, left_class, cuts_for). Without a pre-tokenizer
//    (SentencePiece) every pair is one piece.
//  - Merges. Within one piece, a pair is written as itself unless a merge
//    crosses between them. Such a merge must join a symbol on the previous
//    token's right edge, as its merges build it, with one on the next
//    token's left edge, and come before the merges that join each of those
//    symbols to the rest of its token (equal keys: the leftmost first, as
//    the encoder does). An index of the edges gives every next token that
//    such a merge surely crosses to, and the few it may (or that join the
//    previous token into a whole token); only those go to the encoder.
//    Next tokens whose merges are not monotone (but for their first unit),
//    or that end inside a character, are indexed without times.
//  - Rows (fill_row) combine the two with every token's verdict alone; the
//    pairs left to the encoder are decided one by one as the masks meet
//    them (decide(), the path for vocabularies the automaton cannot cut).
// Every fast answer equals the encoder's (tests/unit/matcher/canonical_test.cpp
// checks this pair by pair, class by class, whole rows against one-by-one
// decisions, and triple by triple where pieces settle three tokens). Rows
// are remembered per previous token, for a bounded number of them.
// Thread-safe.
//
// Context on the left: a pre-tokenizer may join the previous token to the
// one before it in one piece (Llama 3 writes ` '%@` as one punctuation
// piece, so `@` then `example` is canonical there, though `@example` alone
// is one token). Where the two share a piece, a pair refused alone is
// checked again together with the token before (fill_context_row, from the
// class of the two tokens' text).
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "encoder.h"
#include "vocabulary.h"

namespace cgram {

class CanonicalPairs {
 public:
  static constexpr uint32_t kStart = UINT32_MAX;  // no token there
  // Rows remembered (least recently used goes): a row made whole costs
  // about 10 µs on Llama 3 and 80 KB; a row remembers the pairs decided
  // one by one too (the encoder's, 1-10 µs each), which repeated previous
  // tokens of a document then find.
  static constexpr size_t kDefaultCachedTokens = 256;

  // Only merge-based vocabularies (byte-level BPE, tiktoken, SentencePiece)
  // have a canonical encoding; a plain token list is refused.
  static Result<std::unique_ptr<CanonicalPairs>> create(std::shared_ptr<const Vocabulary> vocab, const Encoder& encoder,
                                                        size_t cached_tokens = kDefaultCachedTokens);

  // Whether text token `next` may follow `prev`, itself after `before`
  // (kStart where there is no such token).
  bool allows(uint32_t before, uint32_t prev, uint32_t next) const;
  // Whether the text may end after `before`, `prev`.
  bool may_end(uint32_t before, uint32_t prev) const;
  // Clears in `words` (a mask) the text tokens that may not follow; the
  // end-of-sequence and special bits are left alone.
  void filter(uint32_t before, uint32_t prev, std::span<uint32_t> words) const;
  size_t memory_bytes() const;  // all of it, the rows remembered included
  // The rows remembered for recent previous tokens (at most cached_tokens
  // of them, 80 KB each for 128k tokens).
  size_t row_cache_bytes() const;
  // Classes of text on the left whose piece cuts are made (left_class).
  size_t classes() const;

  struct Key {
    explicit Key() = default;
  };
  CanonicalPairs(Key, std::shared_ptr<const Vocabulary> vocab, const Encoder& encoder, size_t cached_tokens,
                 bool build);

  // Everything made once for the vocabulary (the merges index, every
  // token's verdict alone, the piece cuts of every class), as bytes that
  // load() takes back in milliseconds (`cgram vocab build`). The bytes
  // name the vocabulary and its encoder by fingerprint; load() refuses
  // others, and anything damaged, with a message.
  std::string save() const;
  static Result<std::unique_ptr<CanonicalPairs>> load(std::shared_ptr<const Vocabulary> vocab, const Encoder& encoder,
                                                      std::string_view bytes,
                                                      size_t cached_tokens = kDefaultCachedTokens);
  // What save()'s bytes are checked against: the vocabulary's tokens, its
  // kind, pre-tokenizer, merges, scores and added tokens.
  static uint64_t encoder_fingerprint(const Vocabulary& vocab);
  ~CanonicalPairs();

  // For the tests: the pair by the encoder alone, and as the fast path
  // decides it (0 Canonical, 1 before some text, 2 never).
  int reference_pair(uint32_t prev, uint32_t next) const;
  int decided_pair(uint32_t prev, uint32_t next) const;
  // The same for three tokens read from the token before's start: the
  // encoder's answer, and the pieces' (-1 where they do not settle it).
  int reference_triple(uint32_t before, uint32_t prev, uint32_t next) const;
  int decided_triple(uint32_t before, uint32_t prev, uint32_t next) const;
  bool has_fast_path() const { return merges_ != nullptr; }
  // For the tests: whether rows are made whole word by word (the default)
  // or decided token by token, the reference the whole rows equal.
  void make_rows_whole(bool whole);
  // Up to `per_class` previous tokens of each class whose rows are made
  // whole (fill_row: the same automaton state after them), and how many
  // classes there are; for the tests, which check those rows entire.
  std::vector<uint32_t> row_class_samples(size_t per_class, size_t* classes = nullptr) const;

 private:
  // How a pair is written: as the two tokens at the end of a text, or only
  // before some text (a pre-tokenizer that looks ahead: Llama 3 writes two
  // spaces before a digit as ' ', ' ' but at the end as '  '), or never.
  enum class Pair : uint8_t { Canonical, BeforeSomeText, Never };
  struct Row {
    std::vector<uint32_t> checked, allowed, before_text;  // mask words
    // Rows of a previous token alone, on the fast path: the next tokens a
    // merge may cross to, or that join it into one token (the encoder
    // decides those), and those a merge surely crosses to.
    bool fast = false;
    std::vector<uint32_t> candidates;
    std::vector<uint32_t> crossed;  // within one piece, never written so
    // How the previous token's piece ends before each first character
    // (a PieceState, by first-character group).
    std::unordered_map<uint32_t, uint8_t> groups;
    // Made whole (fill_row, fill_context_row): the piece automaton's class
    // of the text on the left (state << 2 | where its last match ended).
    std::optional<uint64_t> cls;
    // The three-token row after `three_before` (three_row).
    std::unique_ptr<Row> three;
    uint32_t three_before = kStart;
  };
  using RowKey = uint64_t;  // (token before, or kStart) << 32 | previous token
  struct Merges;            // the merge derivations (canonical.cpp)
  static std::unique_ptr<const Merges> build_merges(const Vocabulary& vocab, const Encoder& encoder);

  // Whether the encoder writes `tokens`' bytes followed by `after` starting
  // with exactly `tokens`.
  bool written_as(std::span<const uint32_t> tokens, std::string_view after) const;
  // How the encoder writes `tokens` (at the end, only before some text, or
  // never); for a pair, the reference every fast answer equals.
  Pair written_how(std::span<const uint32_t> tokens) const;
  Pair classify(uint32_t prev, uint32_t next) const;
  // The text that may follow `tokens` and change how the encoder writes
  // them (none when only the end of the text could).
  std::span<const std::string_view> probes_after(std::span<const uint32_t> tokens) const;
  // Under the lock from here on.
  bool self_canonical(uint32_t token) const;
  bool written_alone(uint32_t token) const;  // at the end of a text
  Row& row_for(RowKey key) const;
  Row& make_row(RowKey key) const;
  Pair pair(uint32_t prev, uint32_t next) const;
  Pair pair_in(Row& row, uint32_t prev, uint32_t next) const;  // `row` is prev's
  Pair decide(Row& row, uint32_t prev, uint32_t next) const;    // not yet in the row
  Pair decide_one_piece(const Row& row, uint32_t prev, uint32_t next) const;
  Pair decide_at_boundary(uint32_t prev, uint32_t next) const;  // a piece ends at `prev`'s end
  bool splits_a_token(std::span<const uint32_t> tokens, size_t piece_end) const;
  std::optional<Encoder::FirstPiece> first_piece(std::span<const uint32_t> tokens) const;
  std::optional<size_t> settled_first_piece(std::span<const uint32_t> tokens) const;
  std::optional<Pair> triple_by_pieces(uint32_t before, uint32_t prev, uint32_t next) const;
  bool piece_written_as_two(uint32_t before, uint32_t prev, uint32_t next) const;
  // How the piece of `left` (the previous token, or the two before) ends
  // before the group's first character; remembered in `row`.
  uint8_t piece_state(Row& row, std::string_view left, uint32_t group) const;
  // Rows made whole with word-wide operations (pair rows on the fast path,
  // where the piece automaton models the pre-tokenizer): the automaton's
  // state after the previous token, and whether a match ended inside it,
  // decide how every next token's piece is cut (PieceCuts, made once per
  // such state); the previous token adds its merges. Only the pairs that
  // need the encoder stay unchecked, decided one by one as before.
  struct PieceCuts {
    std::vector<uint32_t> boundary;   // a piece ends between the two
    std::vector<uint32_t> one_piece;  // the two make one piece
    std::vector<uint32_t> exact;      // decide() one by one; the rest: never written so
    std::vector<uint32_t> joins;      // its first character may join the piece on the left
    std::vector<uint32_t> inner;      // left text of two tokens: the piece settles at the first one's end
  };
  bool fill_row(Row& row, uint32_t prev) const;  // false: the row is left to decide()
  bool makes_whole_rows() const;
  void make_rows_parts();  // the per-token words, every token alone, the piece cuts
  std::optional<std::string> read_saved(std::string_view bytes);  // load(): nullopt, or what is wrong
  bool fill_context_row(Row& context, const Row& row, uint32_t before, uint32_t prev) const;
  // The automaton's class of the tokens' text, their piece starting with
  // the first: its state, and whether its last match ended inside (or, of
  // two tokens, at the end of the first); nullopt where rows cannot be
  // made whole after it.
  std::optional<uint64_t> left_class(std::span<const uint32_t> tokens) const;
  const PieceCuts& cuts_for(uint64_t cls) const;
  // For a token ending inside a character, bit k of each: the encoder
  // writes it first before kFinishing[k] (alone), and merging writes it
  // first in its bytes and those of kFinishing[k] that finish its
  // character (in_piece, as inside a longer piece). Asked once a token.
  struct Finishing {
    uint8_t alone, in_piece;
  };
  Finishing finishing_ok(uint32_t token) const;
  static constexpr uint32_t kFinishingUnknown = 1u << 16;
  mutable std::vector<uint32_t> finishing_;
  std::vector<uint64_t> left_classes() const;
  void know_every_token_alone() const;
  void find_candidates(Row& row, uint32_t prev) const;
  // Whether the token before `prev` may change how `prev` and what follows
  // it are cut into pieces (it shares a piece with `prev`).
  bool context_matters(uint32_t before, uint32_t prev) const;
  // The rows that decide what may follow `prev` (text) after `before`: its
  // own, the context row where `before` shares its piece, and whether the
  // three must be checked together (`before`, `prev` written so only
  // before some text).
  struct Rows {
    Row* row = nullptr;
    Row* context = nullptr;
    bool needs_three = false;
  };
  Rows rows_for(uint32_t before, uint32_t prev) const;
  const Row* three_row(const Rows& rows, uint32_t before, uint32_t prev) const;  // null: one by one
  bool allowed_after(const Rows& rows, uint32_t before, uint32_t prev, uint32_t next) const;
  Pair in_context(Row& context_row, Row& row, uint32_t before, uint32_t prev, uint32_t next) const;
  bool context_may_differ(Row& context_row, Row& row, uint32_t before, uint32_t prev, uint32_t next) const;
  // With `before`, `prev` written so only before some text: the three
  // together, next being (or coming before) that text.
  bool triple_ok(uint32_t before, uint32_t prev, uint32_t next, Pair next_pair) const;
  bool is_text(uint32_t token) const { return token < vocab_->size() && !vocab_->is_special(token); }

  std::shared_ptr<const Vocabulary> vocab_;
  const Encoder& encoder_;
  size_t cached_tokens_;
  size_t words_;
  bool looks_ahead_;  // the vocabulary has a pre-tokenizer
  std::vector<uint32_t> text_words_;      // the text tokens' bits
  std::vector<uint32_t> one_byte_words_;  // the text tokens of one byte
  std::vector<uint32_t> stray_start_words_;  // those whose first byte is a continuation byte
  std::unique_ptr<const Merges> merges_;  // null: every pair goes to the encoder
  mutable std::mutex mutex_;
  mutable std::unique_ptr<Encoder::PieceFinder> finder_;
  mutable std::string scratch_, context_text_, cut_text_;
  mutable std::vector<uint32_t> undecided_words_;  // filter()'s words with tokens to decide one by one
  // Whether the encoder writes a piece made of two tokens as those two
  // (triple_by_pieces), per pair; emptied past kPiecePairsKept.
  static constexpr size_t kPiecePairsKept = 1 << 16;
  mutable std::unordered_map<RowKey, bool> piece_pairs_;
  mutable std::vector<uint32_t> self_checked_, self_ok_, alone_checked_, alone_ok_;
  mutable bool every_token_alone_known_ = false;
  bool whole_rows_ = true;
  // Per token (mask words), for fill_row: merging its units gives it; it
  // ends in white space; the fast path does not apply to it; a text with it
  // may hold an added token (may_meet_added).
  std::vector<uint32_t> merges_give_words_, white_end_words_, unsafe_words_, added_byte_words_;
  bool may_meet_added(std::string_view bytes) const;
  std::vector<uint32_t> cut_end_words_;  // whole characters, then the first bytes of one
  // Lone lead bytes, and those the bytes that finish their character leave
  // first (a probe of kFinishing).
  std::vector<uint32_t> lone_lead_words_, lead_probe_ok_;
  mutable std::unordered_map<uint64_t, PieceCuts> cuts_;  // by left_class
  PieceCuts whole_text_cuts_;  // no pre-tokenizer: every pair in one piece
  mutable std::list<RowKey> recent_;  // most recent first
  mutable std::unordered_map<RowKey, std::pair<Row, std::list<RowKey>::iterator>> rows_;
};

}  // namespace cgram

#pragma once
// The reference recognizer: the ground truth for every mask test.
//
// Deliberately simple and independent of the fast path: the grammar IR's
// rules are kept, but every literal and regex terminal is expanded into
// plain context-free rules over byte ranges (regex syntax tree → rules; code
// point classes → UTF-8 byte sequences), and an Earley parser runs over the
// bytes. No DFA, no minimisation, no lexer, no LR table is involved.
//
// any! and except! are handled exactly:
//  - any! spans exactly one token of the given segmentation (without one,
//    any non-empty text);
//  - except!(S) spans a text w in which no occurrence of a string of S
//    starts, including one completed by the bytes after w. Each Earley item
//    carries the set of occurrences still pending (strings of S begun inside
//    an earlier except! span and not yet refuted), threaded through the
//    derivation in text order; an item whose pending occurrence completes
//    dies. With a count n, at most n tokens may hold bytes of w.
//
// The text is over UTF-8: a text that is not a prefix of valid UTF-8 is
// dead, and a complete sentence never ends inside a character (checked by
// decoding, independently of the matcher's UTF-8 automaton).
//
// Viability of a prefix whose live items all carry pending occurrences, or
// that ends inside a character, is decided by a bounded search over
// continuation bytes (depth twice the longest string of S, plus a
// character), which assumes the vocabulary can spell every byte — true of
// byte-level BPE, tiktoken and byte-fallback vocabularies.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "grammar_ir.h"

namespace cgram::oracle {

struct Symbol {
  enum class Kind : uint8_t { Nonterminal, Bytes, AnyToken, Except };
  Kind kind;
  uint8_t lo = 0, hi = 0;  // Bytes
  uint32_t index = 0;      // Nonterminal or except spec
};

struct Production {
  uint32_t lhs;
  std::vector<Symbol> rhs;
};

struct ExceptRule {
  std::vector<std::string> strings;
  std::optional<uint64_t> max_tokens;
};

class OracleGrammar {
 public:
  static OracleGrammar from_ir(const ir::GrammarIR& ir);

  std::vector<Production> productions;
  std::vector<std::vector<uint32_t>> productions_of;  // by nonterminal
  std::vector<bool> nullable;
  std::vector<ExceptRule> excepts;
  uint32_t accept_production = 0;  // S' -> start
  size_t longest_except_string = 0;
  // One byte per class of bytes that no rule of the grammar tells apart.
  std::vector<uint8_t> representative_bytes;
};

enum class Verdict { Complete, Prefix, Rejected };
const char* verdict_name(Verdict v);

class Recognizer {
 public:
  // segmented: the text is pushed token by token (push_token); any! and
  // except! counts follow that segmentation. Otherwise any! spans any
  // non-empty text and except! counts are not checked.
  Recognizer(std::shared_ptr<const OracleGrammar> grammar, bool segmented);

  void push_token(std::string_view bytes);
  void push_bytes(std::string_view bytes);  // unsegmented mode
  // Removes the last n bytes (and any token boundary among them).
  void pop_bytes(size_t n);
  size_t size() const { return text_.size(); }
  std::string_view text() const { return text_; }

  bool complete() const;
  // Some continuation makes the text a complete sentence.
  bool viable() const;
  bool dead() const {
    return (columns_.back().items.empty() && !columns_.back().span_goes_on) || utf8_.back() == Utf8::Invalid;
  }
  // Whether an any! or except! span may have started at byte `pos` (such a
  // span has no item in later columns until it ends).
  bool span_may_start_at(size_t pos) const { return columns_[pos].has_span_waiters; }
  Verdict verdict() const;

 private:
  struct Item {
    uint32_t production, dot, origin, pending_at_start, pending;
    bool operator==(const Item&) const = default;
  };
  struct ItemHash {
    size_t operator()(const Item& i) const {
      uint64_t h = i.production;
      h = h * 1000003u ^ i.dot;
      h = h * 1000003u ^ i.origin;
      h = h * 1000003u ^ i.pending_at_start;
      h = h * 1000003u ^ i.pending;
      return h;
    }
  };
  struct Column {
    std::vector<Item> items;
    std::unordered_set<Item, ItemHash> seen;
    bool has_span_waiters = false;  // items waiting on any! or except!
    // An except! span runs through this position but cannot end here
    // (inside a character): the text lives on with no item here.
    bool span_goes_on = false;
  };
  // A pending occurrence: a string of except spec `spec` began at `start`.
  using Pending = std::vector<std::pair<uint32_t, uint32_t>>;

  enum class Utf8 : uint8_t { Whole, Partial, Invalid };
  Utf8 utf8_after_last_byte() const;
  void push_byte(uint8_t byte, bool boundary_after);
  void add(Column& column, const Item& item);
  void close(size_t k);
  void complete_spans(size_t e);
  std::optional<uint32_t> advance_pending(uint32_t pending, size_t from, size_t to);
  uint32_t intern(Pending p);
  bool token_boundary(size_t pos) const;
  size_t tokens_touching(size_t begin, size_t end) const;
  bool has_clean_item() const;
  bool viable_within(size_t depth) const;

  std::shared_ptr<const OracleGrammar> g_;
  bool segmented_;
  std::string text_;
  size_t free_from_ = SIZE_MAX;     // positions >= this are an unsegmented continuation
  std::vector<Column> columns_;
  std::vector<Pending> pending_sets_;
  std::map<Pending, uint32_t> pending_ids_;
  std::vector<uint8_t> boundary_;  // boundary_[p]: a token starts or ends at p
  std::vector<Utf8> utf8_;         // utf8_[p]: where the text's first p bytes stand
};

// Convenience: verdict and the longest viable prefix of a whole text.
struct MatchResult {
  Verdict verdict;
  size_t viable_bytes;  // length of the longest viable prefix
};
MatchResult match_text(std::shared_ptr<const OracleGrammar> grammar, std::string_view text);
MatchResult match_tokens(std::shared_ptr<const OracleGrammar> grammar,
                         const std::vector<std::string>& tokens);

}  // namespace cgram::oracle

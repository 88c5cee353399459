#include "canonical.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <type_traits>
#include <limits>

#include "canonical_merges.h"
#include "piece_automaton.h"
#include "utf8.h"

namespace cgram {
namespace {
bool bit(std::span<const uint32_t> words, uint32_t t) { return words[t / 32] >> (t % 32) & 1; }
void set(std::span<uint32_t> words, uint32_t t) { words[t / 32] |= 1u << (t % 32); }

// Rows are word-wide formulas over a dozen per-token bitsets; one word at a
// time they took most of a new row's time (a row is 4,000 words for
// 128k tokens). Four words go in one 16-byte vector (SSE2 or NEON, on
// every target built for), the last few one by one.
using Quad = uint32_t __attribute__((vector_size(16)));
template <typename W>
W load_words(const uint32_t* p) {
  W out;
  std::memcpy(&out, p, sizeof out);
  return out;
}
template <typename W>
W word_at(const std::vector<uint32_t>& v, size_t w) {
  return load_words<W>(v.data() + w);
}
template <typename W>
void put_word(std::span<uint32_t> v, size_t w, W value) {
  std::memcpy(v.data() + w, &value, sizeof value);
}
template <typename W>
bool any_bit(W bits) {
  if constexpr (std::is_same_v<W, uint32_t>) {
    return bits != 0;
  } else {
    uint32_t out = 0;
    for (size_t i = 0; i < sizeof(W) / sizeof(uint32_t); ++i) out |= bits[i];
    return out != 0;
  }
}
// Calls body.template operator()<W>(w) for every word w < words: W = Quad
// for four words from w, then uint32_t for the rest.
template <typename Body>
void by_quads(size_t words, Body&& body) {
  constexpr size_t kQuad = sizeof(Quad) / sizeof(uint32_t);
  size_t w = 0;
  for (; w + kQuad <= words; w += kQuad) body.template operator()<Quad>(w);
  for (; w < words; ++w) body.template operator()<uint32_t>(w);
}
// The first token set in `bits` (words from w), or nullopt.
template <typename W>
std::optional<uint32_t> first_token(W bits, size_t w) {
  if constexpr (std::is_same_v<W, uint32_t>) {
    if (bits) return static_cast<uint32_t>(w * 32 + std::countr_zero(bits));
  } else {
    for (size_t i = 0; i < sizeof(W) / sizeof(uint32_t); ++i)
      if (bits[i]) return static_cast<uint32_t>((w + i) * 32 + std::countr_zero(bits[i]));
  }
  return std::nullopt;
}

// Text that may come after a pair that ends with white space, one of each
// kind a pre-tokenizer tells apart (letters, digits, spaces, line breaks,
// punctuation, quotes, a letter outside ASCII).
constexpr std::string_view kAfterSpace[] = {"a", "A", "0", " ", "\n", ".", "(", "\"", "'", "\xC3\xA9"};
// Bytes that finish a character cut after its first one, two or three
// bytes (each lead byte's allowed second bytes are among them).
constexpr std::string_view kFinishing[] = {"\x80",         "\x90",         "\xA0",        "\x80\x80",
                                           "\x90\x80",     "\xA0\x80",     "\x80\x80\x80", "\x90\x80\x80"};

// Whether `text` ends inside a UTF-8 character (a lead byte whose
// continuation bytes are not all there).
bool ends_inside_character(std::string_view text) {
  size_t continuation = 0;
  for (size_t i = text.size(); i > 0 && continuation < 4; --i) {
    const auto b = static_cast<uint8_t>(text[i - 1]);
    if ((b & 0xC0) == 0x80) {
      ++continuation;
      continue;
    }
    const size_t needed = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    return continuation < needed;
  }
  return false;
}


bool ends_in_white_space(std::string_view text);

// The class of the character at `pos` (advanced past it); kUnsafe where
// the bytes are not one (tables loaded from a file are not trusted to mark
// every such token unsafe).
uint8_t class_at(const PieceAutomaton& automaton, std::string_view bytes, size_t& pos) {
  const std::optional<uint32_t> cp = decode_utf8(bytes, pos);
  return cp ? automaton.class_of(*cp) : PieceAutomaton::kUnsafe;
}

// Where the last character of a token that ends inside one begins: whole
// characters, then a lead byte and fewer continuation bytes than it needs;
// nullopt for any other shape.
std::optional<size_t> cut_start(std::string_view bytes) {
  const std::optional<size_t> bad = first_invalid_utf8(bytes);
  if (!bad || bytes.size() - *bad > 3) return std::nullopt;
  const auto lead = static_cast<uint8_t>(bytes[*bad]);
  const size_t needed = lead >= 0xF0 && lead <= 0xF4 ? 4
                        : lead >= 0xE0 && lead <= 0xEF ? 3
                        : lead >= 0xC2 && lead <= 0xDF ? 2
                                                       : 0;
  if (needed == 0 || bytes.size() - *bad >= needed) return std::nullopt;
  for (size_t i = *bad + 1; i < bytes.size(); ++i)
    if ((static_cast<uint8_t>(bytes[i]) & 0xC0) != 0x80) return std::nullopt;
  return bad;
}

// Whether a token ends inside a character (cut_start), and the whole
// characters it starts with (possibly none).
bool ends_cut(std::string_view bytes) { return cut_start(bytes).has_value(); }
std::string_view whole_characters(std::string_view bytes) { return bytes.substr(0, cut_start(bytes).value_or(0)); }

// How the previous token's piece ends before a first character.
enum PieceState : uint8_t {
  kUnknown = 0,
  kSplit,     // inside the previous token, whatever follows
  kBoundary,  // exactly at its end, whatever follows
  kJoin,      // it may go on into the next token
};
}  // namespace

Result<std::unique_ptr<CanonicalPairs>> CanonicalPairs::create(std::shared_ptr<const Vocabulary> vocab,
                                                               const Encoder& encoder, size_t cached_tokens) {
  if (vocab->kind() == TokenizerKind::List)
    return Error{ErrorCode::Unsupported,
                 "canonical mode needs a merge-based vocabulary (byte-level BPE, tiktoken or SentencePiece); " +
                     vocab->name() + " is a plain token list"};
  return std::make_unique<CanonicalPairs>(Key{}, std::move(vocab), encoder, std::max<size_t>(cached_tokens, 2), true);
}

CanonicalPairs::CanonicalPairs(Key, std::shared_ptr<const Vocabulary> vocab, const Encoder& encoder,
                               size_t cached_tokens, bool build)
    : vocab_(std::move(vocab)),
      encoder_(encoder),
      cached_tokens_(cached_tokens),
      words_((vocab_->size() + 31) / 32),
      looks_ahead_(vocab_->kind() != TokenizerKind::SentencePiece),
      text_words_(words_, 0),
      one_byte_words_(words_, 0),
      stray_start_words_(words_, 0),
      self_checked_(words_, 0),
      self_ok_(words_, 0),
      alone_checked_(words_, 0),
      alone_ok_(words_, 0) {
  for (uint32_t t = 0; t < vocab_->size(); ++t)
    if (is_text(t)) {
      set(text_words_, t);
      const std::string_view bytes = vocab_->bytes(t);
      if (bytes.size() == 1) set(one_byte_words_, t);
      if (!bytes.empty() && (static_cast<uint8_t>(bytes[0]) & 0xC0) == 0x80) set(stray_start_words_, t);
    }
  const auto rule = encoder_.piece_rule();
  if (rule == Encoder::PieceRule::OneRegex) finder_ = encoder_.piece_finder();
  if (!build) return;  // load() fills the rest from saved bytes
  if (rule == Encoder::PieceRule::WholeText || finder_) merges_ = build_merges(*vocab_, encoder_);
  make_rows_parts();
}

bool CanonicalPairs::makes_whole_rows() const {
  return merges_ && ((finder_ && finder_->automaton()) || encoder_.piece_rule() == Encoder::PieceRule::WholeText);
}

// Whether a text with this token in it may hold an added token the encoder
// cuts out first: the token holds one, or ends with the first bytes of one
// (which the text after may finish). A pair, or three tokens, mentions an
// added token only if one of them does this: one that ends in a later
// token begins in an earlier one as its end's first bytes.
bool CanonicalPairs::may_meet_added(std::string_view bytes) const {
  const Merges& m = *merges_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!m.added_first[static_cast<uint8_t>(bytes[i])]) continue;
    const std::string_view rest = bytes.substr(i);
    for (const std::string& a : m.added)
      if (rest.starts_with(a) || std::string_view(a).starts_with(rest)) return true;
  }
  return false;
}

void CanonicalPairs::make_rows_parts() {
  // Rows are made whole where the pieces are known: the pre-tokenizer as an
  // automaton, or none (one piece, the whole text: SentencePiece).
  const bool whole_text = encoder_.piece_rule() == Encoder::PieceRule::WholeText;
  if (makes_whole_rows()) {
    merges_give_words_.assign(words_, 0);
    white_end_words_.assign(words_, 0);
    unsafe_words_.assign(words_, 0);
    added_byte_words_.assign(words_, 0);
    cut_end_words_.assign(words_, 0);
    lone_lead_words_.assign(words_, 0);
    lead_probe_ok_.assign(words_, 0);
    for (uint32_t t = 0; t < vocab_->size(); ++t) {
      if (!is_text(t)) continue;
      const std::string_view bytes = vocab_->bytes(t);
      if (merges_->has(t, Merges::kMergesGive) || merges_->has(t, Merges::kCutMergesGive)) set(merges_give_words_, t);
      if (looks_ahead_ && ends_in_white_space(bytes)) set(white_end_words_, t);
      if (!merges_->has(t, Merges::kSafe)) set(unsafe_words_, t);
      // (Without a pre-tokenizer, SentencePiece writes cut characters as
      // byte tokens whatever follows: those stay with the encoder.)
      if (looks_ahead_ && ends_cut(bytes)) {
        set(cut_end_words_, t);
        // A lone lead byte is also its own byte token at the end of a text
        // (or of its run of whole characters: the probes too short to finish
        // its character); whether the bytes that finish it leave it first.
        if (bytes.size() == 1) {
          set(lone_lead_words_, t);
          const auto lead = static_cast<uint8_t>(bytes[0]);
          const size_t missing = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : 1;
          const uint32_t one[] = {t};
          for (std::string_view probe : kFinishing)
            if (probe.size() >= missing && written_as(one, probe)) {
              set(lead_probe_ok_, t);
              break;
            }
        }
      }
      if (may_meet_added(bytes)) set(added_byte_words_, t);
    }
    // Everything rows are made of, once for the vocabulary: every token
    // alone, and how next tokens' pieces are cut after every class of text
    // one or two tokens leave on the left.
    know_every_token_alone();
    if (whole_text) {
      // Every pair is within the one piece.
      whole_text_cuts_.boundary.assign(words_, 0);
      whole_text_cuts_.joins.assign(words_, 0);
      whole_text_cuts_.inner.assign(words_, 0);
      whole_text_cuts_.exact = unsafe_words_;
      whole_text_cuts_.one_piece.assign(words_, 0);
      for (size_t w = 0; w < words_; ++w) whole_text_cuts_.one_piece[w] = text_words_[w] & ~unsafe_words_[w];
    } else {
      for (uint64_t cls : left_classes()) cuts_for(cls);
    }
  }
}

// Every class left_class() gives: after each text token, and after each
// token following a text in one of those classes.
std::vector<uint64_t> CanonicalPairs::left_classes() const {
  const PieceAutomaton& automaton = *finder_->automaton();
  std::vector<uint64_t> one;
  std::vector<uint8_t> seen(automaton.states() * 4, 0);
  auto note = [&](std::vector<uint64_t>& into, uint64_t cls) {
    if (!seen[cls]) into.push_back(cls);
    seen[cls] = 1;
  };
  for (uint32_t t = 0; t < vocab_->size(); ++t) {
    const uint32_t token[] = {t};
    if (const auto cls = left_class(token)) note(one, *cls);
  }
  std::vector<uint64_t> all = one;
  for (uint64_t before : one)
    for (uint32_t t = 0; t < vocab_->size(); ++t) {
      if (!is_text(t) || bit(unsafe_words_, t) || bit(added_byte_words_, t)) continue;
      // left_class() of (a token of class `before`, t), from the class.
      const std::string_view bytes = vocab_->bytes(t);
      uint32_t state = static_cast<uint32_t>(before >> 2);
      uint64_t prior = before & 3 ? 1 : 0;
      bool known = true;
      for (size_t pos = 0; pos < bytes.size();) {
        const size_t at = pos;
        const uint8_t c = class_at(automaton, bytes, pos);
        if (c == PieceAutomaton::kUnsafe) {
          known = false;
          break;
        }
        const PieceAutomaton::Step step = automaton.step(state, c);
        if (step.match_before) prior = at == 0 ? 2 : 1;
        state = step.next;
      }
      if (known) note(all, uint64_t{state} << 2 | prior);
    }
  return all;
}

CanonicalPairs::~CanonicalPairs() = default;

namespace {

// Interned symbols (the merges' view of a run of units).
class Symbols {
 public:
  uint32_t intern(const std::string& s) {
    auto [it, added] = ids_.try_emplace(s, static_cast<uint32_t>(ids_.size()));
    return it->second;
  }
  std::optional<uint32_t> find(std::string_view s) const {
    scratch_.assign(s);
    auto it = ids_.find(scratch_);
    return it == ids_.end() ? std::nullopt : std::optional<uint32_t>(it->second);
  }
  uint32_t size() const { return static_cast<uint32_t>(ids_.size()); }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  mutable std::string scratch_;
};

// CSR lists from (owner, entry) pairs.
template <typename Entry>
void to_csr(std::vector<std::pair<uint32_t, Entry>>& pairs, uint32_t owners, std::vector<uint32_t>& begin,
            std::vector<Entry>& out) {
  begin.assign(owners + 1, 0);
  for (const auto& p : pairs) ++begin[p.first + 1];
  for (uint32_t i = 0; i < owners; ++i) begin[i + 1] += begin[i];
  out.resize(pairs.size());
  std::vector<uint32_t> at(begin.begin(), begin.end() - 1);
  for (const auto& p : pairs) out[at[p.first]++] = p.second;
}

}  // namespace

namespace {
// Every split of a text token into two text tokens A, B, as B listed under
// A (Merges::joined): after A, the next tokens with which A makes one token.
// And (Merges::joined_cut) the B that end inside the token's last
// character: A, B and the bytes that finish it make one token.
void join_tokens(const Vocabulary& vocab, std::vector<uint32_t>& begin, std::vector<uint32_t>& joined,
                 std::vector<uint32_t>& cut_begin, std::vector<uint32_t>& cut_joined) {
  const auto n = static_cast<uint32_t>(vocab.size());
  std::unordered_map<std::string_view, std::vector<uint32_t>> by_bytes;  // several tokens may share bytes
  for (uint32_t t = 0; t < n; ++t)
    if (!vocab.is_special(t)) by_bytes[vocab.bytes(t)].push_back(t);
  std::vector<std::pair<uint32_t, uint32_t>> pairs, cut_pairs;
  auto add = [&](std::vector<std::pair<uint32_t, uint32_t>>& out, std::string_view a, std::string_view b) {
    const auto first = by_bytes.find(a);
    if (first == by_bytes.end()) return;
    const auto second = by_bytes.find(b);
    if (second == by_bytes.end()) return;
    for (uint32_t x : first->second)
      for (uint32_t y : second->second) out.push_back({x, y});
  };
  for (uint32_t t = 0; t < n; ++t) {
    if (vocab.is_special(t)) continue;
    const std::string_view bytes = vocab.bytes(t);
    // Where the last character starts (its continuation bytes before).
    size_t last = bytes.size();
    while (last > 0 && (static_cast<uint8_t>(bytes[last - 1]) & 0xC0) == 0x80) --last;
    if (last > 0) --last;
    for (size_t k = 1; k < bytes.size(); ++k) {
      add(pairs, bytes.substr(0, k), bytes.substr(k));
      for (size_t cut = std::max(last + 1, k + 1); cut < bytes.size(); ++cut)
        add(cut_pairs, bytes.substr(0, k), bytes.substr(k, cut - k));
    }
  }
  for (auto* v : {&pairs, &cut_pairs}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  to_csr(pairs, n, begin, joined);
  to_csr(cut_pairs, n, cut_begin, cut_joined);
}
}  // namespace

std::unique_ptr<const CanonicalPairs::Merges> CanonicalPairs::build_merges(const Vocabulary& vocab,
                                                                           const Encoder& encoder) {
  using M = Merges;
  auto m = std::make_unique<M>();
  const auto n = static_cast<uint32_t>(vocab.size());
  const size_t words = (n + 31) / 32;
  m->flags.assign(n, 0);
  m->group.assign(n, UINT32_MAX);
  m->always_candidate.assign(words, 0);
  m->always_candidate_prev.assign(words, 0);
  // Edges with their merge keys, made times (Merges::Time) at the end.
  struct Keyed {
    uint32_t id;
    double made, consumed;
  };
  std::vector<std::pair<uint32_t, Keyed>> loose_edges;
  m->note_added_tokens(vocab);

  // Cut characters and added tokens are left to the encoder.
  std::unordered_map<std::string, uint32_t> groups;
  Symbols symbols;
  std::vector<std::pair<uint32_t, Keyed>> right_edges, left_edges;
  for (uint32_t t = 0; t < n; ++t) {
    if (vocab.is_special(t)) continue;
    const std::string_view bytes = vocab.bytes(t);
    const bool holds_added = std::any_of(m->added.begin(), m->added.end(), [&](const std::string& a) {
      return bytes.find(a) != std::string_view::npos;
    });
    if (bytes.empty() || first_invalid_utf8(bytes) || holds_added) {
      // A token that ends inside a character: where merging its bytes gives
      // it, its left edge is indexed (untimed, as for merges that are not
      // monotone) so that the previous tokens a merge cannot cross from
      // leave it to the piece cuts (fill_row).
      const Encoder::Derivation d = !ends_cut(bytes) || holds_added ? Encoder::Derivation{} : encoder.derive(t);
      if (d.merges_give_token) {
        m->flags[t] = M::kCutMergesGive;
        for (const auto& e : d.left)
          loose_edges.push_back({symbols.intern(e.work), {t, e.made, std::numeric_limits<double>::infinity()}});
      }
      set(m->always_candidate_prev, t);
      if (!d.merges_give_token) set(m->always_candidate, t);
      continue;
    }
    size_t first_end = 0;
    decode_utf8(bytes, first_end);
    auto [git, fresh] =
        groups.try_emplace(std::string(bytes.substr(0, first_end)), static_cast<uint32_t>(groups.size()));
    if (fresh) m->group_text.push_back(git->first);
    m->group[t] = git->second;
    const Encoder::Derivation d = encoder.derive(t);
    uint8_t flags = M::kSafe;
    if (d.piece_gives_token) flags |= M::kPieceGives;
    if (d.merges_give_token) {
      flags |= M::kMergesGive;
      if (!d.monotone) set(m->always_candidate_prev, t);
      for (const auto& e : d.right) right_edges.push_back({t, {symbols.intern(e.work), e.made, e.consumed}});
      for (const auto& e : d.left) {
        // Where merges are not monotone, a later symbol's keys do not say
        // when it is on the edge; the first unit's do where nothing made
        // late joins it: it is there from the start until its merge, and a
        // monotone previous token's merges of lower keys all come first.
        const bool timed = d.monotone || (e.made == -std::numeric_limits<double>::infinity() && e.gone_by == e.consumed);
        if (timed)
          left_edges.push_back({symbols.intern(e.work), {t, e.made, e.consumed}});
        else
          loose_edges.push_back({symbols.intern(e.work), {t, e.made, e.gone_by}});
      }
    }
    m->flags[t] = flags;
  }
  // Only merges from a right-edge symbol to a left-edge one can cross a pair.
  std::vector<uint8_t> on_right(symbols.size(), 0), on_left(symbols.size(), 0);
  for (const auto& e : right_edges) on_right[e.second.id] = 1;
  for (const auto& e : left_edges) on_left[e.first] = 1;
  for (const auto& e : loose_edges) on_left[e.first] = 1;
  std::vector<std::pair<uint32_t, std::pair<uint32_t, double>>> keyed_steps;
  encoder.for_each_merge([&](std::string_view a, std::string_view b, double key) {
    auto x = symbols.find(a);
    if (!x || !on_right[*x]) return;
    auto y = symbols.find(b);
    if (y && on_left[*y]) keyed_steps.push_back({*x, {*y, key}});
  });

  // Keys as their order: compared as the keys are (equal ones equal), in
  // half the bytes, which the rows' walk over the edges reads.
  std::vector<double> keys;
  for (const auto* edges : {&right_edges, &left_edges, &loose_edges})
    for (const auto& [owner, e] : *edges) keys.insert(keys.end(), {e.made, e.consumed});
  for (const auto& [owner, step] : keyed_steps) keys.push_back(step.second);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  auto time_of = [&](double key) -> M::Time {
    if (key == -std::numeric_limits<double>::infinity()) return M::kFromStart;
    if (key == std::numeric_limits<double>::infinity()) return M::kNever;
    return static_cast<M::Time>(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin()) + 1;
  };
  auto with_times = [&](const std::vector<std::pair<uint32_t, Keyed>>& edges) {
    std::vector<std::pair<uint32_t, M::Edge>> out;
    out.reserve(edges.size());
    for (const auto& [owner, e] : edges) out.push_back({owner, {e.id, time_of(e.made), time_of(e.consumed)}});
    return out;
  };
  auto most_lasting_first = [&](std::vector<uint32_t>& begin, std::vector<M::Edge>& edges) {
    for (uint32_t s = 0; s + 1 < begin.size(); ++s)
      std::sort(edges.begin() + begin[s], edges.begin() + begin[s + 1],
                [](const M::Edge& a, const M::Edge& b) { return a.consumed > b.consumed; });
  };
  auto rights = with_times(right_edges), lefts = with_times(left_edges), looses = with_times(loose_edges);
  to_csr(rights, n, m->right_begin, m->right);
  to_csr(lefts, symbols.size(), m->left_begin, m->left);
  to_csr(looses, symbols.size(), m->loose_left_begin, m->loose_left);
  most_lasting_first(m->left_begin, m->left);
  most_lasting_first(m->loose_left_begin, m->loose_left);
  for (size_t w = 0; w < words; ++w) m->always_candidate_prev[w] |= m->always_candidate[w];
  std::vector<std::pair<uint32_t, M::Step>> steps;
  steps.reserve(keyed_steps.size());
  for (const auto& [x, step] : keyed_steps) steps.push_back({x, {step.first, time_of(step.second)}});
  to_csr(steps, symbols.size(), m->merges_begin, m->merges);

  join_tokens(vocab, m->joined_begin, m->joined, m->joined_cut_begin, m->joined_cut);
  return m;
}

bool CanonicalPairs::written_as(std::span<const uint32_t> tokens, std::string_view after) const {
  std::string text;
  for (uint32_t t : tokens) text += vocab_->bytes(t);
  text += after;
  auto encoded = encoder_.try_encode_continuation(text);
  const auto* got = encoded.if_value();
  return got && got->size() >= tokens.size() && std::equal(tokens.begin(), tokens.end(), got->begin()) &&
         (!after.empty() || got->size() == tokens.size());
}

namespace {
// Whether the text's last character is white space as the pre-tokenizers'
// `\s` means it (Unicode White_Space): `\s+(?!\S)` looks past an
// ideographic or no-break space as past ' ' (after two U+3000 the first
// ends a piece when a letter follows, and not at the end of the text).
bool ends_in_white_space(std::string_view text) {
  size_t start = text.size();
  while (start > 0 && (static_cast<unsigned char>(text[start - 1]) & 0xC0) == 0x80) --start;
  if (start == 0) return false;
  size_t pos = start - 1;
  const std::optional<uint32_t> cp = decode_utf8(text, pos);
  if (!cp || pos != text.size()) return false;
  const uint32_t c = *cp;
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
}  // namespace

std::span<const std::string_view> CanonicalPairs::probes_after(std::span<const uint32_t> tokens) const {
  // Only what the encoder does at the end of a text can make the text after
  // a pair matter: a pre-tokenizer's look-ahead over white space, and a
  // character cut by the end (its bytes become byte tokens there). With
  // merges alone, more text on the right never undoes a merge across the
  // pair, so SentencePiece (no pre-tokenizer, cut characters already byte
  // tokens) needs none.
  if (!looks_ahead_) return {};
  const std::string_view last = vocab_->bytes(tokens.back());
  if (last.empty()) return {};
  // The last four bytes decide whether a character is cut (they may reach
  // into the token before).
  char tail[4];
  size_t size = 0;
  for (size_t i = tokens.size(); i > 0 && size < sizeof tail; --i) {
    const std::string_view bytes = vocab_->bytes(tokens[i - 1]);
    for (size_t j = bytes.size(); j > 0 && size < sizeof tail; --j) tail[sizeof tail - ++size] = bytes[j - 1];
  }
  const std::string_view end(tail + sizeof tail - size, size);
  if (ends_inside_character(end)) return kFinishing;
  if (ends_in_white_space(end)) return kAfterSpace;
  return {};
}

CanonicalPairs::Pair CanonicalPairs::written_how(std::span<const uint32_t> tokens) const {
  const std::span<const std::string_view> probes = probes_after(tokens);
  // Tokens that end inside a character are judged with the text after them
  // (at the end, the cut character is written as bytes, whatever follows).
  const bool cut = probes.data() == std::data(kFinishing);
  if (written_as(tokens, "")) return cut ? Pair::BeforeSomeText : Pair::Canonical;
  for (std::string_view probe : probes)
    if (written_as(tokens, probe)) return Pair::BeforeSomeText;
  return Pair::Never;
}

CanonicalPairs::Pair CanonicalPairs::classify(uint32_t prev, uint32_t next) const {
  const uint32_t pair[] = {prev, next};
  return written_how(pair);
}

bool CanonicalPairs::written_alone(uint32_t token) const {
  if (!bit(alone_checked_, token)) {
    set(alone_checked_, token);
    bool ok;
    if (merges_ && merges_->has(token, Merges::kSafe)) {
      ok = merges_->has(token, Merges::kPieceGives);
      if (ok && finder_) {
        const std::string_view bytes = vocab_->bytes(token);
        auto piece = finder_->first(bytes);
        ok = piece ? piece->length == bytes.size() : written_as(std::span<const uint32_t>(&token, 1), "");
      }
    } else {
      ok = written_as(std::span<const uint32_t>(&token, 1), "");
    }
    if (ok) set(alone_ok_, token);
  }
  return bit(alone_ok_, token);
}

bool CanonicalPairs::self_canonical(uint32_t token) const {
  if (!bit(self_checked_, token)) {
    set(self_checked_, token);
    const uint32_t one[] = {token};
    bool ok = written_alone(token);
    for (std::string_view probe : probes_after(one)) {
      if (ok) break;
      ok = written_as(one, probe);
    }
    if (ok) set(self_ok_, token);
  }
  return bit(self_ok_, token);
}

CanonicalPairs::Row& CanonicalPairs::row_for(RowKey key) const {
  if (auto it = rows_.find(key); it != rows_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second.second);
    return it->second.first;
  }
  return make_row(key);
}

CanonicalPairs::Row& CanonicalPairs::make_row(RowKey key) const {
  // The least recent row gives its place, and its words' memory, to the new
  // one (a row is five 16 KB vectors for 128k tokens).
  decltype(rows_)::node_type node;
  if (rows_.size() >= cached_tokens_) {
    node = rows_.extract(recent_.back());
    recent_.splice(recent_.begin(), recent_, std::prev(recent_.end()));  // its list node too
    recent_.front() = key;
    node.key() = key;
    Row& old = node.mapped().first;
    old.fast = false;
    old.groups.clear();
    old.cls.reset();
    old.three.reset();
    old.three_before = kStart;
  }
  if (!node) recent_.push_front(key);
  auto& entry = node ? rows_.insert(std::move(node)).position->second : rows_[key];
  Row& row = entry.first;
  entry.second = recent_.begin();
  row.checked.resize(words_);
  row.allowed.resize(words_);
  row.before_text.resize(words_);
  const auto prev = static_cast<uint32_t>(key);
  const auto before = static_cast<uint32_t>(key >> 32);
  bool filled = false;
  if (before != kStart) {
    // A context row: made whole from `prev`'s, the most recent row.
    const auto pair_row = rows_.find(RowKey(kStart) << 32 | prev);
    filled = pair_row != rows_.end() && whole_rows_ && fill_context_row(row, pair_row->second.first, before, prev);
  } else if (merges_ && merges_->has(prev, Merges::kSafe) && !bit(merges_->always_candidate_prev, prev)) {
    // (A previous token whose merges are not monotone bounds nothing.)
    find_candidates(row, prev);
    filled = row.fast && whole_rows_ && fill_row(row, prev);
  }
  if (!filled) {
    std::fill(row.checked.begin(), row.checked.end(), 0);
    std::fill(row.allowed.begin(), row.allowed.end(), 0);
    std::fill(row.before_text.begin(), row.before_text.end(), 0);
  }
  return row;
}

void CanonicalPairs::find_candidates(Row& row, uint32_t prev) const {
  const Merges& m = *merges_;
  const std::string_view bytes = vocab_->bytes(prev);
  // An added token that starts inside the previous token and ends in the
  // next is cut out first: everything goes to the encoder.
  for (const std::string& a : m.added)
    for (size_t i = 0; i < bytes.size(); ++i)
      if (a.size() > bytes.size() - i && std::string_view(a).starts_with(bytes.substr(i))) return;
  row.fast = true;
  row.candidates = m.always_candidate;
  row.crossed.assign(words_, 0);
  if (!m.has(prev, Merges::kMergesGive)) return;  // within one piece, never written so
  // A merge that crosses: symbol x on prev's right edge with y on next's
  // left edge. With monotone merges each side makes its merges in the
  // order of their keys until a merge crosses, so x and y are on the edges
  // together between max(made) and min(consumed), and their merge, of key
  // k, happens when max(k, made) comes first; then the pair is never
  // written so (unless the crossing symbol falls back to the two tokens'
  // single bytes). Equal keys: see below.
  const bool single_byte = bytes.size() == 1;
  for (uint32_t e = m.right_begin[prev]; e < m.right_begin[prev + 1]; ++e) {
    const Merges::Edge& x = m.right[e];
    for (uint32_t s = m.merges_begin[x.id]; s < m.merges_begin[x.id + 1]; ++s) {
      const Merges::Step& step = m.merges[s];
      const Merges::Time from = std::max(step.key, x.made);
      if (from > x.consumed) continue;
      // Next tokens whose merges are not monotone: their edge symbol may
      // be there from the start, and is gone before any merge of a higher
      // key than its gone_by is made.
      for (uint32_t l = m.loose_left_begin[step.symbol]; l < m.loose_left_begin[step.symbol + 1]; ++l) {
        if (m.loose_left[l].consumed < from) break;
        set(row.candidates, m.loose_left[l].id);
      }
      for (uint32_t l = m.left_begin[step.symbol]; l < m.left_begin[step.symbol + 1]; ++l) {
        const Merges::Edge& y = m.left[l];
        if (y.consumed < from) break;  // most lasting first
        const Merges::Time start = std::max(from, y.made);
        const Merges::Time stop = std::min(x.consumed, y.consumed);
        if (start > stop) continue;
        bool crosses = start < stop;
        if (start == stop) {
          // Equal keys go to the leftmost pair first. Where only the
          // crossing has that key on the way in, x's merge on its left
          // comes before it (x is gone), and it before y's merge on y's
          // right (`ss` + `s`, `-` + `--`). Other ties: the encoder.
          const bool crossing_key_only = start == step.key && start > x.made && start > y.made;
          if (crossing_key_only && stop == x.consumed) continue;
          crosses = crossing_key_only && stop == y.consumed;
          if (!crosses) {
            set(row.candidates, y.id);
            continue;
          }
        }
        if (crosses && !(single_byte && bit(one_byte_words_, y.id)))
          set(row.crossed, y.id);
        else
          set(row.candidates, y.id);
      }
    }
  }
  // The two together a token: written whole where a piece that is a token
  // is taken as is, else perhaps merged.
  // (Not surely where the next token ends inside a character: the piece
  // goes on into the bytes that finish it.)
  const bool whole = encoder_.takes_whole_pieces();
  for (uint32_t j = m.joined_begin[prev]; j < m.joined_begin[prev + 1]; ++j) {
    const uint32_t next = m.joined[j];
    set(whole && !ends_cut(vocab_->bytes(next)) ? row.crossed : row.candidates, next);
  }
  // With the bytes that finish its character, a token ending inside one
  // may make a token with `prev`, taken whole: the encoder decides.
  if (whole)
    for (uint32_t j = m.joined_cut_begin[prev]; j < m.joined_cut_begin[prev + 1]; ++j)
      set(row.candidates, m.joined_cut[j]);
}

void CanonicalPairs::make_rows_whole(bool whole) {
  std::lock_guard lock(mutex_);
  whole_rows_ = whole;
  rows_.clear();
  recent_.clear();
}

void CanonicalPairs::know_every_token_alone() const {
  if (every_token_alone_known_) return;
  every_token_alone_known_ = true;
  for (uint32_t t = 0; t < vocab_->size(); ++t)
    if (is_text(t)) self_canonical(t);  // and written_alone
}

namespace {
// Where the last match so far ended, seen from the end of the previous
// token: nowhere yet, strictly inside the text on the left (a piece that
// cuts a token), at the end of the token before (left text of two tokens),
// or that many bytes into the next token.
constexpr int64_t kNoMatch = -2, kInsidePrevious = -1, kInnerBoundary = -3;
constexpr int64_t prior_of(uint64_t cls) {
  return (cls & 3) == 0 ? kNoMatch : (cls & 3) == 1 ? kInsidePrevious : kInnerBoundary;
}
}  // namespace

CanonicalPairs::Finishing CanonicalPairs::finishing_ok(uint32_t token) const {
  static_assert(std::size(kFinishing) <= 8);
  if (finishing_.empty()) finishing_.assign(vocab_->size(), kFinishingUnknown);
  if (finishing_[token] == kFinishingUnknown) {
    uint32_t bits = 0;
    const uint32_t one[] = {token};
    const std::string_view bytes = vocab_->bytes(token);
    const size_t start = cut_start(bytes).value_or(bytes.size());
    for (size_t k = 0; k < std::size(kFinishing); ++k) {
      if (written_as(one, kFinishing[k])) bits |= 1u << k;
      // Inside a piece: the bytes up to the character's end merged alone.
      const std::string finished = std::string(bytes).append(kFinishing[k]);
      size_t end = start;
      if (!decode_utf8(finished, end)) continue;
      const std::vector<uint32_t> merged = encoder_.merge_piece(std::string_view(finished).substr(0, end));
      if (!merged.empty() && merged[0] == token) bits |= 1u << (8 + k);
    }
    finishing_[token] = bits;
  }
  const uint32_t bits = finishing_[token];
  return {static_cast<uint8_t>(bits), static_cast<uint8_t>(bits >> 8)};
}

const CanonicalPairs::PieceCuts& CanonicalPairs::cuts_for(uint64_t cls) const {
  auto [it, fresh] = cuts_.try_emplace(cls);
  if (!fresh) return it->second;
  PieceCuts& cuts = it->second;
  cuts.boundary.assign(words_, 0);
  cuts.one_piece.assign(words_, 0);
  cuts.exact.assign(words_, 0);
  cuts.joins.assign(words_, 0);
  cuts.inner.assign(words_, 0);
  const PieceAutomaton& automaton = *finder_->automaton();
  const auto state = static_cast<uint32_t>(cls >> 2);
  // Where a piece settled (no text after can move it) at `last`: between
  // the two (boundary), at the end of the token before (the encoder
  // decides), or cutting a token (never).
  auto settle = [&](uint32_t t, int64_t last) {
    if (last == 0) set(cuts.boundary, t);
    if (last == kInnerBoundary) set(cuts.inner, t);
  };
  // How the piece stands after the next token's first character (of class
  // c, `length` bytes long), as piece_state() reads it: settled where it
  // ends (inside the text on the left, at its end, at the inner boundary),
  // else kJoins (it may go on) or kUnknown (ICU must say).
  constexpr int64_t kJoins = INT64_MAX, kUnknown = INT64_MIN;
  auto after_first = [&](uint8_t c, size_t length) -> int64_t {
    if (c == PieceAutomaton::kUnsafe) return kUnknown;
    const PieceAutomaton::Step step = automaton.step(state, c);
    int64_t first_last = step.match_before ? 0 : prior_of(cls);
    if (step.next != PieceAutomaton::kDead) {
      if (automaton.match_at_end(step.next)) first_last = static_cast<int64_t>(length);
      if (!automaton.settled(step.next)) return first_last == kNoMatch ? kUnknown : kJoins;
    }
    if (first_last == kNoMatch) return kUnknown;
    return first_last > 0 ? kJoins : first_last;
  };
  // A token that ends inside a character: whole characters W, then the
  // first bytes of one. The encoder writes it so only before bytes that
  // finish that character, each probe of kFinishing a case of its own.
  // Where a probe leaves the character unfinished, its bytes are byte
  // tokens (a lone lead byte after text written alone: fill_row's
  // lone_now). Where it finishes it, the text's valid run ends with that
  // character (the probe's further bytes continue none), and the pieces of
  // the left text, W and the character are settled there: the first ends
  // at the previous token's end (a boundary; the token must come first in
  // its own text and the probe's, finishing_ok), runs through the
  // character (one piece: no merge across, and the token first where its
  // bytes and the character's last ones are merged), or cuts a token
  // (never, with this probe). A probe the automaton cannot say sends the
  // token to the encoder.
  struct CutCuts {
    bool unknown = false, joins = false, boundary = false, one_piece = false;
  };
  auto cut_cuts = [&](uint32_t t) {
    CutCuts out;
    const std::string_view bytes = vocab_->bytes(t);
    const std::string_view whole = whole_characters(bytes);
    uint32_t at = state;
    int64_t last = prior_of(cls);
    for (size_t pos = 0; pos < whole.size() && at != PieceAutomaton::kDead;) {
      const size_t offset = pos;
      const uint8_t c = class_at(automaton, whole, pos);
      if (c == PieceAutomaton::kUnsafe) return CutCuts{.unknown = true};
      if (offset == 0 && after_first(c, pos) == kJoins) out.joins = true;
      const PieceAutomaton::Step step = automaton.step(at, c);
      if (step.match_before) last = static_cast<int64_t>(offset);
      at = step.next;
    }
    const Finishing written_first = finishing_ok(t);
    for (size_t k = 0; k < std::size(kFinishing); ++k) {
      const std::string finished = std::string(bytes.substr(whole.size())).append(kFinishing[k]);
      size_t length = 0;
      const std::optional<uint32_t> cp = decode_utf8(finished, length);
      if (!cp) continue;  // unfinished: byte tokens
      const auto through = static_cast<int64_t>(whole.size() + length);
      int64_t end = last;
      if (at != PieceAutomaton::kDead) {
        const uint8_t c = automaton.class_of(*cp);
        if (c == PieceAutomaton::kUnsafe) return CutCuts{.unknown = true};
        const PieceAutomaton::Step step = automaton.step(at, c);
        if (step.match_before) end = static_cast<int64_t>(whole.size());
        if (step.next != PieceAutomaton::kDead && automaton.match_at_end(step.next)) end = through;
      }
      if (end == kNoMatch || end == kInnerBoundary) return CutCuts{.unknown = true};
      if (end == 0 && (written_first.alone >> k & 1)) out.boundary = true;
      if (end == through && (written_first.in_piece >> k & 1)) out.one_piece = true;
    }
    return out;
  };
  // The same decisions as decide(), read off the automaton: how the piece
  // is cut after the next token's first character (piece_state), then
  // after the whole token (first_piece).
  for (uint32_t t = 0; t < vocab_->size(); ++t) {
    if (!is_text(t) || bit(added_byte_words_, t) || (bit(unsafe_words_, t) && !bit(cut_end_words_, t))) {
      set(cuts.exact, t);
      continue;
    }
    if (bit(cut_end_words_, t)) {
      const CutCuts cut = cut_cuts(t);
      if (cut.unknown) set(cuts.exact, t);
      if (cut.joins) set(cuts.joins, t);
      if (cut.boundary && !cut.unknown) set(cuts.boundary, t);
      if (cut.one_piece && !cut.unknown) set(cuts.one_piece, t);
      continue;
    }
    const std::string_view bytes = vocab_->bytes(t);
    uint32_t at = state;
    int64_t last = prior_of(cls);
    bool open = false, first_char_decided = false, unknown = false;
    for (size_t pos = 0; pos < bytes.size();) {
      const size_t offset = pos;
      const uint8_t c = class_at(automaton, bytes, pos);
      if (offset == 0) {
        const int64_t first = after_first(c, pos);
        if (first == kUnknown) {
          unknown = true;
          break;
        }
        if (first != kJoins) {
          first_char_decided = true;  // kSplit (before the end) or kBoundary (at the end)
          settle(t, first);
          break;
        }
        set(cuts.joins, t);
      }
      if (c == PieceAutomaton::kUnsafe) {
        unknown = true;
        break;
      }
      const PieceAutomaton::Step step = automaton.step(at, c);
      if (step.match_before) last = static_cast<int64_t>(offset);
      at = step.next;
      if (at == PieceAutomaton::kDead) break;
    }
    if (unknown) {
      set(cuts.exact, t);
      continue;
    }
    if (first_char_decided) continue;
    if (at != PieceAutomaton::kDead) {
      if (automaton.match_at_end(at)) last = static_cast<int64_t>(bytes.size());
      open = !automaton.settled(at);
    }
    // An open piece (text after could move its end) is settled all the
    // same where only the end of the text is asked about: no probes after
    // the pair (probes_after), as decide() reads it.
    const bool probed = bit(white_end_words_, t);
    if (last == kNoMatch)
      set(cuts.exact, t);
    else if ((!open || !probed) && last < static_cast<int64_t>(bytes.size()))
      settle(t, last);
    else if (last == static_cast<int64_t>(bytes.size()))
      set(cuts.one_piece, t);
    else
      set(cuts.exact, t);
  }
  return cuts;
}

std::optional<uint64_t> CanonicalPairs::left_class(std::span<const uint32_t> tokens) const {
  const PieceAutomaton* automaton = finder_ ? finder_->automaton() : nullptr;
  if (!automaton || unsafe_words_.empty()) return std::nullopt;
  for (uint32_t t : tokens)
    if (!is_text(t) || bit(unsafe_words_, t) || bit(added_byte_words_, t)) return std::nullopt;
  // The automaton over the tokens, their piece starting with the first.
  uint32_t state = PieceAutomaton::kStart;
  int64_t last = kNoMatch;
  size_t offset = 0;
  for (uint32_t t : tokens) {
    const std::string_view bytes = vocab_->bytes(t);
    for (size_t pos = 0; pos < bytes.size();) {
      const size_t at = offset + pos;
      const uint8_t c = class_at(*automaton, bytes, pos);
      if (c == PieceAutomaton::kUnsafe) return std::nullopt;
      const PieceAutomaton::Step step = automaton->step(state, c);
      if (step.match_before && at > 0) last = static_cast<int64_t>(at);
      state = step.next;
    }
    offset += bytes.size();
  }
  const uint64_t prior = last == kNoMatch ? 0 : tokens.size() == 2 && last == int64_t(vocab_->bytes(tokens[0]).size()) ? 2 : 1;
  return uint64_t{state} << 2 | prior;
}

std::vector<uint32_t> CanonicalPairs::row_class_samples(size_t per_class, size_t* classes) const {
  std::lock_guard lock(mutex_);
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_class;
  for (uint32_t t = 0; t < vocab_->size(); ++t) {
    const uint32_t one[] = {t};
    if (const auto c = left_class(one); c && !bit(merges_->always_candidate_prev, t)) {
      auto& tokens = by_class[*c];
      if (tokens.size() < per_class) tokens.push_back(t);
    }
  }
  if (classes) *classes = by_class.size();
  std::vector<uint32_t> out;
  for (const auto& [c, tokens] : by_class) out.insert(out.end(), tokens.begin(), tokens.end());
  std::sort(out.begin(), out.end());
  return out;
}

bool CanonicalPairs::fill_row(Row& row, uint32_t prev) const {
  if (unsafe_words_.empty()) return false;
  const PieceCuts* whole_text = finder_ ? nullptr : &whole_text_cuts_;
  const uint32_t one[] = {prev};
  const std::optional<uint64_t> cls = whole_text ? std::nullopt : left_class(one);
  if (!cls && !whole_text) return false;
  const PieceCuts& cuts = whole_text ? *whole_text : cuts_for(*cls);
  row.cls = cls;
  // Flags of the previous token, as whole words.
  const uint32_t piece_gives = merges_->has(prev, Merges::kPieceGives) ? ~0u : 0;
  const uint32_t merges_apart = merges_->has(prev, Merges::kMergesGive) ? 0 : ~0u;  // no merge gives prev
  // A lone lead byte after `prev` is its byte token at the end of the text
  // wherever `prev` is written alone there, whatever the pieces; so is a
  // next token that begins with a byte continuing no character (`prev`
  // ends with whole ones): the encoder writes the text before such a byte
  // alone, and the byte as its byte token (Encoder's encode_span).
  const uint32_t alone_at_end = written_alone(prev) ? ~0u : 0;
  by_quads(words_, [&]<typename W>(size_t w) {
    auto at = [w](const std::vector<uint32_t>& v) { return word_at<W>(v, w); };
    const W self = at(self_ok_) & at(text_words_);
    const W lone = at(lone_lead_words_);
    const W cut_end = at(cut_end_words_);
    const W stray = at(stray_start_words_) & ~cut_end;
    const W candidates = at(row.candidates);
    // One piece: written as the two unless a merge crosses (never, or the
    // encoder where text after a white-space end could cut it otherwise).
    const W not_merged = at(row.crossed) | ~at(merges_give_words_) | merges_apart;
    const W one_piece_exact = at(cuts.one_piece) & (candidates | (not_merged & at(white_end_words_)));
    const W lone_now = lone & alone_at_end & ~at(added_byte_words_);
    const W exact = self & (at(cuts.exact) | one_piece_exact) & ~lone_now & ~stray;
    // Before the bytes that finish its character, a lone lead byte stays
    // first only where those bytes leave it so alone (lead_probe_ok_).
    const W probed = ~lone | at(lead_probe_ok_);
    const W boundary = at(cuts.boundary) & piece_gives & probed;
    const W one_piece = at(cuts.one_piece) & ~not_merged & ~candidates & probed;
    put_word(row.checked, w, at(text_words_) & ~exact);
    put_word(row.allowed, w, self & ~exact & (boundary | one_piece | lone_now | (stray & alone_at_end)));
    // A token ending inside a character is written so only before the
    // bytes that finish it.
    put_word(row.before_text, w,
             self & ~exact &
                 ((boundary & (~at(alone_ok_) | cut_end)) | ((one_piece | lone_now) & cut_end)));
  });
  return true;
}

// The context row as in_context() decides it, word by word: a pair the
// previous token's row allows stays allowed; one it refuses is tried with
// the token before, where the two pieces' cuts may differ, and settled by
// where the three's first piece ends (triple_by_pieces).
bool CanonicalPairs::fill_context_row(Row& context, const Row& row, uint32_t before, uint32_t prev) const {
  if (!row.cls || !merges_->has(before, Merges::kSafe)) return false;
  const uint32_t two[] = {before, prev};
  const std::optional<uint64_t> cls = left_class(two);
  if (!cls) return false;
  const PieceCuts& mine = cuts_for(*row.cls);
  const PieceCuts& cuts = cuts_for(*cls);
  context.cls = *cls;
  // Whether the encoder writes the two as themselves, the same for every
  // next token after which their piece ends (asked once, as
  // triple_by_pieces does).
  std::optional<bool> written, two_at_end;
  by_quads(words_, [&]<typename W>(size_t w) {
    auto at = [w](const std::vector<uint32_t>& v) { return word_at<W>(v, w); };
    const W text = at(text_words_);
    const W checked = at(row.checked);
    const W refused = checked & ~at(row.allowed) & text & at(self_ok_);
    const W tried = refused & ~(at(mine.joins) & at(cuts.joins));
    // A lone lead byte may also be its byte token after the two written at
    // the end of the text: the encoder decides.
    // (Unsafe tokens, as triple_by_pieces leaves them, go to the encoder.)
    // A next token beginning with a byte that continues no character
    // follows the two where they are written so at the end of the text.
    const W stray = tried & at(stray_start_words_) & ~at(cut_end_words_);
    const W exact = (text & ~checked) | (tried & ~stray &
                                         (at(cuts.exact) | at(cuts.one_piece) | at(lone_lead_words_) |
                                          (at(cuts.boundary) & at(unsafe_words_))));
    W rescued = tried & at(cuts.boundary) & ~exact;
    if (!written)
      if (const std::optional<uint32_t> next = first_token(rescued, w)) written = piece_written_as_two(before, prev, *next);
    rescued &= written.value_or(false) ? ~0u : 0u;
    if (any_bit(stray) && !two_at_end) two_at_end = written_as(two, "");
    rescued |= stray & (two_at_end.value_or(false) ? ~0u : 0u);
    put_word(context.checked, w, text & ~exact);
    put_word(context.allowed, w, (at(row.allowed) | rescued) & ~exact);
    put_word(context.before_text, w,
             (at(row.before_text) | (rescued & (~at(alone_ok_) | at(cut_end_words_)))) & ~exact);
  });
  return true;
}

// With `before`, `prev` written so only before some text, which next tokens
// keep them so (triple_ok), word by word: where the three's first piece
// settles at `before`'s end, the rest is the pair's own verdict after a
// piece `before` is written as alone; where it settles at `prev`'s end,
// whether the encoder writes the two as themselves (asked once) and the
// next token alone (triple_by_pieces); anywhere else inside, never. The
// rest is left to triple_ok one by one. Kept in the decided row, for one
// token before; filter() reads its checked and allowed bits only (no
// before_text).
const CanonicalPairs::Row* CanonicalPairs::three_row(const Rows& rows, uint32_t before, uint32_t prev) const {
  Row& decided = rows.context ? *rows.context : *rows.row;
  if (!decided.cls || !merges_->has(before, Merges::kSafe)) return nullptr;
  if (decided.three && decided.three_before == before) return decided.three.get();
  const uint32_t two[] = {before, prev};
  const std::optional<uint64_t> cls = left_class(two);
  if (!cls) return nullptr;
  const PieceCuts& cuts = cuts_for(*cls);
  const bool before_alone = merges_->has(before, Merges::kPieceGives);
  auto three = std::make_unique<Row>();
  three->checked.assign(words_, 0);
  three->allowed.assign(words_, 0);
  three->before_text.assign(words_, 0);
  std::optional<bool> written;
  const uint32_t inner_settles = before_alone ? ~0u : 0u;
  by_quads(words_, [&]<typename W>(size_t w) {
    auto at = [w](const std::vector<uint32_t>& v) { return word_at<W>(v, w); };
    const W text = at(text_words_);
    const W pair_ok = at(decided.checked) & at(decided.allowed);
    const W canonical = pair_ok & ~at(decided.before_text);  // the rest allowed before some text
    const W boundary = at(cuts.boundary), inner = at(cuts.inner), safe = ~at(unsafe_words_);
    // Settled at prev's end: the encoder's two, then the next token alone
    // (Canonical where written alone, else before some text); safe tokens only.
    W at_prev = boundary & safe & at(self_ok_);
    if (!written)
      if (const std::optional<uint32_t> next = first_token(at_prev, w)) written = piece_written_as_two(before, prev, *next);
    at_prev &= written.value_or(false) ? ~0u : 0u;
    const W at_prev_canonical = at_prev & at(alone_ok_);
    // triple_ok: a pair allowed before some text needs the three written so
    // (any verdict but never); one allowed at the end, the three canonical.
    const W ok = (inner & pair_ok & inner_settles) | (pair_ok & ~canonical & at_prev) | (canonical & at_prev_canonical);
    // (A lone lead byte may also be its byte token after the two written
    // at the end of the text, where their pieces may differ: the encoder.)
    const W decided_here =
        (inner | (boundary & safe) | ~(at(cuts.exact) | at(cuts.one_piece) | boundary | inner)) & ~at(lone_lead_words_);
    const W exact = text & (~at(decided.checked) | ~decided_here);
    put_word(three->checked, w, text & ~exact);
    put_word(three->allowed, w, ok & text & ~exact);
  });
  decided.three = std::move(three);
  decided.three_before = before;
  return decided.three.get();
}

uint8_t CanonicalPairs::piece_state(Row& row, std::string_view left, uint32_t group) const {
  auto [it, fresh] = row.groups.try_emplace(group, kUnknown);
  if (fresh) {
    scratch_.assign(left).append(merges_->group_text[group]);
    auto piece = finder_->first(scratch_);
    it->second = !piece || piece->open || piece->length > left.size() ? kJoin
                 : piece->length < left.size()                        ? kSplit
                                                                      : kBoundary;
  }
  return it->second;
}

// `prev` and `next` form one piece at the end of the text.
CanonicalPairs::Pair CanonicalPairs::decide_one_piece(const Row& row, uint32_t prev, uint32_t next) const {
  const Merges& m = *merges_;
  // Merging the piece gives the two tokens unless a merge crosses between
  // them, or merging does not give either alone.
  const bool written = m.has(prev, Merges::kMergesGive) && m.has(next, Merges::kMergesGive) && !bit(row.crossed, next);
  if (written && !bit(row.candidates, next)) return Pair::Canonical;
  // Only text after the pair could still cut it into other pieces.
  const uint32_t pair[] = {prev, next};
  if (!written && probes_after(pair).empty()) return Pair::Never;
  return classify(prev, next);
}

CanonicalPairs::Pair CanonicalPairs::decide(Row& row, uint32_t prev, uint32_t next) const {
  if (!self_canonical(next)) return Pair::Never;
  if (!row.fast || !merges_->has(next, Merges::kSafe)) return classify(prev, next);
  if (!finder_) return decide_one_piece(row, prev, next);  // one piece: the whole text
  switch (piece_state(row, vocab_->bytes(prev), merges_->group[next])) {
    case kSplit:
      return Pair::Never;
    case kBoundary:
      return decide_at_boundary(prev, next);
    default: {
      // The group's first character may join `prev`'s piece; the whole
      // token may still cut it. A first piece the regex ended before the
      // end of the text (not open) is the same whatever follows, as for
      // the groups: inside `prev` no encoding has `prev` (after 128 spaces,
      // `\s+(?!\S)` leaves the last one to the word), at its end the two
      // are pieces apart. So is an open one where only the end of the text
      // is asked about (no probes): after Gujarati, o200k's
      // `[\p{Lu}...\p{Lo}\p{M}]*` takes a capital letter in, then gives it
      // back to find `[\p{Ll}...\p{M}]+`; text after could keep it.
      const uint32_t two[] = {prev, next};
      const std::optional<Encoder::FirstPiece> piece = first_piece(two);
      const size_t a = vocab_->bytes(prev).size();
      if (piece && (!piece->open || probes_after(two).empty()) && !merges_->mentions_added(cut_text_)) {
        if (splits_a_token(two, piece->length)) return Pair::Never;
        if (piece->length == a) return decide_at_boundary(prev, next);
      }
      if (piece && piece->length == a + vocab_->bytes(next).size()) return decide_one_piece(row, prev, next);
      return classify(prev, next);
    }
  }
}

// Whether a piece that ends `piece_end` bytes into the tokens' text ends
// strictly inside one of them: a token is never cut by a piece, so no
// encoding of that text has these tokens.
bool CanonicalPairs::splits_a_token(std::span<const uint32_t> tokens, size_t piece_end) const {
  size_t end = 0;
  for (uint32_t t : tokens) {
    const size_t start = end;
    end += vocab_->bytes(t).size();
    if (piece_end > start && piece_end < end) return true;
  }
  return false;
}

// The pre-tokenizer's first piece of the tokens' text (left in cut_text_);
// nullopt where the tokens are not whole characters or the regex failed.
std::optional<Encoder::FirstPiece> CanonicalPairs::first_piece(std::span<const uint32_t> tokens) const {
  if (!finder_ || !merges_) return std::nullopt;
  cut_text_.clear();
  for (uint32_t t : tokens) {
    if (!merges_->has(t, Merges::kSafe)) return std::nullopt;
    cut_text_.append(vocab_->bytes(t));
  }
  return finder_->first(cut_text_);
}

// Where the first piece of the tokens' text ends, when no text after it
// could move that end (the regex did not reach the end of the text);
// nullopt where an added token may be cut out first or the end is open.
std::optional<size_t> CanonicalPairs::settled_first_piece(std::span<const uint32_t> tokens) const {
  const std::optional<Encoder::FirstPiece> piece = first_piece(tokens);
  if (!piece || piece->open || merges_->mentions_added(cut_text_)) return std::nullopt;
  return piece->length;
}

// The encoder's answer for three tokens where their first piece settles
// it: a piece that ends inside a token (never written so: after two runs
// of spaces, `\s+(?!\S)` leaves the last space to what follows), or one
// that ends with `prev`. Then the piece's encoding is `before`, `prev` or
// not, the same for every next token (asked of the encoder once a pair),
// and `next` starts the text after it. nullopt: ask the encoder.
std::optional<CanonicalPairs::Pair> CanonicalPairs::triple_by_pieces(uint32_t before, uint32_t prev,
                                                                     uint32_t next) const {
  const uint32_t three[] = {before, prev, next};
  const std::optional<size_t> end = settled_first_piece(three);
  if (!end) return std::nullopt;
  if (splits_a_token(three, *end)) return Pair::Never;
  if (*end != vocab_->bytes(before).size() + vocab_->bytes(prev).size()) return std::nullopt;
  if (!piece_written_as_two(before, prev, next) || !self_canonical(next)) return Pair::Never;
  return written_alone(next) ? Pair::Canonical : Pair::BeforeSomeText;
}

// Whether the encoder writes `before`, `prev` as themselves where their
// piece ends with `prev` whatever follows (asked with `next` after them,
// once a pair: the answer is the same for every such next token).
bool CanonicalPairs::piece_written_as_two(uint32_t before, uint32_t prev, uint32_t next) const {
  const RowKey key = RowKey(before) << 32 | prev;
  auto known = piece_pairs_.find(key);
  if (known == piece_pairs_.end()) {
    if (piece_pairs_.size() >= kPiecePairsKept) piece_pairs_.clear();
    const uint32_t two[] = {before, prev};
    known = piece_pairs_.emplace(key, written_as(two, vocab_->bytes(next))).first;
  }
  return known->second;
}

// `prev` ends a piece whatever follows: each token is written as it is alone.
CanonicalPairs::Pair CanonicalPairs::decide_at_boundary(uint32_t prev, uint32_t next) const {
  if (!merges_->has(prev, Merges::kPieceGives)) return Pair::Never;
  return written_alone(next) ? Pair::Canonical : Pair::BeforeSomeText;
}

CanonicalPairs::Pair CanonicalPairs::pair(uint32_t prev, uint32_t next) const {
  return pair_in(row_for(RowKey(kStart) << 32 | prev), prev, next);
}

CanonicalPairs::Pair CanonicalPairs::pair_in(Row& row, uint32_t prev, uint32_t next) const {
  if (!bit(row.checked, next)) {
    set(row.checked, next);
    const Pair p = decide(row, prev, next);
    if (p != Pair::Never) set(row.allowed, next);
    if (p == Pair::BeforeSomeText) set(row.before_text, next);
  }
  if (!bit(row.allowed, next)) return Pair::Never;
  return bit(row.before_text, next) ? Pair::BeforeSomeText : Pair::Canonical;
}

bool CanonicalPairs::context_matters(uint32_t before, uint32_t prev) const {
  if (!is_text(before)) return false;
  if (!looks_ahead_) return false;  // merges alone: pairs suffice
  if (!finder_ || !merges_ || !merges_->has(before, Merges::kSafe) || !merges_->has(prev, Merges::kSafe)) return true;
  const std::string_view a = vocab_->bytes(before);
  scratch_.assign(a).append(vocab_->bytes(prev));
  auto piece = finder_->first(scratch_);
  return !piece || piece->open || piece->length != a.size();
}

// Whether the token before can change how `prev` and `next` are cut: not
// when `prev`'s piece goes on into `next` both alone and after `before`
// (within one piece, adjacent pairs decide), else it may.
bool CanonicalPairs::context_may_differ(Row& context_row, Row& row, uint32_t before, uint32_t prev,
                                        uint32_t next) const {
  if (!finder_ || !row.fast || !merges_->has(before, Merges::kSafe) || !merges_->has(next, Merges::kSafe))
    return true;
  const uint32_t group = merges_->group[next];
  if (piece_state(row, vocab_->bytes(prev), group) != kJoin) return true;
  context_text_.assign(vocab_->bytes(before)).append(vocab_->bytes(prev));
  return piece_state(context_row, context_text_, group) != kJoin;
}

CanonicalPairs::Pair CanonicalPairs::in_context(Row& context_row, Row& row, uint32_t before, uint32_t prev,
                                                uint32_t next) const {
  if (!bit(context_row.checked, next)) {
    set(context_row.checked, next);
    Pair p = pair_in(row, prev, next);
    if (p == Pair::Never && self_canonical(next) && context_may_differ(context_row, row, before, prev, next)) {
      const uint32_t three[] = {before, prev, next};
      const std::optional<Pair> settled = triple_by_pieces(before, prev, next);
      p = settled ? *settled : written_how(three);
    }
    if (p != Pair::Never) set(context_row.allowed, next);
    if (p == Pair::BeforeSomeText) set(context_row.before_text, next);
  }
  if (!bit(context_row.allowed, next)) return Pair::Never;
  return bit(context_row.before_text, next) ? Pair::BeforeSomeText : Pair::Canonical;
}

bool CanonicalPairs::triple_ok(uint32_t before, uint32_t prev, uint32_t next, Pair next_pair) const {
  if (const std::optional<Pair> settled = triple_by_pieces(before, prev, next))
    return next_pair == Pair::BeforeSomeText ? *settled != Pair::Never : *settled == Pair::Canonical;
  const uint32_t three[] = {before, prev, next};
  return next_pair == Pair::BeforeSomeText ? written_how(three) != Pair::Never : written_as(three, "");
}

CanonicalPairs::Rows CanonicalPairs::rows_for(uint32_t before, uint32_t prev) const {
  Rows rows;
  rows.needs_three = is_text(before) && pair(before, prev) == Pair::BeforeSomeText;
  // Looked up after `before`'s row (which may push out another); the
  // context row's lookup cannot push out `prev`'s, the most recent.
  rows.row = &row_for(RowKey(kStart) << 32 | prev);
  if (context_matters(before, prev)) {
    rows.context = &row_for(RowKey(before) << 32 | prev);
  }
  return rows;
}

bool CanonicalPairs::allowed_after(const Rows& rows, uint32_t before, uint32_t prev, uint32_t next) const {
  const Pair p = rows.context ? in_context(*rows.context, *rows.row, before, prev, next) : pair_in(*rows.row, prev, next);
  return p != Pair::Never && (!rows.needs_three || triple_ok(before, prev, next, p));
}

bool CanonicalPairs::allows(uint32_t before, uint32_t prev, uint32_t next) const {
  if (!is_text(next)) return false;
  std::lock_guard lock(mutex_);
  if (!is_text(prev)) return self_canonical(next);
  return allowed_after(rows_for(before, prev), before, prev, next);
}

bool CanonicalPairs::may_end(uint32_t before, uint32_t prev) const {
  if (!is_text(prev)) return true;  // no token
  std::lock_guard lock(mutex_);
  if (!is_text(before)) return written_alone(prev);  // one token: written alone at the end of the text
  return pair(before, prev) == Pair::Canonical;
}

void CanonicalPairs::filter(uint32_t before, uint32_t prev, std::span<uint32_t> words) const {
  std::lock_guard lock(mutex_);
  const bool start = !is_text(prev);
  const Rows rows = start ? Rows{} : rows_for(before, prev);
  // Only tokens not decided yet are looked at one by one; the rest is a
  // word-wide AND with the decided bits (special tokens left alone).
  const Row* decided = rows.context ? rows.context : rows.row;
  // Where the two before must be checked with the next token, a row of the
  // three made whole stands for the decided one (else every token is
  // checked one by one).
  const Row* three = rows.needs_three ? three_row(rows, before, prev) : nullptr;
  if (three) decided = three;
  const bool one_by_one = rows.needs_three && !three;
  const std::vector<uint32_t>& checked = start ? self_checked_ : decided->checked;
  const std::vector<uint32_t>& allowed = start ? self_ok_ : decided->allowed;
  const size_t n = std::min(words.size(), words_);
  auto decide_word = [&](size_t w, uint32_t bits) {
    for (; bits; bits &= bits - 1) {
      const auto t = static_cast<uint32_t>(w * 32 + std::countr_zero(bits));
      if (!(start ? self_canonical(t) : allowed_after(rows, before, prev, t))) words[w] &= ~(1u << (t % 32));
    }
  };
  if (one_by_one) {
    for (size_t w = 0; w < n; ++w) decide_word(w, words[w] & text_words_[w]);
    return;
  }
  // A word-wide AND with the decided bits (special tokens left alone); the
  // words holding tokens not decided yet are noted, and those tokens
  // looked at one by one after.
  std::vector<uint32_t>& undecided = undecided_words_;
  undecided.clear();
  by_quads(n, [&]<typename W>(size_t w) {
    auto at = [w](const std::vector<uint32_t>& v) { return word_at<W>(v, w); };
    const W mask = load_words<W>(words.data() + w);
    const W not_checked = ~at(checked);
    if (any_bit(mask & at(text_words_) & not_checked)) undecided.push_back(static_cast<uint32_t>(w));
    put_word(words, w, mask & (at(allowed) | not_checked | ~at(text_words_)));
  });
  // (A noted word begins four where the quads run, one past them.)
  constexpr size_t kQuad = sizeof(Quad) / sizeof(uint32_t);
  const size_t quads_end = n / kQuad * kQuad;
  for (uint32_t first : undecided)
    for (size_t w = first; w < (first < quads_end ? first + kQuad : first + 1); ++w)
      decide_word(w, words[w] & text_words_[w] & ~checked[w]);
}

int CanonicalPairs::reference_pair(uint32_t prev, uint32_t next) const {
  std::lock_guard lock(mutex_);
  if (!is_text(prev) || !is_text(next) || !self_canonical(next)) return static_cast<int>(Pair::Never);
  return static_cast<int>(classify(prev, next));
}

int CanonicalPairs::decided_pair(uint32_t prev, uint32_t next) const {
  std::lock_guard lock(mutex_);
  if (!is_text(prev) || !is_text(next)) return static_cast<int>(Pair::Never);
  return static_cast<int>(pair(prev, next));
}

int CanonicalPairs::reference_triple(uint32_t before, uint32_t prev, uint32_t next) const {
  std::lock_guard lock(mutex_);
  const uint32_t three[] = {before, prev, next};
  if (!is_text(before) || !is_text(prev) || !is_text(next)) return static_cast<int>(Pair::Never);
  return static_cast<int>(written_how(three));
}

int CanonicalPairs::decided_triple(uint32_t before, uint32_t prev, uint32_t next) const {
  std::lock_guard lock(mutex_);
  if (!is_text(before) || !is_text(prev) || !is_text(next)) return static_cast<int>(Pair::Never);
  const std::optional<Pair> settled = triple_by_pieces(before, prev, next);
  return settled ? static_cast<int>(*settled) : -1;
}

size_t CanonicalPairs::classes() const {
  std::lock_guard lock(mutex_);
  return cuts_.size();
}

size_t CanonicalPairs::row_cache_bytes() const {
  std::lock_guard lock(mutex_);
  return rows_.size() * words_ * 5 * sizeof(uint32_t);  // five words a row
}

size_t CanonicalPairs::memory_bytes() const {
  const size_t rows = row_cache_bytes();
  std::lock_guard lock(mutex_);
  // Per token: text, one byte, a continuation byte first, and the
  // verdicts alone (four); five words a class's cuts.
  size_t bytes = rows + (self_checked_.size() * 7 + cuts_.size() * words_ * 5 +
                  (merges_give_words_.size() + white_end_words_.size() + unsafe_words_.size() +
                   added_byte_words_.size() + cut_end_words_.size())) *
                     sizeof(uint32_t) +
                 piece_pairs_.size() * (sizeof(RowKey) + sizeof(bool) + 2 * sizeof(void*));
  if (merges_) {
    const Merges& m = *merges_;
    bytes += m.flags.size() + (m.group.size() + m.right_begin.size() + m.left_begin.size() + m.merges_begin.size() +
                               m.always_candidate.size() + m.always_candidate_prev.size() +
                               m.loose_left_begin.size() + m.joined_begin.size() + m.joined.size() +
                               m.joined_cut_begin.size() + m.joined_cut.size()) *
                                  sizeof(uint32_t) +
             (m.right.size() + m.left.size() + m.loose_left.size()) * sizeof(Merges::Edge) + m.merges.size() * sizeof(Merges::Step);
  }
  return bytes;
}

}  // namespace cgram

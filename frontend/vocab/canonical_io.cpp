// Saving and loading what canonical mode makes once per vocabulary
// (CanonicalPairs::save, load; `cgram vocab build`).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "binary_io.h"
#include "canonical.h"
#include "canonical_merges.h"
#include "piece_automaton.h"
#include "utf8.h"

namespace cgram {
namespace {

constexpr std::string_view kMagic = "CGVOCAB\n";
constexpr uint32_t kFormat = 9;

// Begin offsets of CSR lists: one more than the owners, from 0, never
// decreasing, ending at the entries' count.
bool valid_begins(const std::vector<uint32_t>& begin, size_t owners, size_t entries) {
  if (begin.size() != owners + 1 || begin.front() != 0 || begin.back() != entries) return false;
  return std::is_sorted(begin.begin(), begin.end());
}

// A copy whose padding bytes are zero (the saved bytes are then the same
// for the same vocabulary).
template <typename T>
std::vector<T> zero_padded(const std::vector<T>& v) {
  std::vector<T> out(v.size());
  std::memset(static_cast<void*>(out.data()), 0, out.size() * sizeof(T));
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (requires { v[i].made; }) {
      out[i].id = v[i].id;
      out[i].made = v[i].made;
      out[i].consumed = v[i].consumed;
    } else {
      out[i].symbol = v[i].symbol;
      out[i].key = v[i].key;
    }
  }
  return out;
}

template <typename T, typename F>
bool all_of(const std::vector<T>& v, F&& f) {
  return std::all_of(v.begin(), v.end(), f);
}

}  // namespace

uint64_t CanonicalPairs::encoder_fingerprint(const Vocabulary& vocab) {
  const Vocabulary::EncoderData& d = vocab.encoder_data();
  uint64_t h = ir::hash_bytes(std::string_view(reinterpret_cast<const char*>(&kFormat), sizeof kFormat),
                              vocab.fingerprint());
  h = ir::hash_bytes(d.pretokenizer, h ^ static_cast<uint64_t>(vocab.kind()));
  h = ir::hash_bytes(std::string_view(reinterpret_cast<const char*>(d.scores.data()), d.scores.size() * sizeof(float)),
                     h + (d.add_prefix_space ? 1 : 0) + (d.ignore_merges ? 2 : 0));
  const uint64_t merges[] = {d.merges_digest, d.merge_rank.size()};
  h = ir::hash_bytes(std::string_view(reinterpret_cast<const char*>(merges), sizeof merges), h);
  for (const auto& [text, id] : d.added_tokens) h = ir::hash_bytes(text, h + id);
  return h;
}

std::string CanonicalPairs::save() const {
  std::lock_guard lock(mutex_);
  ir::BinaryWriter w;
  w.put_bytes(kMagic);
  w.put<uint32_t>(kFormat);
  w.put<uint64_t>(encoder_fingerprint(*vocab_));
  const PieceAutomaton* automaton = finder_ ? finder_->automaton() : nullptr;
  w.put<uint64_t>(automaton ? automaton->fingerprint() : 0);
  w.put<uint8_t>(merges_ ? 1 : 0);
  if (merges_) {
    const Merges& m = *merges_;
    w.put_vector(m.flags);
    w.put_vector(m.group);
    w.put<uint64_t>(m.group_text.size());
    for (const std::string& g : m.group_text) w.put_bytes(g);
    w.put_vector(m.right_begin);
    w.put_vector(zero_padded(m.right));
    w.put_vector(m.left_begin);
    w.put_vector(zero_padded(m.left));
    w.put_vector(m.merges_begin);
    w.put_vector(zero_padded(m.merges));
    w.put_vector(m.always_candidate);
    w.put_vector(m.loose_left_begin);
    w.put_vector(zero_padded(m.loose_left));
    w.put_vector(m.always_candidate_prev);
    w.put_vector(m.joined_begin);
    w.put_vector(m.joined);
    w.put_vector(m.joined_cut_begin);
    w.put_vector(m.joined_cut);
  }
  using Words = const std::vector<uint32_t>*;
  for (Words v : std::initializer_list<Words>{&self_checked_, &self_ok_, &alone_checked_, &alone_ok_,
                                              &merges_give_words_, &white_end_words_, &unsafe_words_,
                                              &added_byte_words_, &cut_end_words_, &lone_lead_words_, &lead_probe_ok_})
    w.put_vector(*v);
  auto put_cuts = [&](const PieceCuts& c) {
    for (const auto* v : {&c.boundary, &c.one_piece, &c.exact, &c.joins, &c.inner}) w.put_vector(*v);
  };
  put_cuts(whole_text_cuts_);
  std::vector<uint64_t> keys;
  for (const auto& [key, cuts] : cuts_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  w.put<uint64_t>(keys.size());
  for (uint64_t key : keys) {
    w.put<uint64_t>(key);
    put_cuts(cuts_.at(key));
  }
  w.put<uint64_t>(ir::hash_bytes(w.bytes()));
  return w.take();
}

Result<std::unique_ptr<CanonicalPairs>> CanonicalPairs::load(std::shared_ptr<const Vocabulary> vocab,
                                                             const Encoder& encoder, std::string_view bytes,
                                                             size_t cached_tokens) {
  const std::string name = vocab->name();
  auto pairs = std::make_unique<CanonicalPairs>(Key{}, std::move(vocab), encoder, std::max<size_t>(cached_tokens, 2),
                                                false);
  if (auto wrong = pairs->read_saved(bytes))
    return Error{ErrorCode::InvalidInput, fmt::format("the saved canonical context for {}: {}", name, *wrong)};
  return pairs;
}

std::optional<std::string> CanonicalPairs::read_saved(std::string_view bytes) {
  if (bytes.size() < 8 || ir::hash_bytes(bytes.substr(0, bytes.size() - 8)) !=
                              ir::BinaryReader(bytes.substr(bytes.size() - 8)).get<uint64_t>())
    return "its checksum does not match (a truncated or damaged file)";
  ir::BinaryReader r(bytes.substr(0, bytes.size() - 8));
  if (r.get_bytes() != kMagic) return "it is not a saved canonical context (no CGVOCAB header)";
  if (const auto format = r.get<uint32_t>(); format != kFormat)
    return fmt::format("it is in format {}, this cgram reads format {}; build it again", format, kFormat);
  if (r.get<uint64_t>() != encoder_fingerprint(*vocab_))
    return "it was built for another vocabulary (or another version of this one's merges or pre-tokenizer)";
  const PieceAutomaton* automaton = finder_ ? finder_->automaton() : nullptr;
  if (r.get<uint64_t>() != (automaton ? automaton->fingerprint() : 0))
    return "its pre-tokenizer automaton differs from this cgram's; build it again";
  const size_t n = vocab_->size();
  // Merges exactly where the constructor builds them.
  const bool has_merges = r.get<uint8_t>() != 0;
  if (has_merges != (encoder_.piece_rule() == Encoder::PieceRule::WholeText || finder_ != nullptr))
    return "its merges index does not fit this vocabulary's pre-tokenizer";
  if (has_merges) {
    auto m = std::make_unique<Merges>();
    m->flags = r.get_vector<uint8_t>();
    m->group = r.get_vector<uint32_t>();
    const uint64_t groups = r.get_count(8);
    for (uint64_t i = 0; i < groups && r.ok(); ++i) m->group_text.emplace_back(r.get_bytes());
    m->right_begin = r.get_vector<uint32_t>();
    m->right = r.get_vector<Merges::Edge>();
    m->left_begin = r.get_vector<uint32_t>();
    m->left = r.get_vector<Merges::Edge>();
    m->merges_begin = r.get_vector<uint32_t>();
    m->merges = r.get_vector<Merges::Step>();
    m->always_candidate = r.get_vector<uint32_t>();
    m->loose_left_begin = r.get_vector<uint32_t>();
    m->loose_left = r.get_vector<Merges::Edge>();
    m->always_candidate_prev = r.get_vector<uint32_t>();
    m->joined_begin = r.get_vector<uint32_t>();
    m->joined = r.get_vector<uint32_t>();
    m->joined_cut_begin = r.get_vector<uint32_t>();
    m->joined_cut = r.get_vector<uint32_t>();
    if (!r.ok()) return r.error();
    // Every index the rows follow must stay inside what it indexes.
    const size_t symbols = m->left_begin.empty() ? 0 : m->left_begin.size() - 1;
    const bool valid =
        m->flags.size() == n && m->group.size() == n &&
        all_of(m->group, [&](uint32_t g) { return g == UINT32_MAX || g < m->group_text.size(); }) &&
        [&] {  // a token the fast path takes has a group, and is whole characters
          for (uint32_t t = 0; t < n; ++t)
            if ((m->flags[t] & Merges::kSafe) &&
                (m->group[t] == UINT32_MAX || vocab_->bytes(t).empty() || vocab_->is_special(t)))
              return false;
          return true;
        }() &&
        valid_begins(m->right_begin, n, m->right.size()) &&
        all_of(m->right, [&](const Merges::Edge& e) { return e.id < symbols; }) &&
        valid_begins(m->left_begin, symbols, m->left.size()) &&
        all_of(m->left, [&](const Merges::Edge& e) { return e.id < n; }) &&
        valid_begins(m->merges_begin, symbols, m->merges.size()) &&
        all_of(m->merges, [&](const Merges::Step& s) { return s.symbol < symbols; }) &&
        valid_begins(m->loose_left_begin, symbols, m->loose_left.size()) &&
        all_of(m->loose_left, [&](const Merges::Edge& e) { return e.id < n; }) &&
        m->always_candidate.size() == words_ && m->always_candidate_prev.size() == words_ &&
        valid_begins(m->joined_begin, n, m->joined.size()) &&
        all_of(m->joined, [&](uint32_t t) { return t < n; }) &&
        valid_begins(m->joined_cut_begin, n, m->joined_cut.size()) &&
        all_of(m->joined_cut, [&](uint32_t t) { return t < n; });
    if (!valid) return "its merges index does not fit the vocabulary";
    m->note_added_tokens(*vocab_);
    merges_ = std::move(m);
  }
  for (auto* v : {&self_checked_, &self_ok_, &alone_checked_, &alone_ok_, &merges_give_words_, &white_end_words_,
                  &unsafe_words_, &added_byte_words_, &cut_end_words_, &lone_lead_words_, &lead_probe_ok_}) {
    *v = r.get_vector<uint32_t>();
    if (r.ok() && !v->empty() && v->size() != words_) return "a per-token table does not fit the vocabulary";
  }
  if (self_checked_.size() != words_ || alone_checked_.size() != words_ || self_ok_.size() != words_ ||
      alone_ok_.size() != words_)
    return "the tokens' verdicts alone do not fit the vocabulary";
  every_token_alone_known_ = makes_whole_rows();  // the build made them all
  auto get_cuts = [&](PieceCuts& c) {
    for (auto* v : {&c.boundary, &c.one_piece, &c.exact, &c.joins, &c.inner}) {
      *v = r.get_vector<uint32_t>();
      if (r.ok() && !v->empty() && v->size() != words_) return false;
    }
    return true;
  };
  if (!get_cuts(whole_text_cuts_)) return "the piece cuts do not fit the vocabulary";
  const uint64_t count = r.get_count(8);
  for (uint64_t i = 0; i < count && r.ok(); ++i) {
    const uint64_t key = r.get<uint64_t>();
    if (!automaton || key >> 2 >= automaton->states() || (key & 3) == 3) return "a class of piece cuts is out of range";
    PieceCuts& cuts = cuts_[key];
    if (!get_cuts(cuts) || cuts.boundary.size() != words_ || cuts.one_piece.size() != words_ ||
        cuts.exact.size() != words_ || cuts.joins.size() != words_ || cuts.inner.size() != words_)
      return "the piece cuts do not fit the vocabulary";
  }
  if (!r.ok()) return r.error();
  if (!r.at_end()) return "it has bytes after its end";
  // Whole rows need every part, and nothing else may be there: a context
  // saved without them (a vocabulary whose pieces the automaton cannot cut)
  // decides pair by pair.
  const bool whole = makes_whole_rows();
  const bool whole_text = whole && !finder_;
  for (const auto* v : {&merges_give_words_, &white_end_words_, &unsafe_words_, &added_byte_words_, &cut_end_words_,
                        &lone_lead_words_, &lead_probe_ok_})
    if (v->size() != (whole ? words_ : 0)) return "the per-token tables do not fit the vocabulary's pieces";
  for (const auto* v : {&whole_text_cuts_.boundary, &whole_text_cuts_.one_piece, &whole_text_cuts_.exact,
                        &whole_text_cuts_.joins, &whole_text_cuts_.inner})
    if (v->size() != (whole_text ? words_ : 0)) return "the piece cuts do not fit the vocabulary's pieces";
  if (!cuts_.empty() && (!whole || whole_text)) return "the piece cuts do not fit the vocabulary's pieces";
  // Every token the rows read as whole characters is (the tables are not
  // trusted to mark the others unsafe).
  if (whole)
    for (uint32_t t = 0; t < n; ++t)
      if (!vocab_->is_special(t) && !(unsafe_words_[t / 32] >> (t % 32) & 1) && first_invalid_utf8(vocab_->bytes(t)))
        return "a token that is not whole characters is not marked so";
  return std::nullopt;
}

}  // namespace cgram

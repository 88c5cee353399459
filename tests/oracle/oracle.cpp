#include "oracle.h"

#include <algorithm>
#include <map>
#include <set>

#include "utf8_ranges.h"

namespace cgram::oracle {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Complete: return "complete";
    case Verdict::Prefix: return "prefix";
    case Verdict::Rejected: return "rejected";
  }
  return "?";
}

namespace {

class Expander {
 public:
  explicit Expander(OracleGrammar& g) : g_(g) {}

  uint32_t new_nonterminal() {
    g_.productions_of.emplace_back();
    return static_cast<uint32_t>(g_.productions_of.size() - 1);
  }
  void add(uint32_t lhs, std::vector<Symbol> rhs) {
    g_.productions_of[lhs].push_back(static_cast<uint32_t>(g_.productions.size()));
    g_.productions.push_back({lhs, std::move(rhs)});
  }
  static Symbol nt(uint32_t i) { return {Symbol::Kind::Nonterminal, 0, 0, i}; }
  static Symbol byte(uint8_t b) { return {Symbol::Kind::Bytes, b, b, 0}; }

  Symbol literal(std::string_view bytes) {
    uint32_t n = new_nonterminal();
    std::vector<Symbol> rhs;
    for (char c : bytes) rhs.push_back(byte(static_cast<uint8_t>(c)));
    add(n, std::move(rhs));
    return nt(n);
  }

  // A regex syntax tree as rules; each node becomes one nonterminal.
  Symbol regex(const ir::RegexNode& node) {
    uint32_t n = new_nonterminal();
    switch (node.kind) {
      case ir::RegexNode::Kind::Empty: add(n, {}); break;
      case ir::RegexNode::Kind::Set:
        for (const ir::Utf8Sequence& seq : ir::utf8_sequences(node.set)) {
          std::vector<Symbol> rhs;
          for (uint8_t i = 0; i < seq.length; ++i)
            rhs.push_back({Symbol::Kind::Bytes, seq.bytes[i].lo, seq.bytes[i].hi, 0});
          add(n, std::move(rhs));
        }
        break;
      case ir::RegexNode::Kind::Concat: {
        std::vector<Symbol> rhs;
        for (const ir::RegexNode& c : node.children) rhs.push_back(regex(c));
        add(n, std::move(rhs));
        break;
      }
      case ir::RegexNode::Kind::Alternation:
        for (const ir::RegexNode& c : node.children) add(n, {regex(c)});
        break;
      case ir::RegexNode::Kind::Repeat: {
        Symbol x = regex(node.children[0]);
        std::vector<Symbol> head(node.min, x);
        if (node.max == ir::kRegexUnbounded) {
          add(n, head);                // n -> x^min
          add(n, {nt(n), x});          // n -> n x
          break;
        }
        std::optional<Symbol> rest;  // rest_j -> ε | x rest_{j-1}
        for (uint32_t j = node.min; j < node.max; ++j) {
          uint32_t r = new_nonterminal();
          add(r, {});
          add(r, rest ? std::vector<Symbol>{x, *rest} : std::vector<Symbol>{x});
          rest = nt(r);
        }
        if (rest) head.push_back(*rest);
        add(n, std::move(head));
        break;
      }
    }
    return nt(n);
  }

 private:
  OracleGrammar& g_;
};

void compute_nullable(OracleGrammar& g) {
  g.nullable.assign(g.productions_of.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (const Production& p : g.productions) {
      if (g.nullable[p.lhs]) continue;
      bool all = std::all_of(p.rhs.begin(), p.rhs.end(), [&](const Symbol& s) {
        return s.kind == Symbol::Kind::Except ||
               (s.kind == Symbol::Kind::Nonterminal && g.nullable[s.index]);
      });
      if (all) g.nullable[p.lhs] = true, changed = true;
    }
  }
}

void compute_byte_classes(OracleGrammar& g) {
  std::set<int> cuts{0, 256};
  for (const Production& p : g.productions)
    for (const Symbol& s : p.rhs)
      if (s.kind == Symbol::Kind::Bytes) cuts.insert(s.lo), cuts.insert(s.hi + 1);
  for (const ExceptRule& e : g.excepts)
    for (const std::string& str : e.strings)
      for (char c : str) cuts.insert(static_cast<uint8_t>(c)), cuts.insert(static_cast<uint8_t>(c) + 1);
  // Where UTF-8 tells bytes apart: continuation sub-ranges, and lead bytes
  // of each length and of the restricted second bytes.
  for (int c : {0x80, 0x90, 0xA0, 0xC0, 0xC2, 0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF1, 0xF4, 0xF5}) cuts.insert(c);
  for (int c : cuts)
    if (c < 256) g.representative_bytes.push_back(static_cast<uint8_t>(c));
}

}  // namespace

OracleGrammar OracleGrammar::from_ir(const ir::GrammarIR& ir) {
  OracleGrammar g;
  Expander x(g);
  for (size_t i = 0; i < ir.nonterminals.size(); ++i) x.new_nonterminal();
  std::vector<std::optional<Symbol>> terminal_symbol(ir.terminals.size());
  for (const ir::ExceptSpec& e : ir.excepts) {
    g.excepts.push_back({e.strings, e.max_tokens});
    for (const std::string& s : e.strings) g.longest_except_string = std::max(g.longest_except_string, s.size());
  }
  for (const ir::Production& p : ir.productions) {
    std::vector<Symbol> rhs;
    for (ir::Symbol s : p.rhs) {
      switch (s.kind) {
        case ir::Symbol::Kind::Nonterminal: rhs.push_back(Expander::nt(s.index)); break;
        case ir::Symbol::Kind::Terminal: {
          const ir::Terminal& t = ir.terminals[s.index];
          if (!terminal_symbol[s.index])
            terminal_symbol[s.index] =
                t.kind == ir::Terminal::Kind::Literal ? x.literal(t.text) : x.regex(t.regex);
          rhs.push_back(*terminal_symbol[s.index]);
          break;
        }
        case ir::Symbol::Kind::AnyToken: rhs.push_back({Symbol::Kind::AnyToken, 0, 0, 0}); break;
        case ir::Symbol::Kind::Except: rhs.push_back({Symbol::Kind::Except, 0, 0, s.index}); break;
      }
    }
    x.add(p.lhs, std::move(rhs));
  }
  uint32_t accept = x.new_nonterminal();
  g.accept_production = static_cast<uint32_t>(g.productions.size());
  x.add(accept, {Expander::nt(ir.start)});
  compute_nullable(g);
  compute_byte_classes(g);
  return g;
}

Recognizer::Recognizer(std::shared_ptr<const OracleGrammar> grammar, bool segmented)
    : g_(std::move(grammar)), segmented_(segmented) {
  intern({});  // id 0: nothing pending
  columns_.emplace_back();
  boundary_.push_back(1);
  utf8_.push_back(Utf8::Whole);
  add(columns_[0], {g_->accept_production, 0, 0, 0, 0});
  close(0);
}

uint32_t Recognizer::intern(Pending p) {
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  auto [it, inserted] = pending_ids_.emplace(p, static_cast<uint32_t>(pending_sets_.size()));
  if (inserted) pending_sets_.push_back(std::move(p));
  return it->second;
}

void Recognizer::add(Column& column, const Item& item) {
  if (column.seen.insert(item).second) column.items.push_back(item);
}

// The pending occurrences after the text grows from `from` to `to`; nullopt
// when one of them completes (the derivation dies).
std::optional<uint32_t> Recognizer::advance_pending(uint32_t pending, size_t from, size_t to) {
  if (pending == 0 || from == to) return pending;
  Pending next;
  for (auto [spec, start] : pending_sets_[pending]) {
    const std::vector<std::string>& strings = g_->excepts[spec].strings;
    bool alive = true;
    for (size_t j = from + 1; j <= to && alive; ++j) {
      std::string_view t(text_.data() + start, j - start);
      bool is_prefix = false;
      for (const std::string& s : strings) {
        if (s == t) return std::nullopt;
        if (s.size() > t.size() && std::string_view(s).substr(0, t.size()) == t) is_prefix = true;
      }
      alive = is_prefix;
    }
    if (alive) next.emplace_back(spec, start);
  }
  return intern(std::move(next));
}

bool Recognizer::token_boundary(size_t pos) const {
  return pos >= free_from_ || boundary_[pos];
}

size_t Recognizer::tokens_touching(size_t begin, size_t end) const {
  size_t count = 1;
  for (size_t p = begin + 1; p < end; ++p) count += boundary_[p] && p <= free_from_;
  return count;
}

void Recognizer::close(size_t k) {
  for (size_t i = 0; i < columns_[k].items.size(); ++i) {
    const Item item = columns_[k].items[i];
    const Production& p = g_->productions[item.production];
    if (item.dot == p.rhs.size()) {
      const size_t o = item.origin;
      for (size_t j = 0; j < columns_[o].items.size(); ++j) {
        const Item parent = columns_[o].items[j];
        const Production& pp = g_->productions[parent.production];
        if (parent.dot < pp.rhs.size() && pp.rhs[parent.dot].kind == Symbol::Kind::Nonterminal &&
            pp.rhs[parent.dot].index == p.lhs && parent.pending == item.pending_at_start)
          add(columns_[k], {parent.production, parent.dot + 1, parent.origin, parent.pending_at_start,
                            item.pending});
      }
      continue;
    }
    const Symbol& next = p.rhs[item.dot];
    const Item advanced{item.production, item.dot + 1, item.origin, item.pending_at_start, item.pending};
    switch (next.kind) {
      case Symbol::Kind::Nonterminal:
        for (uint32_t q : g_->productions_of[next.index])
          add(columns_[k], {q, 0, static_cast<uint32_t>(k), item.pending, item.pending});
        // Aycock–Horspool: an empty derivation consumes nothing and leaves
        // the pending occurrences as they are.
        if (g_->nullable[next.index]) add(columns_[k], advanced);
        break;
      case Symbol::Kind::Except:
        columns_[k].has_span_waiters = true;
        add(columns_[k], advanced);  // w may be empty
        break;
      case Symbol::Kind::AnyToken: columns_[k].has_span_waiters = true; break;
      case Symbol::Kind::Bytes: break;
    }
  }
}

// any! and except! spans [o, e) that end at e.
void Recognizer::complete_spans(size_t e) {
  for (size_t o = 0; o < e; ++o) {
    if (!columns_[o].has_span_waiters) continue;
    for (size_t j = 0; j < columns_[o].items.size(); ++j) {
      const Item item = columns_[o].items[j];
      const Production& p = g_->productions[item.production];
      if (item.dot == p.rhs.size()) continue;
      const Symbol& next = p.rhs[item.dot];
      if (next.kind == Symbol::Kind::AnyToken) {
        if (segmented_) {
          if (!token_boundary(o) || !token_boundary(e)) continue;
          bool inner_boundary = false;
          for (size_t q = o + 1; q < e && !inner_boundary; ++q) inner_boundary = token_boundary(q);
          if (inner_boundary) continue;
        }
      } else if (next.kind == Symbol::Kind::Except) {
        const ExceptRule& rule = g_->excepts[next.index];
        bool occurrence_inside = false;
        for (size_t i = o; i < e && !occurrence_inside; ++i)
          for (const std::string& s : rule.strings)
            if (i + s.size() <= e && text_.compare(i, s.size(), s) == 0) occurrence_inside = true;
        if (occurrence_inside) continue;
        if (segmented_ && rule.max_tokens && tokens_touching(o, e) > *rule.max_tokens) continue;
        // The text is whole characters: it ends between two (it may begin
        // inside one, finishing a character that any! began). Inside one,
        // it can only go on.
        if (utf8_[e] != Utf8::Whole) {
          if (advance_pending(item.pending, o, e)) columns_[e].span_goes_on = true;
          continue;
        }
      } else {
        continue;
      }
      std::optional<uint32_t> pending = advance_pending(item.pending, o, e);
      if (!pending) continue;
      if (next.kind == Symbol::Kind::Except) {
        Pending more = pending_sets_[*pending];
        const ExceptRule& rule = g_->excepts[next.index];
        for (size_t i = o; i < e; ++i) {
          std::string_view t(text_.data() + i, e - i);
          for (const std::string& s : rule.strings)
            if (s.size() > t.size() && std::string_view(s).substr(0, t.size()) == t) {
              more.emplace_back(next.index, static_cast<uint32_t>(i));
              break;
            }
        }
        pending = intern(std::move(more));
      }
      add(columns_[e], {item.production, item.dot + 1, item.origin, item.pending_at_start, *pending});
    }
  }
}

// The text is over UTF-8: decode the last character from its lead byte and
// ask whether the code points its bytes still allow include a valid one of
// that length (not overlong, not a surrogate, at most U+10FFFF).
Recognizer::Utf8 Recognizer::utf8_after_last_byte() const {
  if (utf8_.back() == Utf8::Invalid) return Utf8::Invalid;
  auto at = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(text_[i])); };
  size_t lead = text_.size() - 1;
  while (lead > 0 && (at(lead) & 0xC0) == 0x80 && text_.size() - lead < 4) --lead;
  if (utf8_[lead] != Utf8::Whole) return Utf8::Invalid;
  const uint32_t b0 = at(lead);
  const size_t have = text_.size() - lead;
  const size_t length = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 0;
  if (length == 0 || have > length) return Utf8::Invalid;
  uint32_t bits = b0 & (0xFFu >> (length + 1));
  for (size_t i = lead + 1; i < text_.size(); ++i) bits = bits << 6 | (at(i) & 0x3F);
  const size_t missing = length - have;
  uint32_t lo = bits << (6 * missing), hi = lo + (1u << (6 * missing)) - 1;
  static constexpr uint32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
  static constexpr uint32_t kMost[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  lo = std::max(lo, kLeast[length - 1]);
  hi = std::min(hi, kMost[length - 1]);
  if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return Utf8::Invalid;
  return missing == 0 ? Utf8::Whole : Utf8::Partial;
}

void Recognizer::push_byte(uint8_t byte, bool boundary_after) {
  const size_t k = text_.size();
  text_ += static_cast<char>(byte);
  boundary_.push_back(boundary_after);
  utf8_.push_back(utf8_after_last_byte());
  columns_.emplace_back();
  for (size_t j = 0; j < columns_[k].items.size(); ++j) {
    const Item item = columns_[k].items[j];
    const Production& p = g_->productions[item.production];
    if (item.dot == p.rhs.size()) continue;
    const Symbol& s = p.rhs[item.dot];
    if (s.kind != Symbol::Kind::Bytes || byte < s.lo || byte > s.hi) continue;
    if (auto pending = advance_pending(item.pending, k, k + 1))
      add(columns_[k + 1], {item.production, item.dot + 1, item.origin, item.pending_at_start, *pending});
  }
  complete_spans(k + 1);
  close(k + 1);
}

void Recognizer::push_token(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size(); ++i)
    push_byte(static_cast<uint8_t>(bytes[i]), i + 1 == bytes.size());
}

void Recognizer::push_bytes(std::string_view bytes) {
  for (char c : bytes) push_byte(static_cast<uint8_t>(c), !segmented_);
}

void Recognizer::pop_bytes(size_t n) {
  n = std::min(n, text_.size());
  text_.resize(text_.size() - n);
  columns_.resize(columns_.size() - n);
  boundary_.resize(boundary_.size() - n);
  utf8_.resize(utf8_.size() - n);
}

bool Recognizer::complete() const {
  if (utf8_.back() != Utf8::Whole) return false;  // never inside a character
  for (const Item& item : columns_.back().items)
    if (item.production == g_->accept_production && item.dot == 1 && item.origin == 0) return true;
  return false;
}

bool Recognizer::has_clean_item() const {
  if (utf8_.back() != Utf8::Whole) return false;
  for (const Item& item : columns_.back().items)
    if (item.pending == 0) return true;
  return false;
}

bool Recognizer::viable() const {
  if (dead()) return false;
  // A complete text is viable even where every item still carries pending
  // occurrences: nothing follows to complete them.
  if (has_clean_item() || complete()) return true;
  return viable_within(2 * g_->longest_except_string + 1);
}

// Bytes that leave the text inside a character do not count against the
// depth (a character has at most three more), and inside a character only
// continuation bytes are tried: the rest are invalid UTF-8.
bool Recognizer::viable_within(size_t depth) const {
  const bool in_char = utf8_.back() == Utf8::Partial;
  if (depth == 0 && !in_char) return false;
  Recognizer probe = *this;
  // Inside a character begun in segmented text, the rest of it comes as
  // one-byte tokens (every vocabulary spells each byte; except! counts see
  // them); past that, the continuation is free text.
  const bool byte_tokens = utf8_.back() == Utf8::Partial && text_.size() < free_from_;
  if (!byte_tokens) probe.free_from_ = std::min(free_from_, text_.size());
  for (uint8_t b : g_->representative_bytes) {
    if (in_char && (b < 0x80 || b > 0xBF)) continue;
    probe.push_byte(b, byte_tokens);
    const size_t left = probe.utf8_.back() == Utf8::Partial || depth == 0 ? depth : depth - 1;
    bool ok = !probe.dead() && (probe.complete() || probe.has_clean_item() || probe.viable_within(left));
    probe.pop_bytes(1);
    if (ok) return true;
  }
  return false;
}

Verdict Recognizer::verdict() const {
  if (complete()) return Verdict::Complete;
  return viable() ? Verdict::Prefix : Verdict::Rejected;
}

namespace {
MatchResult finish(Recognizer& r, size_t total) {
  if (r.size() == total) {
    Verdict v = r.verdict();
    if (v != Verdict::Rejected) return {v, total};
  }
  while (r.size() > 0 && !r.viable()) r.pop_bytes(1);
  return {Verdict::Rejected, r.size()};
}
}  // namespace

MatchResult match_text(std::shared_ptr<const OracleGrammar> grammar, std::string_view text) {
  Recognizer r(std::move(grammar), /*segmented=*/false);
  for (char c : text) {
    r.push_bytes(std::string_view(&c, 1));
    if (r.dead()) break;
  }
  return finish(r, text.size());
}

MatchResult match_tokens(std::shared_ptr<const OracleGrammar> grammar,
                         const std::vector<std::string>& tokens) {
  Recognizer r(std::move(grammar), /*segmented=*/true);
  size_t total = 0;
  for (const std::string& t : tokens) total += t.size();
  for (const std::string& t : tokens) {
    r.push_token(t);
    if (r.dead()) break;
  }
  return finish(r, total);
}

}  // namespace cgram::oracle

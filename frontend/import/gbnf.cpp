#include "gbnf.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "cgram_text.h"
#include "memory_budget.h"
#include "utf8.h"

namespace cgram {

namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A piece of the output: a rule (from its name to its `;`) or what lies
// between rules (blank lines, comments). Offsets are local to the piece.
struct Chunk {
  std::string text;
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
  std::string rule;  // the GBNF name for a rule's chunk, empty otherwise
  bool dropped = false;
};

// llama.cpp's own view of a rule, kept as far as its left-recursion check
// needs it: per alternative, its elements (rule references and characters).
// llama.cpp rewrites groups and repetitions into rules of their own, and
// refuses a grammar where a rule can reach itself before any character
// (llama_grammar_detect_left_recursion); the same rewriting is followed
// here, so that the same grammars are refused.
struct Element {
  bool is_ref = false;
  uint32_t rule = 0;
};
using Alternative = std::vector<Element>;
// A GBNF rule is defined once it has alternatives (every definition has at
// least one); until then `offset` is where it was first referred to.
struct ModelRule {
  std::vector<Alternative> alternatives;
  std::string owner;  // the GBNF rule it is, or is part of
  size_t offset = 0;  // where it is defined (or the group, the repetition)
  size_t chunk = SIZE_MAX;  // the output chunk of its definition (GBNF rules)
};

// The translator follows llama.cpp's recursive-descent parser step by step
// (parse_space, parse_name, parse_sequence, parse_alternates, parse_rule),
// so that newlines end rules in exactly the same places.
class GbnfTranslator {
 public:
  GbnfTranslator(const SourceFile& file, Diagnostics& diags, const SyntaxLimits& limits, std::string entry)
      : file_(file), src_(file.text()), diags_(diags), limits_(limits), entry_(std::move(entry)) {
    names_taken_.insert("start");  // the entry rule the translation adds
  }

  std::optional<Translation> run() {
    size_t pos = space(0, true);
    while (pos < src_.size() && !failed_) pos = rule(pos);
    if (failed_) return std::nullopt;
    if (!check_references() || !check_left_recursion()) return std::nullopt;
    return assemble();
  }

 private:
  // Errors stop the translation at the first one, as llama.cpp does.
  void fail(size_t at, size_t length, std::string message) {
    if (failed_) return;
    failed_ = true;
    const auto begin = file_.location_of(static_cast<uint32_t>(std::min(at, src_.size())));
    const auto end = file_.location_of(static_cast<uint32_t>(std::min(at + std::max<size_t>(length, 1), src_.size())));
    diags_.error({begin, end}, std::move(message));
  }

  char at(size_t pos) const { return pos < src_.size() ? src_[pos] : '\0'; }

  Chunk& chunk() {
    if (chunks_.empty()) chunks_.emplace_back();
    return chunks_.back();
  }
  void emit(std::string_view text) { chunk().text += text; }
  void emit_token(size_t gbnf_offset, std::string_view text) {
    Chunk& c = chunk();
    c.offsets.emplace_back(static_cast<uint32_t>(c.text.size()), static_cast<uint32_t>(gbnf_offset));
    c.text += text;
  }

  // Spaces, tabs and `#` comments, and newlines where `newline_ok`; copied
  // to the output, comments as `(* … *)`.
  size_t space(size_t pos, bool newline_ok) {
    while (pos < src_.size()) {
      char c = src_[pos];
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        emit(std::string_view(&src_[pos], 1));
        ++pos;
      } else if (c == '#') {
        size_t end = pos;
        while (end < src_.size() && src_[end] != '\r' && src_[end] != '\n') ++end;
        emit_comment(src_.substr(pos + 1, end - pos - 1));
        pos = end;
      } else {
        break;
      }
    }
    return pos;
  }

  void emit_comment(std::string_view body) {
    // A .cgram comment ends at the first `*)`; keep the text, break that pair.
    std::string text;
    for (size_t i = 0; i < body.size(); ++i) {
      text += body[i];
      if (body[i] == '*' && i + 1 < body.size() && body[i + 1] == ')') text += ' ';
    }
    if (!text.empty() && text.back() == '*') text += ' ';
    emit(fmt::format("(*{} *)", text));
  }

  uint32_t symbol(std::string_view name, size_t offset) {
    auto [it, inserted] = symbols_.emplace(std::string(name), static_cast<uint32_t>(model_.size()));
    if (inserted) model_.push_back(ModelRule{{}, std::string(name), offset, SIZE_MAX});
    return it->second;
  }
  uint32_t generated(const std::string& owner, size_t offset) {
    model_.push_back(ModelRule{{}, owner, offset, SIZE_MAX});
    return static_cast<uint32_t>(model_.size() - 1);
  }

  std::string cgram_name(std::string_view gbnf_name) {
    auto found = names_.find(std::string(gbnf_name));
    if (found != names_.end()) return found->second;
    std::string base(gbnf_name);
    std::replace(base.begin(), base.end(), '-', '_');
    if (is_digit(base[0])) base = "r" + base;
    std::string name = base;
    for (int n = 2; names_taken_.count(name); ++n) name = fmt::format("{}_{}", base, n);
    names_taken_.insert(name);
    names_.emplace(std::string(gbnf_name), name);
    return name;
  }

  size_t name_end(size_t pos) const {
    while (pos < src_.size() && is_word_char(src_[pos])) ++pos;
    return pos;
  }

  size_t rule(size_t pos) {
    size_t end = name_end(pos);
    if (end == pos) {
      fail(pos, 1, "expecting a rule name");
      return src_.size();
    }
    const std::string name(src_.substr(pos, end - pos));
    const size_t name_at = pos;
    chunks_.push_back(Chunk{{}, {}, name, false});
    emit_token(pos, cgram_name(name));
    pos = space(end, false);
    if (src_.substr(pos, 3) != "::=") {
      fail(pos, 1, "expecting ::=");
      return src_.size();
    }
    emit_token(pos, "::=");
    pos = space(pos + 3, true);
    std::vector<Alternative> alternatives;
    pos = alternates(pos, 0, alternatives, name);
    if (failed_) return src_.size();
    emit(" ;");
    if (at(pos) == '\r') {
      emit(at(pos + 1) == '\n' ? "\r\n" : "\r");
      pos += at(pos + 1) == '\n' ? 2 : 1;
    } else if (at(pos) == '\n') {
      emit("\n");
      ++pos;
    } else if (pos < src_.size()) {
      fail(pos, 1, "expecting a newline or the end of the grammar");
      return src_.size();
    }
    // A later definition replaces an earlier one, as in llama.cpp.
    ModelRule& defined = model_[symbol(name, name_at)];
    if (defined.chunk != SIZE_MAX) {
      chunks_[defined.chunk].dropped = true;
      const auto loc = file_.location_of(static_cast<uint32_t>(name_at));
      diags_.warning({loc, loc}, fmt::format("rule '{}' is defined again; the last definition replaces the "
                                             "earlier one, as in llama.cpp",
                                             name));
    }
    defined.alternatives = std::move(alternatives);
    defined.offset = name_at;
    defined.chunk = chunks_.size() - 1;
    chunks_.emplace_back();  // what follows, up to the next rule
    return space(pos, true);
  }

  size_t alternates(size_t pos, uint32_t depth, std::vector<Alternative>& out, const std::string& owner) {
    out.emplace_back();
    pos = sequence(pos, depth, out.back(), owner);
    while (!failed_ && at(pos) == '|') {
      emit_token(pos, "|");
      pos = space(pos + 1, true);
      out.emplace_back();
      pos = sequence(pos, depth, out.back(), owner);
    }
    return pos;
  }

  // One alternative. Inside parentheses (depth > 0) newlines are spaces;
  // outside, a newline ends the rule. `alt` gets llama.cpp's elements.
  size_t sequence(size_t pos, uint32_t depth, Alternative& alt, const std::string& owner) {
    const bool nested = depth > 0;
    size_t last_start = alt.size();  // llama.cpp's last_sym_start: where the last item began
    bool emitted = false;
    while (pos < src_.size() && !failed_) {
      const char c = src_[pos];
      const size_t item = pos;
      if (c == '"' || c == '[' || is_word_char(c) || c == '(' || c == '.') last_start = alt.size();
      if (c == '"') {
        bool empty = false;
        pos = literal(pos, empty);
        if (!empty) alt.push_back({false, 0});  // one character stands for the literal
      } else if (c == '[') {
        bool empty = false;
        pos = char_class(pos, empty);
        if (!empty) alt.push_back({false, 0});
      } else if (is_word_char(c)) {
        size_t end = name_end(pos);
        const std::string_view name = src_.substr(pos, end - pos);
        alt.push_back({true, symbol(name, pos)});
        emit_token(pos, cgram_name(name));
        pos = end;
      } else if (c == '(') {
        if (depth + 1 > std::min(limits_.max_nesting, kMaxNestingCeiling)) {
          fail(pos, 1, fmt::format("the grammar nests deeper than {} levels here", limits_.max_nesting));
          return src_.size();
        }
        emit_token(pos, "(");
        pos = space(pos + 1, true);
        std::vector<Alternative> group;
        pos = alternates(pos, depth + 1, group, owner);
        if (failed_) return src_.size();
        if (at(pos) != ')') {
          fail(pos, 1, "expecting ')'");
          return src_.size();
        }
        const uint32_t id = generated(owner, item);
        model_[id].alternatives = std::move(group);
        alt.push_back({true, id});
        emit_token(pos, ")");
        ++pos;
      } else if (c == '.') {
        emit_token(pos, "#'[\\s\\S]'");  // any code point, newline included
        alt.push_back({false, 0});
        ++pos;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        // llama.cpp repeats the elements of the last item; an item that
        // gave none ("", [], x{0}) cannot be repeated.
        if (last_start == alt.size()) {
          fail(pos, 1, fmt::format("expecting an item before '{}'", c));
          return src_.size();
        }
        uint64_t min = c == '+' ? 1 : 0;
        int64_t max = c == '?' ? 1 : -1;
        if (c == '{') {
          pos = braces(pos, nested, min, max);
          if (failed_) return src_.size();
        } else {
          emit_token(pos, std::string_view(&src_[pos], 1));
          ++pos;
        }
        repeat(alt, last_start, min, max, owner, item);
      } else if (c == '<' || (c == '!' && at(pos + 1) == '<')) {
        fail(pos, 1, "llama.cpp's token terminals (<[id]>, <text>, !<...>) are not supported: write the token's text "
                     "as a literal");
        return src_.size();
      } else {
        break;
      }
      if (failed_) return src_.size();
      emitted = true;
      pos = space(pos, nested);
    }
    if (!emitted) emit_token(pos, at(pos) == '|' ? "'' " : "''");  // an empty alternative
    return pos;
  }

  // llama.cpp's rewriting of S{min,max} (max < 0: no maximum): S repeated
  // min times, then a rule S' ::= S S' | (no maximum) or a chain of
  // max - min rules S'(k) ::= S S'(k-1) | . For the left-recursion check one
  // copy of S stands for min copies and one link for the chain: further
  // copies and links are only reached after the first, through the same
  // rules.
  void repeat(Alternative& alt, size_t last_start, uint64_t min, int64_t max, const std::string& owner,
              size_t offset) {
    const Alternative repeated(alt.begin() + static_cast<std::ptrdiff_t>(last_start), alt.end());
    alt.resize(last_start);
    if (min > 0) alt.insert(alt.end(), repeated.begin(), repeated.end());
    const bool optional_part = max < 0 || static_cast<uint64_t>(max) > min;
    if (!optional_part) return;
    const uint32_t id = generated(owner, offset);
    Alternative again = repeated;
    if (max < 0) again.push_back({true, id});
    model_[id].alternatives = {std::move(again), Alternative{}};
    alt.push_back({true, id});
  }

  // {m}, {m,}, {m,n}: spaces are allowed inside, as in llama.cpp.
  size_t braces(size_t pos, bool nested, uint64_t& min_out, int64_t& max_out) {
    const size_t open = pos;
    std::string scratch;  // spaces and comments inside the braces are not copied
    std::swap(scratch, chunk().text);
    auto restore = [&] { std::swap(scratch, chunk().text); };
    pos = space(pos + 1, nested);
    uint64_t min = 0, max = 0;
    bool has_max = true;
    if (!number(pos, min)) {
      restore();
      fail(pos, 1, "expecting a number");
      return src_.size();
    }
    pos = space(pos, nested);
    if (at(pos) == ',') {
      pos = space(pos + 1, nested);
      if (is_digit(at(pos))) {
        number(pos, max);
        pos = space(pos, nested);
      } else {
        has_max = false;
      }
    } else {
      max = min;
    }
    restore();
    if (at(pos) != '}') {
      fail(pos, 1, "expecting '}'");
      return src_.size();
    }
    const uint64_t limit = limits_.max_repeat_bound;
    if (min > limit || (has_max && max > limit)) {
      fail(open, pos + 1 - open,
           fmt::format("a repetition bound of {} is too large (the limit is {})", std::max(min, max), limit));
      return src_.size();
    }
    if (has_max && min > max) {
      fail(open, pos + 1 - open, fmt::format("bad repetition bounds {{{},{}}}: the minimum is larger than the maximum",
                                             min, max));
      return src_.size();
    }
    if (!has_max) emit_token(open, fmt::format("{{{},}}", min));
    else if (min == max && src_.substr(open, pos - open).find(',') == std::string_view::npos)
      emit_token(open, fmt::format("{{{}}}", min));
    else emit_token(open, fmt::format("{{{},{}}}", min, max));
    min_out = min;
    max_out = has_max ? static_cast<int64_t>(max) : -1;
    return pos + 1;
  }

  // Digits, saturating far above any limit.
  bool number(size_t& pos, uint64_t& value) {
    if (!is_digit(at(pos))) return false;
    value = 0;
    while (is_digit(at(pos))) {
      value = std::min<uint64_t>(value * 10 + static_cast<uint64_t>(at(pos) - '0'), uint64_t{1} << 40);
      ++pos;
    }
    return true;
  }

  // One character of a literal or class: an escape or a UTF-8 character.
  std::optional<uint32_t> character(size_t& pos) {
    if (at(pos) == '\\') {
      const char e = at(pos + 1);
      auto hex = [&](int digits) -> std::optional<uint32_t> {
        uint32_t value = 0;
        for (int i = 0; i < digits; ++i) {
          char h = at(pos + 2 + i);
          int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) {
            fail(pos, 2 + i, fmt::format("expecting {} hex digits after '\\{}'", digits, e));
            return std::nullopt;
          }
          value = value * 16 + static_cast<uint32_t>(d);
        }
        pos += 2 + digits;
        return value;
      };
      switch (e) {
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case 't': pos += 2; return '\t';
        case 'r': pos += 2; return '\r';
        case 'n': pos += 2; return '\n';
        case '\\': case '"': case '[': case ']': pos += 2; return static_cast<uint32_t>(e);
        default:
          fail(pos, 2, pos + 1 < src_.size() ? fmt::format("unknown escape '\\{}'", printable_char(e))
                                             : std::string("unexpected end of the grammar after '\\'"));
          return std::nullopt;
      }
    }
    size_t next = pos;
    auto cp = decode_utf8(src_, next);
    if (!cp) {
      fail(pos, 1, "invalid UTF-8 in the grammar");
      return std::nullopt;
    }
    pos = next;
    return *cp;
  }

  static std::string printable_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7F ? std::string(1, c) : fmt::format("\\x{:02X}", u);
  }

  // A code point the output can hold: UTF-8 text has no surrogates and
  // nothing above U+10FFFF.
  bool check_code_point(uint32_t cp, size_t pos, size_t length) {
    if (cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF)) return true;
    fail(pos, length, fmt::format("U+{:04X} is not a character: UTF-8 text cannot hold it", cp));
    return false;
  }

  // A literal; `empty` when it is "" (llama.cpp adds no element for it).
  size_t literal(size_t pos, bool& empty) {
    const size_t open = pos;
    std::string out = "'";
    ++pos;
    while (at(pos) != '"') {
      if (pos >= src_.size()) {
        fail(open, 1, "unterminated literal: expecting '\"'");
        return src_.size();
      }
      const size_t char_start = pos;
      auto cp = character(pos);
      if (!cp || !check_code_point(*cp, char_start, pos - char_start)) return src_.size();
      out += literal_char(*cp);
    }
    out += "'";
    empty = out == "''";
    emit_token(open, out);
    return pos + 1;
  }

  // A class; `empty` when it lists no character ([] and [^]: llama.cpp
  // adds no element, so they match the empty string). Ranges over code
  // points that UTF-8 text cannot hold (surrogates, above U+10FFFF) and
  // reversed ranges never match in llama.cpp: they are clipped or dropped.
  size_t char_class(size_t pos, bool& empty) {
    const size_t open = pos;
    ++pos;
    const bool negated = at(pos) == '^';
    if (negated) ++pos;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    empty = true;
    while (at(pos) != ']') {
      if (pos >= src_.size()) {
        fail(open, 1, "unterminated character class: expecting ']'");
        return src_.size();
      }
      auto lo = character(pos);
      if (!lo) return src_.size();
      uint32_t hi = *lo;
      empty = false;
      if (at(pos) == '-' && at(pos + 1) != ']' && pos + 1 < src_.size()) {
        ++pos;
        auto upper = character(pos);
        if (!upper) return src_.size();
        hi = *upper;
      }
      add_clipped(ranges, *lo, hi);
    }
    if (empty) {
      emit_token(open, "''");
      return pos + 1;
    }
    std::string out;
    for (const auto& [lo, hi] : ranges) out += class_char(lo) + (hi > lo ? "-" + class_char(hi) : "");
    if (ranges.empty() && !negated) {
      // llama.cpp accepts it and never matches it; .cgram has no notation
      // for a set of no text.
      fail(open, pos + 1 - open, "this class holds no character that UTF-8 text can have, so it never matches");
      return src_.size();
    }
    emit_token(open, ranges.empty() ? "#'[\\s\\S]'" : fmt::format("#'[{}{}]'", negated ? "^" : "", out));
    return pos + 1;
  }

  // [lo, hi] without surrogates and code points above U+10FFFF.
  static void add_clipped(std::vector<std::pair<uint32_t, uint32_t>>& ranges, uint32_t lo, uint32_t hi) {
    hi = std::min<uint32_t>(hi, kMaxCodePoint);
    if (lo > hi) return;
    if (lo < 0xD800) ranges.emplace_back(lo, std::min<uint32_t>(hi, 0xD7FF));
    if (hi > 0xDFFF) ranges.emplace_back(std::max<uint32_t>(lo, 0xE000), hi);
  }

  bool check_references() {
    // Rules come in the order they were first named: the first undefined
    // one is reported where it was first used.
    for (const ModelRule& r : model_)
      if (r.alternatives.empty()) {
        fail(r.offset, r.owner.size(), fmt::format("undefined rule '{}'", r.owner));
        return false;
      }
    if (!symbols_.count(entry_)) {  // every rule named is defined by now
      diags_.error_at_file(entry_ == "root" ? std::string("the grammar has no rule 'root' (a GBNF grammar starts there)")
                                            : fmt::format("no rule named '{}', the start rule", entry_));
      return false;
    }
    return true;
  }

  // llama.cpp refuses a grammar in which a rule can reach itself through
  // rules at the start of alternatives, each before it possibly empty (it
  // counts a rule as possibly empty when one of its alternatives has no
  // element). Found as a cycle of that graph, without recursion.
  bool check_left_recursion() {
    auto may_be_empty = [&](uint32_t r) {
      const auto& alts = model_[r].alternatives;
      return std::any_of(alts.begin(), alts.end(), [](const Alternative& a) { return a.empty(); });
    };
    std::vector<std::vector<uint32_t>> leftmost(model_.size());
    for (uint32_t r = 0; r < model_.size(); ++r)
      for (const Alternative& alt : model_[r].alternatives)
        for (const Element& e : alt) {
          if (!e.is_ref) break;
          leftmost[r].push_back(e.rule);
          if (!may_be_empty(e.rule)) break;
        }
    enum : uint8_t { kNew, kOpen, kDone };
    std::vector<uint8_t> state(model_.size(), kNew);
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (uint32_t root = 0; root < model_.size(); ++root) {
      if (state[root] != kNew) continue;
      stack.emplace_back(root, 0);
      state[root] = kOpen;
      while (!stack.empty()) {
        auto& [r, next] = stack.back();
        if (next == leftmost[r].size()) {
          state[r] = kDone;
          stack.pop_back();
          continue;
        }
        const uint32_t s = leftmost[r][next++];
        if (state[s] == kOpen) return left_recursion(s);
        if (state[s] == kNew) {
          state[s] = kOpen;
          stack.emplace_back(s, 0);
        }
      }
    }
    return true;
  }

  bool left_recursion(uint32_t r) {
    const ModelRule& rule = model_[r];
    fail(rule.offset, 1,
         fmt::format("rule '{}' is left-recursive: it can reach itself before reading any character, which llama.cpp "
                     "refuses (write the recursion at the end of the alternative)",
                     rule.owner));
    return false;
  }

  Translation assemble() {
    Translation out;
    out.start = "start";
    out.names = names_;
    out.cgram = fmt::format("start ::= {} ; (* a GBNF grammar starts at {} *)\n", names_.at(entry_), entry_);
    out.header_bytes = static_cast<uint32_t>(out.cgram.size());
    out.entry_offset = static_cast<uint32_t>(model_[symbols_.at(entry_)].offset);
    out.offsets.emplace_back(0, 0);
    for (const Chunk& c : chunks_) {
      if (c.dropped) {
        out.cgram += fmt::format("(* rule {} is defined again below; the last definition counts *)\n", names_.at(c.rule));
        continue;
      }
      const auto base = static_cast<uint32_t>(out.cgram.size());
      for (const auto& [local, gbnf] : c.offsets) out.offsets.emplace_back(base + local, gbnf);
      out.cgram += c.text;
    }
    if (out.cgram.back() != '\n') out.cgram += '\n';
    return out;
  }

  const SourceFile& file_;
  std::string_view src_;
  Diagnostics& diags_;
  SyntaxLimits limits_;
  std::string entry_;
  bool failed_ = false;
  std::vector<ModelRule> model_;
  std::map<std::string, uint32_t> symbols_;
  std::vector<Chunk> chunks_;
  std::map<std::string, std::string> names_;
  std::set<std::string> names_taken_;
};

}  // namespace

std::optional<Translation> translate_gbnf(const SourceFile& gbnf, Diagnostics& diags, const SyntaxLimits& limits,
                                              const std::string& entry) {
  if (gbnf.text().size() > limits.max_source_bytes) {
    diags.error_at_file(
        fmt::format("grammar file is {} bytes; the limit is {} bytes", gbnf.text().size(), limits.max_source_bytes));
    return std::nullopt;
  }
  MemoryStage stage("translating the GBNF grammar");
  std::optional<Translation> out = GbnfTranslator(gbnf, diags, limits, entry).run();
  if (out) charge_memory(out->cgram.size() + out->offsets.size() * sizeof(out->offsets[0]));
  return out;
}

bool is_gbnf_path(std::string_view path) {
  return path.size() >= 5 && path.substr(path.size() - 5) == ".gbnf";
}

}  // namespace cgram

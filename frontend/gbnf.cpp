#include "gbnf.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

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

// The translator follows llama.cpp's recursive-descent parser step by step
// (parse_space, parse_name, parse_sequence, parse_alternates, parse_rule),
// so that newlines end rules in exactly the same places.
class Translator {
 public:
  Translator(const SourceFile& file, Diagnostics& diags, const SyntaxLimits& limits)
      : file_(file), src_(file.text()), diags_(diags), limits_(limits) {
    names_taken_.insert("start");  // the entry rule the translation adds
  }

  std::optional<GbnfTranslation> run() {
    size_t pos = space(0, true);
    while (pos < src_.size() && !failed_) pos = rule(pos);
    if (failed_) return std::nullopt;
    if (!check_references()) return std::nullopt;
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
    chunks_.push_back(Chunk{{}, {}, name, false});
    emit_token(pos, cgram_name(name));
    pos = space(end, false);
    if (src_.substr(pos, 3) != "::=") {
      fail(pos, 1, "expecting ::=");
      return src_.size();
    }
    emit_token(pos, "::=");
    pos = space(pos + 3, true);
    pos = alternates(pos, 0);
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
    auto [previous, inserted] = defined_.emplace(name, chunks_.size() - 1);
    if (!inserted) {
      chunks_[previous->second].dropped = true;
      const auto loc = file_.location_of(static_cast<uint32_t>(chunks_.back().offsets.front().second));
      diags_.warning({loc, loc}, fmt::format("rule '{}' is defined again; as in llama.cpp, the last definition "
                                             "replaces the earlier one",
                                             name));
      previous->second = chunks_.size() - 1;
    }
    chunks_.emplace_back();  // what follows, up to the next rule
    return space(pos, true);
  }

  size_t alternates(size_t pos, uint32_t depth) {
    pos = sequence(pos, depth);
    while (!failed_ && at(pos) == '|') {
      emit_token(pos, "|");
      pos = space(pos + 1, true);
      pos = sequence(pos, depth);
    }
    return pos;
  }

  // One alternative. Inside parentheses (depth > 0) newlines are spaces;
  // outside, a newline ends the rule.
  size_t sequence(size_t pos, uint32_t depth) {
    const bool nested = depth > 0;
    bool has_item = false;
    while (pos < src_.size() && !failed_) {
      const char c = src_[pos];
      if (c == '"') {
        pos = literal(pos);
        has_item = true;
      } else if (c == '[') {
        pos = char_class(pos);
        has_item = true;
      } else if (is_word_char(c)) {
        size_t end = name_end(pos);
        references_.emplace_back(std::string(src_.substr(pos, end - pos)), pos);
        emit_token(pos, cgram_name(src_.substr(pos, end - pos)));
        pos = end;
        has_item = true;
      } else if (c == '(') {
        if (depth + 1 > std::min(limits_.max_nesting, kMaxNestingCeiling)) {
          fail(pos, 1, fmt::format("the grammar nests deeper than {} levels here", limits_.max_nesting));
          return src_.size();
        }
        emit_token(pos, "(");
        pos = space(pos + 1, true);
        pos = alternates(pos, depth + 1);
        if (failed_) return src_.size();
        if (at(pos) != ')') {
          fail(pos, 1, "expecting ')'");
          return src_.size();
        }
        emit_token(pos, ")");
        ++pos;
        has_item = true;
      } else if (c == '.') {
        emit_token(pos, "#'[\\s\\S]'");  // any code point, newline included
        ++pos;
        has_item = true;
      } else if (c == '*' || c == '+' || c == '?') {
        if (!has_item) {
          fail(pos, 1, fmt::format("expecting an item before '{}'", c));
          return src_.size();
        }
        emit_token(pos, std::string_view(&src_[pos], 1));
        ++pos;
      } else if (c == '{') {
        if (!has_item) {
          fail(pos, 1, "expecting an item before '{'");
          return src_.size();
        }
        pos = braces(pos, nested);
      } else {
        break;
      }
      if (failed_) return src_.size();
      pos = space(pos, nested);
    }
    if (!has_item) emit_token(pos, at(pos) == '|' ? "'' " : "''");  // an empty alternative
    return pos;
  }

  // {m}, {m,}, {m,n}: spaces are allowed inside, as in llama.cpp.
  size_t braces(size_t pos, bool nested) {
    const size_t open = pos;
    std::string scratch;  // spaces inside the braces are not copied
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

  size_t literal(size_t pos) {
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
    emit_token(open, out);
    return pos + 1;
  }

  static std::string literal_char(uint32_t cp) {
    switch (cp) {
      case '\'': return "\\'";
      case '\\': return "\\\\";
      case '\n': return "\\n";
      case '\r': return "\\r";
      case '\t': return "\\t";
      default: break;
    }
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) return fmt::format("\\u{{{:X}}}", cp);
    std::string out;
    append_utf8(out, cp);
    return out;
  }

  size_t char_class(size_t pos) {
    const size_t open = pos;
    std::string out = "#'[";
    ++pos;
    if (at(pos) == '^') {
      out += '^';
      ++pos;
    }
    bool empty = true;
    while (at(pos) != ']') {
      if (pos >= src_.size()) {
        fail(open, 1, "unterminated character class: expecting ']'");
        return src_.size();
      }
      size_t char_start = pos;
      auto lo = character(pos);
      if (!lo || !check_code_point(*lo, char_start, pos - char_start)) return src_.size();
      out += class_char(*lo);
      empty = false;
      if (at(pos) == '-' && at(pos + 1) != ']' && pos + 1 < src_.size()) {
        ++pos;
        char_start = pos;
        auto hi = character(pos);
        if (!hi || !check_code_point(*hi, char_start, pos - char_start)) return src_.size();
        if (*hi < *lo) {
          fail(char_start, pos - char_start, "the end of this range comes before its start");
          return src_.size();
        }
        out += '-';
        out += class_char(*hi);
      }
    }
    if (empty && out == "#'[") {
      // llama.cpp accepts `[]`, which matches nothing; .cgram refuses an
      // empty language, so say so here.
      fail(open, pos + 1 - open, "an empty character class matches nothing");
      return src_.size();
    }
    out += "]'";
    emit_token(open, out);
    return pos + 1;
  }

  static std::string class_char(uint32_t cp) {
    if (cp == '\'' || cp == '\\' || cp == ']' || cp == '[' || cp == '^' || cp == '-')
      return fmt::format("\\{}", static_cast<char>(cp));
    if (cp == '\n') return "\\n";
    if (cp == '\t') return "\\t";
    if (cp == '\r') return "\\r";
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) return fmt::format("\\u{{{:X}}}", cp);
    std::string out;
    append_utf8(out, cp);
    return out;
  }

  bool check_references() {
    for (const auto& [name, pos] : references_)
      if (!defined_.count(name)) {
        fail(pos, name.size(), fmt::format("undefined rule '{}'", name));
        return false;
      }
    if (!defined_.count("root")) {
      diags_.error_at_file("the grammar has no rule 'root' (a GBNF grammar starts there)");
      return false;
    }
    return true;
  }

  GbnfTranslation assemble() {
    GbnfTranslation out;
    out.start = "start";
    out.names = names_;
    out.cgram = fmt::format("start ::= {} ; (* a GBNF grammar starts at root *)\n", names_.at("root"));
    out.offsets.emplace_back(0, 0);
    for (const Chunk& c : chunks_) {
      if (c.dropped) {
        out.cgram += fmt::format("(* rule {} is defined again below; the last definition counts *)", names_.at(c.rule));
        continue;
      }
      const auto base = static_cast<uint32_t>(out.cgram.size());
      for (const auto& [local, gbnf] : c.offsets) out.offsets.emplace_back(base + local, gbnf);
      out.cgram += c.text;
    }
    if (!out.cgram.empty() && out.cgram.back() != '\n') out.cgram += '\n';
    return out;
  }

  const SourceFile& file_;
  std::string_view src_;
  Diagnostics& diags_;
  SyntaxLimits limits_;
  bool failed_ = false;
  std::vector<Chunk> chunks_;
  std::map<std::string, std::string> names_;
  std::set<std::string> names_taken_;
  std::map<std::string, size_t> defined_;  // GBNF name → its chunk
  std::vector<std::pair<std::string, size_t>> references_;
};

}  // namespace

uint32_t GbnfTranslation::gbnf_offset(uint32_t offset) const {
  auto it = std::upper_bound(offsets.begin(), offsets.end(), std::make_pair(offset, UINT32_MAX));
  if (it == offsets.begin()) return 0;
  return std::prev(it)->second;
}

std::optional<GbnfTranslation> translate_gbnf(const SourceFile& gbnf, Diagnostics& diags, const SyntaxLimits& limits) {
  if (gbnf.text().size() > limits.max_source_bytes) {
    diags.error_at_file(
        fmt::format("grammar file is {} bytes; the limit is {} bytes", gbnf.text().size(), limits.max_source_bytes));
    return std::nullopt;
  }
  return Translator(gbnf, diags, limits).run();
}

bool is_gbnf_path(std::string_view path) {
  return path.size() >= 5 && path.substr(path.size() - 5) == ".gbnf";
}

}  // namespace cgram

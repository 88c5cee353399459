#include "regex.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "cgram_text.h"
#include "utf8.h"

namespace cgram::ir {

CodePointSet regex_digit() { return CodePointSet::range('0', '9'); }
CodePointSet regex_word() {
  CodePointSet s = CodePointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
CodePointSet regex_space() {
  CodePointSet s = CodePointSet::range('\t', '\r');  // \t \n \v \f \r
  s.add(' ', ' ');
  return s;
}
CodePointSet regex_dot() {
  CodePointSet s = CodePointSet::single('\n');
  return s.complement();
}

namespace {

struct ParseFailure {
  RegexError error;
};

class RegexParser {
 public:
  RegexParser(std::string_view pattern, uint32_t max_nesting) : p_(pattern), max_nesting_(max_nesting) {}

  RegexNode parse() {
    RegexNode node = alternation();
    if (pos_ < p_.size()) {  // only ')' can stop alternation() early
      fail(pos_, 1, "unmatched ')' in regex");
    }
    return node;
  }

 private:
  [[noreturn]] void fail(size_t at, size_t length, std::string message) {
    throw ParseFailure{{at, length, std::move(message)}};
  }

  bool at_end() const { return pos_ >= p_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }
  bool starts_with(std::string_view s) const { return p_.substr(pos_).starts_with(s); }

  RegexNode alternation() {
    std::vector<RegexNode> alternatives;
    alternatives.push_back(concatenation());
    while (peek() == '|' && !at_end()) {
      ++pos_;
      alternatives.push_back(concatenation());
    }
    if (alternatives.size() == 1) return std::move(alternatives[0]);
    RegexNode node;
    node.kind = RegexNode::Kind::Alternation;
    node.children = std::move(alternatives);
    return node;
  }

  RegexNode concatenation() {
    std::vector<RegexNode> items;
    while (!at_end() && peek() != '|' && peek() != ')') items.push_back(repetition());
    if (items.empty()) return RegexNode{};
    if (items.size() == 1) return std::move(items[0]);
    RegexNode node;
    node.kind = RegexNode::Kind::Concat;
    node.children = std::move(items);
    return node;
  }

  // Parses {n}, {n,}, {n,m}, {,m} at pos_; nullopt (pos_ unchanged) when the
  // brace does not start a quantifier, in which case it is a literal '{'.
  std::optional<std::pair<uint32_t, uint32_t>> braces() {
    size_t start = pos_;
    size_t i = pos_ + 1;
    auto number = [&](std::optional<uint64_t>& out) {
      uint64_t v = 0;
      size_t digits = 0;
      while (i < p_.size() && isdigit(static_cast<unsigned char>(p_[i]))) {
        v = std::min<uint64_t>(v * 10 + (p_[i] - '0'), UINT32_MAX);
        ++i, ++digits;
      }
      if (digits) out = v;
    };
    std::optional<uint64_t> lo, hi;
    number(lo);
    bool comma = i < p_.size() && p_[i] == ',';
    if (comma) {
      ++i;
      number(hi);
    }
    if (i >= p_.size() || p_[i] != '}' || (!lo && !hi)) return std::nullopt;
    pos_ = i + 1;
    uint64_t min = lo.value_or(0);
    uint64_t max = comma ? hi.value_or(kRegexUnbounded) : min;
    // Bounds above kMaxRegexRepeat are checked where the automaton is
    // built: one such repetition may be counted (automata/counted.h).
    if (min > kMaxRegexRepeat || (max != kRegexUnbounded && max > kMaxCountedRepeat))
      fail(start, pos_ - start,
           fmt::format("repetition bound in regex is too large (the limit is {} for the lower bound and {} for the "
                       "upper)",
                       kMaxRegexRepeat, kMaxCountedRepeat));
    if (max != kRegexUnbounded && min > max)
      fail(start, pos_ - start,
           fmt::format("bad repetition bounds {{{},{}}} in regex: the minimum is larger than the maximum",
                       min, max));
    return std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(min), static_cast<uint32_t>(max));
  }

  std::optional<std::pair<uint32_t, uint32_t>> quantifier() {
    switch (peek()) {
      case '*': ++pos_; return std::pair<uint32_t, uint32_t>(0, kRegexUnbounded);
      case '+': ++pos_; return std::pair<uint32_t, uint32_t>(1, kRegexUnbounded);
      case '?': ++pos_; return std::pair<uint32_t, uint32_t>(0, 1);
      case '{': return braces();
      default: return std::nullopt;
    }
  }

  RegexNode repetition() {
    RegexNode atom_node = atom();
    size_t q_start = pos_;
    if (at_end()) return atom_node;
    auto q = quantifier();
    if (!q) return atom_node;
    if (!at_end() && peek() == '?')
      fail(pos_, 1,
           "lazy quantifiers are not supported: a regex terminal denotes a regular language and is "
           "matched as a whole, so laziness has no meaning; remove the '?'");
    if (!at_end() && peek() == '+')
      fail(pos_, 1, "possessive quantifiers are not supported: regex terminals denote regular languages");
    {
      size_t save = pos_;
      if (!at_end() && quantifier())
        fail(save, pos_ - save,
             "a quantifier cannot follow another quantifier; use a group, as in (?:a*)+");
      pos_ = save;
    }
    (void)q_start;
    RegexNode node;
    node.kind = RegexNode::Kind::Repeat;
    node.min = q->first;
    node.max = q->second;
    node.children.push_back(std::move(atom_node));
    return node;
  }

  static RegexNode set_node(CodePointSet set) {
    RegexNode node;
    node.kind = RegexNode::Kind::Set;
    node.set = std::move(set);
    return node;
  }

  uint32_t literal_code_point() {
    size_t at = pos_;
    auto cp = decode_utf8(p_, pos_);
    if (!cp) fail(at, 1, "invalid UTF-8 in regex");
    return *cp;
  }

  RegexNode atom() {
    size_t at = pos_;
    char c = peek();
    switch (c) {
      case '(': return group();
      case '[': return set_node(char_class());
      case '.': ++pos_; return set_node(flags_.dot_all ? CodePointSet::all() : regex_dot());
      case '^':
      case '$':
        fail(at, 1, fmt::format("anchors ('{}') are not supported: a regex terminal is always matched "
                                "as a whole, so it is already anchored",
                                c));
      case '*':
      case '+':
      case '?': fail(at, 1, fmt::format("nothing to repeat before '{}' in regex", c));
      case '{': {
        if (braces()) fail(at, pos_ - at, "nothing to repeat before this repetition in regex");
        ++pos_;
        return set_node(CodePointSet::single('{'));
      }
      case '\\': {
        CodePointSet set = escape(/*in_class=*/false);
        return set_node(folded(std::move(set)));
      }
      default: return set_node(folded(CodePointSet::single(literal_code_point())));
    }
  }

  RegexNode group() {
    size_t open = pos_;
    // Groups are parsed (and later walked) recursively: too deep a regex is
    // refused before it can overflow the stack.
    if (++open_groups_ > max_nesting_)
      fail(open, 1, fmt::format("the regex nests groups deeper than {} levels here", max_nesting_));
    ++pos_;  // '('
    const Flags outer = flags_;  // a group's flags end with it
    if (peek() == '?') {
      if (starts_with("?:")) {
        pos_ += 2;
      } else if (starts_with("?=") || starts_with("?!")) {
        fail(open, 3, "lookahead is not supported: regex terminals denote regular languages");
      } else if (starts_with("?<=") || starts_with("?<!")) {
        fail(open, 4, "lookbehind is not supported: regex terminals denote regular languages");
      } else if (starts_with("?<") || starts_with("?P<")) {
        // A named group is just a group here: names have no use without backreferences.
        size_t close = p_.find('>', pos_);
        if (close == std::string_view::npos) fail(open, 2, "unterminated group name in regex");
        pos_ = close + 1;
      } else if (starts_with("?P=")) {
        fail(open, 3, "backreferences are not supported: regex terminals denote regular languages");
      } else if (!inline_flags(open)) {
        // `(?i)`: the flags hold for the rest of the enclosing group.
        --open_groups_;
        return RegexNode{};
      }
    }
    RegexNode inner = alternation();
    flags_ = outer;
    if (peek() != ')' || at_end()) fail(open, 1, "unclosed '(' in regex");
    ++pos_;
    --open_groups_;
    return inner;
  }

  // After `(?`: flags, then `:` (a group with them, true) or `)` (they
  // hold from here, false). i folds ASCII letters, s lets `.` match a
  // newline; m and u change nothing here (no anchors; code points already).
  bool inline_flags(size_t open) {
    ++pos_;  // '?'
    Flags set = flags_;
    bool on = true;
    for (;;) {
      const char c = peek();
      if (at_end()) fail(open, 2, "unterminated inline flags in regex");
      if (c == ':' || c == ')') {
        ++pos_;
        flags_ = set;
        return c == ':';
      }
      if (c == '-' && on) {
        on = false;
      } else if (c == 'i') {
        set.case_insensitive = on;
      } else if (c == 's') {
        set.dot_all = on;
      } else if (c != 'm' && c != 'u') {
        fail(pos_, 1,
             c == 'x' ? std::string("verbose mode (the x flag) is not supported in regex")
                      : fmt::format("unknown inline flag '{}' in regex: i, s, m and u are supported, as in (?i:abc)",
                                    std::string(1, c)));
      }
      ++pos_;
    }
  }

  // With the i flag, both cases of every ASCII letter.
  CodePointSet folded(CodePointSet set) const {
    if (!flags_.case_insensitive) return set;
    CodePointSet out = set;
    for (const auto& [lo, hi] : set.ranges()) {
      for (uint32_t base : {uint32_t{'a'}, uint32_t{'A'}}) {
        const uint32_t a = std::max(lo, base), b = std::min(hi, base + 25);
        if (a <= b) out.add(a ^ 0x20, b ^ 0x20);
      }
    }
    return out;
  }

  uint32_t hex_digits(size_t start, size_t count, const char* what) {
    uint32_t v = 0;
    for (size_t i = 0; i < count; ++i) {
      char h = peek();
      if (!isxdigit(static_cast<unsigned char>(h)) || at_end())
        fail(start, pos_ - start + 1, fmt::format("bad escape in regex: {}", what));
      v = v * 16 + (isdigit(static_cast<unsigned char>(h)) ? h - '0' : (tolower(h) - 'a' + 10));
      ++pos_;
    }
    return v;
  }

  uint32_t checked_scalar(uint32_t cp, size_t start) {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      fail(start, pos_ - start,
           fmt::format("bad escape in regex: U+{:04X} is not a Unicode scalar value", cp));
    return cp;
  }

  // \x{…} or \u{…}: one to six hex digits in braces, a scalar value.
  uint32_t braced_code_point(size_t start, char letter) {
    ++pos_;  // '{'
    uint32_t v = 0;
    size_t digits = 0;
    while (!at_end() && isxdigit(static_cast<unsigned char>(peek())) && digits < 7) {
      v = v * 16 + hex_digits(start, 1, "");
      ++digits;
    }
    if (peek() != '}' || digits == 0 || digits > 6)
      fail(start, pos_ - start + 1,
           fmt::format("bad escape in regex: '\\{}{{…}}' needs one to six hex digits", letter));
    ++pos_;
    return checked_scalar(v, start);
  }

  // After a backslash. Returns the set the escape denotes.
  CodePointSet escape(bool in_class) {
    size_t start = pos_;
    ++pos_;  // '\'
    if (at_end()) fail(start, 1, "regex ends with a lone backslash");
    char c = p_[pos_++];
    switch (c) {
      case 'd': return regex_digit();
      case 'D': return regex_digit().complement();
      case 'w': return regex_word();
      case 'W': return regex_word().complement();
      case 's': return regex_space();
      case 'S': return regex_space().complement();
      case 'n': return CodePointSet::single('\n');
      case 'r': return CodePointSet::single('\r');
      case 't': return CodePointSet::single('\t');
      case 'f': return CodePointSet::single('\f');
      case 'v': return CodePointSet::single('\v');
      case '0': return CodePointSet::single(0);
      case 'x':
        if (peek() == '{') return CodePointSet::single(braced_code_point(start, 'x'));
        return CodePointSet::single(hex_digits(start, 2, "'\\x' needs two hex digits, as in \\x41"));
      case 'u': {
        if (peek() == '{') return CodePointSet::single(braced_code_point(start, 'u'));
        uint32_t v = hex_digits(start, 4, "'\\u' needs four hex digits or braces, as in \\u00e9 or \\u{e9}");
        return CodePointSet::single(checked_scalar(v, start));
      }
      case 'b':
        if (in_class) return CodePointSet::single('\b');
        fail(start, 2, "word boundaries (\\b) are not supported: regex terminals denote regular languages");
      case 'B':
      case 'A':
      case 'z':
      case 'Z':
      case 'G':
        fail(start, 2,
             fmt::format("anchors (\\{}) are not supported: a regex terminal is always matched as a "
                         "whole, so it is already anchored",
                         c));
      case 'k':
        fail(start, 2, "backreferences are not supported: regex terminals denote regular languages");
      case 'p':
      case 'P':
        fail(start, 2,
             "Unicode property classes (\\p{…}) are not supported; write the ranges as a class, as in "
             "[\\u{4E00}-\\u{9FFF}]");
      default: break;
    }
    if (c >= '1' && c <= '9')
      fail(start, 2, "backreferences are not supported: regex terminals denote regular languages");
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x80 && !isalnum(u)) return CodePointSet::single(u);  // escaped punctuation
    if (u >= 0x80) {
      --pos_;
      return CodePointSet::single(literal_code_point());
    }
    fail(start, 2, fmt::format("unknown escape '\\{}' in regex", c));
  }

  // One member of a class: a code point (returned) or a set (added to out).
  std::optional<uint32_t> class_atom(CodePointSet& out) {
    if (peek() == '\\') {
      size_t start = pos_;
      CodePointSet s = escape(/*in_class=*/true);
      if (s.ranges().size() == 1 && s.ranges()[0].first == s.ranges()[0].second) {
        (void)start;
        return s.ranges()[0].first;
      }
      out.add(s);
      return std::nullopt;
    }
    if (starts_with("[:") || starts_with("[=") || starts_with("[."))
      fail(pos_, 2, "POSIX classes like [:alpha:] are not supported; write the ranges, as in [a-zA-Z]");
    return literal_code_point();
  }

  CodePointSet char_class() {
    size_t open = pos_;
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^' && !at_end()) {
      negated = true;
      ++pos_;
    }
    CodePointSet set;
    bool first = true;
    for (;;) {
      if (at_end()) fail(open, 1, "unclosed '[' in regex");
      if (peek() == ']' && !first) break;
      first = false;
      size_t item_start = pos_;
      std::optional<uint32_t> lo = class_atom(set);
      if (lo && peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;  // '-'
        CodePointSet dummy;
        std::optional<uint32_t> hi = class_atom(dummy);
        if (!hi)
          fail(item_start, pos_ - item_start, "a class range cannot end with a class escape such as \\d");
        if (*hi < *lo)
          fail(item_start, pos_ - item_start,
               fmt::format("bad class range: U+{:04X} comes after U+{:04X}", *lo, *hi));
        set.add(*lo, *hi);
      } else if (lo) {
        set.add(*lo, *lo);
      }
    }
    ++pos_;  // ']'
    set = folded(std::move(set));
    return negated ? set.complement() : set;
  }

  struct Flags {
    bool case_insensitive = false;
    bool dot_all = false;
  };

  std::string_view p_;
  size_t pos_ = 0;
  Flags flags_;
  uint32_t max_nesting_;
  uint32_t open_groups_ = 0;
};

}  // namespace

RegexParseResult parse_regex(std::string_view pattern, uint32_t max_nesting) {
  try {
    return RegexParser(pattern, std::min(max_nesting, kMaxRegexNestingCeiling)).parse();
  } catch (const ParseFailure& f) {
    return f.error;
  }
}

namespace {

std::string set_text(const CodePointSet& set) {
  if (set.ranges().size() == 1 && set.ranges()[0].first == set.ranges()[0].second) {
    const uint32_t cp = set.ranges()[0].first;
    if (cp < 0x80 && (isalnum(static_cast<int>(cp)) || cp == ' ')) return std::string(1, static_cast<char>(cp));
    return "[" + class_char(cp) + "]";
  }
  auto members = [](const CodePointSet& of) {
    std::string out;
    for (const auto& [lo, hi] : of.ranges()) out += class_char(lo) + (hi > lo ? "-" + class_char(hi) : "");
    return out;
  };
  const CodePointSet rest = set.complement();
  if (rest.empty()) return "[\\s\\S]";
  const std::string listed = members(set), left_out = members(rest);
  return listed.size() <= left_out.size() + 1 ? "[" + listed + "]" : "[^" + left_out + "]";
}

// `node` as an operand of a concatenation (grouped when an alternation) or
// of a quantifier (grouped unless a single set).
std::string operand(const RegexNode& node, bool quantified) {
  const std::string text = regex_text(node);
  const bool atomic = node.kind == RegexNode::Kind::Set || (!quantified && node.kind != RegexNode::Kind::Alternation);
  return atomic ? text : "(?:" + text + ")";
}

}  // namespace

std::string regex_text(const RegexNode& node) {
  switch (node.kind) {
    case RegexNode::Kind::Empty: return "";
    case RegexNode::Kind::Set: return set_text(node.set);
    case RegexNode::Kind::Concat: {
      std::string out;
      for (const RegexNode& child : node.children) out += operand(child, false);
      return out;
    }
    case RegexNode::Kind::Alternation: {
      std::string out;
      for (size_t i = 0; i < node.children.size(); ++i) out += (i ? "|" : "") + regex_text(node.children[i]);
      return out;
    }
    case RegexNode::Kind::Repeat: {
      std::string q;
      if (node.min == 0 && node.max == kRegexUnbounded) q = "*";
      else if (node.min == 1 && node.max == kRegexUnbounded) q = "+";
      else if (node.min == 0 && node.max == 1) q = "?";
      else if (node.max == kRegexUnbounded) q = fmt::format("{{{},}}", node.min);
      else if (node.min == node.max) q = fmt::format("{{{}}}", node.min);
      else q = fmt::format("{{{},{}}}", node.min, node.max);
      if (node.children.empty() || node.children[0].kind == RegexNode::Kind::Empty) return "";
      return operand(node.children[0], true) + q;
    }
  }
  return "";
}

}  // namespace cgram::ir

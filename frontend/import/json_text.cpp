#include "json_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>

#include "cgram_text.h"
#include "utf8.h"

namespace cgram::json {
namespace {

// Alternatives of a regex; none means the regex matches nothing.
class Alternatives {
 public:
  void add(std::optional<std::string> alternative) {
    if (alternative) list_.push_back(std::move(*alternative));
  }
  std::optional<std::string> regex() const {
    if (list_.empty()) return std::nullopt;
    if (list_.size() == 1) return list_[0];
    std::string out = "(?:";
    for (size_t i = 0; i < list_.size(); ++i) out += (i ? "|" : "") + list_[i];
    return out + ")";
  }

 private:
  std::vector<std::string> list_;
};

std::string digit_class(int lo, int hi) {
  if (lo == hi) return std::string(1, static_cast<char>('0' + lo));
  if (lo == 0 && hi == 9) return "[0-9]";
  return fmt::format("[{}-{}]", lo, hi);
}

// --- Digit strings between bounds -------------------------------------------

// A bound on digit strings that are compared digit by digit: fraction digits
// (shorter strings padded with zeros) or integer digits of one length.
struct DigitBound {
  std::string digits;
  bool inclusive = true;
};
using OptBound = std::optional<DigitBound>;

// Steps one bound past a first digit `d`. Returns false when no
// continuation meets the bound; `rest` is what the digits after `d` must
// meet, or nothing when every continuation meets it.
bool step(const OptBound& bound, bool lower, int d, OptBound& rest) {
  rest.reset();
  if (!bound) return true;
  const int first = bound->digits.empty() ? 0 : bound->digits[0] - '0';
  if (d == first) {
    rest = DigitBound{bound->digits.empty() ? "" : bound->digits.substr(1), bound->inclusive};
    return true;
  }
  return lower ? d > first : d < first;
}

// Both bounds past a first digit `d`; false when `d` is not allowed.
bool step_both(const OptBound& lower, const OptBound& upper, int d, OptBound& next_lower, OptBound& next_upper) {
  return step(lower, true, d, next_lower) && step(upper, false, d, next_upper);
}

// Per first digit, the regex of what may follow it (nullopt: the digit is
// not allowed); runs of digits with the same follower become one class.
template <typename Follower>
std::optional<std::string> by_first_digit(int first_min, Follower follower) {
  std::vector<std::optional<std::string>> rest(10);
  for (int d = first_min; d <= 9; ++d) rest[d] = follower(d);
  Alternatives alts;
  for (int d = first_min; d <= 9;) {
    int e = d;
    while (e + 1 <= 9 && rest[e + 1] == rest[d]) ++e;
    if (rest[d]) alts.add(digit_class(d, e) + *rest[d]);
    d = e + 1;
  }
  return alts.regex();
}

// Fraction digit strings F (maybe empty: no fraction) with lower ≤ 0.F ≤
// upper, each bound optional. Empty bound digits stand for the value 0.
struct FractionSet {
  bool empty_ok = false;
  std::optional<std::string> nonempty;  // strings of one digit or more
};

FractionSet fraction_set(OptBound lower, OptBound upper) {
  if (lower && lower->digits.empty() && lower->inclusive) lower.reset();  // ≥ 0 always holds
  FractionSet out;
  const bool upper_is_zero = upper && upper->digits.empty();
  if (!lower && !upper) return {true, "[0-9]+"};
  if (lower && lower->digits.empty()) {  // > 0: a nonzero digit somewhere
    if (upper_is_zero) return {};
    if (!upper) return {false, "0*[1-9][0-9]*"};
  }
  if (!lower && upper_is_zero) return upper->inclusive ? FractionSet{true, "0+"} : FractionSet{};
  out.empty_ok = (!lower) && (!upper || !upper->digits.empty() || upper->inclusive);
  out.nonempty = by_first_digit(0, [&](int d) -> std::optional<std::string> {
    OptBound next_lower, next_upper;
    if (!step_both(lower, upper, d, next_lower, next_upper)) return std::nullopt;
    FractionSet rest = fraction_set(next_lower, next_upper);
    if (!rest.nonempty) return rest.empty_ok ? std::optional<std::string>("") : std::nullopt;
    return rest.empty_ok ? "(?:" + *rest.nonempty + ")?" : *rest.nonempty;
  });
  return out;
}

// The fraction part of a JSON number ("" or "." digits) with the bounds.
std::optional<std::string> fraction_regex(const OptBound& lower, const OptBound& upper) {
  FractionSet set = fraction_set(lower, upper);
  if (!set.nonempty) return set.empty_ok ? std::optional<std::string>("") : std::nullopt;
  return set.empty_ok ? "(?:\\." + *set.nonempty + ")?" : "\\." + *set.nonempty;
}

// Digit strings of exactly n digits (no leading zero unless n is 1) between
// bounds of n digits.
std::optional<std::string> fixed_length(size_t n, const OptBound& lower, const OptBound& upper, bool leading) {
  if (n == 0) {
    const bool ok = (!lower || lower->inclusive) && (!upper || upper->inclusive);
    return ok ? std::optional<std::string>("") : std::nullopt;
  }
  auto digits = [](size_t count) { return count == 1 ? std::string("[0-9]") : fmt::format("[0-9]{{{}}}", count); };
  if (!lower && !upper) return leading && n > 1 ? "[1-9]" + digits(n - 1) : digits(n);
  return by_first_digit(leading && n > 1 ? 1 : 0, [&](int d) -> std::optional<std::string> {
    OptBound next_lower, next_upper;
    if (!step_both(lower, upper, d, next_lower, next_upper)) return std::nullopt;
    return fixed_length(n - 1, next_lower, next_upper, false);
  });
}

// Integer digit strings (no leading zeros) between the bounds.
std::optional<std::string> integer_digits(const DigitBound& lower, const OptBound& upper) {
  const size_t lo_len = lower.digits.size();
  const size_t hi_len = upper ? upper->digits.size() : SIZE_MAX;
  if (hi_len < lo_len) return std::nullopt;
  Alternatives alts;
  if (lo_len == hi_len) return fixed_length(lo_len, lower, upper, true);
  alts.add(fixed_length(lo_len, lower, std::nullopt, true));
  // Every length strictly between: a nonzero digit and lo_len .. hi_len-2 more.
  if (!upper) alts.add(fmt::format("[1-9][0-9]{{{},}}", lo_len));
  else if (hi_len - lo_len >= 2)
    alts.add(hi_len - lo_len == 2 ? fmt::format("[1-9][0-9]{{{}}}", lo_len)
                                  : fmt::format("[1-9][0-9]{{{},{}}}", lo_len, hi_len - 2));
  if (upper) alts.add(fixed_length(hi_len, std::nullopt, upper, true));
  return alts.regex();
}

// Magnitudes (no sign) between the bounds, fixed point; integers only
// when `integer`.
int compare_magnitude(const Decimal& a, const Decimal& b);

std::optional<std::string> magnitude_regex(const NumberBound& lower, const std::optional<NumberBound>& upper,
                                           bool integer) {
  if (upper) {
    const int c = compare_magnitude(lower.value, upper->value);
    if (c > 0 || (c == 0 && !(lower.inclusive && upper->inclusive))) return std::nullopt;
  }
  const std::string& li = lower.value.integer;
  if (integer) {
    // ceil of the lower bound, floor of the upper: a bound with a fraction
    // excludes its integer part below and includes it above.
    DigitBound lo{li, lower.inclusive && lower.value.fraction.empty()};
    OptBound hi;
    if (upper) hi = DigitBound{upper->value.integer, upper->inclusive || !upper->value.fraction.empty()};
    return integer_digits(lo, hi);
  }
  const DigitBound lower_fraction{lower.value.fraction, lower.inclusive};
  Alternatives alts;
  if (upper && upper->value.integer == li) {
    auto f = fraction_regex(lower_fraction, DigitBound{upper->value.fraction, upper->inclusive});
    if (f) alts.add(li + *f);
    return alts.regex();
  }
  if (auto f = fraction_regex(lower_fraction, std::nullopt)) alts.add(li + *f);
  OptBound between_upper;
  if (upper) between_upper = DigitBound{upper->value.integer, false};
  if (auto i = integer_digits({li, false}, between_upper)) alts.add(*i + "(?:\\.[0-9]+)?");
  if (upper)
    if (auto f = fraction_regex(std::nullopt, DigitBound{upper->value.fraction, upper->inclusive}))
      alts.add(upper->value.integer + *f);
  return alts.regex();
}

int compare_digits_as_integers(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}

int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (int c = compare_digits_as_integers(a.integer, b.integer)) return c;
  const size_t n = std::max(a.fraction.size(), b.fraction.size());
  std::string fa = a.fraction, fb = b.fraction;
  fa.resize(n, '0');
  fb.resize(n, '0');
  return fa < fb ? -1 : (fa == fb ? 0 : 1);
}

Decimal magnitude_of(Decimal d) {
  d.negative = false;
  return d;
}

// --- Strings ----------------------------------------------------------------

// A class character, non-ASCII ones as \u{…} (the ranges of a class are
// mostly huge spans whose ends are unprintable).
std::string class_member(uint32_t cp) { return cp >= 0x7F ? fmt::format("\\u{{{:X}}}", cp) : class_char(cp); }

// One character as a regex atom, or a class.
std::string class_regex(const ir::CodePointSet& set) {
  const auto& ranges = set.ranges();
  if (ranges.size() == 1 && ranges[0].first == ranges[0].second) {
    const uint32_t cp = ranges[0].first;
    return cp < 0x7F ? regex_literal(std::string(1, static_cast<char>(cp))) : class_member(cp);
  }
  auto members = [](const ir::CodePointSet& of) {
    std::string out;
    for (const auto& [lo, hi] : of.ranges()) out += class_member(lo) + (hi > lo ? "-" + class_member(hi) : "");
    return out;
  };
  // Whichever is shorter: the set, or what it leaves out (a negated class is
  // the complement among scalar values, as CodePointSet's).
  const std::string listed = members(set), left_out = members(set.complement());
  return listed.size() <= left_out.size() + 1 ? "[" + listed + "]" : "[^" + left_out + "]";
}

// Hex digits as a class body, runs of three or more as ranges ("0-9a-f").
std::string hex_class_body(const std::string& digits) {
  std::string out;
  for (size_t i = 0; i < digits.size();) {
    size_t j = i;
    while (j + 1 < digits.size() && digits[j + 1] == digits[j] + 1) ++j;
    if (j - i >= 2) out += fmt::format("{}-{}", digits[i], digits[j]);
    else out += digits.substr(i, j - i + 1);
    i = j + 1;
  }
  return out;
}

// The letter of JSON's two-character escape for `cp` (\" \\ \b \f \n \r \t), if it has one.
std::optional<char> json_escape_letter(uint32_t cp) {
  switch (cp) {
    case '"': return '"';
    case '\\': return '\\';
    case '\b': return 'b';
    case '\f': return 'f';
    case '\n': return 'n';
    case '\r': return 'r';
    case '\t': return 't';
    default: return std::nullopt;
  }
}

// The spellings of the characters JSON must escape, as one regex:
// \" \\ \b \f \n \r \t, and \u00xx (lower-case) for the other controls.
std::optional<std::string> escapes_regex(const std::vector<uint32_t>& escaped) {
  std::string short_forms;
  std::map<int, std::string> by_high_nibble;  // \u00xx: x's low hex digits per high one
  for (uint32_t cp : escaped) {
    if (auto letter = json_escape_letter(cp))
      short_forms += *letter == '\\' ? std::string("\\\\") : std::string(1, *letter);  // a regex: \ escaped
    else by_high_nibble[static_cast<int>(cp >> 4)] += fmt::format("{:x}", cp & 0xF);
  }
  Alternatives alts;
  if (!short_forms.empty()) alts.add(short_forms.size() == 1 ? short_forms : "[" + short_forms + "]");
  if (!by_high_nibble.empty()) {
    Alternatives hex;
    for (const auto& [high, lows] : by_high_nibble)
      hex.add(fmt::format("{}{}", high, lows.size() == 1 ? lows : "[" + hex_class_body(lows) + "]"));
    alts.add("u00" + *hex.regex());
  }
  if (auto r = alts.regex()) return "\\\\" + *r;
  return std::nullopt;
}


}  // namespace

// --- Decimals ---------------------------------------------------------------

std::optional<Decimal> parse_decimal(std::string_view text) {
  Decimal d;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string digits;  // all mantissa digits
  long point = -1;     // digits before the point
  for (; i < text.size() && (isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      if (point >= 0) return std::nullopt;
      point = static_cast<long>(digits.size());
    } else {
      digits += text[i];
    }
  }
  if (digits.empty()) return std::nullopt;
  if (point < 0) point = static_cast<long>(digits.size());
  long exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool minus = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) minus = text[i++] == '-';
    if (i == text.size()) return std::nullopt;
    for (; i < text.size(); ++i) {
      if (!isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
      exponent = exponent * 10 + (text[i] - '0');
      if (exponent > kMaxDecimalExponent) return std::nullopt;
    }
    if (minus) exponent = -exponent;
  }
  if (i != text.size()) return std::nullopt;
  point += exponent;
  // Place the point: pad with zeros on the side that needs them.
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<long>(digits.size())) digits.append(static_cast<size_t>(point) - digits.size(), '0');
  std::string integer = digits.substr(0, static_cast<size_t>(point));
  std::string fraction = digits.substr(static_cast<size_t>(point));
  integer.erase(0, std::min(integer.find_first_not_of('0'), integer.size()));
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  d.integer = integer.empty() ? "0" : integer;
  d.fraction = fraction;
  if (d.is_zero()) d.negative = false;
  return d;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.is_zero() && b.is_zero()) return 0;
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int c = compare_magnitude(a, b);
  return a.negative ? -c : c;
}

std::string to_string(const Decimal& d) {
  return (d.negative ? "-" : "") + d.integer + (d.fraction.empty() ? "" : "." + d.fraction);
}

std::optional<std::string> number_regex(const std::optional<NumberBound>& lower,
                                        const std::optional<NumberBound>& upper, bool integer) {
  if (!lower && !upper)
    return integer ? "-?(?:0|[1-9][0-9]*)" : "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][-+]?[0-9]+)?";
  const NumberBound zero{Decimal{}, true};
  Alternatives alts;
  // Non-negative writings (no sign): magnitudes in [max(lower, 0), upper].
  if (!upper || !upper->value.negative) {
    NumberBound lo = lower && !lower->value.negative ? *lower : zero;
    alts.add(magnitude_regex({magnitude_of(lo.value), lo.inclusive}, upper, integer));
  }
  // Negative writings ("-" and a magnitude m, the value −m, −0 included):
  // value ≤ upper ⟺ m ≥ −upper, value ≥ lower ⟺ m ≤ −lower.
  if (!lower || lower->value.negative || lower->value.is_zero()) {
    NumberBound lo = upper && (upper->value.negative || upper->value.is_zero())
                         ? NumberBound{magnitude_of(upper->value), upper->inclusive}
                         : zero;
    std::optional<NumberBound> hi;
    if (lower) hi = NumberBound{magnitude_of(lower->value), lower->inclusive};
    if (auto m = magnitude_regex(lo, hi, integer)) alts.add("-" + *m);
  }
  return alts.regex();
}

// --- Strings ----------------------------------------------------------------

std::optional<std::string> string_char_regex(const ir::CodePointSet& set) {
  Alternatives alts;
  ir::CodePointSet raw;
  std::vector<uint32_t> escaped;
  for (const auto& [lo, hi] : set.ranges()) {
    for (uint32_t cp = lo; cp <= std::min<uint32_t>(hi, 0x5C); ++cp)
      if (cp < 0x20 || cp == '"' || cp == '\\') escaped.push_back(cp);
  }
  // The raw part: the set without the escaped characters.
  for (const auto& [lo, hi] : set.ranges()) {
    uint32_t from = lo;
    for (uint32_t cp : escaped)
      if (cp >= from && cp <= hi) {
        if (cp > from) raw.add(from, cp - 1);
        from = cp + 1;
      }
    if (from <= hi) raw.add(from, hi);
  }
  if (!raw.empty()) alts.add(class_regex(raw));
  alts.add(escapes_regex(escaped));
  return alts.regex();
}

std::string any_string_char_regex() {
  static const std::string any = *string_char_regex(ir::CodePointSet::all());
  return any;
}

std::string json_string_text(std::string_view utf8) {
  std::string out = "\"";
  for (size_t pos = 0; pos < utf8.size();) {
    const size_t at = pos;
    auto cp = decode_utf8(utf8, pos);
    if (!cp) continue;
    if (auto letter = json_escape_letter(*cp)) {
      out += '\\';
      out += *letter;
    } else if (*cp < 0x20) {
      out += fmt::format("\\u00{:02x}", *cp);
    } else {
      out.append(utf8.substr(at, pos - at));
    }
  }
  return out + "\"";
}

std::string regex_literal(std::string_view text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    auto cp = decode_utf8(text, pos);
    const uint32_t c = cp ? *cp : 0xFFFD;
    if (c < 0x80 && (isalnum(static_cast<int>(c)) || c == ' ')) out += static_cast<char>(c);
    else if (c < 0x80 && ispunct(static_cast<int>(c))) out += fmt::format("\\{}", static_cast<char>(c));
    else if (needs_code_point_escape(c)) out += fmt::format("\\u{{{:X}}}", c);
    else append_utf8(out, c);
  }
  return out;
}

namespace {
// A regex and whether a quantifier may follow it as it is.
struct Encoded {
  std::string text;
  bool atom;
};

std::string quantifier(uint32_t min, uint32_t max) {
  if (max == ir::kRegexUnbounded) return min == 0 ? "*" : (min == 1 ? "+" : fmt::format("{{{},}}", min));
  if (min == 0 && max == 1) return "?";
  return min == max ? fmt::format("{{{}}}", min) : fmt::format("{{{},{}}}", min, max);
}

std::optional<Encoded> encode(const ir::RegexNode& node) {
  using Kind = ir::RegexNode::Kind;
  switch (node.kind) {
    case Kind::Empty: return Encoded{"", false};
    case Kind::Set: {
      auto r = string_char_regex(node.set);
      if (!r) return std::nullopt;
      const bool single = r->size() == 1 || (r->size() == 2 && (*r)[0] == '\\');
      return Encoded{*r, single || r->front() == '[' || r->starts_with("(?:")};
    }
    case Kind::Concat: {
      Encoded out{"", node.children.size() == 1};
      for (const ir::RegexNode& child : node.children) {
        auto part = encode(child);
        if (!part) return std::nullopt;
        out.text += part->text;
        out.atom = out.atom && part->atom;
      }
      return out;
    }
    case Kind::Alternation: {
      Alternatives alts;
      for (const ir::RegexNode& child : node.children)
        if (auto part = encode(child)) alts.add(part->text);
      auto r = alts.regex();
      if (!r) return std::nullopt;
      return Encoded{r->starts_with("(?:") ? *r : "(?:" + *r + ")", true};
    }
    case Kind::Repeat: {
      auto inner = encode(node.children.at(0));
      if (!inner) return node.min == 0 ? std::optional<Encoded>(Encoded{"", false}) : std::nullopt;
      if (inner->text.empty()) return Encoded{"", false};
      const std::string base = inner->atom ? inner->text : "(?:" + inner->text + ")";
      return Encoded{base + quantifier(node.min, node.max), false};
    }
  }
  return std::nullopt;
}
}  // namespace

std::optional<std::string> encode_regex(const ir::RegexNode& node) {
  auto e = encode(node);
  if (!e) return std::nullopt;
  return e->text;
}

namespace {
struct NameTrie {
  bool terminal = false;
  std::map<uint32_t, std::unique_ptr<NameTrie>> children;
};

// A string that is not a name either leaves the trie of names at some
// character (a path in the trie, then a character no name continues with
// there, then anything), or ends inside it where no name ends. Written so,
// "anything" appears once, after the whole trie, instead of after each of
// its nodes: the regex is a few times shorter and its automaton is a trie
// with one loop (a schema with 400 properties took 20 s to build the other).
//
// A character that no name has anywhere (escapes, most of Unicode) leaves
// the trie at every node: it is written once, after a regex of every path
// in the trie, and only the characters of the names are left to the nodes
// they do not continue. Written at each node, the large class was copied as
// often, and the subset construction of the key's DFA built each copy's
// states (500 states for 30 minimal ones, 1 ms a key).

// The paths below `node` followed by one of `used`, the characters of the
// names, that leaves the trie there (nullopt: none can).
std::optional<std::string> leaving(const NameTrie& node, const ir::CodePointSet& used) {
  Alternatives alts;
  ir::CodePointSet not_leaving = used.complement();  // used ∖ children = ¬(¬used ∪ children)
  for (const auto& [cp, child] : node.children) not_leaving.add(cp, cp);
  if (const ir::CodePointSet leaves = not_leaving.complement(); !leaves.empty()) alts.add(string_char_regex(leaves));
  for (const auto& [cp, child] : node.children)
    if (std::optional<std::string> below = leaving(*child, used))
      alts.add(*string_char_regex(ir::CodePointSet::single(cp)) + *below);
  return alts.regex();
}

// Every path from `node` down the trie, the empty one included (nullopt
// for a node with no children: only the empty path).
std::optional<std::string> paths(const NameTrie& node) {
  Alternatives alts;
  for (const auto& [cp, child] : node.children) {
    const std::optional<std::string> below = paths(*child);
    alts.add(*string_char_regex(ir::CodePointSet::single(cp)) + (below ? "(?:" + *below + ")?" : ""));
  }
  return alts.regex();
}

// The strings that end inside the trie below `node` where no name ends: the
// regex of the non-empty ones, and whether the empty one is among them.
struct Stops {
  std::optional<std::string> nonempty;
  bool empty = false;
};
Stops stops(const NameTrie& node) {
  Alternatives alts;
  for (const auto& [cp, child] : node.children) {
    const Stops below = stops(*child);
    if (!below.nonempty && !below.empty) continue;
    const std::string rest = below.nonempty ? (below.empty ? "(?:" + *below.nonempty + ")?" : *below.nonempty) : "";
    alts.add(*string_char_regex(ir::CodePointSet::single(cp)) + rest);
  }
  return {alts.regex(), !node.terminal};
}
}  // namespace

std::optional<std::string> key_not_in_regex(const std::vector<std::string>& names, size_t max_nodes) {
  NameTrie root;
  size_t nodes = 0;
  for (const std::string& name : names) {
    NameTrie* node = &root;
    for (size_t pos = 0; pos < name.size();) {
      auto cp = decode_utf8(name, pos);
      auto& child = node->children[cp ? *cp : 0xFFFD];
      if (!child) {
        // Refused before anything recursive runs (the trie's own destructor
        // is recursive too: a name of 300,000 characters would overflow it).
        if (++nodes > max_nodes) {
          child.reset();
          return std::nullopt;
        }
        child = std::make_unique<NameTrie>();
      }
      node = child.get();
    }
    node->terminal = true;
  }
  ir::CodePointSet used;
  for (const std::string& name : names)
    for (size_t pos = 0; pos < name.size();) {
      const uint32_t cp = decode_utf8(name, pos).value_or(0xFFFD);
      used.add(cp, cp);
    }
  Alternatives first;  // what leaves the trie, and where
  first.add(leaving(root, used));
  if (const std::optional<std::string> elsewhere = string_char_regex(used.complement())) {
    const std::optional<std::string> path = paths(root);
    first.add(path ? "(?:" + *path + ")?" + *elsewhere : *elsewhere);
  }
  const std::string leave = "(?:" + *first.regex() + ")(?:" + any_string_char_regex() + ")*";
  const Stops stop = stops(root);
  std::string body = stop.nonempty ? "(?:" + leave + "|" + *stop.nonempty + ")" : "(?:" + leave + ")";
  if (stop.empty) body += "?";
  return "\"" + body + "\"";
}

// --- ECMAScript patterns ----------------------------------------------------

namespace {
// ECMAScript's \s: the white space and line terminators of ECMA-262.
constexpr const char* kEcmaSpace = "\\t\\n\\v\\f\\r \\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF";

// One branch of the top-level alternation, its anchors taken off.
struct Branch {
  std::string body;
  bool anchored_start = false, anchored_end = false;
};

// A pattern's structure as a regex reader sees it: every character outside
// escapes and classes, with the group depth before it, visited in order
// until `visit` returns true.
struct Shape {
  std::string_view text;
  template <typename Visit>
  void scan(size_t from, Visit&& visit) const {
    int depth = 0;
    bool in_class = false;
    for (size_t i = from; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '\\') ++i;
      else if (in_class) in_class = c != ']';
      else if (c == '[') in_class = true;
      else if (visit(i, c, depth)) return;
      else if (c == '(') ++depth;
      else if (c == ')') --depth;
    }
  }
  // Where the group opening at `open` closes; npos if it never does.
  size_t close_of(size_t open) const {
    size_t close = std::string_view::npos;
    scan(open, [&](size_t i, char c, int depth) { return c == ')' && depth == 1 && (close = i, true); });
    return close;
  }
  // The top-level group that ends the text (its opening), or npos.
  size_t group_at_end() const {
    size_t open = std::string_view::npos;
    scan(0, [&](size_t i, char c, int depth) {
      if (c == '(' && depth == 0) open = i;
      return false;
    });
    return open != std::string_view::npos && close_of(open) + 1 == text.size() ? open : std::string_view::npos;
  }
  // The alternatives at depth 0.
  std::vector<std::string_view> alternatives() const {
    std::vector<std::string_view> out;
    size_t start = 0;
    scan(0, [&](size_t i, char c, int depth) {
      if (c == '|' && depth == 0) {
        out.push_back(text.substr(start, i - start));
        start = i + 1;
      }
      return false;
    });
    out.push_back(text.substr(start));
    return out;
  }
  bool has_anchor() const {
    bool found = false;
    scan(0, [&](size_t, char c, int) { return found = c == '^' || c == '$'; });
    return found;
  }
};

// A plain group (capturing or `(?:`, not a look-around) opening at `open`:
// the offset of its content, or npos.
size_t group_content(std::string_view text, size_t open) {
  if (open >= text.size() || text[open] != '(') return std::string_view::npos;
  if (text.substr(open, 3) == "(?:") return open + 3;
  return open + 1 < text.size() && text[open + 1] == '?' ? std::string_view::npos : open + 1;
}

// Anchors inside groups, brought out to where ecma_pattern_to_regex reads
// them (the start or end of a top-level alternative), by distributing the
// groups that carry them: `(^a$)` is `^a$`, `^(a$|b)` is `^a$|^b`,
// `(^a|b)c` is `^ac|bc`. Capturing groups only group here (backreferences
// are refused). Only a group that is unquantified and ends (or begins) its
// alternative is distributed, and the result is bounded; anything else is
// left as written, and refused as before.
std::string anchors_brought_out(std::string_view pattern) {
  std::vector<std::string> branches;
  for (std::string_view b : Shape{pattern}.alternatives()) branches.emplace_back(b);
  for (size_t round = 0; round < 16; ++round) {
    bool changed = false;
    std::vector<std::string> next;
    for (const std::string& b : branches) {
      const Shape shape{b};
      if (!shape.has_anchor()) {
        next.push_back(b);
        continue;
      }
      // A group that ends the alternative: `prefix (x|y)` → `prefix x | prefix y`.
      const size_t lead = b.starts_with('^') ? 1 : 0;
      const size_t open = shape.group_at_end();
      // Or a group that begins it (after a leading '^'): `(x|y) suffix`.
      const size_t first_close = lead < b.size() ? shape.close_of(lead) : std::string::npos;
      const bool first_plain = group_content(b, lead) != std::string::npos && first_close != std::string::npos &&
                               (first_close + 1 == b.size() || std::string_view("*+?{").find(b[first_close + 1]) ==
                                                                   std::string_view::npos);
      size_t from = std::string::npos, to = std::string::npos;
      if (open != std::string::npos && group_content(b, open) != std::string::npos) {
        from = open;
        to = b.size() - 1;
      } else if (first_plain) {
        from = lead;
        to = first_close;
      }
      const std::string_view inner =
          from == std::string::npos ? std::string_view() : std::string_view(b).substr(group_content(b, from),
                                                                                       to - group_content(b, from));
      if (from == std::string::npos || !Shape{inner}.has_anchor()) {
        next.push_back(b);
        continue;
      }
      for (std::string_view alternative : Shape{inner}.alternatives())
        next.push_back(b.substr(0, from) + std::string(alternative) + b.substr(to + 1));
      changed = true;
    }
    size_t size = 0;
    for (const std::string& b : next) size += b.size() + 1;
    if (size > 4 * pattern.size() + 64) break;  // bounded: leave the rest as written
    branches = std::move(next);
    if (!changed) break;
  }
  std::string out;
  for (const std::string& b : branches) out += (out.empty() ? "" : "|") + b;
  return out;
}
}  // namespace

std::optional<LookaheadParts> leading_lookaheads(std::string_view pattern) {
  if (!pattern.starts_with("^(?=") && !pattern.starts_with("^(?!")) return std::nullopt;
  const Shape shape{pattern};
  LookaheadParts parts;
  size_t at = 1;
  while (pattern.substr(at, 3) == "(?=" || pattern.substr(at, 3) == "(?!") {
    const size_t close = shape.close_of(at);
    if (close == std::string_view::npos) return std::nullopt;
    // Anchored where it stands: a '^' that starts one of its alternatives says nothing more.
    std::string body;
    for (std::string_view alternative : Shape{pattern.substr(at + 3, close - at - 3)}.alternatives()) {
      if (alternative.starts_with('^')) alternative.remove_prefix(1);
      body += (body.empty() ? "" : "|") + std::string(alternative);
    }
    (pattern[at + 2] == '=' ? parts.within : parts.outside).push_back("^(?:" + body + ")");
    at = close + 1;
  }
  std::string_view rest = pattern.substr(at);
  if (rest.starts_with('^')) rest.remove_prefix(1);
  parts.rest = "^" + std::string(rest);
  return parts;
}

Result<std::string> ecma_pattern_to_regex(std::string_view written) {
  const std::string flattened = anchors_brought_out(written);
  const std::string_view pattern = flattened;
  std::vector<Branch> branches(1);
  int depth = 0;
  bool in_class = false;
  // A '?' right after a quantifier makes it lazy. Whether some match is
  // found anywhere in a string does not depend on which one a search
  // prefers, so a lazy quantifier means what its greedy twin means here.
  // (A '}' ends a quantifier only where `{n}`, `{n,}` or `{n,m}` began it;
  // elsewhere braces are literal.)
  bool after_quantifier = false;
  size_t counted_end = std::string_view::npos;  // the '}' of the last `{n,m}`
  size_t class_start = 0;                        // where the open class's '[' is in the branch's body
  bool class_negated = false, class_not_space = false;
  auto counted_quantifier_end = [&](size_t open) -> size_t {
    size_t j = open + 1;
    const size_t digits = j;
    while (j < pattern.size() && isdigit(static_cast<unsigned char>(pattern[j]))) ++j;
    if (j == digits) return std::string_view::npos;
    if (j < pattern.size() && pattern[j] == ',') {
      ++j;
      while (j < pattern.size() && isdigit(static_cast<unsigned char>(pattern[j]))) ++j;
    }
    return j < pattern.size() && pattern[j] == '}' ? j : std::string_view::npos;
  };
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    Branch& b = branches.back();
    const bool quantified = after_quantifier;
    after_quantifier = false;
    if (!in_class && c == '?' && quantified) continue;
    if (!in_class && c == '{') counted_end = counted_quantifier_end(i);
    if (!in_class && (c == '*' || c == '+' || c == '?' || (c == '}' && i == counted_end))) after_quantifier = true;
    if (c == '\\') {
      if (i + 1 >= pattern.size()) return Error{ErrorCode::InvalidInput, "the pattern ends with a lone backslash"};
      const char e = pattern[++i];
      if (e == 's') b.body += in_class ? kEcmaSpace : fmt::format("[{}]", kEcmaSpace);
      else if (e == 'S' && !in_class) b.body += fmt::format("[^{}]", kEcmaSpace);
      else if (e == 'S' && class_negated)
        return Error{ErrorCode::Unsupported, "'\\S' inside a negated class is not supported"};
      else if (e == 'S') class_not_space = true;  // [X\S] is (?:[X]|\S): written when the class closes
      else if (e == 'p' || e == 'P')
        return Error{ErrorCode::Unsupported, "Unicode property escapes (\\p{…}) are not supported"};
      else if (e == 'c')
        return Error{ErrorCode::Unsupported, "control escapes (\\cX) are not supported"};
      else if (e >= '1' && e <= '9')
        return Error{ErrorCode::Unsupported, "backreferences are not supported"};
      else if (e == 'b' && !in_class)
        return Error{ErrorCode::Unsupported, "word boundaries (\\b) are not supported"};
      else if (e == 'B')
        return Error{ErrorCode::Unsupported, "word boundaries (\\B) are not supported"};
      else b.body += std::string("\\") + e;
      continue;
    }
    if (in_class) {
      if (c == ']') {
        in_class = false;
        if (class_not_space) {
          const std::string members = b.body.substr(class_start + 1);
          const std::string not_space = fmt::format("[^{}]", kEcmaSpace);
          b.body.resize(class_start);
          b.body += members.empty() ? not_space : fmt::format("(?:[{}]|{})", members, not_space);
          class_not_space = false;
          continue;
        }
      }
      b.body += c;
      continue;
    }
    switch (c) {
      case '[':
        in_class = true;
        class_start = b.body.size();
        b.body += c;
        class_negated = i + 1 < pattern.size() && pattern[i + 1] == '^';
        if (i + 1 < pattern.size() && pattern[i + 1] == '^') b.body += pattern[++i];
        if (i + 1 < pattern.size() && pattern[i + 1] == ']')
          return Error{ErrorCode::Unsupported, "'[]' and '[^]' are not supported"};
        break;
      case '(': ++depth; b.body += c; break;
      case ')': --depth; b.body += c; break;
      case '.': b.body += "[^\\n\\r\\u2028\\u2029]"; break;
      case '|':
        if (depth == 0) branches.emplace_back();
        else b.body += c;
        break;
      case '^':
        if (depth != 0 || !b.body.empty() || b.anchored_start)
          return Error{ErrorCode::Unsupported,
                       "'^' is supported only at the start of the pattern (or of a top-level alternative)"};
        b.anchored_start = true;
        break;
      case '$': {
        size_t next = i + 1;
        if (depth != 0 || (next < pattern.size() && pattern[next] != '|'))
          return Error{ErrorCode::Unsupported,
                       "'$' is supported only at the end of the pattern (or of a top-level alternative)"};
        b.anchored_end = true;
        break;
      }
      default: b.body += c;
    }
  }
  std::string out;
  for (const Branch& b : branches) {
    if (!out.empty()) out += "|";
    out += fmt::format("{}(?:{}){}", b.anchored_start ? "" : "[\\s\\S]*", b.body, b.anchored_end ? "" : "[\\s\\S]*");
  }
  return out;
}

// --- Formats ----------------------------------------------------------------

namespace {
constexpr const char* kDate =
    "[0-9]{4}-(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|[0-9]{4}-(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|[0-9]{4}-02-(?:0[1-9]|1[0-9]|2[0-8])"
    "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29";
// Leap seconds only at 23:59:60 UTC written as such (docs/JSON_SCHEMA.md).
constexpr const char* kTime =
    "(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
    "|23:59:60(?:\\.[0-9]+)?(?:[Zz]|[+-]00:00))";
constexpr const char* kOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
constexpr const char* kLabel = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";

std::string ipv4() { return fmt::format("{0}\\.{0}\\.{0}\\.{0}", kOctet); }

std::string ipv6() {
  const std::string h = "[0-9A-Fa-f]{1,4}";
  const std::string ls32 = fmt::format("(?:{0}:{0}|{1})", h, ipv4());
  // RFC 3986's IPv6address: six groups and ls32, or "::" with at most n
  // groups before it (n = 0..6) and what fits after it.
  Alternatives alts;
  alts.add(fmt::format("(?:{0}:){{6}}{1}", h, ls32));
  alts.add(fmt::format("::(?:{0}:){{5}}{1}", h, ls32));
  for (int n = 0; n <= 6; ++n) {
    const std::string before = n == 0 ? fmt::format("(?:{0})?", h) : fmt::format("(?:(?:{0}:){{0,{1}}}{0})?", h, n);
    const std::string after = n <= 4 ? fmt::format("(?:{}:){{{}}}{}", h, 4 - n, ls32) : (n == 5 ? h : "");
    alts.add(before + "::" + after);
  }
  return *alts.regex();
}

std::string hostname() {
  // Labels of 1 to 63 letters, digits and hyphens, not starting or ending
  // with a hyphen, without "--" at the third and fourth characters (those
  // are IDNA A-labels, which a regex cannot check).
  const std::string a = "[A-Za-z0-9]", x = "[A-Za-z0-9-]";
  const std::string label = fmt::format("(?:{0}(?:{1}?{0}|{1}{{2}}{0}|{1}(?:{0}{1}|-{0}){1}{{0,58}}{0})?)", a, x);
  return fmt::format("{0}(?:\\.{0})*", label);
}

std::string email() {
  const std::string atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]";
  const std::string dot_atom = fmt::format("{0}+(?:\\.{0}+)*", atext);
  const std::string quoted = "\"(?:[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]|\\\\[\\x20-\\x7E])*\"";
  const std::string domain = fmt::format("{0}(?:\\.{0})*|\\[{1}\\]|\\[IPv6:{2}\\]", kLabel, ipv4(), ipv6());
  return fmt::format("(?:{}|{})@(?:{})", dot_atom, quoted, domain);
}

// RFC 3986: a URI is scheme ":" hier-part [ "?" query ] [ "#" fragment ]; a
// URI reference is a URI or a relative reference, relative-part [ "?" query ]
// [ "#" fragment ], whose first segment has no colon (path-noscheme).
std::string uri_or_reference(bool reference) {
  const std::string unreserved = "A-Za-z0-9\\-._~";
  const std::string sub_delims = "!$&'()*+,;=";
  const std::string pct = "%[0-9A-Fa-f]{2}";
  const std::string pchar = fmt::format("(?:[{}{}:@]|{})", unreserved, sub_delims, pct);
  const std::string userinfo = fmt::format("(?:[{}{}:]|{})*", unreserved, sub_delims, pct);
  const std::string ip_literal = fmt::format("\\[(?:{}|[vV][0-9A-Fa-f]+\\.[{}{}:]+)\\]", ipv6(), unreserved, sub_delims);
  const std::string reg_name = fmt::format("(?:[{}{}]|{})*", unreserved, sub_delims, pct);
  const std::string host = fmt::format("(?:{}|{}|{})", ip_literal, ipv4(), reg_name);
  const std::string authority = fmt::format("(?:{}@)?{}(?::[0-9]*)?", userinfo, host);
  const std::string segment = pchar + "*";
  const std::string segment_nz = pchar + "+";
  const std::string tail = fmt::format("(?:[/?]|{})*", pchar);
  const std::string query_fragment = fmt::format("(?:\\?{0})?(?:#{0})?", tail);
  const std::string hier = fmt::format("(?://{0}(?:/{1})*|/(?:{2}(?:/{1})*)?|{2}(?:/{1})*|)", authority, segment,
                                       segment_nz);
  const std::string absolute = fmt::format("[A-Za-z][A-Za-z0-9+\\-.]*:{}{}", hier, query_fragment);
  if (!reference) return absolute;
  const std::string segment_nz_nc = fmt::format("(?:[{}{}@]|{})+", unreserved, sub_delims, pct);
  const std::string relative = fmt::format("(?://{0}(?:/{1})*|/(?:{2}(?:/{1})*)?|{3}(?:/{1})*|){4}", authority,
                                           segment, segment_nz, segment_nz_nc, query_fragment);
  return fmt::format("(?:{}|{})", absolute, relative);
}

// RFC 6901 and draft-handrews-relative-json-pointer.
constexpr const char* kJsonPointer = "(?:/(?:[^~/]|~[01])*)*";

// RFC 3339 appendix A (ISO 8601 durations).
std::string duration() {
  const std::string time = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)";
  const std::string date = "(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)";
  return fmt::format("P(?:{0}(?:{1})?|{1}|[0-9]+W)", date, time);
}
}  // namespace

std::optional<FormatRegex> format_regex(std::string_view format) {
  if (format == "date") return FormatRegex{fmt::format("(?:{})", kDate), ""};
  if (format == "time") return FormatRegex{kTime, ""};
  if (format == "date-time") return FormatRegex{fmt::format("(?:{})[Tt]{}", kDate, kTime), ""};
  if (format == "ipv4") return FormatRegex{ipv4(), ""};
  if (format == "ipv6") return FormatRegex{ipv6(), ""};
  if (format == "uuid") return FormatRegex{"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}", ""};
  if (format == "hostname") return FormatRegex{hostname(), "the 253-character limit of a hostname"};
  if (format == "email") return FormatRegex{email(), ""};
  if (format == "uri") return FormatRegex{uri_or_reference(false), ""};
  if (format == "uri-reference") return FormatRegex{uri_or_reference(true), ""};
  if (format == "json-pointer") return FormatRegex{kJsonPointer, ""};
  if (format == "relative-json-pointer") return FormatRegex{fmt::format("(?:0|[1-9][0-9]*)(?:#|{})", kJsonPointer), ""};
  if (format == "duration") return FormatRegex{duration(), ""};
  return std::nullopt;
}

}  // namespace cgram::json

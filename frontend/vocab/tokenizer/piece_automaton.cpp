#include "piece_automaton.h"

#include <unicode/uchar.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "binary_io.h"
#include "utf8.h"

namespace cgram {

// The compiled pattern: a Pike machine's program over character classes.
class PieceProgram {
 public:
  enum Op : uint8_t { kChar, kSplit, kJmp, kMatch, kLook, kLookNot };
  struct Inst {
    Op op;
    uint32_t x = 0, y = 0;  // targets (kChar, kLook: x is the next instruction)
    uint32_t set = 0;       // kChar, kLook, kLookNot
  };
  std::vector<Inst> program;
  // Per set, per class: whether the class is in the set.
  std::vector<std::vector<uint8_t>> set_has;
  size_t classes = 0;
  std::vector<uint32_t> interval_start;  // sorted; class of [start[i], start[i + 1])
  std::vector<uint8_t> interval_class;
  std::vector<uint8_t> bmp_class;  // the same for code points below 0x10000

  uint8_t class_of(uint32_t cp) const {
    if (cp < bmp_class.size()) return bmp_class[cp];
    auto it = std::upper_bound(interval_start.begin(), interval_start.end(), cp);
    return interval_class[static_cast<size_t>(it - interval_start.begin()) - 1];
  }
};

namespace {

constexpr uint32_t kNoCodePoint = UINT32_MAX;

struct Node {
  enum Kind { kEmpty, kSet, kConcat, kAlt, kRepeat, kLook, kLookNot } kind = kEmpty;
  uint32_t set = 0;
  char32_t literal = 0;  // a kSet of one literal character matched ignoring case
  std::vector<Node> kids;
  int min = 0, max = -1;  // kRepeat; -1: no bound
};

Node node(Node::Kind kind) {
  Node n;
  n.kind = kind;
  return n;
}

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::kSet: return false;
    case Node::kConcat: return std::all_of(n.kids.begin(), n.kids.end(), nullable);
    case Node::kAlt: return std::any_of(n.kids.begin(), n.kids.end(), nullable);
    case Node::kRepeat: return n.min == 0 || nullable(n.kids[0]);
    default: return true;
  }
}

icu::UnicodeSet property_set(const std::string& body, bool negated, UErrorCode& status) {
  icu::UnicodeSet set(icu::UnicodeString::fromUTF8("[\\p{" + body + "}]"), status);
  if (negated) set.complement();
  return set;
}

// ICU's \s, \d and \w (tests/unit/vocab/piece_automaton_test.cpp checks
// them against ICU's regex on every code point).
icu::UnicodeSet escape_set(char32_t c, UErrorCode& status) {
  icu::UnicodeSet set;
  switch (c) {
    case 's': case 'S': set = property_set("White_Space", false, status); break;
    case 'd': case 'D': set = property_set("Nd", false, status); break;
    default:
      set = icu::UnicodeSet(icu::UnicodeString::fromUTF8(
                                "[\\p{Alphabetic}\\p{Mark}\\p{Decimal_Number}\\p{Connector_Punctuation}\\u200c\\u200d]"),
                            status);
  }
  if (c == 'S' || c == 'D' || c == 'W') set.complement();
  return set;
}

// Recursive descent over the pattern's code points. Anything outside the
// subset sets `refused`.
class Parser {
 public:
  explicit Parser(std::u32string pattern) : p_(std::move(pattern)) {}

  std::optional<Node> parse() {
    Node n = alternation();
    if (!refused_.empty() || at_ != p_.size()) {
      if (refused_.empty()) refused_ = "an unbalanced ')'";
      return std::nullopt;
    }
    return n;
  }
  const std::string& refused() const { return refused_; }
  std::vector<icu::UnicodeSet>& sets() { return sets_; }
  bool ignores_case() const { return any_ignore_case_; }
  const std::vector<std::u32string>& case_blind_runs() const { return case_blind_runs_; }

 private:
  bool more() const { return at_ < p_.size() && refused_.empty(); }
  char32_t peek(size_t ahead = 0) const { return at_ + ahead < p_.size() ? p_[at_ + ahead] : 0; }
  void refuse(std::string why) {
    if (refused_.empty()) refused_ = std::move(why);
  }

  Node alternation() {
    Node alt = node(Node::kAlt);
    alt.kids.push_back(concatenation());
    while (more() && peek() == '|') {
      ++at_;
      alt.kids.push_back(concatenation());
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : std::move(alt);
  }

  Node concatenation() {
    Node cat = node(Node::kConcat);
    while (more() && peek() != '|' && peek() != ')') {
      if (peek() == '(' && peek(1) == '?' && peek(2) == 'i' && peek(3) == ')') {
        at_ += 4;
        ignore_case_ = any_ignore_case_ = true;
        continue;
      }
      cat.kids.push_back(repetition());
    }
    // Runs of literal characters matched ignoring case: ICU compares them
    // by full case folding, where one character may stand for several.
    std::u32string run;
    for (const Node& k : cat.kids) {
      if (k.literal) {
        run += k.literal;
        continue;
      }
      if (run.size() > 1) case_blind_runs_.push_back(run);
      run.clear();
    }
    if (run.size() > 1) case_blind_runs_.push_back(run);
    // A flag set here lasts to the end of the group (group() restores it).
    return cat.kids.size() == 1 ? std::move(cat.kids[0]) : std::move(cat);
  }

  std::optional<int> number() {
    if (!(peek() >= '0' && peek() <= '9')) return std::nullopt;
    int v = 0;
    while (peek() >= '0' && peek() <= '9' && v < 100000) v = v * 10 + static_cast<int>(p_[at_++] - '0');
    return v;
  }

  Node repetition() {
    Node atom_node = atom();
    while (more()) {
      int min, max;
      const char32_t c = peek();
      if (c == '?') min = 0, max = 1;
      else if (c == '*') min = 0, max = -1;
      else if (c == '+') min = 1, max = -1;
      else if (c == '{') {
        const size_t save = at_;
        ++at_;
        auto lo = number();
        if (!lo) {
          at_ = save;
          refuse("a '{' that is not a counted repetition");
          break;
        }
        min = max = *lo;
        if (peek() == ',') {
          ++at_;
          auto hi = number();
          max = hi ? *hi : -1;
        }
        if (peek() != '}' || (max >= 0 && max < min) || min > 1000 || max > 1000) {
          refuse("a counted repetition outside {n}, {n,}, {n,m} with m <= 1000");
          break;
        }
      } else {
        break;
      }
      ++at_;
      if (peek() == '?' || peek() == '+') {
        refuse("a lazy or possessive quantifier");
        break;
      }
      if (nullable(atom_node) && max != 1) {
        refuse("a repeated part that may match nothing");
        break;
      }
      Node rep = node(Node::kRepeat);
      rep.min = min;
      rep.max = max;
      rep.kids.push_back(std::move(atom_node));
      atom_node = std::move(rep);
    }
    return atom_node;
  }

  Node set_node(icu::UnicodeSet set) {
    if (ignore_case_) {
      set.closeOver(USET_CASE_INSENSITIVE);
      set.removeAllStrings();
    }
    sets_.push_back(std::move(set));
    Node n = node(Node::kSet);
    n.set = static_cast<uint32_t>(sets_.size() - 1);
    return n;
  }

  Node group() {
    ++at_;  // '('
    const bool outer_case = ignore_case_;
    Node inner;
    if (peek() == '?') {
      const char32_t kind = peek(1);
      if (kind == ':') {
        at_ += 2;
        inner = alternation();
      } else if (kind == 'i' && peek(2) == ':') {
        at_ += 3;
        ignore_case_ = any_ignore_case_ = true;
        inner = alternation();
      } else if (kind == '=' || kind == '!') {
        at_ += 2;
        Node body = alternation();
        if (body.kind != Node::kSet) refuse("a look-ahead of more than one character class");
        inner = node(kind == '=' ? Node::kLook : Node::kLookNot);
        inner.set = body.set;
      } else {
        refuse("a group kind other than (?:…), (?i:…), (?=…) and (?!…)");
      }
    } else {
      inner = alternation();
    }
    ignore_case_ = outer_case;
    if (peek() != ')') refuse("an unclosed group");
    ++at_;
    return inner;
  }

  // One character escape (after the backslash), or kNoCodePoint.
  char32_t char_escape() {
    const char32_t c = p_[at_++];
    auto hex = [&](size_t digits) -> char32_t {
      char32_t v = 0;
      for (size_t i = 0; i < digits; ++i) {
        const char32_t h = peek();
        const int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
                      : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
        if (d < 0) return kNoCodePoint;
        v = v * 16 + static_cast<char32_t>(d);
        ++at_;
      }
      return v;
    };
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'a': return 0x07;
      case 'e': return 0x1B;
      case 'u': return hex(4);
      case 'U': return hex(8);
      case 'x':
        if (peek() == '{') {
          ++at_;
          char32_t v = 0;
          int digits = 0;
          while (peek() != '}' && digits < 7) {
            const char32_t d = hex(1);
            if (d == kNoCodePoint) return kNoCodePoint;
            v = v * 16 + d;
            ++digits;
          }
          if (peek() != '}' || digits == 0) return kNoCodePoint;
          ++at_;
          return v;
        }
        return hex(2);
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return kNoCodePoint;
        return c;  // an escaped symbol stands for itself
    }
  }

  // A set escape (\s \S \d \D \w \W \p{…} \P{…}) after the backslash, into
  // `out`; false when it is not one.
  bool set_escape(icu::UnicodeSet& out) {
    const char32_t c = peek();
    UErrorCode status = U_ZERO_ERROR;
    if (c == 's' || c == 'S' || c == 'd' || c == 'D' || c == 'w' || c == 'W') {
      ++at_;
      out = escape_set(c, status);
    } else if (c == 'p' || c == 'P') {
      ++at_;
      std::string body;
      if (peek() == '{') {
        ++at_;
        while (more() && peek() != '}') append_utf8(body, p_[at_++]);
        if (peek() != '}') {
          refuse("an unclosed \\p{");
          return true;
        }
        ++at_;
      } else if (more()) {
        append_utf8(body, p_[at_++]);
      }
      out = property_set(body, c == 'P', status);
    } else {
      return false;
    }
    if (U_FAILURE(status)) refuse("a property ICU's sets do not know");
    return true;
  }

  Node escape() {
    ++at_;  // backslash
    if (!more()) {
      refuse("a trailing backslash");
      return {};
    }
    icu::UnicodeSet set;
    if (set_escape(set)) return set_node(std::move(set));
    const char32_t c = char_escape();
    if (c == kNoCodePoint) {
      refuse("an escape other than a character, \\s \\d \\w or \\p{…}");
      return {};
    }
    return set_node(icu::UnicodeSet(static_cast<UChar32>(c), static_cast<UChar32>(c)));
  }

  // One member of a bracket class: a character (or kNoCodePoint after a set
  // escape, added to `set`).
  char32_t class_member(icu::UnicodeSet& set) {
    if (peek() == '\\') {
      ++at_;
      icu::UnicodeSet escaped;
      if (set_escape(escaped)) {
        set.addAll(escaped);
        return kNoCodePoint;
      }
      const char32_t c = char_escape();
      if (c == kNoCodePoint) refuse("an escape in a class other than a character, \\s \\d \\w or \\p{…}");
      return c;
    }
    if (peek() == '[' || (peek() == '&' && peek(1) == '&') || (peek() == '-' && peek(1) == '-'))
      refuse("a nested class or set operation");
    return p_[at_++];
  }

  Node bracket() {
    ++at_;  // '['
    const bool negated = peek() == '^';
    if (negated) ++at_;
    if (negated && ignore_case_) refuse("a negated class that ignores case");
    if (peek() == ']') refuse("a class that starts with ']'");
    icu::UnicodeSet set;
    while (more() && peek() != ']') {
      const char32_t lo = class_member(set);
      if (lo == kNoCodePoint) continue;
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0) {
        ++at_;
        const char32_t hi = class_member(set);
        if (hi == kNoCodePoint || hi < lo) {
          refuse("a class range that is not from a character to a later one");
          break;
        }
        set.add(static_cast<UChar32>(lo), static_cast<UChar32>(hi));
      } else {
        set.add(static_cast<UChar32>(lo));
      }
    }
    if (peek() != ']') refuse("an unclosed class");
    ++at_;
    if (ignore_case_) {
      set.closeOver(USET_CASE_INSENSITIVE);
      set.removeAllStrings();
    }
    if (negated) set.complement();
    sets_.push_back(std::move(set));
    Node n = node(Node::kSet);
    n.set = static_cast<uint32_t>(sets_.size() - 1);
    return n;
  }

  Node atom() {
    const char32_t c = peek();
    switch (c) {
      case '(': return group();
      case '[': return bracket();
      case '\\': return escape();
      case '.': case '^': case '$': refuse("'.', '^' or '$'"); return {};
      case '*': case '+': case '?': case '{': refuse("a quantifier with nothing before it"); return {};
      default: {
        ++at_;
        Node n = set_node(icu::UnicodeSet(static_cast<UChar32>(c), static_cast<UChar32>(c)));
        if (ignore_case_) n.literal = c;
        return n;
      }
    }
  }

  std::u32string p_;
  size_t at_ = 0;
  bool ignore_case_ = false, any_ignore_case_ = false;
  std::string refused_;
  std::vector<icu::UnicodeSet> sets_;
  std::vector<std::u32string> case_blind_runs_;
};

class Emitter {
 public:
  explicit Emitter(std::vector<PieceProgram::Inst>& program) : out_(program) {}
  static constexpr size_t kMaxInstructions = 1 << 16;

  bool emit(const Node& n) {
    if (out_.size() > kMaxInstructions) return false;
    using I = PieceProgram;
    switch (n.kind) {
      case Node::kEmpty: return true;
      case Node::kSet: out_.push_back({I::kChar, here() + 1, 0, n.set}); return true;
      case Node::kLook: case Node::kLookNot:
        out_.push_back({n.kind == Node::kLook ? I::kLook : I::kLookNot, here() + 1, 0, n.set});
        return true;
      case Node::kConcat:
        for (const Node& k : n.kids)
          if (!emit(k)) return false;
        return true;
      case Node::kAlt: {
        std::vector<uint32_t> jumps;
        for (size_t i = 0; i < n.kids.size(); ++i) {
          uint32_t split = UINT32_MAX;
          if (i + 1 < n.kids.size()) {
            split = here();
            out_.push_back({I::kSplit, here() + 1, 0});
          }
          if (!emit(n.kids[i])) return false;
          if (i + 1 < n.kids.size()) {
            jumps.push_back(here());
            out_.push_back({I::kJmp, 0, 0});
            out_[split].y = here();
          }
        }
        for (uint32_t j : jumps) out_[j].x = here();
        return true;
      }
      case Node::kRepeat: {
        const Node& body = n.kids[0];
        for (int i = 0; i < n.min; ++i)
          if (!emit(body)) return false;
        if (n.max < 0) {
          const uint32_t loop = here();
          out_.push_back({I::kSplit, loop + 1, 0});
          if (!emit(body)) return false;
          out_.push_back({I::kJmp, loop, 0});
          out_[loop].y = here();
          return true;
        }
        std::vector<uint32_t> splits;
        for (int i = n.min; i < n.max; ++i) {
          splits.push_back(here());
          out_.push_back({I::kSplit, here() + 1, 0});
          if (!emit(body)) return false;
        }
        for (uint32_t s : splits) out_[s].y = here();
        return true;
      }
    }
    return false;
  }

 private:
  uint32_t here() const { return static_cast<uint32_t>(out_.size()); }
  std::vector<PieceProgram::Inst>& out_;
};

// Characters whose full case folding is more than one character: ICU's
// case-blind matching of a literal may stop inside their folding, which
// the classes cannot say, so texts with them go to ICU.
icu::UnicodeString folded(const icu::UnicodeString& text) {
  icu::UnicodeString out(text);
  return out.foldCase(U_FOLD_CASE_DEFAULT);
}

// Characters whose full case folding is several characters, where that
// folding appears in a run of literals the pattern matches ignoring case
// (ß against `(?i:ss)`): the classes cannot say that one character matches
// two literals, so texts with them go to ICU. Elsewhere ICU never matches
// them to a literal (a match may not end inside a folding), as for any
// character outside the literal's set.
icu::UnicodeSet multi_character_foldings(const std::vector<std::u32string>& runs) {
  std::vector<icu::UnicodeString> folded_runs;
  for (const std::u32string& run : runs) {
    icu::UnicodeString text;
    for (char32_t c : run) text.append(static_cast<UChar32>(c));
    folded_runs.push_back(folded(text));
  }
  UErrorCode status = U_ZERO_ERROR;
  icu::UnicodeSet changes(icu::UnicodeString::fromUTF8("[\\p{Changes_When_Casefolded}]"), status);
  icu::UnicodeSet out;
  for (int32_t i = 0; U_SUCCESS(status) && i < changes.getRangeCount(); ++i)
    for (UChar32 c = changes.getRangeStart(i); c <= changes.getRangeEnd(i); ++c) {
      const icu::UnicodeString f = folded(icu::UnicodeString(c));
      if (f.countChar32() < 2) continue;
      for (const icu::UnicodeString& run : folded_runs)
        if (run.indexOf(f) >= 0) out.add(c);
    }
  return out;
}

// Splits Unicode into the classes no set tells apart.
bool make_classes(std::vector<icu::UnicodeSet> sets, const icu::UnicodeSet* unsafe, PieceProgram& p) {
  if (sets.size() > 63) return false;
  std::vector<UChar32> cuts = {0, 0x110000};
  auto add_cuts = [&](const icu::UnicodeSet& s) {
    for (int32_t i = 0; i < s.getRangeCount(); ++i) {
      cuts.push_back(s.getRangeStart(i));
      cuts.push_back(s.getRangeEnd(i) + 1);
    }
  };
  for (const auto& s : sets) add_cuts(s);
  if (unsafe) add_cuts(*unsafe);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::map<uint64_t, uint8_t> ids;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const UChar32 c = cuts[i];
    uint8_t cls = PieceAutomaton::kUnsafe;
    if (!unsafe || !unsafe->contains(c)) {
      uint64_t signature = 0;
      for (size_t s = 0; s < sets.size(); ++s)
        if (sets[s].contains(c)) signature |= uint64_t{1} << s;
      auto [it, fresh] = ids.try_emplace(signature, static_cast<uint8_t>(ids.size()));
      if (ids.size() >= PieceAutomaton::kUnsafe) return false;
      cls = it->second;
    }
    if (!p.interval_class.empty() && p.interval_class.back() == cls) continue;
    p.interval_start.push_back(static_cast<uint32_t>(c));
    p.interval_class.push_back(cls);
  }
  p.classes = ids.size();
  p.set_has.assign(sets.size(), std::vector<uint8_t>(p.classes, 0));
  for (const auto& [signature, cls] : ids)
    for (size_t s = 0; s < sets.size(); ++s) p.set_has[s][cls] = signature >> s & 1;
  p.bmp_class.resize(0x10000);
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    auto it = std::upper_bound(p.interval_start.begin(), p.interval_start.end(), cp);
    p.bmp_class[cp] = p.interval_class[static_cast<size_t>(it - p.interval_start.begin()) - 1];
  }
  return true;
}

}  // namespace

namespace {
// The threads that wait for a character, in priority order, from `list`
// with the character after being `next` (a class, or kEndOfText), and
// whether a match ends here (cutting every thread after it).
constexpr uint32_t kEndOfText = UINT32_MAX;

class Determinizer {
 public:
  explicit Determinizer(const PieceProgram& p) : p_(p), marks_(p.program.size(), 0) {}

  bool closure(const std::vector<uint32_t>& list, uint32_t next, std::vector<uint32_t>& out) {
    out.clear();
    ++mark_;
    for (uint32_t start : list) {
      stack_.assign(1, start);
      while (!stack_.empty()) {
        const uint32_t pc = stack_.back();
        stack_.pop_back();
        if (marks_[pc] == mark_) continue;
        marks_[pc] = mark_;
        const PieceProgram::Inst& inst = p_.program[pc];
        switch (inst.op) {
          case PieceProgram::kChar: out.push_back(pc); break;
          case PieceProgram::kJmp: stack_.push_back(inst.x); break;
          case PieceProgram::kSplit:
            stack_.push_back(inst.y);
            stack_.push_back(inst.x);
            break;
          case PieceProgram::kLook:
          case PieceProgram::kLookNot: {
            const bool in = next != kEndOfText && p_.set_has[inst.set][next];
            if (in == (inst.op == PieceProgram::kLook)) stack_.push_back(inst.x);
            break;
          }
          case PieceProgram::kMatch: return true;
        }
      }
    }
    return false;
  }

 private:
  const PieceProgram& p_;
  std::vector<uint32_t> marks_, stack_;
  uint32_t mark_ = 0;
};

struct ListHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    size_t h = v.size();
    for (uint32_t x : v) h = h * 0x9E3779B97F4A7C15ull + x;
    return h;
  }
};
}  // namespace

Result<std::shared_ptr<const PieceAutomaton>> PieceAutomaton::compile(std::string_view pattern) {
  std::u32string code_points;
  for (size_t pos = 0; pos < pattern.size();) {
    auto cp = decode_utf8(pattern, pos);
    if (!cp) return Error{ErrorCode::InvalidInput, "the pre-tokenizer pattern is not valid UTF-8"};
    code_points.push_back(*cp);
  }
  Parser parser(std::move(code_points));
  auto root = parser.parse();
  if (!root)
    return Error{ErrorCode::Unsupported, "the pre-tokenizer pattern has " + parser.refused() +
                                             ", which the piece automaton does not model"};
  auto program = std::make_shared<PieceProgram>();
  // Instruction 0 is never reached (state 0 is the dead state's empty list).
  program->program.push_back({PieceProgram::kMatch});
  Emitter emitter(program->program);
  if (!emitter.emit(*root))
    return Error{ErrorCode::Unsupported, "the pre-tokenizer pattern is too large for the piece automaton"};
  program->program.push_back({PieceProgram::kMatch});
  std::optional<icu::UnicodeSet> unsafe;
  if (parser.ignores_case()) unsafe = multi_character_foldings(parser.case_blind_runs());
  if (!make_classes(std::move(parser.sets()), unsafe ? &*unsafe : nullptr, *program))
    return Error{ErrorCode::Unsupported, "the pre-tokenizer pattern has too many character sets for the piece automaton"};

  // Every state, breadth first from the start: a state is the list of
  // threads (program counters, in priority order) waiting for a character.
  auto automaton = std::make_shared<PieceAutomaton>(Key{});
  automaton->classes_ = program->classes;
  std::vector<std::vector<uint32_t>> lists = {{}, {1}};
  std::unordered_map<std::vector<uint32_t>, State, ListHash> ids = {{{}, kDead}, {{1}, kStart}};
  Determinizer d(*program);
  std::vector<uint32_t> waiting;
  for (State s = 0; s < lists.size(); ++s) {
    for (size_t c = 0; c < program->classes; ++c) {
      const bool matched = d.closure(lists[s], static_cast<uint32_t>(c), waiting);
      std::vector<uint32_t> next;
      for (uint32_t pc : waiting)
        if (program->set_has[program->program[pc].set][c]) next.push_back(program->program[pc].x);
      auto [it, fresh] = ids.try_emplace(next, static_cast<State>(lists.size()));
      if (fresh) {
        if (lists.size() >= kMaxStates)
          return Error{ErrorCode::Unsupported, "the pre-tokenizer pattern needs more states than the piece automaton allows"};
        lists.push_back(std::move(next));
      }
      automaton->steps_.push_back(it->second << 1 | (matched ? 1u : 0u));
    }
    automaton->end_match_.push_back(d.closure(lists[s], kEndOfText, waiting) ? 1 : 0);
  }
  for (State s = 0; s < lists.size(); ++s) {
    bool same = true;
    for (size_t c = 0; c < program->classes && same; ++c) {
      const Step step = automaton->step(s, static_cast<uint8_t>(c));
      same = step.next == kDead && step.match_before == (automaton->end_match_[s] != 0);
    }
    automaton->settled_.push_back(same ? 1 : 0);
  }
  automaton->program_ = std::move(program);
  return std::shared_ptr<const PieceAutomaton>(std::move(automaton));
}

PieceAutomaton::~PieceAutomaton() = default;

uint64_t PieceAutomaton::fingerprint() const {
  auto bytes = [](const auto& v) {
    return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  uint64_t h = ir::hash_bytes(bytes(steps_), classes_);
  h = ir::hash_bytes(bytes(end_match_), h);
  h = ir::hash_bytes(bytes(settled_), h);
  h = ir::hash_bytes(bytes(program_->interval_start), h);
  return ir::hash_bytes(bytes(program_->interval_class), h);
}

uint8_t PieceAutomaton::class_of(uint32_t code_point) const { return program_->class_of(code_point); }


std::optional<PieceAutomaton::FirstPiece> PieceAutomaton::first(std::string_view text) const {
  State state = kStart;
  std::optional<size_t> last;
  for (size_t pos = 0; pos < text.size();) {
    const size_t at = pos;
    const std::optional<uint32_t> cp = decode_utf8(text, pos);
    if (!cp) return std::nullopt;
    const uint8_t cls = class_of(*cp);
    if (cls == kUnsafe) return std::nullopt;
    const Step s = step(state, cls);
    if (s.match_before) last = at;
    state = s.next;
    if (state == kDead) break;
  }
  bool open = false;
  if (state != kDead) {
    if (match_at_end(state)) last = text.size();
    open = !settled(state);
  }
  if (!last || *last == 0) return std::nullopt;
  return FirstPiece{*last, open};
}

}  // namespace cgram

#include "lark.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <variant>
#include <vector>

#include "cgram_text.h"
#include "char_dfa.h"
#include "json_text.h"
#include "memory_budget.h"
#include "python_classes.h"
#include "regex.h"
#include "utf8.h"

namespace cgram {

namespace {

// --- Tokens -------------------------------------------------------------------

enum class Tok {
  Name, String, Regex, Number, Directive, Block, Special, At,
  Colon, Pipe, Amp, LParen, RParen, LBrack, RBrack, LBrace, RBrace, Comma, Tilde, DotDot, Dot, Arrow,
  Question, Star, Plus, Equals, Bang, Newline, End,
};

struct Token {
  Tok kind = Tok::End;
  size_t offset = 0, length = 0;
  std::string text;   // Name, Directive (without '%'), Number; String decoded; Regex pattern; Block JSON
  std::string flags;  // String: "i" or ""; Regex: its flags
};

struct Comment {
  size_t offset = 0;
  std::string text;
};

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// A Lark error at [offset, offset + length).
struct LarkError {
  size_t offset = 0, length = 1;
  std::string message;
};

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  // Every token, or the first lexical error.
  std::variant<std::vector<Token>, LarkError> run() {
    std::vector<Token> out;
    int depth = 0;  // ( [ { open: newlines inside them are spaces
    for (;;) {
      if (auto error = skip_space(depth > 0)) return *error;
      if (pos_ >= src_.size()) break;
      const size_t at = pos_;
      const char c = src_[pos_];
      Token t;
      t.offset = at;
      if (c == '\n') {
        ++pos_;
        t.kind = Tok::Newline;
      } else if (c == '"') {
        if (auto error = string(t)) return *error;
      } else if (c == '/') {
        if (auto error = regex(t)) return *error;
      } else if (name_start(c)) {
        while (pos_ < src_.size() && name_char(src_[pos_]) && !(src_[pos_] == '-' && peek(1) == '>')) ++pos_;
        t.kind = Tok::Name;
        t.text = std::string(src_.substr(at, pos_ - at));
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 ((c == '-' || c == '+') && std::isdigit(static_cast<unsigned char>(peek(1))))) {
        ++pos_;
        while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
        if (peek(0) == '.' && std::isdigit(static_cast<unsigned char>(peek(1)))) {
          ++pos_;
          while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
        }
        t.kind = Tok::Number;
        t.text = std::string(src_.substr(at, pos_ - at));
      } else if (c == '%') {
        ++pos_;
        while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
        t.kind = Tok::Directive;
        t.text = std::string(src_.substr(at + 1, pos_ - at - 1));
        out.push_back(t);
        if (t.text == "json" || t.text == "regex" || t.text == "llguidance" || t.text == "grammar_options" ||
            t.text == "lark") {
          Token block;
          if (auto error = json_block(block)) return *error;
          out.push_back(block);
        }
        continue;
      } else if (c == '<') {
        if (auto error = special(t)) return *error;
      } else if (c == '@') {
        ++pos_;
        while (pos_ < src_.size() && name_char(src_[pos_])) ++pos_;
        t.kind = Tok::At;
        t.text = std::string(src_.substr(at + 1, pos_ - at - 1));
      } else if (c == '-' && peek(1) == '>') {
        pos_ += 2;
        t.kind = Tok::Arrow;
      } else if (c == '.' && peek(1) == '.') {
        pos_ += 2;
        t.kind = Tok::DotDot;
      } else {
        static constexpr std::string_view kPunct = ":|&()[]{},~.?*+=!";
        static constexpr Tok kKinds[] = {Tok::Colon,  Tok::Pipe,   Tok::Amp,    Tok::LParen, Tok::RParen, Tok::LBrack,
                                         Tok::RBrack, Tok::LBrace, Tok::RBrace, Tok::Comma,  Tok::Tilde,  Tok::Dot,
                                         Tok::Question, Tok::Star, Tok::Plus,   Tok::Equals, Tok::Bang};
        const size_t k = kPunct.find(c);
        if (k == std::string_view::npos) {
          size_t next = pos_;
          decode_utf8(src_, next);
          return LarkError{at, std::max<size_t>(next - at, 1),
                           fmt::format("unexpected character '{}'", src_.substr(at, std::max<size_t>(next - at, 1)))};
        }
        ++pos_;
        t.kind = kKinds[k];
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      }
      t.length = pos_ - at;
      out.push_back(std::move(t));
    }
    Token end;
    end.offset = src_.size();
    out.push_back(end);
    return out;
  }

  std::vector<Comment> comments;

 private:
  char peek(size_t ahead) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }

  // Spaces and comments (`//` and `#` to the end of the line), newlines too
  // where `newlines`.
  std::optional<LarkError> skip_space(bool newlines) {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#' || (c == '/' && peek(1) == '/')) {
        size_t end = pos_;
        while (end < src_.size() && src_[end] != '\n') ++end;
        const size_t body = pos_ + (c == '#' ? 1 : 2);
        comments.push_back({pos_, std::string(src_.substr(body, end - body))});
        pos_ = end;
      } else if (c == '\\' && (peek(1) == '\n' || (peek(1) == '\r' && peek(2) == '\n'))) {
        pos_ += peek(1) == '\n' ? 2 : 3;  // a line continued
      } else {
        break;
      }
    }
    return std::nullopt;
  }

  // "…" with escapes, then an optional i flag.
  std::optional<LarkError> string(Token& t) {
    const size_t open = pos_++;
    std::string out;
    for (;;) {
      if (pos_ >= src_.size() || src_[pos_] == '\n')
        return LarkError{open, 1, "unterminated string: expecting '\"'"};
      const char c = src_[pos_];
      if (c == '"') break;
      if (c != '\\') {
        const size_t at = pos_;
        if (!decode_utf8(src_, pos_)) return LarkError{at, 1, "invalid UTF-8 in the grammar"};
        out.append(src_.substr(at, pos_ - at));
        continue;
      }
      const size_t at = pos_;
      const char e = peek(1);
      pos_ += 2;
      auto hex = [&](int digits) -> std::optional<LarkError> {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i, ++pos_) {
          const char h = peek(0);
          if (!std::isxdigit(static_cast<unsigned char>(h)))
            return LarkError{at, static_cast<size_t>(2 + i), fmt::format("expecting {} hex digits after '\\{}'", digits, e)};
          v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
        }
        if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF))
          return LarkError{at, pos_ - at, fmt::format("U+{:04X} is not a character: UTF-8 text cannot hold it", v)};
        append_utf8(out, v);
        return std::nullopt;
      };
      std::optional<LarkError> error;
      switch (e) {
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'f': out += '\f'; break;
        case 'b': out += '\b'; break;
        case 'v': out += '\v'; break;
        case '0': out += '\0'; break;
        case '"': case '\\': case '/': case '\'': out += e; break;
        case 'x': error = hex(2); break;
        case 'u': error = hex(4); break;
        case 'U': error = hex(8); break;
        case '\0':
        case '\n': return LarkError{open, 1, "unterminated string: expecting '\"'"};
        default:
          return LarkError{at, 2, fmt::format("unknown escape '\\{}' in a string: \\n \\r \\t \\f \\b \\v \\0 "
                                              "\\\" \\\\ \\/ \\' \\xHH \\uHHHH \\UHHHHHHHH",
                                              e)};
      }
      if (error) return error;
    }
    ++pos_;
    t.kind = Tok::String;
    t.text = std::move(out);
    if (peek(0) == 'i' && !name_char(peek(1))) {
      t.flags = "i";
      ++pos_;
    }
    return std::nullopt;
  }

  // /…/flags; `\/` is a slash of the pattern.
  std::optional<LarkError> regex(Token& t) {
    const size_t open = pos_++;
    std::string out;
    for (;;) {
      if (pos_ >= src_.size() || src_[pos_] == '\n') return LarkError{open, 1, "unterminated regex: expecting '/'"};
      const char c = src_[pos_];
      if (c == '/') break;
      if (c == '\\' && peek(1) == '/') {
        out += '/';
        pos_ += 2;
      } else if (c == '\\' && pos_ + 1 < src_.size() && src_[pos_ + 1] != '\n') {
        out.append(src_.substr(pos_, 2));
        pos_ += 2;
      } else {
        out += c;
        ++pos_;
      }
    }
    ++pos_;
    const size_t flags = pos_;
    while (pos_ < src_.size() && std::isalpha(static_cast<unsigned char>(src_[pos_]))) ++pos_;
    t.kind = Tok::Regex;
    t.text = std::move(out);
    t.flags = std::string(src_.substr(flags, pos_ - flags));
    for (size_t i = 0; i < t.flags.size(); ++i)
      if (std::string_view("imslux").find(t.flags[i]) == std::string_view::npos)
        return LarkError{flags + i, 1, fmt::format("unknown regex flag '{}': Lark's flags are i, m, s, l, u and x",
                                                   t.flags[i])};
    return std::nullopt;
  }

  // <name> or <[ids]>: special tokens, refused by the parser.
  std::optional<LarkError> special(Token& t) {
    const size_t open = pos_;
    const size_t close = src_.find('>', pos_);
    const size_t line_end = src_.find('\n', pos_);
    if (close == std::string_view::npos || close > line_end) return LarkError{open, 1, "unexpected character '<'"};
    pos_ = close + 1;
    t.kind = Tok::Special;
    t.text = std::string(src_.substr(open, pos_ - open));
    return std::nullopt;
  }

  // The JSON object after %json, %regex, %llguidance, %grammar_options and
  // %lark: from its '{' to the matching '}', strings skipped.
  std::optional<LarkError> json_block(Token& t) {
    while (pos_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos_]))) ++pos_;
    if (peek(0) != '{') return LarkError{pos_, 1, "expecting '{' to open the JSON object"};
    const size_t open = pos_;
    int depth = 0;
    bool in_string = false;
    for (; pos_ < src_.size(); ++pos_) {
      const char c = src_[pos_];
      if (in_string) {
        if (c == '\\') ++pos_;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        ++pos_;
        t.kind = Tok::Block;
        t.offset = open;
        t.length = pos_ - open;
        t.text = std::string(src_.substr(open, pos_ - open));
        return std::nullopt;
      }
    }
    return LarkError{open, 1, "unterminated JSON object: expecting '}'"};
  }

  std::string_view src_;
  size_t pos_ = 0;
};

// --- The grammar as written -----------------------------------------------------

struct Expr {
  // And and Not: llguidance's intersection and complement of terminals.
  enum class Kind { Empty, Seq, Alt, And, Not, Repeat, Optional, Literal, Range, Regex, Ref, Json, Substring };
  Kind kind = Kind::Empty;
  std::vector<Expr> items;  // Seq, Alt, And, Not, Repeat and Optional (one), Ref (template arguments)
  uint64_t min = 0, max = 0;  // Repeat; max UINT64_MAX: no bound
  std::string text;   // Literal (decoded), Regex (pattern), Ref (name), Json (the object)
  std::string flags;  // Literal, Regex
  uint32_t lo = 0, hi = 0;  // Range
  std::vector<std::string> chunks;  // Substring
  bool new_line = false;  // an alternative whose '|' began a line
  size_t offset = 0, length = 1;
};

struct Attributes {
  bool lazy = false;
  std::optional<Expr> stop, suffix;  // the marker
  std::optional<uint64_t> max_tokens, max_chars;
  std::vector<std::string> dropped;  // attributes that change no text (capture, temperature)
};

struct Definition {
  std::string name;  // as written, without ? or !
  bool terminal = false;
  std::vector<std::string> params;  // a template's
  std::optional<std::string> priority;
  Attributes attributes;
  Expr body;  // an Alt
  size_t offset = 0, end = 0;  // the name; where the definition ends
  std::optional<std::string> imported;  // %import common.X: X
};

// What %llguidance and %grammar_options set.
struct Options {
  bool allow_initial_skip = false;
  bool skip_once = false;  // llguidance's "skip_repetition": "once"
};

// The common terminals of Lark's `common` library, as regexes (Lark's own
// definitions read as languages: ESCAPED_STRING's lazy body ends at the
// first quote no backslash escapes, a C comment at the first `*/`).
const std::map<std::string, std::string>& common_terminals() {
  static const std::map<std::string, std::string> table = {
      {"DIGIT", "[0-9]"},
      {"HEXDIGIT", "[a-fA-F0-9]"},
      {"INT", "[0-9]+"},
      {"SIGNED_INT", "[+\\-]?[0-9]+"},
      {"DECIMAL", "[0-9]+\\.[0-9]*|\\.[0-9]+"},
      {"_EXP", "[eE][+\\-]?[0-9]+"},
      {"FLOAT", "[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?"},
      {"SIGNED_FLOAT", "[+\\-]?(?:[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?)"},
      {"NUMBER", "[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?|[0-9]+"},
      {"SIGNED_NUMBER",
       "[+\\-]?(?:[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?|[0-9]+)"},
      {"ESCAPED_STRING", "\"(?:[^\"\\\\\\n]|\\\\[^\\n])*\""},
      {"LCASE_LETTER", "[a-z]"},
      {"UCASE_LETTER", "[A-Z]"},
      {"LETTER", "[A-Za-z]"},
      {"WORD", "[A-Za-z]+"},
      {"CNAME", "[_A-Za-z][_A-Za-z0-9]*"},
      {"WS_INLINE", "[ \\t]+"},
      {"WS", "[ \\t\\f\\r\\n]+"},
      {"CR", "\\r"},
      {"LF", "\\n"},
      {"NEWLINE", "(?:\\r?\\n)+"},
      {"SH_COMMENT", "#[^\\n]*"},
      {"CPP_COMMENT", "//[^\\n]*"},
      {"C_COMMENT", "/\\*(?:[^*]|\\*+[^*/])*\\*+/"},
      {"SQL_COMMENT", "--[^\\n]*"},
  };
  return table;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const SyntaxLimits& limits) : t_(std::move(tokens)), limits_(limits) {}

  std::optional<LarkError> run() {
    try {
      while (!at(Tok::End)) {
        if (accept(Tok::Newline)) continue;
        item();
        if (!at(Tok::End)) expect(Tok::Newline, "expecting a new line after the definition");
      }
    } catch (const LarkError& e) {
      return e;
    }
    return std::nullopt;
  }

  std::vector<Definition> definitions;
  std::vector<Expr> ignored;
  std::vector<std::pair<size_t, std::string>> statements;  // (offset, text) of %ignore and %import lines
  struct OptionBlock {
    std::string directive;  // llguidance or grammar_options
    Token object;
  };
  std::vector<OptionBlock> option_blocks;

 private:
  [[noreturn]] void fail(const Token& t, std::string message) { throw LarkError{t.offset, std::max<size_t>(t.length, 1), std::move(message)}; }
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  bool at(Tok k) const { return peek().kind == k; }
  bool accept(Tok k) {
    if (!at(k)) return false;
    ++i_;
    return true;
  }
  const Token& expect(Tok k, const char* message) {
    if (!at(k)) fail(peek(), message);
    return t_[i_++];
  }
  // A newline followed by '|' continues the alternatives.
  bool continues_with_pipe() const {
    size_t j = i_;
    while (t_[j].kind == Tok::Newline) ++j;
    return j > i_ && t_[j].kind == Tok::Pipe;
  }

  void item() {
    const Token& first = peek();
    if (first.kind == Tok::Directive) return statement();
    if (first.kind == Tok::Question || first.kind == Tok::Bang) ++i_;  // ?rule, !rule: tree shaping only
    const Token& name = expect(Tok::Name, "expecting a rule or terminal definition (name: …) or a %directive");
    Definition d;
    d.name = name.text;
    d.offset = name.offset;
    d.terminal = is_terminal_name(name.text);
    if (accept(Tok::LBrace)) {
      do d.params.push_back(expect(Tok::Name, "expecting a template parameter name").text);
      while (accept(Tok::Comma));
      expect(Tok::RBrace, "expecting '}' after the template parameters");
    }
    if (at(Tok::LBrack)) attributes(d);
    if (accept(Tok::Dot)) {
      const Token& n = expect(Tok::Number, "expecting a priority number after '.'");
      if (n.text.find('.') != std::string::npos) fail(n, "a priority is a whole number, as in 'a.2:'");
      d.priority = n.text;
    }
    expect(Tok::Colon, fmt::format("expecting ':' after '{}'", name.text).c_str());
    d.body = alternatives(0);
    d.end = peek().offset;
    definitions.push_back(std::move(d));
  }

  static bool is_terminal_name(const std::string& name) {
    const size_t first = name.find_first_not_of('_');
    return first != std::string::npos && std::isupper(static_cast<unsigned char>(name[first]));
  }

  // name[lazy, stop="x", max_tokens=5, capture, capture="c", temperature=0.7]
  void attributes(Definition& d) {
    const Token& open = expect(Tok::LBrack, "expecting '['");
    if (d.terminal) fail(open, "attributes go on rules, not on terminals");
    std::set<std::string> seen;
    bool stop_capture = false;
    do {
      const Token& key = expect(Tok::Name, "expecting an attribute name");
      if (!seen.insert(key.text).second) fail(key, fmt::format("the {} attribute is given more than once", key.text));
      const bool has_value = accept(Tok::Equals);
      auto capture_name = [&] {
        const Token& name = expect(Tok::String, "Expected token: a string (the capture's name)");
        if (name.text.empty() || name.text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789_-.") != std::string::npos)
          fail(name, "a capture name is letters, digits, '_', '-' and '.', and not empty");
      };
      auto number = [&]() -> uint64_t {
        const Token& n = expect(Tok::Number, "Expected token: a number");
        if (n.text.find_first_not_of("0123456789") != std::string::npos)
          fail(n, fmt::format("{} must be a whole number", key.text));
        return std::stoull(n.text.substr(0, 12));
      };
      auto marker = [&]() -> Expr {
        if (!at(Tok::String) && !at(Tok::Regex) && !(at(Tok::Name) && is_terminal_name(peek().text)))
          fail(peek(), "Expected token: a string, a regex or a terminal name");
        return atom(0);
      };
      if (key.text == "lazy" && !has_value) {
        d.attributes.lazy = true;
      } else if ((key.text == "stop" || key.text == "suffix") && has_value) {
        Expr m = marker();
        if (key.text == "suffix" && m.kind == Expr::Kind::Literal && m.text.empty())
          fail(key, "suffix must not be empty (stop=\"\" is the end of the text)");
        (key.text == "stop" ? d.attributes.stop : d.attributes.suffix) = std::move(m);
      } else if (key.text == "max_tokens" && has_value) {
        d.attributes.max_tokens = number();
      } else if (key.text == "max_chars" && has_value) {
        d.attributes.max_chars = number();
      } else if (key.text == "capture" || (key.text == "stop_capture" && has_value)) {
        if (has_value) capture_name();
        stop_capture |= key.text == "stop_capture";
        d.attributes.dropped.push_back(key.text);
      } else if (key.text == "temperature" && has_value) {
        expect(Tok::Number, "Expected token: a number");
        d.attributes.dropped.push_back(key.text);
      } else {
        fail(key, fmt::format("Unknown attribute '{}'{}: Lark rules take lazy, stop=, suffix=, max_tokens=, "
                              "max_chars=, capture, stop_capture= and temperature=",
                              key.text, has_value ? " with a value" : ""));
      }
    } while (accept(Tok::Comma));
    expect(Tok::RBrack, "Expected token: ',' or ']' after the attribute");
    if (d.attributes.stop && d.attributes.suffix) fail(open, "a rule takes stop= or suffix=, not both");
    if (stop_capture && !d.attributes.stop && !d.attributes.suffix) fail(open, "stop_capture= needs stop= or suffix=");
  }

  void statement() {
    const Token& directive = t_[i_++];
    if (directive.text == "ignore") {
      Expr e = alternatives(0);
      ignored.push_back(std::move(e));
      statements.emplace_back(directive.offset, "%ignore");
    } else if (directive.text == "import") {
      import(directive);
    } else if (directive.text == "llguidance" || directive.text == "grammar_options") {
      option_blocks.push_back({directive.text, expect(Tok::Block, "expecting a JSON object")});
    } else if (directive.text == "json" || directive.text == "regex" || directive.text == "lark") {
      fail(directive, fmt::format("%{} is an element of a rule, not a statement: write name: %{} {{ … }}",
                                  directive.text, directive.text));
    } else {
      fail(directive, fmt::format("%{} is not supported: cgram reads %import common, %ignore, %llguidance and "
                                  "%grammar_options",
                                  directive.text));
    }
  }

  // %import common.NAME [-> ALIAS] | %import common (A, B)
  void import(const Token& directive) {
    const Token& module = expect(Tok::Name, "expecting a module to import from (common)");
    auto add = [&](const Token& what, const std::string& as) {
      if (!common_terminals().count(what.text))
        fail(what, fmt::format("Unknown common terminal '{}': common has {}", what.text, common_names()));
      Definition d;
      d.name = as;
      d.terminal = true;
      d.offset = what.offset;
      d.end = what.offset + what.length;
      d.imported = what.text;
      definitions.push_back(std::move(d));
    };
    if (module.text != "common")
      fail(module, fmt::format("cannot import from '{}': cgram has only Lark's common library", module.text));
    if (accept(Tok::Dot)) {
      const Token& what = expect(Tok::Name, "expecting a name after 'common.'");
      std::string as = what.text;
      if (accept(Tok::Arrow)) as = expect(Tok::Name, "expecting the name to import as").text;
      add(what, as);
    } else {
      expect(Tok::LParen, "expecting '.NAME' or '(NAME, …)' after common");
      do {
        const Token& what = expect(Tok::Name, "expecting a name to import");
        add(what, what.text);
      } while (accept(Tok::Comma));
      expect(Tok::RParen, "expecting ')'");
    }
    statements.emplace_back(directive.offset, "%import");
  }

  static std::string common_names() {
    std::string out;
    for (const auto& [name, regex] : common_terminals()) out += (out.empty() ? "" : ", ") + name;
    return out;
  }

  void nest(const Token& at_token, uint32_t depth) {
    if (depth > std::min(limits_.max_nesting, kMaxNestingCeiling))
      fail(at_token, fmt::format("the grammar nests deeper than {} levels here", limits_.max_nesting));
  }

  Expr alternatives(uint32_t depth) {
    nest(peek(), depth);
    Expr alt;
    alt.kind = Expr::Kind::Alt;
    alt.offset = peek().offset;
    alt.items.push_back(conjunction(depth));
    for (;;) {
      bool new_line = false;
      if (continues_with_pipe()) {
        while (at(Tok::Newline)) ++i_;
        new_line = true;
      }
      if (!accept(Tok::Pipe)) break;
      alt.items.push_back(conjunction(depth));
      alt.items.back().new_line = new_line;
    }
    return alt;
  }

  // A & B: binds tighter than '|', looser than a sequence.
  Expr conjunction(uint32_t depth) {
    Expr first = sequence(depth);
    if (!at(Tok::Amp)) return first;
    Expr all;
    all.kind = Expr::Kind::And;
    all.offset = first.offset;
    all.length = peek().offset + 1 - first.offset;
    all.items.push_back(std::move(first));
    while (accept(Tok::Amp)) all.items.push_back(sequence(depth));
    return all;
  }

  Expr sequence(uint32_t depth) {
    Expr seq;
    seq.kind = Expr::Kind::Seq;
    seq.offset = peek().offset;
    for (;;) {
      const Tok k = peek().kind;
      if (k == Tok::String || k == Tok::Regex || k == Tok::Name || k == Tok::LParen || k == Tok::LBrack ||
          k == Tok::Directive || k == Tok::Special || k == Tok::At || k == Tok::Tilde) {
        seq.items.push_back(repetition(depth));
      } else {
        break;
      }
    }
    if (accept(Tok::Arrow)) expect(Tok::Name, "expecting an alias name after '->'");  // tree shaping only
    return seq;
  }

  // Each quantifier on the same item is a level more (`"a"???` is three),
  // as in .cgram: the tree is walked recursively.
  Expr repetition(uint32_t depth) {
    Expr e = atom(depth);
    for (uint32_t stacked = 1;; ++stacked) {
      const Token& q = peek();
      Expr r;
      r.kind = Expr::Kind::Repeat;
      r.offset = q.offset;
      if (accept(Tok::Question)) {
        r.min = 0, r.max = 1;
      } else if (accept(Tok::Star)) {
        r.min = 0, r.max = UINT64_MAX;
      } else if (accept(Tok::Plus)) {
        r.min = 1, r.max = UINT64_MAX;
      } else if (accept(Tok::Tilde)) {
        r.min = r.max = bound(expect(Tok::Number, "expecting a number after '~'"), "range start");
        if (accept(Tok::DotDot)) r.max = bound(expect(Tok::Number, "expecting a number after '..'"), "range end");
        check_range(q, r);
      } else if (at(Tok::LBrace) && (peek(1).kind == Tok::Number || peek(1).kind == Tok::Comma)) {
        braces(r);
        check_range(q, r);
      } else {
        return e;
      }
      nest(q, depth + stacked);
      r.items.push_back(std::move(e));
      e = std::move(r);
    }
  }

  uint64_t bound(const Token& n, const char* what) {
    if (n.text.find_first_not_of("0123456789") != std::string::npos)
      fail(n, n.text[0] == '-' ? fmt::format("{} must be >= 0", what) : fmt::format("{} must be a whole number", what));
    if (n.text.size() > 12 || std::stoull(n.text) > limits_.max_repeat_bound)
      fail(n, fmt::format("a repetition bound of {} is too large (the limit is {})", n.text, limits_.max_repeat_bound));
    return std::stoull(n.text);
  }

  // {m}, {m,}, {m,n}, {,n}
  void braces(Expr& r) {
    expect(Tok::LBrace, "expecting '{'");
    r.min = at(Tok::Number) ? bound(t_[i_++], "range start") : 0;
    if (accept(Tok::Comma)) r.max = at(Tok::Number) ? bound(t_[i_++], "range end") : UINT64_MAX;
    else r.max = r.min;
    expect(Tok::RBrace, "expecting '}' after the repetition bounds");
  }

  void check_range(const Token& q, const Expr& r) {
    if (r.max < r.min) fail(q, fmt::format("range end must be >= start ({} < {})", r.max, r.min));
  }

  Expr atom(uint32_t depth) {
    const Token& t = peek();
    Expr e;
    e.offset = t.offset;
    e.length = std::max<size_t>(t.length, 1);
    switch (t.kind) {
      case Tok::Tilde: {  // ~A: binds tighter than a quantifier
        ++i_;
        e.kind = Expr::Kind::Not;
        nest(t, depth + 1);
        e.items.push_back(atom(depth + 1));
        return e;
      }
      case Tok::LParen: {
        ++i_;
        e = alternatives(depth + 1);
        expect(Tok::RParen, "expecting ')'");
        return e;
      }
      case Tok::LBrack: {
        ++i_;
        e.kind = Expr::Kind::Optional;
        e.items.push_back(alternatives(depth + 1));
        expect(Tok::RBrack, "expecting ']'");
        return e;
      }
      case Tok::String: {
        ++i_;
        if (accept(Tok::DotDot)) return range(t, expect(Tok::String, "expecting a string after '..'"));
        e.kind = Expr::Kind::Literal;
        e.text = t.text;
        e.flags = t.flags;
        return e;
      }
      case Tok::Regex:
        ++i_;
        e.kind = Expr::Kind::Regex;
        e.text = t.text;
        e.flags = t.flags;
        return e;
      case Tok::Name: {
        ++i_;
        if (at(Tok::Colon) && peek(1).kind == Tok::Colon)
          fail(t, fmt::format("parametric rules ({}::…) are not supported: write the rules the parameter stands "
                              "for",
                              t.text));
        e.kind = Expr::Kind::Ref;
        e.text = t.text;
        if (at(Tok::LBrace) && peek(1).kind != Tok::Number && peek(1).kind != Tok::Comma) {
          ++i_;
          do e.items.push_back(alternatives(depth + 1));
          while (accept(Tok::Comma));
          expect(Tok::RBrace, "expecting '}' after the template arguments");
        }
        return e;
      }
      case Tok::Directive: {
        ++i_;
        const Token& block = expect(Tok::Block, "expecting a JSON object");
        e.offset = block.offset;
        e.length = block.length;
        if (t.text == "json") {
          e.kind = Expr::Kind::Json;
          e.text = block.text;
          return e;
        }
        if (t.text == "regex") return substring(block);
        fail(t, t.text == "lark" ? std::string("%lark { … } (a nested grammar) is not supported: write its rules in "
                                               "this grammar, renamed where they clash")
                                 : fmt::format("%{} cannot be used inside a rule", t.text));
      }
      case Tok::Special:
        fail(t, fmt::format("special tokens ({}) are not supported: cgram constrains text, and a special token "
                            "has none; if the model writes it as text, write it as a string (\"{}\")",
                            t.text, t.text));
      case Tok::At:
        fail(t, fmt::format("named grammars (@{}) are not supported: write the grammar here, or a JSON Schema as "
                            "%json {{ … }}",
                            t.text));
      default: fail(t, "expecting a string, a regex, a name, '(' or '['");
    }
  }

  Expr range(const Token& from, const Token& to) {
    auto single = [&](const Token& t, const char* which) {
      size_t pos = 0;
      auto cp = decode_utf8(t.text, pos);
      if (!cp || pos != t.text.size()) fail(t, fmt::format("range {} must be a single character", which));
      if (!t.flags.empty()) fail(t, "the i flag cannot be used on a range");
      return *cp;
    };
    Expr e;
    e.kind = Expr::Kind::Range;
    e.offset = from.offset;
    e.length = to.offset + to.length - from.offset;
    e.lo = single(from, "start");
    e.hi = single(to, "end");
    if (e.hi < e.lo) fail(from, "invalid range order: the end comes before the start");
    return e;
  }

  // %regex { "substring_words" | "substring_chars" | "substring_chunks": … }
  Expr substring(const Token& block) {
    nlohmann::json spec;
    try {
      spec = nlohmann::json::parse(block.text);
    } catch (const nlohmann::json::exception& e) {
      fail(block, fmt::format("failed to parse %regex: {}", e.what()));
    }
    if (!spec.is_object()) fail(block, "failed to parse %regex: expecting a JSON object");
    if (spec.empty()) fail(block, "no fields set on %regex");
    if (spec.size() > 1) fail(block, "only one field can be set on %regex");
    const std::string key = spec.begin().key();
    const nlohmann::json& value = spec.begin().value();
    Expr e;
    e.kind = Expr::Kind::Substring;
    e.offset = block.offset;
    e.length = block.length;
    if (key == "substring_chunks") {
      if (!value.is_array()) fail(block, "failed to parse %regex: substring_chunks is a list of strings");
      for (const auto& chunk : value) {
        if (!chunk.is_string()) fail(block, "failed to parse %regex: substring_chunks is a list of strings");
        e.chunks.push_back(chunk.get<std::string>());
      }
    } else if (key == "substring_words" || key == "substring_chars") {
      if (!value.is_string()) fail(block, fmt::format("failed to parse %regex: {} is a string", key));
      e.chunks = key == "substring_words" ? words(value.get<std::string>()) : characters(value.get<std::string>());
    } else {
      fail(block, fmt::format("unknown field '{}' in %regex: substring_words, substring_chars or substring_chunks",
                              key));
    }
    return e;
  }

  static std::vector<std::string> characters(const std::string& text) {
    std::vector<std::string> out;
    for (size_t pos = 0; pos < text.size();) {
      const size_t at = pos;
      decode_utf8(text, pos);
      out.emplace_back(text.substr(at, pos - at));
    }
    return out;
  }

  // Words (runs of letters and digits, any script) and every other
  // character on its own, as llguidance splits the text.
  static std::vector<std::string> words(const std::string& text) {
    std::vector<std::string> out;
    bool in_word = false;
    for (const std::string& c : characters(text)) {
      const unsigned char b = static_cast<unsigned char>(c[0]);
      const bool word = b >= 0x80 ? !(c == "\u00A0" || c == "\u3000") : std::isalnum(b) || b == '_';
      if (word && in_word) out.back() += c;
      else out.push_back(c);
      in_word = word;
    }
    return out;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  SyntaxLimits limits_;
};

// --- .cgram text with the way back ---------------------------------------------

class Text {
 public:
  void add(std::string_view text, size_t source_offset) {
    offsets_.emplace_back(static_cast<uint32_t>(text_.size()), static_cast<uint32_t>(source_offset));
    text_ += text;
  }
  void plain(std::string_view text) { text_ += text; }
  void append(const Text& other) {
    const auto base = static_cast<uint32_t>(text_.size());
    for (const auto& [at, source] : other.offsets_) offsets_.emplace_back(base + at, source);
    text_ += other.text_;
  }
  const std::string& str() const { return text_; }
  const OffsetMap& offsets() const { return offsets_; }
  bool empty() const { return text_.empty(); }

 private:
  std::string text_;
  OffsetMap offsets_;
};

// A piece of an expression: its text, and how it binds: an atom takes a
// quantifier as it is, a sequence an item of a sequence, an alternation
// neither.
enum class Binds { Atom, Sequence, Alternation };
struct Piece {
  Text text;
  Binds binds = Binds::Atom;
};

// A regex body as .cgram writes it between #' and ': quotes escaped, line
// breaks written as escapes. One offset per byte, so that an error inside
// the regex points at its character in the Lark file.
// The '?' that makes a quantifier lazy (`+?`, `*?`, `??`, `{m,n}?`): the
// positions of those in `pattern`. A lazy quantifier changes which match a
// search finds, not which texts match as a whole, which is all a grammar's
// terminal asks.
std::vector<bool> lazy_marks(std::string_view pattern) {
  std::vector<bool> lazy(pattern.size(), false);
  bool after_quantifier = false, in_class = false;
  size_t quantifier_close = std::string_view::npos;  // the '}' of a {m,n} that repeats
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '{' && !in_class) {
      size_t j = i + 1, digits = 0, commas = 0;
      for (; j < pattern.size() && (std::isdigit(static_cast<unsigned char>(pattern[j])) || pattern[j] == ','); ++j)
        pattern[j] == ',' ? ++commas : ++digits;
      if (j < pattern.size() && pattern[j] == '}' && digits > 0 && commas <= 1) quantifier_close = j;
    }
    if (c == '\\') {
      ++i;
      after_quantifier = false;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') ++i;
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') ++i;
      after_quantifier = false;
    } else if (c == '?' && after_quantifier) {
      lazy[i] = true;
      after_quantifier = false;
    } else {
      after_quantifier = c == '*' || c == '+' || (c == '}' && i == quantifier_close) ||
                         (c == '?' && (i == 0 || pattern[i - 1] != '('));
    }
  }
  return lazy;
}

std::string without_lazy_quantifiers(std::string_view pattern) {
  const std::vector<bool> lazy = lazy_marks(pattern);
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i)
    if (!lazy[i]) out += pattern[i];
  return out;
}

// A Lark regex (`python`: its \w \d \s as Python reads them, over Unicode,
// import/python_classes.h) or a regex cgram wrote itself.
Text regex_body(std::string_view pattern, size_t source_offset, bool python = false) {
  Text out;
  const std::vector<bool> lazy = lazy_marks(pattern);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    const size_t at = source_offset + i;
    if (lazy[i]) continue;
    if (c == '\\' && i + 1 < pattern.size()) {
      const std::string_view escape = pattern.substr(i, 2);
      const bool unicode_class = python && std::string_view("wWdDsS").find(escape[1]) != std::string_view::npos;
      if (!unicode_class) out.add(escape, at);
      else out.add(in_class ? python_class_body(escape[1]) : with_python_classes(escape), at);
      ++i;
    } else if (c == '\'') {
      out.add("\\'", at);
    } else if (c == '\n') {
      out.add("\\n", at);
    } else if (c == '\r') {
      out.add("\\r", at);
    } else {
      out.add(std::string_view(&pattern[i], 1), at);
    }
    if (c == '\\') continue;
    if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.add("^", at + 1), ++i;
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.add("]", at + 1), ++i;
    }
  }
  return out;
}

// The regex flags .cgram reads as inline flags (i, s); m and u change
// nothing (no anchors; code points already).
std::string inline_flags(const std::string& flags) {
  std::string out;
  for (char f : flags)
    if ((f == 'i' || f == 's') && out.find(f) == std::string::npos) out += f;
  return out;
}

bool has_ascii_letter(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
}

// --- Translation ------------------------------------------------------------------

class LarkTranslator {
 public:
  LarkTranslator(const SourceFile& file, Diagnostics& diags, const SyntaxLimits& limits, std::string entry,
             const JsonSchemaOptions& json)
      : file_(file), diags_(diags), limits_(limits), entry_(std::move(entry)), json_(json) {
    taken_.insert({"any", "except"});
  }

  std::optional<Translation> run() {
    Lexer lexer(file_.text());
    auto lexed = lexer.run();
    if (auto* e = std::get_if<LarkError>(&lexed)) return fail(*e);
    comments_ = std::move(lexer.comments);
    std::vector<Token>& tokens = std::get<std::vector<Token>>(lexed);
    // The tokens, and the syntax tree they become: at most a node or two a token.
    charge_memory(tokens.size() * (sizeof(Token) + 2 * sizeof(Expr)) + file_.text().size());
    Parser parser(std::move(tokens), limits_);
    if (auto e = parser.run()) return fail(*e);
    defs_ = std::move(parser.definitions);
    if (!read_options(parser) || !index_definitions() || !check_terminals()) return std::nullopt;
    if (!by_name_.count(entry_)) {
      diags_.error_at_file(entry_ == "start" ? std::string("no start rule: a Lark grammar starts at 'start'")
                                             : fmt::format("no rule named '{}', the start rule", entry_));
      return std::nullopt;
    }
    for (const Definition& d : defs_) names_[d.name] = allocate(d.name);
    ignored_exprs_ = parser.ignored;
    if (!ignores_only_terminals()) return std::nullopt;
    if (!parser.ignored.empty()) define_ignored(parser.ignored);
    emit_all(parser.statements);
    if (failed_) return std::nullopt;
    Translation out = assemble();
    // Templates can write far more than the file holds: say so of the
    // Lark file, not of a .cgram text the user never wrote.
    if (out.cgram.size() > limits_.max_source_bytes) {
      diags_.error_at_file(fmt::format("the Lark grammar ({} bytes) expands to {} bytes of rules (its templates' "
                                       "instances); the limit is {} bytes",
                                       file_.text().size(), out.cgram.size(), limits_.max_source_bytes));
      return std::nullopt;
    }
    return out;
  }

 private:
  std::nullopt_t fail(const LarkError& e) {
    error(e.offset, e.length, e.message);
    return std::nullopt;
  }
  void error(size_t offset, size_t length, std::string message) {
    failed_ = true;
    // A template's instances meet one error at one place many times: said once.
    if (!said_.emplace(offset, message).second) return;
    const auto size = file_.text().size();
    diags_.error({file_.location_of(static_cast<uint32_t>(std::min(offset, size))),
                  file_.location_of(static_cast<uint32_t>(std::min(offset + std::max<size_t>(length, 1), size)))},
                 std::move(message));
  }
  void error(const Expr& e, std::string message) { error(e.offset, e.length, std::move(message)); }

  std::string allocate(const std::string& lark_name) {
    std::string base = lark_name;
    std::replace(base.begin(), base.end(), '-', '_');
    std::string name = base;
    for (int n = 2; taken_.count(name); ++n) name = fmt::format("{}_{}", base, n);
    taken_.insert(name);
    return name;
  }

  bool read_options(const Parser& parser) {
    for (const Parser::OptionBlock& option : parser.option_blocks) {
      const Token& block = option.object;
      const bool llguidance = option.directive == "llguidance";
      const std::string what = "%" + option.directive;
      nlohmann::json spec;
      try {
        spec = nlohmann::json::parse(block.text);
      } catch (const nlohmann::json::exception& e) {
        error(block.offset, block.length, fmt::format("failed to parse {} declaration: {}", what, e.what()));
        return false;
      }
      if (!spec.is_object()) {
        error(block.offset, block.length, fmt::format("failed to parse {} declaration: expecting an object", what));
        return false;
      }
      for (const auto& [key, value] : spec.items()) {
        static const std::set<std::string> kFlags = {"no_forcing", "allow_invalid_utf8", "allow_initial_skip"};
        if (kFlags.count(key) && (llguidance || key == "allow_initial_skip")) {
          if (!value.is_boolean()) {
            error(block.offset, block.length,
                  fmt::format("failed to parse {} declaration: '{}' is true or false", what, key));
            return false;
          }
          if (key == "allow_initial_skip") options_.allow_initial_skip = value.get<bool>();
        } else if (key == "skip_repetition" && llguidance) {
          if (!value.is_string() || (value != "once" && value != "many")) {
            error(block.offset, block.length,
                  fmt::format("failed to parse {} declaration: skip_repetition is \"once\" or \"many\"", what));
            return false;
          }
          options_.skip_once = value == "once";
        } else {
          error(block.offset, block.length, fmt::format("unknown option '{}' in {}", key, what));
          return false;
        }
      }
    }
    return true;
  }

  bool index_definitions() {
    for (size_t i = 0; i < defs_.size(); ++i) {
      const Definition& d = defs_[i];
      auto [it, inserted] = by_name_.emplace(d.name, i);
      if (!inserted) {
        const std::string_view kind = d.terminal ? "terminal" : "rule";
        error(d.offset, d.name.size(),
              d.imported ? fmt::format("'{}' is imported, but it is already defined", d.name)
                         : fmt::format("duplicate {} '{}': it is already defined (line {})", kind, d.name,
                                       file_.location_of(static_cast<uint32_t>(defs_[it->second].offset)).line));
      }
    }
    return !failed_;
  }

  // Terminals use only terminals, and none uses itself.
  bool check_terminals() {
    std::vector<uint8_t> state(defs_.size(), 0);  // 0 new, 1 open, 2 done
    std::function<void(size_t)> visit = [&](size_t i) {
      state[i] = 1;
      walk(defs_[i].body, [&](const Expr& e) {
        if (failed_ || e.kind != Expr::Kind::Ref) return;
        auto found = by_name_.find(e.text);
        if (found == by_name_.end()) return;  // reported when emitted
        const Definition& used = defs_[found->second];
        if (!used.terminal) {
          error(e, fmt::format("terminal '{}' cannot use rule '{}': terminals are built from strings, regexes and "
                               "other terminals",
                               defs_[i].name, e.text));
        } else if (state[found->second] == 1) {
          error(e, fmt::format("circular reference in terminal '{}': it uses itself through '{}'", e.text,
                               defs_[i].name));
        } else if (state[found->second] == 0) {
          visit(found->second);
        }
      });
      state[i] = 2;
    };
    for (size_t i = 0; i < defs_.size() && !failed_; ++i)
      if (defs_[i].terminal && state[i] == 0) visit(i);
    return !failed_;
  }

  static void walk(const Expr& e, const std::function<void(const Expr&)>& f) {
    f(e);
    for (const Expr& child : e.items) walk(child, f);
  }

  // --- Emitting ---------------------------------------------------------------

  struct Context {
    bool terminal = false;  // inside a terminal: no %ignore text, no rules
    const std::map<std::string, Piece>* bindings = nullptr;  // a template instance's arguments
  };

  bool skipping(const Context& c) const { return !ignored_name_.empty() && !c.terminal; }

  // A lexeme in a rule takes the %ignore text after it.
  Piece lexeme(Text text, const Context& c) {
    if (!skipping(c)) return {std::move(text), Binds::Atom};
    text.plain(" " + ignored_name_);
    return {std::move(text), Binds::Sequence};
  }

  Piece emit(const Expr& e, const Context& c) {
    switch (e.kind) {
      case Expr::Kind::Empty: return literal_text("", e.offset);
      case Expr::Kind::Seq: return sequence(e, c);
      case Expr::Kind::Alt: return alternatives(e, c, "");
      case Expr::Kind::Optional: {
        Piece inner = emit(e.items[0], c);
        Piece out;
        out.text.add("[ ", e.offset);
        out.text.append(inner.text);
        out.text.plain(" ]");
        return out;
      }
      case Expr::Kind::Repeat: return repeat(e, c);
      case Expr::Kind::And:
      case Expr::Kind::Not: {
        if (!c.terminal) {
          error(e, "the & and ~ operators work inside terminals only (llguidance's rule); define a terminal for them");
          return {};
        }
        auto regex = terminal_regex(e, c);
        if (!regex) return {};
        Text t;  // written by cgram: its errors point at the expression
        t.add("#'" + regex_body(*regex, e.offset).str() + "'", e.offset);
        return {std::move(t), Binds::Atom};
      }
      case Expr::Kind::Literal: {
        if (e.text.empty()) return literal_text("", e.offset);
        if (e.flags == "i" && has_ascii_letter(e.text)) {
          Text t;
          t.add(fmt::format("#'(?i:{})'", escape_quotes(json::regex_literal(e.text))), e.offset);
          return lexeme(std::move(t), c);
        }
        return lexeme(literal_text(e.text, e.offset).text, c);
      }
      case Expr::Kind::Range: {
        Text t;
        t.add(fmt::format("#'[{}-{}]'", class_char(e.lo), class_char(e.hi)), e.offset);
        return lexeme(std::move(t), c);
      }
      case Expr::Kind::Regex: return regex(e, c);
      case Expr::Kind::Ref: return reference(e, c);
      case Expr::Kind::Json: return json(e, c);
      case Expr::Kind::Substring: {
        Text t;
        t.add(substring(e), e.offset);
        return lexeme(std::move(t), c);
      }
    }
    return {};
  }

  static std::string escape_quotes(const std::string& regex) {
    std::string out;
    for (size_t i = 0; i < regex.size(); ++i) {
      if (regex[i] == '\\' && i + 1 < regex.size()) {
        out += regex.substr(i, 2);
        ++i;
      } else {
        out += regex[i] == '\'' ? "\\'" : std::string(1, regex[i]);
      }
    }
    return out;
  }

  static Piece literal_text(const std::string& text, size_t offset) {
    Piece p;
    p.text.add(quote_literal(text), offset);
    return p;
  }

  Piece sequence(const Expr& e, const Context& c) {
    if (e.items.empty()) return literal_text("", e.offset);
    if (e.items.size() == 1) return emit(e.items[0], c);
    Piece out;
    out.binds = Binds::Sequence;
    for (size_t i = 0; i < e.items.size(); ++i) {
      if (i) out.text.plain(" ");
      out.text.append(grouped(e.items[i], c, Binds::Sequence).text);
    }
    return out;
  }

  // `indent` set: alternatives that began a line in Lark begin one here.
  Piece alternatives(const Expr& e, const Context& c, const std::string& indent) {
    if (e.items.size() == 1) return emit(e.items[0], c);
    Piece out;
    out.binds = Binds::Alternation;
    for (size_t i = 0; i < e.items.size(); ++i) {
      if (i) out.text.plain(!indent.empty() && e.items[i].new_line ? "\n" + indent + "| " : " | ");
      out.text.append(emit(e.items[i], c).text);
    }
    return out;
  }

  // `e` in parentheses unless it binds at least as tightly as `within` needs.
  Piece grouped(const Expr& e, const Context& c, Binds within = Binds::Atom) {
    Piece inner = emit(e, c);
    if (static_cast<int>(inner.binds) <= static_cast<int>(within)) return inner;
    Piece out;
    out.text.plain("( ");
    out.text.append(inner.text);
    out.text.plain(" )");
    return out;
  }

  Piece repeat(const Expr& e, const Context& c) {
    Piece out = grouped(e.items[0], c);
    std::string q;
    if (e.min == 0 && e.max == 1) q = "?";
    else if (e.min == 0 && e.max == UINT64_MAX) q = "*";
    else if (e.min == 1 && e.max == UINT64_MAX) q = "+";
    else if (e.max == UINT64_MAX) q = fmt::format("{{{},}}", e.min);
    else if (e.min == e.max) q = fmt::format("{{{}}}", e.min);
    else q = fmt::format("{{{},{}}}", e.min, e.max);
    out.text.add(q, e.offset);
    out.binds = Binds::Atom;
    return out;
  }

  Piece regex(const Expr& e, const Context& c) {
    for (size_t i = 0; i < e.flags.size(); ++i)
      if (e.flags[i] == 'l' || e.flags[i] == 'x') {
        error(e, fmt::format("the {}-flag is not supported", e.flags[i] == 'l' ? "l" : "x"));
        return {};
      }
    Text t;
    const std::string flags = inline_flags(e.flags);
    t.add(flags.empty() ? "#'" : fmt::format("#'(?{}:", flags), e.offset);
    t.append(regex_body(e.text, e.offset + 1, true));
    t.add(flags.empty() ? "'" : ")'", e.offset + e.length - 1);
    return lexeme(std::move(t), c);
  }

  Piece reference(const Expr& e, const Context& c) {
    if (c.bindings) {
      auto bound = c.bindings->find(e.text);
      if (bound != c.bindings->end() && !e.items.empty()) {
        // Lark passes no template as an argument: what `x` is bound to takes no arguments.
        error(e, fmt::format("'{}' is a template parameter: it takes no arguments", e.text));
        return {};
      }
      if (bound != c.bindings->end()) return bound->second;
    }
    auto found = by_name_.find(e.text);
    if (found == by_name_.end()) {
      error(e, fmt::format("unknown name '{}'{}", e.text, did_you_mean(e.text)));
      return {};
    }
    const Definition& d = defs_[found->second];
    if (!d.params.empty() || !e.items.empty()) return instance(d, e, c);
    Text t;
    t.add(names_.at(d.name), e.offset);
    if (d.terminal || lexical(d)) return lexeme(std::move(t), c);
    return {std::move(t), Binds::Atom};
  }

  std::string did_you_mean(const std::string& name) const {
    for (const auto& [other, i] : by_name_) {
      std::string a = other, b = name;
      std::transform(a.begin(), a.end(), a.begin(), ::tolower);
      std::transform(b.begin(), b.end(), b.begin(), ::tolower);
      if (a == b) return fmt::format(" (did you mean '{}'?)", other);
    }
    return "";
  }

  // A rule Lark compiles as one lexeme: lazy, with a marker or a budget.
  static bool lexical(const Definition& d) {
    const Attributes& a = d.attributes;
    return a.lazy || a.stop || a.suffix || a.max_tokens || a.max_chars;
  }

  // A template used with arguments: one rule per distinct argument list.
  Piece instance(const Definition& d, const Expr& use, const Context& c) {
    if (d.params.size() != use.items.size()) {
      error(use, d.params.empty() ? fmt::format("'{}' is not a template: it takes no arguments", d.name)
                                  : fmt::format("template '{}' takes {} argument{}, not {}", d.name, d.params.size(),
                                                d.params.size() == 1 ? "" : "s", use.items.size()));
      return {};
    }
    std::map<std::string, Piece> bindings;
    std::string key = d.name;
    for (size_t i = 0; i < d.params.size(); ++i) {
      Piece arg = grouped(use.items[i], c);
      key += "\x1F" + arg.text.str();
      bindings.emplace(d.params[i], std::move(arg));
    }
    if (key.size() > kMaxInstanceKeyBytes) {
      error(use, fmt::format("a template's arguments here pass {} bytes (a template that calls itself with growing "
                             "arguments?)",
                             kMaxInstanceKeyBytes));
      return {};
    }
    charge_memory(key.size());
    auto [it, inserted] = instances_.emplace(key, std::string());
    if (inserted) {
      if (instances_.size() > kMaxInstances) {
        if (!instances_refused_)  // once: every later instance would say the same
          error(use, fmt::format("templates make more than {} rules here (a template that calls itself with growing "
                                 "arguments?)",
                                 kMaxInstances));
        instances_refused_ = true;
        return {};
      }
      it->second = allocate(names_.at(d.name));
      pending_instances_.push_back({&d, it->second, std::move(bindings)});
    }
    Text t;
    t.add(it->second, use.offset);
    return {std::move(t), Binds::Atom};
  }
  static constexpr size_t kMaxInstances = 1000;
  static constexpr size_t kMaxInstanceKeyBytes = size_t{1} << 16;

  struct PendingInstance {
    const Definition* definition;
    std::string name;
    std::map<std::string, Piece> bindings;
  };

  // %json { schema }: the schema's translation, its rules renamed apart.
  Piece json(const Expr& e, const Context& c) {
    if (c.terminal) {
      error(e, "%json cannot be used in terminals: a terminal is one lexeme, a JSON value is a grammar");
      return {};
    }
    // The object alone is the schema's file; its offsets are the Lark
    // file's less the object's.
    SourceFile schema_file(file_.name(), std::string(file_.text().substr(e.offset, e.length)));
    Diagnostics schema_diags(&schema_file);
    std::optional<SchemaTranslation> translation = translate_json_schema(schema_file, schema_diags, json_, limits_);
    const auto at = static_cast<uint32_t>(e.offset);
    for (const Diagnostic& d : schema_diags.all()) {
      Diagnostic placed = d;
      if (d.range.begin.line != 0) {
        placed.range.begin = file_.location_of(d.range.begin.offset + at);
        placed.range.end = file_.location_of(d.range.end.offset + at);
      }
      if (d.severity == Severity::Error) failed_ = true;
      diags_.add(std::move(placed));
    }
    if (!translation) {
      failed_ = true;
      return {};
    }
    const std::string base = allocate("json");
    Text rules;
    rules.plain(fmt::format("(* %json at line {} *)\n", file_.location_of(static_cast<uint32_t>(e.offset)).line));
    for (const EmbeddedRule& rule :
         embed_schema_rules(*translation, base, {}, [&](const std::string& name) { return allocate(name); }))
      rules.add(rule.text + "\n", rule.schema_offset + at);
    tail_.append(rules);
    Text t;
    t.add(base, e.offset);
    return {std::move(t), Binds::Atom};
  }

  // %regex substring: the chunks n..m-1 for n <= m, as right-linear rules
  // (one per chunk), which cgram reads as one automaton.
  std::string substring(const Expr& e) {
    const std::string base = allocate("substring");
    const size_t n = e.chunks.size();
    std::vector<std::string> tails(n + 1);
    for (size_t j = 1; j < n; ++j) tails[j] = allocate(fmt::format("{}_{}", base, j));
    Text rules;
    rules.plain(fmt::format("(* %regex at line {} *)\n", file_.location_of(static_cast<uint32_t>(e.offset)).line));
    auto chunk = [&](size_t i) { return quote_literal(e.chunks[i]) + (i + 1 < n ? " " + tails[i + 1] : ""); };
    std::string start = base + " ::= ''";
    for (size_t i = 0; i < n; ++i) start += " | " + chunk(i);
    rules.add(start + " ;\n", e.offset);
    for (size_t j = 1; j < n; ++j) rules.add(fmt::format("{} ::= '' | {} ;\n", tails[j], chunk(j)), e.offset);
    tail_.append(rules);
    return base;
  }

  // %ignore takes terminals (strings, regexes, terminal names), never a
  // rule: Lark refuses one, and a rule there would make the ignored text
  // recursive.
  bool ignores_only_terminals() {
    bool ok = true;
    std::function<void(const Expr&)> visit = [&](const Expr& e) {
      if (e.kind == Expr::Kind::Ref) {
        auto found = by_name_.find(e.text);
        if (found != by_name_.end() && !defs_[found->second].terminal) {
          error(e, fmt::format("%ignore takes terminals: '{}' is a rule", e.text));
          ok = false;
        }
      }
      for (const Expr& child : e.items) visit(child);
    };
    for (const Expr& e : ignored_exprs_) visit(e);
    return ok;
  }

  void define_ignored(const std::vector<Expr>& ignored) {
    ignored_name_ = allocate("ignored");
    Expr all;
    all.kind = Expr::Kind::Alt;
    for (const Expr& e : ignored)
      for (const Expr& alt : e.items) all.items.push_back(alt);
    all.offset = ignored.front().offset;
    Context terminal{true, nullptr};
    Piece body = grouped(all, terminal);
    Text rule;
    rule.add(ignored_name_, all.offset);
    rule.plain(" ::= ");
    rule.append(body.text);
    rule.plain(options_.skip_once ? "? ;" : "* ; (* the %ignore text between lexemes *)");
    ignored_rule_ = std::move(rule);
  }

  // --- Definitions in Lark's order, comments and blank lines kept ----------------

  // Terminals used only inside what is written as one regex (&, ~, a lazy
  // rule's body or marker): their own rule would be unused.
  void find_inlined_only() {
    std::set<std::string> direct, anywhere;
    std::function<void(const Expr&, bool)> visit = [&](const Expr& e, bool inlined) {
      inlined |= e.kind == Expr::Kind::And || e.kind == Expr::Kind::Not;
      if (e.kind == Expr::Kind::Ref) (inlined ? anywhere : direct).insert(e.text);
      for (const Expr& child : e.items) visit(child, inlined);
    };
    for (const Expr& e : ignored_exprs_) visit(e, false);
    for (const Definition& d : defs_) {
      visit(d.body, lexical(d));
      for (const auto* marker : {&d.attributes.stop, &d.attributes.suffix})
        if (*marker) visit(**marker, true);
    }
    for (const std::string& name : anywhere)
      if (!direct.count(name)) inlined_only_.insert(name);
  }

  void emit_all(const std::vector<std::pair<size_t, std::string>>& statements) {
    find_inlined_only();
    size_t next_comment = 0, last_end = 0;
    // Statements other than %import (which defines terminals) become comments.
    std::vector<std::pair<size_t, std::string>> notes;
    for (const auto& [offset, kind] : statements)
      if (kind == "%ignore") {
        const std::string_view line = file_.line_text(file_.location_of(static_cast<uint32_t>(offset)).line);
        notes.emplace_back(offset, std::string(line));
      }
    size_t next_note = 0;
    auto flush_before = [&](size_t offset) {
      for (;;) {
        const bool comment = next_comment < comments_.size() && comments_[next_comment].offset < offset;
        const bool note = next_note < notes.size() && notes[next_note].first < offset;
        if (!comment && !note) break;
        const bool take_comment = comment && (!note || comments_[next_comment].offset < notes[next_note].first);
        const size_t at = take_comment ? comments_[next_comment].offset : notes[next_note].first;
        blank_line(last_end, at);
        body_.add(as_comment(take_comment ? comments_[next_comment++].text : " " + notes[next_note++].second), at);
        body_.plain("\n");
        last_end = at;
      }
    };
    for (const Definition& d : defs_) {
      flush_before(d.offset);
      if (!d.params.empty()) continue;  // a template: its instances come below
      blank_line(last_end, d.offset);
      definition(d);
      // Comments inside the definition and on its last line follow it.
      const size_t line_end = file_.text().find('\n', std::max(d.end, d.offset));
      const size_t stop = line_end == std::string_view::npos ? file_.text().size() : line_end;
      while (next_comment < comments_.size() && comments_[next_comment].offset < stop) {
        body_.add(" " + as_comment(comments_[next_comment].text), comments_[next_comment].offset);
        ++next_comment;
      }
      body_.plain("\n");
      last_end = stop;
    }
    flush_before(SIZE_MAX);
    for (size_t i = 0; i < pending_instances_.size(); ++i) {
      const PendingInstance p = pending_instances_[i];  // a copy: instances may add more
      body_.plain(i ? "" : "\n");
      body_.plain(fmt::format("(* {}{{{}}} *)\n", p.definition->name, join_params(*p.definition)));
      rule_body(*p.definition, p.name, Context{false, &p.bindings});
      body_.plain("\n");
    }
  }

  static std::string join_params(const Definition& d) {
    std::string out;
    for (const std::string& p : d.params) out += (out.empty() ? "" : ", ") + p;
    return out;
  }

  // A blank line where Lark had one between `from` and `to`.
  void blank_line(size_t from, size_t to) {
    if (body_.empty()) return;
    const std::string_view between = file_.text().substr(from, to > from ? to - from : 0);
    if (std::count(between.begin(), between.end(), '\n') >= 2) body_.plain("\n");
  }

  static std::string as_comment(std::string_view body) {
    std::string text;
    for (size_t i = 0; i < body.size(); ++i) {
      text += body[i];
      if (body[i] == '*' && i + 1 < body.size() && body[i + 1] == ')') text += ' ';
    }
    if (!text.empty() && text.back() == '*') text += ' ';
    return fmt::format("(*{} *)", text);
  }

  void definition(const Definition& d) {
    const std::string& name = names_.at(d.name);
    if (d.imported) {
      body_.add(name, d.offset);
      body_.plain(fmt::format(" ::= #'{}' ; (* %import common.{} *)", escape_quotes(common_terminals().at(*d.imported)),
                              *d.imported));
      return;
    }
    if (d.terminal && inlined_only_.count(d.name)) {
      body_.add(fmt::format("(* {}: written into the terminals that use it *)", d.name), d.offset);
      return;
    }
    rule_body(d, name, Context{d.terminal, nullptr});
    if (d.priority) body_.plain(fmt::format(" (* priority {}: every reading counts, so it changes no text *)", *d.priority));
    if (!d.attributes.dropped.empty()) {
      std::string dropped;
      for (const std::string& a : d.attributes.dropped) dropped += (dropped.empty() ? "" : ", ") + a;
      body_.plain(fmt::format(" (* {}: changes no text *)", dropped));
    }
  }

  void rule_body(const Definition& d, const std::string& name, const Context& c) {
    body_.add(name, d.offset);
    body_.plain(" ::= ");
    if (lexical(d)) {
      body_.append(lexical_body(d, c));
    } else {
      const std::string indent(name.size() + 1, ' ');
      body_.append(alternatives(d.body, c, indent).text);
    }
    body_.plain(" ;");
  }

  // --- lazy, stop=, suffix=, max_tokens=, max_chars= ------------------------------

  // A terminal expression as a regex (for the rules Lark reads as one lexeme).
  std::optional<std::string> terminal_regex(const Expr& e, const Context& c, int depth = 0) {
    if (depth > 64) {
      error(e, "terminals nest too deeply here");
      return std::nullopt;
    }
    std::optional<std::string> out = terminal_regex_of(e, c, depth);
    if (out && out->size() > kMaxInlinedRegexBytes) {
      error(e, fmt::format("this terminal written as one regex passes {} bytes (terminals used in it are copied in "
                           "whole): use fewer copies",
                           kMaxInlinedRegexBytes));
      return std::nullopt;
    }
    return out;
  }
  static constexpr size_t kMaxInlinedRegexBytes = size_t{1} << 20;

  std::optional<std::string> terminal_regex_of(const Expr& e, const Context& c, int depth) {
    auto group = [](const std::string& r) { return "(?:" + r + ")"; };
    switch (e.kind) {
      case Expr::Kind::Empty: return std::string();
      case Expr::Kind::Literal: {
        const std::string r = json::regex_literal(e.text);
        return e.flags == "i" ? "(?i:" + r + ")" : r;
      }
      case Expr::Kind::Range: return fmt::format("[{}-{}]", class_char(e.lo), class_char(e.hi));
      case Expr::Kind::Regex: {
        if (e.flags.find_first_of("lx") != std::string::npos) {
          error(e, fmt::format("the {}-flag is not supported", e.flags.find('l') != std::string::npos ? "l" : "x"));
          return std::nullopt;
        }
        const std::string flags = inline_flags(e.flags),
                          pattern = with_python_classes(without_lazy_quantifiers(e.text));
        return flags.empty() ? group(pattern) : fmt::format("(?{}:{})", flags, pattern);
      }
      case Expr::Kind::Seq:
      case Expr::Kind::Alt: {
        std::string out;
        for (size_t i = 0; i < e.items.size(); ++i) {
          auto part = terminal_regex(e.items[i], c, depth + 1);
          if (!part) return std::nullopt;
          out += (i && e.kind == Expr::Kind::Alt ? "|" : "") + group(*part);
        }
        return out;
      }
      case Expr::Kind::Optional:
      case Expr::Kind::Repeat: {
        auto inner = terminal_regex(e.items[0], c, depth + 1);
        if (!inner) return std::nullopt;
        if (e.kind == Expr::Kind::Optional) return group(*inner) + "?";
        return group(*inner) + (e.max == UINT64_MAX ? fmt::format("{{{},}}", e.min)
                                                     : fmt::format("{{{},{}}}", e.min, e.max));
      }
      case Expr::Kind::Ref: {
        auto found = by_name_.find(e.text);
        if (found != by_name_.end() && defs_[found->second].terminal) {
          const Definition& d = defs_[found->second];
          if (d.imported) return group(common_terminals().at(*d.imported));
          return terminal_regex(d.body, c, depth + 1);
        }
        error(e, found == by_name_.end() ? fmt::format("unknown name '{}'", e.text)
                                         : fmt::format("a lazy rule's body is a terminal expression: '{}' is a rule",
                                                       e.text));
        return std::nullopt;
      }
      case Expr::Kind::And:
      case Expr::Kind::Not: {
        std::optional<json::CharDfa> result;
        for (const Expr& part : e.items) {
          auto regex = terminal_regex(part, c, depth + 1);
          if (!regex) return std::nullopt;
          auto dfa = language(*regex, part, "this part of a terminal's & or ~ is too large for cgram's automata");
          if (!dfa) return std::nullopt;
          result = !result ? (e.kind == Expr::Kind::Not ? json::CharDfa::everything().minus(*dfa) : dfa)
                           : result->intersect(*dfa);
          if (!result) {
            error(e, "this terminal's automaton is too large for cgram to intersect or complement");
            return std::nullopt;
          }
        }
        if (result->empty()) return std::string("[^\\s\\S]");
        auto regex = result->to_regex();
        if (!regex) {
          error(e, "this terminal's regex is too large for cgram to write");
          return std::nullopt;
        }
        return group(ir::regex_text(*regex));
      }
      case Expr::Kind::Substring: {
        // Each start, then the chunks after it as far as the run goes: a
        // regex of n²/2 chunks, so only for short lists.
        if (e.chunks.size() > kMaxSubstringChunksInRegex) {
          error(e, fmt::format("a %regex of more than {} chunks cannot be part of a lazy rule or of & and ~",
                               kMaxSubstringChunksInRegex));
          return std::nullopt;
        }
        std::string out = "(?:";
        for (size_t i = 0; i < e.chunks.size(); ++i) {
          std::string run;
          for (size_t j = e.chunks.size(); j-- > i + 1;) run = "(?:" + json::regex_literal(e.chunks[j]) + run + ")?";
          out += (i ? "|" : "") + json::regex_literal(e.chunks[i]) + run;
        }
        return out + ")?";
      }
      case Expr::Kind::Json:
        error(e, "%json cannot be part of a lazy rule or of & and ~: they are built from strings, regexes and "
                 "terminals");
    }
    return std::nullopt;
  }
  static constexpr size_t kMaxSubstringChunksInRegex = 64;

  std::optional<json::CharDfa> language(
      const std::string& regex, const Expr& at,
      std::string_view too_large = "this lazy rule's automaton is too large for cgram to find its shortest matches") {
    auto parsed = ir::parse_regex(regex);
    if (auto* failure = std::get_if<ir::RegexError>(&parsed)) {
      error(at, failure->message);
      return std::nullopt;
    }
    auto dfa = json::CharDfa::of_regex(std::get<ir::RegexNode>(parsed));
    if (!dfa) error(at, std::string(too_large));
    return dfa;
  }

  // Markers cgram can write as except!'s strings: a literal, or an
  // alternation of literals.
  static std::optional<std::vector<std::string>> marker_strings(const Expr& e) {
    if (e.kind == Expr::Kind::Literal && !e.text.empty() && e.flags.empty()) return std::vector<std::string>{e.text};
    if ((e.kind == Expr::Kind::Alt || e.kind == Expr::Kind::Seq) && e.items.size() == 1) return marker_strings(e.items[0]);
    if (e.kind != Expr::Kind::Alt) return std::nullopt;
    std::vector<std::string> out;
    for (const Expr& alt : e.items) {
      auto part = marker_strings(alt);
      if (!part) return std::nullopt;
      out.insert(out.end(), part->begin(), part->end());
    }
    return out;
  }

  Text lexical_body(const Definition& d, const Context& c) {
    const Attributes& a = d.attributes;
    const Expr* marker = a.stop ? &*a.stop : a.suffix ? &*a.suffix : nullptr;
    const bool eos_marker = marker && marker->kind == Expr::Kind::Literal && marker->text.empty();
    Text out;
    auto body = terminal_regex(d.body, c);
    if (!body) return out;
    auto dfa = language(*body, d.body);
    if (!dfa) return out;
    const auto outside = json::CharDfa::everything().minus(*dfa);
    const bool any_text = outside && outside->empty();
    std::optional<std::vector<std::string>> strings;
    if (marker && !eos_marker) strings = marker_strings(*marker);
    if (a.max_chars && (!any_text || marker)) {
      error(d.offset, d.name.size(), "max_chars= is supported on a rule of any text without a marker");
      return out;
    }
    if (any_text && strings) {
      // Any text up to the first marker: except! says it, and keeps the
      // mask of free text as cheap as a trivial grammar's.
      std::string set;
      for (const std::string& s : *strings) set += (set.empty() ? "" : " | ") + quote_literal(s);
      const std::string argument = strings->size() == 1 ? set : "(" + set + ")";
      out.add(a.max_tokens ? fmt::format("except!({}, {})", argument, *a.max_tokens)
                           : fmt::format("except!({})", argument),
              d.offset);
      out.plain(" " + (strings->size() == 1 ? set : "( " + set + " )"));
      return out;
    }
    if (a.max_tokens) {
      error(d.offset, d.name.size(),
            "max_tokens= needs any text up to a string marker here (name[stop=\"…\", max_tokens=N]: /(?s:.*)/): "
            "cgram bounds tokens with except!(S, n)");
      return out;
    }
    if (a.max_chars) {
      out.add(fmt::format("#'[\\s\\S]{{0,{}}}'", *a.max_chars), d.offset);
      return out;
    }
    std::string whole = "(?:" + *body + ")";
    if (marker && !eos_marker) {
      auto marker_regex = terminal_regex(*marker, c);
      if (!marker_regex) return out;
      whole += "(?:" + *marker_regex + ")";
    }
    auto full = language(whole, d.body);
    if (!full) return out;
    // stop="" ends at the end of the text: the body as it is.
    const json::CharDfa lazy = eos_marker ? *full : full->shortest();
    auto regex = lazy.empty() ? std::nullopt : lazy.to_regex();
    if (!regex) {
      error(d.offset, d.name.size(),
            lazy.empty() ? "this lazy rule matches nothing" : "this lazy rule's regex is too large for cgram to write");
      return out;
    }
    out.add(fmt::format("#'{}'", ir::regex_text(*regex)), d.offset);
    return out;
  }

  Translation assemble() {
    Translation out;
    out.names = names_;
    out.start = names_.at(entry_);
    Text all;
    if (options_.allow_initial_skip && !ignored_name_.empty()) {
      out.start = allocate("start_after_ignored");
      all.add(fmt::format("{} ::= {} {} ; (* %ignore text may come first *)\n", out.start, ignored_name_,
                          names_.at(entry_)),
              defs_[by_name_.at(entry_)].offset);
      out.names[entry_] = names_.at(entry_);
    }
    all.append(body_);
    if (!ignored_rule_.empty() || !tail_.empty()) all.plain("\n");
    if (!ignored_rule_.empty()) {
      all.append(ignored_rule_);
      all.plain("\n");
    }
    all.append(tail_);
    out.cgram = all.str();
    out.offsets = all.offsets();
    if (out.offsets.empty() || out.offsets.front().first != 0) out.offsets.insert(out.offsets.begin(), {0, 0});
    return out;
  }

  const SourceFile& file_;
  Diagnostics& diags_;
  SyntaxLimits limits_;
  std::string entry_;
  JsonSchemaOptions json_;
  bool failed_ = false;
  Options options_;
  std::vector<Comment> comments_;
  std::vector<Definition> defs_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, std::string> names_;  // Lark name → .cgram name
  std::set<std::string> taken_;
  std::string ignored_name_;
  std::set<std::string> inlined_only_;
  std::vector<Expr> ignored_exprs_;
  Text ignored_rule_;
  Text body_, tail_;
  std::map<std::string, std::string> instances_;  // template and arguments → rule
  bool instances_refused_ = false;                  // past kMaxInstances (said once)
  std::set<std::pair<size_t, std::string>> said_;   // errors given, by place and message
  std::vector<PendingInstance> pending_instances_;
};

}  // namespace

std::optional<Translation> translate_lark(const SourceFile& lark, Diagnostics& diags, const SyntaxLimits& limits,
                                          const std::string& entry, const JsonSchemaOptions& json) {
  if (lark.text().size() > limits.max_source_bytes) {
    diags.error_at_file(
        fmt::format("grammar file is {} bytes; the limit is {} bytes", lark.text().size(), limits.max_source_bytes));
    return std::nullopt;
  }
  MemoryStage stage("translating the Lark grammar");
  std::optional<Translation> out = LarkTranslator(lark, diags, limits, entry, json).run();
  if (out) charge_memory(out->cgram.size() + out->offsets.size() * sizeof(out->offsets[0]));
  return out;
}

bool is_lark_path(std::string_view path) { return path.ends_with(".lark"); }

}  // namespace cgram

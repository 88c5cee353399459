#include "parse.h"

#include <fmt/format.h>

#include <CGramLexer.h>
#include <CGramParser.h>
#include <antlr4-runtime.h>

#include "memory_budget.h"
#include "utf8.h"

namespace cgram {
namespace {

using antlr::CGramLexer;
using antlr::CGramParser;

// What parsing costs, for the memory budget: ANTLR keeps the text as UTF-32,
// and per token the token itself, its leaf in the parse tree and its share
// of the rule contexts above it (measured: 830,000 alternatives, 1.66
// million tokens, peak at about 700 bytes a token with the AST).
constexpr size_t kInputBytesPerByte = sizeof(char32_t);
constexpr size_t kParseBytesPerToken = 600;

// How a token type reads in an error message.
std::string describe_token_type(size_t type) {
  switch (type) {
    case antlr4::Token::EOF: return "end of file";
    case CGramLexer::DEFINE: return "'::='";
    case CGramLexer::EQUALS: return "'='";
    case CGramLexer::SEMI: return "';'";
    case CGramLexer::PIPE: return "'|'";
    case CGramLexer::COMMA: return "','";
    case CGramLexer::LPAREN: return "'('";
    case CGramLexer::RPAREN: return "')'";
    case CGramLexer::LBRACK: return "'['";
    case CGramLexer::RBRACK: return "']'";
    case CGramLexer::LBRACE: return "'{'";
    case CGramLexer::RBRACE: return "'}'";
    case CGramLexer::QUESTION: return "'?'";
    case CGramLexer::STAR: return "'*'";
    case CGramLexer::PLUS: return "'+'";
    case CGramLexer::ANY: return "any!";
    case CGramLexer::EXCEPT: return "except!";
    case CGramLexer::IDENT: return "a rule name";
    case CGramLexer::INT: return "a number";
    case CGramLexer::STRING: return "a literal";
    case CGramLexer::REGEX: return "a regex";
    default: return "a token";
  }
}

std::string describe_found(const antlr4::Token* token) {
  if (!token || token->getType() == antlr4::Token::EOF) return "end of file";
  std::string text = token->getText();
  if (text.size() > 24) text = text.substr(0, 21) + "...";
  return fmt::format("'{}'", text);
}

// "expected ';', '|' or an expression": the tokens that start an expression
// are folded into one phrase, and repetition suffixes are left out when an
// expression could come (they would only add noise).
std::string describe_expected(const antlr4::misc::IntervalSet& expected) {
  static const size_t expression_starts[] = {CGramLexer::IDENT,  CGramLexer::STRING,
                                             CGramLexer::REGEX,  CGramLexer::LPAREN,
                                             CGramLexer::LBRACK, CGramLexer::LBRACE,
                                             CGramLexer::ANY,    CGramLexer::EXCEPT};
  bool expression = true;
  for (size_t t : expression_starts) expression = expression && expected.contains(t);
  static const size_t order[] = {CGramLexer::SEMI,   CGramLexer::PIPE,   CGramLexer::RPAREN,
                                 CGramLexer::RBRACK, CGramLexer::RBRACE, CGramLexer::DEFINE,
                                 CGramLexer::EQUALS, CGramLexer::COMMA,  CGramLexer::INT,
                                 CGramLexer::IDENT,  CGramLexer::STRING, CGramLexer::REGEX,
                                 CGramLexer::LPAREN, CGramLexer::LBRACK, CGramLexer::LBRACE,
                                 CGramLexer::ANY,    CGramLexer::EXCEPT, CGramLexer::QUESTION,
                                 CGramLexer::STAR,   CGramLexer::PLUS,   antlr4::Token::EOF};
  std::vector<std::string> parts;
  for (size_t t : order) {
    if (!expected.contains(t)) continue;
    bool part_of_expression =
        std::find(std::begin(expression_starts), std::end(expression_starts), t) !=
        std::end(expression_starts);
    bool suffix = t == CGramLexer::QUESTION || t == CGramLexer::STAR || t == CGramLexer::PLUS ||
                  t == CGramLexer::COMMA;
    if (expression && (part_of_expression || suffix)) continue;
    parts.push_back(describe_token_type(t));
  }
  if (expression) parts.push_back("an expression");
  if (parts.empty()) return "something else";
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i)
    out += (i + 1 == parts.size() ? " or " : ", ") + parts[i];
  return out;
}

// Where tokens are in the source file, in bytes.
class TokenLocator {
 public:
  explicit TokenLocator(const SourceFile& file) : file_(file) {}

  SourceLoc begin(const antlr4::Token* token) const {
    if (!token || token->getType() == antlr4::Token::EOF) return file_.location_of(file_.text().size());
    return file_.location_of(
        file_.offset_of(token->getLine(), token->getCharPositionInLine() + 1));
  }
  SourceLoc end(const antlr4::Token* token) const {
    SourceLoc b = begin(token);
    if (!token || token->getType() == antlr4::Token::EOF) return b;
    // In ASCII text a token's characters are its bytes (getText() would copy them).
    const size_t length = file_.ascii() ? token->getStopIndex() + 1 - token->getStartIndex() : token->getText().size();
    return file_.location_of(b.offset + length);
  }
  SourceRange range(const antlr4::Token* token) const { return {begin(token), end(token)}; }
  SourceRange range(antlr4::ParserRuleContext* ctx) const {
    const antlr4::Token* stop = ctx->getStop();
    if (!stop || stop->getTokenIndex() < ctx->getStart()->getTokenIndex())
      return {begin(ctx->getStart()), begin(ctx->getStart())};
    return {begin(ctx->getStart()), end(stop)};
  }
  const SourceFile& file() const { return file_; }

 private:
  const SourceFile& file_;
};

// Turns ANTLR's recognition errors into messages in the grammar author's terms.
class FriendlyErrorStrategy : public antlr4::DefaultErrorStrategy {
 public:
  FriendlyErrorStrategy(const TokenLocator& locator, Diagnostics& diags)
      : locator_(locator), diags_(diags) {}

 protected:
  void reportNoViableAlternative(antlr4::Parser* parser,
                                 const antlr4::NoViableAltException& e) override {
    report_unexpected(parser, e.getOffendingToken(), e.getExpectedTokens());
  }
  void reportInputMismatch(antlr4::Parser* parser,
                           const antlr4::InputMismatchException& e) override {
    report_unexpected(parser, e.getOffendingToken(), e.getExpectedTokens());
  }
  void reportFailedPredicate(antlr4::Parser* parser,
                             const antlr4::FailedPredicateException& e) override {
    report_unexpected(parser, e.getOffendingToken(), e.getExpectedTokens());
  }
  void reportUnwantedToken(antlr4::Parser* parser) override {
    if (inErrorRecoveryMode(parser)) return;
    beginErrorCondition(parser);
    report_unexpected(parser, parser->getCurrentToken(), getExpectedTokens(parser));
  }
  void reportMissingToken(antlr4::Parser* parser) override {
    if (inErrorRecoveryMode(parser)) return;
    beginErrorCondition(parser);
    report_unexpected(parser, parser->getCurrentToken(), getExpectedTokens(parser));
  }

 private:
  void report_unexpected(antlr4::Parser* parser, antlr4::Token* found,
                         const antlr4::misc::IntervalSet& expected) {
    auto* stream = dynamic_cast<antlr4::TokenStream*>(parser->getInputStream());
    const antlr4::Token* previous = nullptr;
    if (found && stream && found->getTokenIndex() > 0)
      previous = stream->get(found->getTokenIndex() - 1);
    // `a ::= 'x'  b ::= 'y' ;` — the parser only notices at the second '::=';
    // the author forgot the ';' before `b`.
    if (found && previous && stream && previous->getTokenIndex() > 0 &&
        (found->getType() == CGramLexer::DEFINE || found->getType() == CGramLexer::EQUALS) &&
        previous->getType() == CGramLexer::IDENT) {
      const antlr4::Token* before = stream->get(previous->getTokenIndex() - 1);
      SourceLoc at = locator_.end(before);
      diags_.error({at, at}, fmt::format("expected ';' after this rule (before the definition of '{}')",
                                         previous->getText()));
      return;
    }
    std::string wanted = describe_expected(expected);
    if (expected.contains(static_cast<size_t>(CGramLexer::SEMI)) && found && found->getType() == antlr4::Token::EOF &&
        previous) {
      SourceLoc at = locator_.end(previous);
      diags_.error({at, at}, "expected ';' at the end of the rule");
      return;
    }
    diags_.error(locator_.range(found),
                 fmt::format("expected {}, found {}", wanted, describe_found(found)));
  }

  const TokenLocator& locator_;
  Diagnostics& diags_;
};

// Reports the lexer's error tokens and removes or repairs them, so that the
// parser sees a clean stream and does not report the same problem again.
std::vector<std::unique_ptr<antlr4::Token>> lex(CGramLexer& lexer, const TokenLocator& locator,
                                                Diagnostics& diags) {
  std::vector<std::unique_ptr<antlr4::Token>> tokens;
  for (;;) {
    std::unique_ptr<antlr4::Token> token = lexer.nextToken();
    size_t type = token->getType();
    SourceRange range = locator.range(token.get());
    auto* common = dynamic_cast<antlr4::CommonToken*>(token.get());
    if (type == CGramLexer::UNTERMINATED_STRING || type == CGramLexer::UNTERMINATED_REGEX) {
      bool regex = type == CGramLexer::UNTERMINATED_REGEX;
      diags.error({range.begin, range.begin},
                  fmt::format("unterminated {}: the closing {} is missing before the end of the line",
                              regex ? "regex" : "literal",
                              token->getText()[regex ? 1 : 0] == '"' ? "'\"'" : "\"'\""));
      if (common) common->setType(regex ? CGramLexer::REGEX : CGramLexer::STRING);
    } else if (type == CGramLexer::UNTERMINATED_COMMENT) {
      diags.error({range.begin, range.begin}, "unterminated comment: '(*' has no matching '*)'");
      continue;
    } else if (type == CGramLexer::STRAY_CHAR) {
      std::string text = token->getText();
      std::string hint;
      if (text == "#") hint = " (a regex terminal is written #'…' or #\"…\")";
      else if (text == "!") hint = " (did you mean any! or except!?)";
      else if (text == ":") hint = " (rules are defined with '::=' or '=')";
      diags.error(range, fmt::format("unexpected character '{}'{}", text, hint));
      continue;
    }
    bool eof = type == antlr4::Token::EOF;
    charge_memory(kParseBytesPerToken);
    tokens.push_back(std::move(token));
    if (eof) break;
  }
  return tokens;
}

// Whether nesting stays within `max_nesting` levels. Every group, bracket,
// brace and except! is a level, and so is every repetition suffix, which
// wraps its item once more: `(('a')?)*` is four levels deep.
bool check_nesting(const std::vector<std::unique_ptr<antlr4::Token>>& tokens, uint32_t max_nesting,
                   const TokenLocator& locator, Diagnostics& diags) {
  // For each open group, the deepest item inside it so far.
  std::vector<uint64_t> deepest_inside{0};
  uint64_t item = 0;  // depth of the item just read (its suffixes included)
  auto too_deep = [&](const antlr4::Token* at) {
    if (deepest_inside.size() - 1 + item <= max_nesting) return false;
    diags.error(locator.range(at),
                fmt::format("the grammar nests deeper than {} levels here (groups, brackets, braces and "
                            "except! inside one another, and repetition suffixes on them); write it with "
                            "helper rules instead",
                            max_nesting));
    return true;
  };
  for (size_t i = 0; i < tokens.size(); ++i) {
    const size_t type = tokens[i]->getType();
    const size_t next = i + 1 < tokens.size() ? tokens[i + 1]->getType() : antlr4::Token::EOF;
    if (type == CGramLexer::LBRACE && (next == CGramLexer::INT || next == CGramLexer::COMMA)) {
      // A bound `{m,n}`: one suffix; its numbers and '}' are skipped.
      while (i + 1 < tokens.size() &&
             (tokens[i + 1]->getType() == CGramLexer::INT || tokens[i + 1]->getType() == CGramLexer::COMMA))
        ++i;
      if (i + 1 < tokens.size() && tokens[i + 1]->getType() == CGramLexer::RBRACE) ++i;
      ++item;
    } else if (type == CGramLexer::QUESTION || type == CGramLexer::STAR || type == CGramLexer::PLUS) {
      ++item;
    } else if (type == CGramLexer::LPAREN || type == CGramLexer::LBRACK || type == CGramLexer::LBRACE) {
      deepest_inside.push_back(0);
      item = 0;
    } else if (type == CGramLexer::RPAREN || type == CGramLexer::RBRACK || type == CGramLexer::RBRACE) {
      if (deepest_inside.size() > 1) {
        item = deepest_inside.back() + 1;
        deepest_inside.pop_back();
      }
    } else if (type == CGramLexer::SEMI) {
      deepest_inside.assign(1, 0);
      item = 0;
      continue;
    } else if (type == CGramLexer::IDENT || type == CGramLexer::STRING || type == CGramLexer::REGEX ||
               type == CGramLexer::ANY) {
      item = 1;
    } else {
      continue;  // separators, except!'s count, '::='
    }
    deepest_inside.back() = std::max(deepest_inside.back(), item);
    if (too_deep(tokens[i].get())) return false;
  }
  return true;
}

class AstBuilder {
 public:
  AstBuilder(const TokenLocator& locator, Diagnostics& diags, const SyntaxLimits& limits)
      : loc_(locator), diags_(diags), limits_(limits) {}

  ast::Grammar build(CGramParser::File_Context* file) {
    ast::Grammar grammar;
    for (auto* rule : file->rule_()) {
      if (!rule->IDENT() || !rule->expression() || rule->expression()->exception) continue;
      ast::RuleDef def;
      def.name = rule->IDENT()->getText();
      def.name_range = loc_.range(rule->IDENT()->getSymbol());
      def.body = expression(rule->expression());
      grammar.rules.push_back(std::move(def));
    }
    return grammar;
  }

 private:
  ast::Expr expression(CGramParser::ExpressionContext* ctx) {
    std::vector<ast::Expr> alternatives;
    for (auto* seq : ctx->sequence()) alternatives.push_back(sequence(seq));
    if (alternatives.size() == 1) return std::move(alternatives[0]);
    ast::Expr e;
    e.kind = ast::ExprKind::Alternation;
    e.range = loc_.range(ctx);
    e.children = std::move(alternatives);
    return e;
  }

  ast::Expr sequence(CGramParser::SequenceContext* ctx) {
    std::vector<ast::Expr> items;
    for (auto* it : ctx->item()) items.push_back(item(it));
    if (items.size() == 1) return std::move(items[0]);
    ast::Expr e;
    e.kind = ast::ExprKind::Sequence;
    e.range = loc_.range(ctx);
    e.children = std::move(items);
    return e;
  }

  ast::Expr item(CGramParser::ItemContext* ctx) {
    ast::Expr e = ctx->primary() ? primary(ctx->primary()) : poisoned(loc_.range(ctx));
    charge_memory(sizeof(ast::Expr) + e.text.size());
    for (auto* q : ctx->quantifier()) {
      charge_memory(sizeof(ast::Expr));
      e = quantified(std::move(e), q, loc_.range(ctx).begin);
    }
    return e;
  }

  ast::Expr quantified(ast::Expr inner, CGramParser::QuantifierContext* q, SourceLoc start) {
    ast::Expr e;
    e.kind = ast::ExprKind::Repeat;
    e.range = {start, loc_.range(q).end};
    if (q->QUESTION()) {
      e.min = 0, e.max = 1;
    } else if (q->STAR()) {
      e.min = 0, e.max = ast::kUnbounded;
    } else if (q->PLUS()) {
      e.min = 1, e.max = ast::kUnbounded;
    } else {
      auto ints = q->INT();
      bool has_comma = q->COMMA() != nullptr;
      bool leading_comma = has_comma && (ints.empty() || q->COMMA()->getSymbol()->getTokenIndex() <
                                                             ints[0]->getSymbol()->getTokenIndex());
      std::vector<uint64_t> values;
      for (auto* i : ints) values.push_back(number(i->getSymbol(), limits_.max_repeat_bound, "a repetition bound"));
      if (!has_comma) {
        e.min = e.max = values.empty() ? 0 : values[0];
      } else if (leading_comma) {
        e.min = 0, e.max = values.empty() ? 0 : values[0];
      } else {
        e.min = values.empty() ? 0 : values[0];
        e.max = values.size() > 1 ? values[1] : ast::kUnbounded;
      }
      if (e.max != ast::kUnbounded && e.min > e.max) {
        diags_.error(loc_.range(q), fmt::format("bad repetition bounds {{{},{}}}: the minimum is larger "
                                                "than the maximum",
                                                e.min, e.max));
        e.max = e.min;
      }
      if (e.max == 0)
        diags_.warning(loc_.range(q), "this repetition allows zero copies only; it matches the empty string");
    }
    e.children.push_back(std::move(inner));
    return e;
  }

  ast::Expr primary(CGramParser::PrimaryContext* ctx) {
    ast::Expr e;
    e.range = loc_.range(ctx);
    if (auto* ref = dynamic_cast<CGramParser::RuleRefContext*>(ctx)) {
      e.kind = ast::ExprKind::RuleRef;
      e.text = ref->IDENT()->getText();
    } else if (auto* lit = dynamic_cast<CGramParser::LiteralContext*>(ctx)) {
      e.kind = ast::ExprKind::Literal;
      literal(lit->STRING()->getSymbol(), e);
    } else if (auto* re = dynamic_cast<CGramParser::RegexContext*>(ctx)) {
      e.kind = ast::ExprKind::Regex;
      regex(re->REGEX()->getSymbol(), e);
    } else if (auto* group = dynamic_cast<CGramParser::GroupContext*>(ctx)) {
      return group->expression() ? expression(group->expression()) : poisoned(e.range);
    } else if (auto* opt = dynamic_cast<CGramParser::IsoOptionalContext*>(ctx)) {
      return wrap_repeat(opt->expression(), e.range, 0, 1);
    } else if (auto* rep = dynamic_cast<CGramParser::IsoRepeatContext*>(ctx)) {
      return wrap_repeat(rep->expression(), e.range, 0, ast::kUnbounded);
    } else if (dynamic_cast<CGramParser::AnyTokenContext*>(ctx)) {
      e.kind = ast::ExprKind::AnyToken;
    } else if (auto* ex = dynamic_cast<CGramParser::ExceptContext*>(ctx)) {
      e.kind = ast::ExprKind::Except;
      e.children.push_back(ex->expression() ? expression(ex->expression()) : poisoned(e.range));
      if (ex->INT()) {
        e.count_range = loc_.range(ex->INT()->getSymbol());
        e.except_count = number(ex->INT()->getSymbol(), limits_.max_except_count, "an except! token count");
        if (*e.except_count == 0)
          diags_.error(e.count_range,
                       "except! token count must be at least 1 (a count of 0 allows no text at all)");
      }
    } else {
      return poisoned(e.range);
    }
    return e;
  }

  ast::Expr wrap_repeat(CGramParser::ExpressionContext* inner, SourceRange range, uint32_t min,
                        uint32_t max) {
    ast::Expr e;
    e.kind = ast::ExprKind::Repeat;
    e.range = range;
    e.min = min, e.max = max;
    e.children.push_back(inner ? expression(inner) : poisoned(range));
    return e;
  }

  uint64_t number(antlr4::Token* token, uint64_t limit, const char* what) {
    const std::string text = token->getText();
    uint64_t value = 0;
    bool overflow = false;
    for (char c : text) {
      if (value > (UINT64_MAX - 9) / 10) overflow = true;
      value = overflow ? value : value * 10 + (c - '0');
    }
    if (overflow || value > limit) {
      diags_.error(loc_.range(token), fmt::format("{} of {} is too large (the limit is {})", what, text, limit));
      return limit;
    }
    return value;
  }

  void literal(antlr4::Token* token, ast::Expr& e) {
    const std::string text = token->getText();
    if (text.size() < 2 || text.back() != text.front()) {  // unterminated: already reported
      e.poisoned = true;
      return;
    }
    if (!decode_literal(loc_.file(), loc_.begin(token).offset, text, e.text, diags_)) e.poisoned = true;
  }

  void regex(antlr4::Token* token, ast::Expr& e) {
    const std::string text = token->getText();  // #'...'
    if (text.size() < 3 || text.back() != text[1]) {
      e.poisoned = true;
      return;
    }
    e.text = text.substr(2, text.size() - 3);
    e.body_offset = loc_.begin(token).offset + 2;
  }

  ast::Expr poisoned(SourceRange range) {
    ast::Expr e;
    e.kind = ast::ExprKind::Literal;
    e.range = range;
    e.poisoned = true;
    return e;
  }

  const TokenLocator& loc_;
  Diagnostics& diags_;
  const SyntaxLimits& limits_;
};

}  // namespace

bool decode_literal(const SourceFile& file, uint32_t token_offset, std::string_view token,
                    std::string& out, Diagnostics& diags) {
  bool ok = true;
  std::string_view body = token.substr(1, token.size() - 2);
  auto report = [&](size_t at, size_t length, std::string message) {
    SourceLoc b = file.location_of(token_offset + 1 + at);
    SourceLoc e = file.location_of(token_offset + 1 + at + length);
    diags.error({b, e}, std::move(message));
    ok = false;
  };
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    size_t start = i;
    char k = i + 1 < body.size() ? body[i + 1] : '\0';
    i += 1;
    switch (k) {
      case 'n': out += '\n'; continue;
      case 'r': out += '\r'; continue;
      case 't': out += '\t'; continue;
      case '\\': out += '\\'; continue;
      case '\'': out += '\''; continue;
      case '"': out += '"'; continue;
      case 'x': {
        auto hex = body.substr(i + 1, 2);
        if (hex.size() < 2 || !isxdigit(static_cast<unsigned char>(hex[0])) ||
            !isxdigit(static_cast<unsigned char>(hex[1]))) {
          report(start, 2, "bad escape: '\\x' needs exactly two hex digits, as in '\\x41'");
          continue;
        }
        // The code point U+00HH, as in regexes and GBNF: the language is
        // over UTF-8 text, so a literal never holds a lone byte above 0x7F.
        append_utf8(out, static_cast<uint32_t>(std::stoul(std::string(hex), nullptr, 16)));
        i += 2;
        continue;
      }
      case 'u': {
        uint32_t cp = 0;
        size_t length = 0;
        if (i + 1 < body.size() && body[i + 1] == '{') {
          size_t close = body.find('}', i + 2);
          std::string_view digits =
              close == std::string_view::npos ? std::string_view{} : body.substr(i + 2, close - i - 2);
          bool valid = !digits.empty() && digits.size() <= 6 &&
                       std::all_of(digits.begin(), digits.end(),
                                   [](char d) { return isxdigit(static_cast<unsigned char>(d)); });
          if (!valid) {
            report(start, 2, "bad escape: '\\u{…}' needs one to six hex digits, as in '\\u{1F600}'");
            continue;
          }
          cp = std::stoul(std::string(digits), nullptr, 16);
          length = close - start + 1;
          i = close;
        } else {
          auto hex = body.substr(i + 1, 4);
          bool valid = hex.size() == 4 && std::all_of(hex.begin(), hex.end(), [](char d) {
                         return isxdigit(static_cast<unsigned char>(d));
                       });
          if (!valid) {
            report(start, 2, "bad escape: '\\u' needs four hex digits ('\\u00e9') or braces ('\\u{e9}')");
            continue;
          }
          cp = std::stoul(std::string(hex), nullptr, 16);
          length = 6;
          i += 4;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
          report(start, length,
                 fmt::format("bad escape: U+{:04X} is not a Unicode scalar value (surrogates and values "
                             "above U+10FFFF have no UTF-8 encoding)",
                             cp));
          continue;
        }
        append_utf8(out, cp);
        continue;
      }
      default:
        report(start, 2,
               fmt::format("bad escape '\\{}' in literal (known escapes: \\n \\r \\t \\\\ \\' \\\" "
                           "\\xHH \\uHHHH \\u{{H…}})",
                           std::string(1, k)));
        continue;
    }
  }
  return ok;
}

ast::Grammar parse_grammar(const SourceFile& file, Diagnostics& diags, const SyntaxLimits& limits) {
  std::string_view text = file.text();
  if (text.size() > limits.max_source_bytes) {
    diags.error_at_file(fmt::format("grammar file is {} bytes; the limit is {} bytes", text.size(),
                                    limits.max_source_bytes));
    return {};
  }
  if (auto bad = first_invalid_utf8(text)) {
    SourceLoc at = file.location_of(*bad);
    diags.error({at, at}, fmt::format("the grammar is not valid UTF-8 (byte 0x{:02X})",
                                      static_cast<unsigned char>(text[*bad])));
    return {};
  }
  TokenLocator locator(file);
  MemoryStage stage("parsing the grammar");
  charge_memory(text.size() * kInputBytesPerByte);
  antlr4::ANTLRInputStream input(text.data(), text.size());
  CGramLexer lexer(&input);
  lexer.removeErrorListeners();
  std::vector<std::unique_ptr<antlr4::Token>> lexed = lex(lexer, locator, diags);
  // The parser and every walk after it recurse once per level of nesting:
  // too deep a grammar is refused before it can overflow the stack.
  if (!check_nesting(lexed, std::min(limits.max_nesting, kMaxNestingCeiling), locator, diags)) return {};
  antlr4::ListTokenSource source(std::move(lexed));
  antlr4::CommonTokenStream tokens(&source);
  CGramParser parser(&tokens);
  parser.removeErrorListeners();
  parser.setErrorHandler(std::make_shared<FriendlyErrorStrategy>(locator, diags));
  CGramParser::File_Context* tree = parser.file_();
  return AstBuilder(locator, diags, limits).build(tree);
}

}  // namespace cgram

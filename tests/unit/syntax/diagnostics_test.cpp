// Every diagnostic of the language: exact message, exact position.
#include <catch2/catch.hpp>

#include "helpers.h"

using namespace cgram::test;
using cgram::Severity;

namespace {

struct Expected {
  uint32_t line, column;
  std::string message;
  Severity severity = Severity::Error;
};

void expect_diagnostics(std::string_view source, std::vector<Expected> expected,
                        std::string start = "start") {
  auto outcome = parse(source, start);
  auto got = outcome.diagnostics.sorted();
  INFO("source:\n" << source << "\nrendered:\n" << outcome.diagnostics.render());
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].range.begin.line == expected[i].line);
    CHECK(got[i].range.begin.column == expected[i].column);
    CHECK(got[i].message == expected[i].message);
    CHECK(got[i].severity == expected[i].severity);
  }
}

void expect_error(std::string_view source, uint32_t line, uint32_t column, std::string message) {
  expect_diagnostics(source, {{line, column, std::move(message)}});
}

}  // namespace

TEST_CASE("syntax errors say what was expected, in the author's terms", "[diagnostics]") {
  expect_error("start ::= 'a' 'b'", 1, 18, "expected ';' at the end of the rule");
  expect_error("start ::= ;", 1, 11, "expected an expression, found ';'");
  expect_error("start ::= 'a' | ;", 1, 17, "expected an expression, found ';'");
  expect_error("start 'a' ;", 1, 7, "expected '::=' or '=', found ''a''");
  expect_error("start ::= ( 'a' ;", 1, 17, "expected ')', found ';'");
  expect_error("start ::= 'a' ]", 1, 15, "expected ';', found ']'");
  expect_error("start ::= 'a'\nb ::= 'b';", 1, 14,
               "expected ';' after this rule (before the definition of 'b')");
  expect_error("start ::= except!('a' 3);", 1, 23, "expected ')' or ',', found '3'");
}

TEST_CASE("lexical errors: unterminated literal, regex, comment; stray characters", "[diagnostics]") {
  expect_error("start ::= 'abc\n;", 1, 11,
               "unterminated literal: the closing \"'\" is missing before the end of the line");
  expect_error("start ::= \"abc\n;", 1, 11,
               "unterminated literal: the closing '\"' is missing before the end of the line");
  expect_error("start ::= #'a+\n;", 1, 11,
               "unterminated regex: the closing \"'\" is missing before the end of the line");
  expect_diagnostics("start ::= 'a'; (* never closed", {{1, 16, "unterminated comment: '(*' has no matching '*)'"}});
  expect_error("start ::= 'a' $ ;", 1, 15, "unexpected character '$'");
  expect_error("start ::= # 'a';", 1, 11, "unexpected character '#' (a regex terminal is written #'…' or #\"…\")");
  expect_error("start := 'a';", 1, 7, "unexpected character ':' (rules are defined with '::=' or '=')");
}

TEST_CASE("bad escapes in literals point at the escape", "[diagnostics]") {
  expect_error(R"(start ::= 'ab\q';)", 1, 14,
               R"(bad escape '\q' in literal (known escapes: \n \r \t \\ \' \" \xHH \uHHHH \u{H…}))");
  expect_error(R"(start ::= '\x4';)", 1, 12, R"(bad escape: '\x' needs exactly two hex digits, as in '\x41')");
  expect_error(R"(start ::= '\u12';)", 1, 12, R"(bad escape: '\u' needs four hex digits ('\u00e9') or braces ('\u{e9}'))");
  expect_error(R"(start ::= '\u{}';)", 1, 12, R"(bad escape: '\u{…}' needs one to six hex digits, as in '\u{1F600}')");
  expect_error(R"(start ::= 'x\u{110000}';)", 1, 13,
               "bad escape: U+110000 is not a Unicode scalar value (surrogates and values above U+10FFFF "
               "have no UTF-8 encoding)");
  expect_error(R"(start ::= '\uD800';)", 1, 12,
               "bad escape: U+D800 is not a Unicode scalar value (surrogates and values above U+10FFFF "
               "have no UTF-8 encoding)");
}

TEST_CASE("bad regexes: the position is inside the regex", "[diagnostics]") {
  expect_error("start ::= #'a(b';", 1, 14, "unclosed '(' in regex");
  expect_error("start ::= #'ab)';", 1, 15, "unmatched ')' in regex");
  expect_error("start ::= #'[abc';", 1, 13, "unclosed '[' in regex");
  expect_error("start ::= #'[z-a]';", 1, 14, "bad class range: U+007A comes after U+0061");
  expect_error("start ::= #'a{3,1}';", 1, 14, "bad repetition bounds {3,1} in regex: the minimum is larger than the maximum");
  expect_error("start ::= #'*a';", 1, 13, "nothing to repeat before '*' in regex");
  expect_error("start ::= #'a**';", 1, 15, "a quantifier cannot follow another quantifier; use a group, as in (?:a*)+");
  expect_error("start ::= #'\\q';", 1, 13, "unknown escape '\\q' in regex");
  expect_error("start ::= #'\\x4';", 1, 13, "bad escape in regex: '\\x' needs two hex digits, as in \\x41");
  expect_error("start ::= #'a{2000}';", 1, 14, "repetition bound in regex is too large (the limit is 1000 for the lower bound and 16777216 for the upper)");
  expect_error("start ::= #'[^\\s\\S]';", 1, 11, "this regex matches no text at all (its language is empty)");
  expect_error("start ::= #'(a|b)*a(a|b){20}';", 1, 11,
               "this regex is too large: its minimal DFA needs more than 32768 states (bounded repetitions "
               "of large classes, or alternatives that overlap for a long stretch, multiply the states)");
}

TEST_CASE("unsupported regex features say that regexes denote regular languages", "[diagnostics]") {
  expect_error("start ::= #'(a)\\1';", 1, 16, "backreferences are not supported: regex terminals denote regular languages");
  expect_error("start ::= #'a(?=b)';", 1, 14, "lookahead is not supported: regex terminals denote regular languages");
  expect_error("start ::= #'a(?<!b)';", 1, 14, "lookbehind is not supported: regex terminals denote regular languages");
  expect_error("start ::= #'^a';", 1, 13,
               "anchors ('^') are not supported: a regex terminal is always matched as a whole, so it is already anchored");
  expect_error("start ::= #'a$';", 1, 14,
               "anchors ('$') are not supported: a regex terminal is always matched as a whole, so it is already anchored");
  expect_error("start ::= #'a\\b';", 1, 14, "word boundaries (\\b) are not supported: regex terminals denote regular languages");
  expect_error("start ::= #'a*?';", 1, 15,
               "lazy quantifiers are not supported: a regex terminal denotes a regular language and is matched as a "
               "whole, so laziness has no meaning; remove the '?'");
  expect_error("start ::= #'(?x)a';", 1, 15, "verbose mode (the x flag) is not supported in regex");
  expect_error("start ::= #'(?iq:a)';", 1, 16,
               "unknown inline flag 'q' in regex: i, s, m and u are supported, as in (?i:abc)");
  expect_error("start ::= #'\\p{L}';", 1, 13,
               "Unicode property classes (\\p{…}) are not supported; write the ranges as a class, as in "
               "[\\u{4E00}-\\u{9FFF}]");
}

TEST_CASE("undefined rules, with a suggestion when a close name exists", "[diagnostics]") {
  expect_error("start ::= vaule; value ::= 'v';", 1, 11, "undefined rule 'vaule'; did you mean 'value'?");
  expect_diagnostics("start ::= zzz;", {{1, 11, "undefined rule 'zzz'"}});
}

TEST_CASE("unproductive rules and the empty language", "[diagnostics]") {
  expect_diagnostics("start ::= 'a' | loop;\nloop ::= 'x' loop;",
                     {{2, 1, "rule 'loop' is unproductive: it can never finish (every alternative needs "
                             "'loop' again, or a rule that does)"}});
  expect_diagnostics("start ::= a;\na ::= 'x' a;",
                     {{1, 1, "the grammar's language is empty: the start rule 'start' has no finite derivation"},
                      {2, 1, "rule 'a' is unproductive: it can never finish (every alternative needs 'a' again, "
                             "or a rule that does)"}});
}

TEST_CASE("bad repetition bounds", "[diagnostics]") {
  expect_error("start ::= 'a'{5,2};", 1, 14, "bad repetition bounds {5,2}: the minimum is larger than the maximum");
  expect_error("start ::= 'a'{20000};", 1, 15, "a repetition bound of 20000 is too large (the limit is 10000)");
}

TEST_CASE("except! arguments must be finite sets of non-empty strings", "[diagnostics]") {
  std::string not_finite =
      "the argument of except! must be a finite set of non-empty literals ('a', ('a' | 'b') or a rule that "
      "expands to them); a ";
  expect_error("start ::= except!(#'ab');", 1, 19, not_finite + "regex is not allowed here");
  expect_error("start ::= except!('a'+);", 1, 19, not_finite + "repetition is not allowed here");
  expect_error("start ::= except!(('a' | any!));", 1, 26, not_finite + "any! is not allowed here");
  expect_error("start ::= except!(r) 'x'; r ::= 'a' | r 'b';", 1, 39,
               "the argument of except! must be a finite set of literals, but rule 'r' is recursive");
  expect_error("start ::= except!(('' | 'a'));", 1, 20,
               "the strings of except! must not be empty: the empty string occurs everywhere, so nothing could be "
               "matched");
}

TEST_CASE("except! counts of zero or absurdly large", "[diagnostics]") {
  expect_error("start ::= except!('a', 0) 'a';", 1, 24,
               "except! token count must be at least 1 (a count of 0 allows no text at all)");
  expect_error("start ::= except!('a', 99999999999) 'a';", 1, 24,
               "an except! token count of 99999999999 is too large (the limit is 1000000)");
}

TEST_CASE("a missing start rule", "[diagnostics]") {
  expect_diagnostics("begin ::= 'a';", {{0, 1, "no rule named 'start', the start rule: define it, or name "
                                               "another start rule (--start NAME)"}});
  expect_diagnostics("strat ::= 'a';", {{0, 1, "no rule named 'start', the start rule: define it, or name "
                                               "another start rule (--start NAME); did you mean 'strat'?"}});
  expect_diagnostics("", {{0, 1, "the grammar defines no rules; it needs a start rule 'start'"}});
  expect_diagnostics("top ::= 'a';", {{0, 1, "no rule named 'main', the start rule: define it, or name another "
                                             "start rule (--start NAME)"}},
                     "main");
}

TEST_CASE("warnings: unreachable rules and rules that only match the empty string", "[diagnostics]") {
  expect_diagnostics("start ::= 'a' e;\ne ::= '' | ''{3};\nunused ::= 'x';",
                     {{2, 1, "rule 'e' only matches the empty string", Severity::Warning},
                      {3, 1, "rule 'unused' is never used: it is not reachable from the start rule 'start'",
                       Severity::Warning}});
  // A rule named inside except!(…) is used.
  expect_diagnostics("start ::= except!(stop) stop; stop ::= 'a' | 'b';", {});
}

TEST_CASE("several errors are reported in one run, in source order", "[diagnostics]") {
  expect_diagnostics("start ::= a b;\nx ::= #'[';\ny ::= 'a'{3,1};",
                     {{1, 11, "undefined rule 'a'"},
                      {1, 13, "undefined rule 'b'"},
                      {2, 9, "unclosed '[' in regex"},
                      {3, 10, "bad repetition bounds {3,1}: the minimum is larger than the maximum"}});
}

TEST_CASE("invalid UTF-8 in a grammar file", "[diagnostics]") {
  expect_error("start ::= 'a\xFF';", 1, 13, "the grammar is not valid UTF-8 (byte 0xFF)");
}

TEST_CASE("rendering: file:line:col, the source line and a caret", "[diagnostics]") {
  auto outcome = parse("start ::= 'a';\nother ::= vaule ;\nvalue ::= 'v';");
  CHECK(outcome.diagnostics.render() ==
        "test.cgram:2:11: error: undefined rule 'vaule'; did you mean 'value'?\n"
        "other ::= vaule ;\n"
        "          ^~~~~\n");
  auto tabs = parse("start ::=\t'a' |\t\tzz;");
  CHECK(tabs.diagnostics.render() ==
        "test.cgram:1:18: error: undefined rule 'zz'\n"
        "start ::=\t'a' |\t\tzz;\n"
        "         \t     \t\t^~\n");
}

TEST_CASE("rendering escapes control characters and invalid bytes, the caret stays aligned", "[diagnostics]") {
  // Grammars come from anyone: a raw ESC in a diagnostic would start a
  // terminal escape sequence. Each such byte is shown as \xHH (four columns).
  auto esc = parse("start ::= '\x1b[31m' zz;");
  CHECK(esc.diagnostics.render() ==
        "test.cgram:1:19: error: undefined rule 'zz'\n"
        "start ::= '\\x1B[31m' zz;\n" +
            std::string(21, ' ') + "^~\n");
  // The message, the file name and the line: NUL, BEL, DEL, a C1 control
  // (U+009B, a one-character CSI), a bad byte, a multi-byte character and a
  // tab before the spot; a range over an escaped character is underlined
  // across its escape.
  static const char raw[] = "r ::= '\xC3\xA9\x00\x07' \t\x7F\xC2\x9B\xFF zz;";
  const std::string text(raw, sizeof raw - 1);
  cgram::SourceFile file("evil\x1b]0;title\x07.cgram", text);
  cgram::Diagnostics diags(&file);
  const uint32_t zz = static_cast<uint32_t>(text.find("zz"));
  diags.error({file.location_of(zz), file.location_of(zz + 2)}, "undefined rule '\x1b[2J\x7f'");
  const uint32_t nul = static_cast<uint32_t>(text.find('\0'));
  diags.error({file.location_of(nul), file.location_of(nul + 1)}, "unexpected character");
  CHECK(diags.render() ==
        "evil\\x1B]0;title\\x07.cgram:1:9: error: unexpected character\n"
        "r ::= '\xC3\xA9\\x00\\x07' \t\\x7F\\xC2\\x9B\\xFF zz;\n"
        "        ^~~~\n"
        "evil\\x1B]0;title\\x07.cgram:1:18: error: undefined rule '\\x1B[2J\\x7F'\n"
        "r ::= '\xC3\xA9\\x00\\x07' \t\\x7F\\xC2\\x9B\\xFF zz;\n" +
        std::string(18, ' ') + "\t" + std::string(17, ' ') + "^~\n");
}

TEST_CASE("a rewound mark takes back what was said after it, under the cap too", "[diagnostics]") {
  for (const size_t cap : {SIZE_MAX, size_t{3}}) {
    cgram::Diagnostics diags;
    diags.set_max_kept(cap);
    cgram::SourceRange at;
    diags.warning(at, "w1");
    diags.warning(at, "w2");
    const cgram::Diagnostics::Mark mark = diags.mark();
    diags.warning(at, "w3");
    diags.error(at, "e1");  // under the cap of 3: takes the place of a warning
    diags.error(at, "e2");
    CHECK(diags.error_count() == 2);
    diags.rewind(mark);
    CHECK(diags.error_count() == 0);
    CHECK(diags.dropped() == 0);
    REQUIRE(diags.all().size() == 2);
    CHECK(diags.all()[0].message == "w1");
    CHECK(diags.all()[1].message == "w2");
  }
}

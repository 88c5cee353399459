// Lark in (import/lark.h): each construct against the texts it must and
// must not match, grammars against hand-written .cgram twins (the oracle on
// sentences of both), every error at its Lark position, the comments and
// layout `cgram convert` keeps, and the matcher's masks on Lark grammars
// against the oracle's.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "compiled_grammar.h"
#include "differential.h"
#include "helpers.h"
#include "lark.h"
#include "oracle_mask.h"
#include "sentence_generator.h"
#include "tokenizer/encoder.h"

using namespace cgram;
using namespace cgram::test;

namespace {

Grammar::Outcome parse_lark(std::string_view source) {
  ParseOptions options;
  options.format = GrammarFormat::Lark;
  return Grammar::parse(source, "test.lark", options);
}

std::shared_ptr<const Grammar> lark_grammar(std::string_view source) {
  Grammar::Outcome outcome = parse_lark(source);
  INFO(source << "\n" << outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  return outcome.grammar;
}

// The first error, rendered (file:line:col: error: message and the caret).
std::string lark_error(std::string_view source) {
  Grammar::Outcome outcome = parse_lark(source);
  INFO(source);
  REQUIRE_FALSE(outcome.ok());
  for (const Diagnostic& d : outcome.diagnostics.all())
    if (d.severity == Severity::Error) return outcome.diagnostics.render_one(d);
  return "";
}

void check_language(std::string_view source, std::initializer_list<std::string_view> accepted,
                    std::initializer_list<std::string_view> rejected) {
  auto g = lark_grammar(source);
  auto oracle = oracle_grammar(*g);
  for (std::string_view text : accepted) {
    INFO(source << "\naccepted: '" << text << "'\n" << g->file().text());
    CHECK(verdict(oracle, text) == oracle::Verdict::Complete);
  }
  for (std::string_view text : rejected) {
    INFO(source << "\nrejected: '" << text << "'\n" << g->file().text());
    CHECK(verdict(oracle, text) != oracle::Verdict::Complete);
  }
}

}  // namespace

TEST_CASE("Lark: rules, terminals, alternatives, groups, optional and repetition", "[lark]") {
  check_language("start: \"a\" \"b\" | \"c\" (\"d\" | \"e\")", {"ab", "cd", "ce"}, {"", "a", "ade", "abcd"});
  check_language("start: (\"a\" | \"b\") [\"c\"]", {"a", "b", "ac", "bc"}, {"", "c", "abc"});
  check_language("start: | \"a\"\n", {"", "a"}, {"aa"});
  check_language("start:\n", {""}, {"a"});
  check_language("start: x+ y* z?\nx: \"x\"\ny: \"y\"\nz: \"z\"", {"x", "xxyyz", "xz"}, {"", "y", "xzz"});
  check_language("start: ab~3 | ab~5..6\nab: \"a\" | \"b\"", {"aba", "aaaaa", "bbbbbb"}, {"aa", "aaaa", "aaaaaaa"});
  check_language("start: ab{2} \"-\" ab{1,} \"-\" ab{,2}\nab: \"a\" | \"b\"", {"ab-a-", "aa-bbb-ab"}, {"a-a-", "ab--"});
  check_language("start: value\nvalue: \"x\" | \"(\" value \")\" | \"[\" [value (\",\" value)*] \"]\"",
                 {"x", "((x))", "[]", "[x,(x),[x]]"}, {"", "()", "[x,]"});
  // ?rule, !rule and aliases shape trees only.
  check_language("?start: item suffix -> both\n!suffix: \"b\"\n?item: \"a\" -> one\n     | \"c\"", {"ab", "cb"},
                 {"a", "b"});
  // Alternatives continued on lines that begin with '|'; newlines inside brackets.
  check_language("start: \"a\"\n  | \"b\"\n\n  | (\"c\"\n     \"d\")", {"a", "b", "cd"}, {"c"});
  // Names with '-' (llguidance) and leading underscores.
  check_language("start: my-rule _hidden\nmy-rule: \"m\"\n_hidden: _TOK\n_TOK: \"t\"", {"mt"}, {"m"});
}

TEST_CASE("Lark: strings, ranges, regexes and their flags", "[lark]") {
  check_language(R"(start: "\"q\" \\ \n\t\u00e9\x41")", {"\"q\" \\ \n\t\xC3\xA9" "A"}, {"q"});
  check_language("start: \"yes\"i \"-\" \"\xC3\xA9t\xC3\xA9\"i", {"yes-\xC3\xA9t\xC3\xA9", "YeS-\xC3\xA9T\xC3\xA9"},
                 {"yes-\xC3\x89t\xC3\xA9"});
  check_language("start: \"a\"..\"f\" \"\xCE\xB1\"..\"\xCE\xB3\"", {"a\xCE\xB1", "f\xCE\xB3"}, {"g\xCE\xB1", "a\xCE\xB4"});
  check_language(R"(start: /a\/b/ /[0-9]{2,4}/)", {"a/b12", "a/b1234"}, {"a/b1", "ab12"});
  check_language(R"(start: /a.b/ | /c.d/s | /[x-z]+/i | /'q'/)", {"acb", "c\nd", "XyZ", "'q'"}, {"a\nb", "XyA"});
  check_language(R"(start: /(?i:ab)c/ /(?s).?/)", {"ABc", "abc\n"}, {"abC"});
  // Three dots are three characters, not three bytes.
  check_language(R"(start: /.../ "abc" /.../)", {"abcabcabc", "\xF0\x9F\x94\xB5\xF0\x9F\x9F\xA0\xE2\x9C\x85" "abcxyz"},
                 {"aaabcccc", "aaaaabcccc"});
}

TEST_CASE("Lark: terminals are built from terminals; the language is the context-free one", "[lark]") {
  check_language("start: SIGNED\nSIGNED: SIGN? DIGIT+\nSIGN: \"+\" | \"-\"\nDIGIT: \"0\"..\"9\"", {"0", "-42", "+7"},
                 {"", "+", "--1", "1a"});
  // Every reading counts (as in XGrammar and Lark's Earley parser): the
  // literal and the terminal may both match 'foo'.
  check_language("start: \"'foo'\" /a+/ | STRING /b+/\nSTRING: /'[^']*'/", {"'foo'a", "'foo'bb", "'bar'bbb"},
                 {"'bar'a", "'bar'c"});
  // A priority changes no text.
  check_language("start: A | B\nA.2: /[a-z]+/\nB.-1: \"abc\"", {"abc", "xyz"}, {"ABC"});
}

TEST_CASE("Lark: %import common and %ignore between lexemes", "[lark]") {
  check_language(R"(
%import common.INT
%import common.WS
%ignore WS
start: item ("," item)*
item: "id=" INT
)",
                 {"id=1", "id=1, id=42", "id=1 ,id=2 , id=3  "}, {" id=1", "id = 1", "id=1 2"});
  check_language("%import common (SIGNED_NUMBER, ESCAPED_STRING, CNAME)\n%import common.WS_INLINE -> SP\n"
                 "start: CNAME SP SIGNED_NUMBER SP ESCAPED_STRING",
                 {"x1 -1.5e3 \"a\\\"b\"", "_ 2 \"\"", "a .5 \"\\\\\""}, {"1x 2 \"a\"", "x 1. \"a\\\"", "x 1 \"a\"b\""});
  check_language("%import common (C_COMMENT, CPP_COMMENT, NEWLINE)\n%ignore C_COMMENT\n%ignore CPP_COMMENT\n"
                 "%ignore NEWLINE\n%ignore \" \"\nstart: \"a\" \"b\"",
                 {"a/* x */b", "a // c\n b /**/", "a\n\r\nb"}, {"a/* */ */b", "/**/ab"});
  // Not inside a terminal; before the first lexeme only when asked for.
  check_language("%ignore \" \"\nstart: \"a\" AB\nAB: \"a\" \"b\"", {"a ab", "aab "}, {"a a b"});
  check_language("%grammar_options {\"allow_initial_skip\": true}\n%ignore \" \"\nstart: \"a\"", {" a ", "a"}, {"  "});
  check_language("%llguidance {\"skip_repetition\": \"once\"}\n%ignore /[ \\t]{1,2}/\nstart: \"A\" \"!\"",
                 {"A  !", "A\t!"}, {"A   !", "A \t !"});
}

TEST_CASE("Lark: templates are instantiated per argument list", "[lark]") {
  check_language("start: _sep{item, \",\"} \";\" _sep{\"x\", _dash}\n_sep{x, sep}: x (sep x)*\n_dash: \"-\"\n"
                 "item: \"a\" | \"b\"",
                 {"a;x", "a,b,a;x-x-x"}, {"a,;x", "a;x,x"});
  // A template using another with its own parameters.
  check_language("start: pair{\"a\", \"b\"}\npair{p, q}: twice{p} q\ntwice{z}: z z", {"aab"}, {"ab", "aabb"});
}

TEST_CASE("Lark: %json, %regex substrings and llguidance's rule attributes", "[lark]") {
  check_language(R"(start: "<call>" args "</call>"
args: %json {
  "type": "object",
  "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
  "required": ["city"],
  "additionalProperties": false
})",
                 {"<call>{\"city\": \"Paris\"}</call>", "<call>{\"city\":\"x\",\"days\":3}</call>"},
                 {"<call>{}</call>", "<call>{\"city\": 1}</call>", "<call>{\"town\": \"x\"}</call>"});
  check_language("start: (%json {\"type\": \"integer\"} \";\")+ %json {\"enum\": [\"a\", 1]}", {"1;2;\"a\"", "-3;1"},
                 {"1;", "1.5;1"});
  check_language(R"(start: "A" %regex { "substring_words": "foo bar. baz" } "B")",
                 {"AfooB", "Abar. bazB", "AB", "Afoo bar. bazB", "A bar.B"}, {"AfoB", "Afoo barB x", "Abar bazB"});
  check_language(R"(start: SUB
SUB: %regex { "substring_chunks": ["abc", "de", "fg"] })",
                 {"", "abc", "de", "abcde", "defg", "abcdefg"}, {"ab", "cde", "abcfg"});
  check_language(R"(start: %regex { "substring_chars": "ab\u00e9" })", {"a", "b\xC3\xA9", "ab\xC3\xA9"}, {"ba", "a\xC3\xA9"});
  // lazy: the rule ends at the first place it can.
  check_language("start: name \">\" rest\nname[lazy]: /[a-z]+/\nrest: /[a-z>]*/", {"a>bc", "a>"}, {"ab>c"});
  check_language("start: head \"!\"\nhead[lazy]: TEXT \"<end>\"\nTEXT: /(.|\\n)*/", {"x\ny<end>!", "<end>!"},
                 {"x<end>y<end>!", "x!"});
  // stop= and suffix=: any text up to the first marker, as except!.
  check_language("start: think answer\nthink[stop=\"</think>\", capture]: /(?s:.*)/\nanswer: /[0-9]+/",
                 {"hmm\n</think>42", "</think>1"}, {"a</think>b</think>1", "1"});
  check_language("start: f \"z\"\nf[suffix=/!+/]: /[a-z]*/", {"xy!z", "!z"}, {"xy!!z", "xyz"});
  check_language("start: t\nt[stop=\"\"]: /.*/", {"", "abc"}, {"a\nb"});
  check_language("start: t \"#\"\nt[max_chars=3]: /(.|\\n)*/", {"#", "ab\n#"}, {"abcd#"});
  check_language("start: t \".\"\nt[temperature=0.7, capture=\"x\"]: /[a-z]+/", {"ab."}, {"."});
}

TEST_CASE("Lark: the translation keeps comments and layout and reads as .cgram", "[lark]") {
  Diagnostics diags;
  SourceFile file("g.lark", R"(// A list of items.
%import common.INT
%import common.WS
%ignore WS

start: item ("," item)*   # a comma between
?item: "id=" INT
     | pair
pair: NAME "=" INT
NAME: /[a-z]+/
)");
  Diagnostics bound(&file);
  auto translation = translate_lark(file, bound);
  INFO(bound.render());
  REQUIRE(translation);
  CHECK(translation->cgram == R"((* A list of items. *)
INT ::= #'[0-9]+' ; (* %import common.INT *)
WS ::= #'[ \t\f\r\n]+' ; (* %import common.WS *)
(* %ignore WS *)

start ::= item ( ',' ignored item )* ; (* a comma between *)
item ::= 'id=' ignored INT ignored
     | pair ;
pair ::= NAME ignored '=' ignored INT ignored ;
NAME ::= #'[a-z]+' ;

ignored ::= WS* ; (* the %ignore text between lexemes *)
)");
  // The translation is .cgram that reads alone, as `cgram convert` writes it.
  Grammar::Outcome again = parse(translation->cgram);
  INFO(again.diagnostics.render());
  CHECK(again.ok());
}

TEST_CASE("Lark: every error at its Lark position", "[lark]") {
  CHECK(lark_error("root: \"abc\"") == "test.lark: error: no start rule: a Lark grammar starts at 'start'\n");
  CHECK(lark_error("start: foo{7,6}\nfoo: \"a\"").starts_with("test.lark:1:11: error: range end must be >= start"));
  CHECK(lark_error("start: foo~-1\nfoo: \"a\"").starts_with("test.lark:1:12: error: range start must be >= 0"));
  CHECK(lark_error("start: FOO\nFOO: \"a\" | BAR\nBAR: \"b\" FOO")
            .starts_with("test.lark:3:10: error: circular reference in terminal 'FOO'"));
  CHECK(lark_error("start: FOO\nFOO: \"a\" bar\nbar: \"b\"")
            .starts_with("test.lark:2:10: error: terminal 'FOO' cannot use rule 'bar'"));
  CHECK(lark_error("start: FOO\nBAR: \"b\"").starts_with("test.lark:1:8: error: unknown name 'FOO'"));
  CHECK(lark_error("start: foo\nFoo: \"b\"").starts_with("test.lark:1:8: error: unknown name 'foo' (did you mean 'Foo'?)"));
  CHECK(lark_error("%import common.BLAH\nstart: BLAH").starts_with("test.lark:1:16: error: Unknown common terminal 'BLAH'"));
  CHECK(lark_error("%import other.X\nstart: X").starts_with("test.lark:1:9: error: cannot import from 'other'"));
  CHECK(lark_error("start: /[abc]/l").starts_with("test.lark:1:8: error: the l-flag is not supported"));
  CHECK(lark_error("start: /[abc/").starts_with("test.lark:1:9: error: unclosed '[' in regex"));
  CHECK(lark_error("start: /a(?=b)/").starts_with("test.lark:1:10: error: lookahead is not supported"));
  CHECK(lark_error("start: FOO\nFOO: %json { }").starts_with("test.lark:2:12: error: %json cannot be used in terminals"));
  CHECK(lark_error("start: \"A\" | <|foo|>").starts_with("test.lark:1:14: error: special tokens (<|foo|>) are not supported"));
  CHECK(lark_error("start: @fcall").starts_with("test.lark:1:8: error: named grammars (@fcall) are not supported"));
  CHECK(lark_error("start: \"ab\"..\"c\"").starts_with("test.lark:1:8: error: range start must be a single character"));
  CHECK(lark_error("start: \"d\"..\"a\"").starts_with("test.lark:1:8: error: invalid range order"));
  CHECK(lark_error("start: foo\nfoo: \"a\"\nfoo: \"c\"").starts_with("test.lark:3:1: error: duplicate rule 'foo'"));
  CHECK(lark_error("start: FOO\nFOO: \"a\"\nFOO: \"c\"").starts_with("test.lark:3:1: error: duplicate terminal 'FOO'"));
  CHECK(lark_error("start: \"test\nblah: \"x\"").starts_with("test.lark:1:8: error: unterminated string"));
  CHECK(lark_error("start: / \"test\"\n").starts_with("test.lark:1:8: error: unterminated regex"));
  CHECK(lark_error("start: %json {").starts_with("test.lark:1:14: error: unterminated JSON object"));
  CHECK(lark_error("start: %json { \"type\": \"strin\" }").find("test.lark:1:24: error:") == 0);
  CHECK(lark_error("start: %regex { \"foobar\": true }").starts_with("test.lark:1:15: error: unknown field 'foobar'"));
  CHECK(lark_error("start: %regex { }").starts_with("test.lark:1:15: error: no fields set on %regex"));
  CHECK(lark_error("%llguidance { \"no_forcing\": \"yes\" }\nstart: \"a\"")
            .starts_with("test.lark:1:13: error: failed to parse %llguidance declaration"));
  CHECK(lark_error("start: foo\nfoo[foobar=12]: /.*/").starts_with("test.lark:2:5: error: Unknown attribute 'foobar'"));
  CHECK(lark_error("start: foo\nfoo[max_tokens=\"x\"]: /.*/").starts_with("test.lark:2:16: error: Expected token"));
  CHECK(lark_error("start: foo\nfoo[max_tokens=5]: /[a-z]+/").starts_with("test.lark:2:1: error: max_tokens= needs"));
  CHECK(lark_error("start: foo{\"a\"}\nfoo{x, y}: x y").starts_with("test.lark:1:8: error: template 'foo' takes 2"));
  CHECK(lark_error("start: \"a\" \"b\" x\n").starts_with("test.lark:1:16: error: unknown name 'x'"));
  CHECK(lark_error("start \"a\"").starts_with("test.lark:1:7: error: expecting ':' after 'start'"));
  CHECK(lark_error("%declare X\nstart: \"a\"").starts_with("test.lark:1:1: error: %declare is not supported"));
  // Problems found after translation point into the Lark text, with Lark's names.
  const Grammar::Outcome late = parse_lark("start: my-rule\nmy-rule: my-rule \"a\"");
  CHECK_THAT(late.diagnostics.render(),
             Catch::Contains("test.lark:2:1: error: rule 'my-rule' is unproductive: it can never finish"));
}

namespace {

// Every document, then random walks of `walk_steps` for each seed. The
// oracle takes seconds a step on the lazy rule's grammar, so the quick run
// walks one seed a few steps and the long run three seeds twelve.
void lark_masks_against_the_oracle(std::initializer_list<uint64_t> seeds, size_t walk_steps, size_t min_pairs) {
  auto vocab = bundled_vocabulary();
  auto encoder = Encoder::create(vocab);
  REQUIRE(encoder.ok());
  struct Case {
    const char* grammar;
    std::vector<std::string> documents;
  };
  const Case cases[] = {
      {"%import common (INT, WS)\n%ignore WS\nstart: item (\",\" item)*\nitem: \"id=\" INT | \"name\" \"=\" /[a-z]+/i",
       {"id=1, name = Xy ,id=22 ", "name=a"}},
      {"start: think answer\nthink[stop=\"</think>\"]: /(?s:.*)/\nanswer: %json {\"type\": \"array\", \"items\": "
       "{\"type\": \"integer\"}, \"maxItems\": 3}",
       {"let me see</think>[1, 2]", "</think>[]"}},
      {"start: (f_call | TEXT)*\nf_call: f_head \"=get>\" %json {\"type\": \"object\", \"properties\": {\"q\": "
       "{\"type\": \"string\"}}, \"required\": [\"q\"]} \"</fn>\"\nf_head[lazy]: TEXT \"<fn\"\nTEXT: /[^<]+/",
       {"hello <fn=get>{\"q\": \"x\"}</fn> bye"}},
      {"start: _list{WORD, \", \"}\n_list{x, sep}: x (sep x)*\n%import common.WORD", {"ab, cd, e"}},
      {"start: \"A\" %regex {\"substring_words\": \"the quick brown fox\"} \"B\"", {"Aquick brownB", "AB"}},
  };
  size_t pairs = 0;
  for (const Case& c : cases) {
    auto g = lark_grammar(c.grammar);
    auto compiled = CompiledGrammar::compile(g, vocab);
    REQUIRE(compiled.ok());
    OracleMasker oracle(oracle_grammar(*g), vocab);
    for (const std::string& doc : c.documents) {
      const WalkStats walk = walk_document(*compiled, oracle, (*encoder)->encode_continuation(doc));
      INFO(c.grammar << "\n" << doc << ": " << walk.first_mismatch);
      CHECK(walk.mismatches == 0);
      CHECK(verdict(oracle_grammar(*g), doc) == oracle::Verdict::Complete);
      pairs += walk.pairs;
    }
    for (uint64_t seed : seeds) {
      const WalkStats walk = walk_random(*compiled, oracle, seed, walk_steps);
      INFO(c.grammar << " walk " << seed << ": " << walk.first_mismatch);
      CHECK(walk.mismatches == 0);
      pairs += walk.pairs;
    }
  }
  CHECK(pairs > min_pairs);
}

}  // namespace

TEST_CASE("Lark: the matcher's masks on Lark grammars are the oracle's", "[lark][differential]") {
  lark_masks_against_the_oracle({1}, 4, 50000);
}

TEST_CASE("Lark, exhaustive: masks along longer random walks", "[long][differential]") {
  lark_masks_against_the_oracle({1, 2, 3}, 12, 100000);
}

TEST_CASE("Lark: attributes are checked as strictly as the peers check them", "[lark]") {
  CHECK(lark_error("start[capture, capture]: \"a\"").starts_with("test.lark:1:16: error: the capture attribute is given more than once"));
  CHECK(lark_error("start[capture=\"a b\"]: \"a\"").starts_with("test.lark:1:15: error: a capture name is letters"));
  CHECK(lark_error("start[capture=\"\"]: \"a\"").starts_with("test.lark:1:15: error: a capture name is letters"));
  CHECK(lark_error("start: h\nh[suffix=\"\"]: /.*/").starts_with("test.lark:2:3: error: suffix must not be empty"));
  CHECK(lark_error("start: h\nh[stop_capture=\"m\"]: /.*/").starts_with("test.lark:2:2: error: stop_capture= needs stop="));
  CHECK(lark_error("start: \"\\q\"").starts_with("test.lark:1:9: error: unknown escape '\\q' in a string"));
  CHECK(parse_lark("start: h\nh[stop=\"x\", stop_capture=\"m\"]: /[a-z]*/").ok());
}

TEST_CASE("Lark: substrings inside & and ~, and terminals written into others are not left unused", "[lark]") {
  check_language("start: A\nA: %regex {\"substring_chunks\": [\"ab\", \"c\", \"d\"]} & /a.*/", {"ab", "abc", "abcd"},
                 {"", "c", "cd", "abd"});
  Grammar::Outcome outcome = parse_lark("start: BOTH\nBOTH: SUB & /f.*/\nSUB: %regex {\"substring_words\": \"foo bar\"}");
  REQUIRE(outcome.ok());
  CHECK(outcome.diagnostics.all().empty());
  CHECK_THAT(std::string(outcome.grammar->file().text()), Catch::Contains("(* SUB: written into the terminals that use it *)"));
}

TEST_CASE("Lark: nesting past the limit is an error at its place, never a deep recursion", "[lark]") {
  const std::string deep = "start: " + std::string(300, '(') + "\"a\"" + std::string(300, ')');
  CHECK(lark_error(deep).starts_with("test.lark:1:265: error: the grammar nests deeper than 256 levels here"));
  const std::string stacked = "start: \"a\"" + std::string(100000, '?');
  CHECK(lark_error(stacked).starts_with("test.lark:1:267: error: the grammar nests deeper than 256 levels here"));
  const std::string ok = "start: " + std::string(100, '(') + "\"a\"" + std::string(100, ')') + std::string(100, '?');
  CHECK(parse_lark(ok).ok());
}

TEST_CASE("Lark: what a review found", "[lark]") {
  // A literal '}' is no quantifier: the '?' after it is not a lazy marker.
  check_language(R"(start: /\{[^}]*}?/)", {"{ab}", "{ab"}, {"ab"});
  // max_chars with a marker is refused, not dropped.
  CHECK(lark_error("start: r\nr[stop=\"x\", max_chars=5]: /(?s:.*)/").starts_with("test.lark:2:1: error: max_chars="));
  // The l and x flags are refused inside lazy bodies too.
  CHECK(lark_error("start: g\ng[lazy]: /a b/x").starts_with("test.lark:2:10: error: the x-flag is not supported"));
  // A terminal used by %ignore and inside a lazy body keeps its rule.
  check_language("%ignore WS\nWS: /[ ]+/\nstart: \"a\" gap \"b\"\ngap[lazy]: WS", {"a b", "a  b "}, {"ab"});
  // Templates whose arguments double at each call stop with an error.
  CHECK_THAT(lark_error("start: f{\"a\"}\nf{x}: x | f{(x x)}"), Catch::Contains("a template's arguments here pass"));
  // Terminals copied into one regex stop at a size.
  std::string doubling = "start: g\ng[lazy]: T0";
  for (int i = 1; i <= 18; ++i) doubling += fmt::format("\nT{}: T{} T{}", i - 1, i, i);
  doubling += "\nT18: \"ab\"";
  CHECK_THAT(lark_error(doubling), Catch::Contains("written as one regex passes"));
}

TEST_CASE("Lark: \\w, \\d and \\s mean what Python's re reads, over Unicode", "[lark]") {
  check_language("start: /\\w+/", {"héllo", "naïve_2", "日本語", "x٣"}, {"hé-llo", "", "a b"});
  check_language("start: /\\d+/", {"42", "٣٤", "०१"}, {"4a", "½"});
  check_language("start: /\\s/", {" ", "\t", "\u3000", "\u00a0", "\u2028", "\x1c"}, {"a", "\u200b"});
  // Inside classes, and negated: [^\W\d] is a letter or '_'.
  check_language("start: /[\\w-]+/ /[^\\W\\d]/ /\\S/", {"hé-lloé!", "a-bé_x"}, {"hé-llo1!", "a é!", "aé"});
  // An escaped backslash before w is no class.
  check_language("start: /\\\\w/", {"\\w"}, {"a"});
}

TEST_CASE("Lark: what the hostile probe found refused as Lark refuses it, each error once", "[lark]") {
  CHECK(lark_error("start: t{\"a\"}\nt{x}: x{\"b\"}\n")
            .starts_with("test.lark:2:7: error: 'x' is a template parameter: it takes no arguments"));
  CHECK(lark_error("start: \"a\" b\nb: \"b\"\n%ignore start\n")
            .starts_with("test.lark:3:9: error: %ignore takes terminals: 'start' is a rule"));
  CHECK(lark_error("start: A\nA.1.2: \"a\"\n").starts_with("test.lark:2:3: error: a priority is a whole number"));
  CHECK(lark_grammar("start: A\nA.2: \"a\"\n"));
  // A large & or ~ is named as what it is, not as a lazy rule.
  // (the 17th character from the end: a DFA of 2^17 states)
  const std::string large = lark_error("start: A\nA: ~/[ab]*a[ab]{16}/\n");
  CHECK_THAT(large, Catch::Contains("this part of a terminal's & or ~ is too large"));
  CHECK(large.find("lazy rule") == std::string::npos);
  // Templates that expand past the source limit say so of the Lark file.
  std::string expanding = fmt::format("start: d{{\"{}\"}}\nd{{x}}: l0{{x x x}}\n", std::string(15000, 'a'));
  for (int k = 0; k < 8; ++k) expanding += fmt::format("l{}{{x}}: l{}{{x \"{}\"}} l{}{{x \"{}\"}}\n", k, k + 1, k, k + 1, k + 100);
  expanding += "l8{x}: x x\n";
  CHECK_THAT(lark_error(expanding), Catch::Contains("the Lark grammar (") && Catch::Contains("expands to"));
  // Past the instance limit: one error, not one per instance.
  std::string many = "start: l0{\"a\"}\n";
  for (int k = 0; k < 12; ++k) many += fmt::format("l{}{{x}}: l{}{{x \"{}\"}} l{}{{x \"{}\"}}\n", k, k + 1, k, k + 1, k + 100);
  many += "l12{x}: x\n";
  const Grammar::Outcome limited = parse_lark(many);
  REQUIRE_FALSE(limited.ok());
  CHECK(limited.diagnostics.error_count() == 1);
}

// JSON Schema → .cgram: 'type' and the scalar types. A schema by the types
// it allows; numbers within their bounds; counts (minLength and the like);
// strings by length, 'pattern' or 'format'.
#include "json_schema_converter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "char_dfa.h"
#include "json_text.h"
#include "regex.h"

namespace cgram::json_schema_detail {
namespace {

const std::vector<std::string>& all_types() {
  static const std::vector<std::string> types = {"null", "boolean", "object", "array", "string", "number"};
  return types;
}

}  // namespace

std::set<std::string> declared_types(const Json& s) {
  std::set<std::string> out;
  if (!s.contains("type")) return {all_types().begin(), all_types().end()};
  const Json& t = s["type"];
  if (t.is_string()) out.insert(t.get<std::string>());
  else if (t.is_array())
    for (const Json& e : t)
      if (e.is_string()) out.insert(e.get<std::string>());
  return out;
}

// --- Types ----------------------------------------------------------------------
Expr Converter::by_type(const Node& node, int depth) {
  const Json& s = *node.schema;
  std::set<std::string> types = declared_types(s);
  if (s.contains("type")) {
    const Json& t = s["type"];
    bool ok = t.is_string() || t.is_array();
    if (t.is_array())
      for (const Json& e : t) ok = ok && e.is_string();
    for (const std::string& name : types)
      ok = ok && (name == "integer" || std::find(all_types().begin(), all_types().end(), name) != all_types().end());
    if (!ok) {
      diagnostics_.error(node.pointer + "/type", "'type' must be one of null, boolean, object, array, string, number, integer, "
                                    "or an array of them");
      return std::nullopt;
    }
  }
  std::vector<std::string> alternatives;
  auto add = [&](Expr e) {
    if (e) alternatives.push_back(*e);
  };
  if (types.count("null")) add("'null'");
  if (types.count("boolean")) add("('true' | 'false')");
  if (types.count("number")) add(scalars_.number(node, false));
  else if (types.count("integer")) add(scalars_.number(node, true));
  if (types.count("string")) add(scalars_.string(node));
  if (types.count("array")) add(arrays_.array(node, depth));
  if (types.count("object")) add(objects_.object(node, depth));
  return alternation(alternatives);
}

std::optional<json::NumberBound> ScalarWriter::bound(const Node& node, const char* inclusive_key,
                                                  const char* exclusive_key, bool lower) {
  const Json& s = *node.schema;
  std::optional<json::NumberBound> out;
  for (const char* key : {inclusive_key, exclusive_key}) {
    if (!s.contains(key)) continue;
    const Json& v = s[key];
    auto d = v.is_number() ? json::parse_decimal(v.dump()) : std::nullopt;
    if (!d) {
      diagnostics_.error(node.pointer + "/" + key, fmt::format("'{}' must be a number (with an exponent of at most {})", key,
                                                  json::kMaxDecimalExponent));
      continue;
    }
    json::NumberBound b{*d, key == inclusive_key};
    if (!out) {
      out = b;
      continue;
    }
    const int c = json::compare(b.value, out->value);
    if ((lower ? c > 0 : c < 0) || (c == 0 && !b.inclusive)) out = b;
  }
  return out;
}

// multipleOf as a power of ten, 10^e with |e| <= 20 (0.01, 1, 100): said
// exactly by the numbers' spelling; nullopt for any other step.
std::optional<int> power_of_ten_step(const Json& s) {
  if (!s.is_object() || !s.contains("multipleOf") || !s["multipleOf"].is_number()) return std::nullopt;
  const std::optional<json::Decimal> step = json::parse_decimal(s["multipleOf"].dump());
  if (!step || step->negative || step->is_zero()) return std::nullopt;
  const std::string& whole = step->integer;
  const std::string& fraction = step->fraction;
  if (fraction.empty() && whole[0] == '1' && whole.find_first_not_of('0', 1) == std::string::npos &&
      whole.size() <= 21)
    return static_cast<int>(whole.size()) - 1;
  if (whole == "0" && !fraction.empty() && fraction.back() == '1' && fraction.size() <= 20 &&
      fraction.find_first_not_of('0') == fraction.size() - 1)
    return -static_cast<int>(fraction.size());
  return std::nullopt;
}

// multipleOf as m·10^-e (m an integer, e its fraction digits), where the
// remainder automaton of its multiples stays small; nullopt otherwise.
std::optional<std::pair<uint64_t, uint32_t>> decimal_step(const Json& s) {
  if (!s.is_object() || !s.contains("multipleOf") || !s["multipleOf"].is_number()) return std::nullopt;
  const std::optional<json::Decimal> step = json::parse_decimal(s["multipleOf"].dump());
  if (!step || step->negative || step->is_zero()) return std::nullopt;
  std::string fraction = step->fraction;
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  std::string digits = step->integer + fraction;
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  if (digits.empty() || digits.size() > 6 || fraction.size() > 12) return std::nullopt;
  const uint64_t m = std::stoull(digits);
  const uint32_t e = static_cast<uint32_t>(fraction.size());
  if (m * (e + 2) + 3 > kMaxMultipleStates) return std::nullopt;
  return std::pair{m, e};
}

Expr ScalarWriter::number(const Node& node, bool integer) {
  auto lower = bound(node, "minimum", "exclusiveMinimum", true);
  auto upper = bound(node, "maximum", "exclusiveMaximum", false);
  auto regex = json::number_regex(lower, upper, integer);
  if (!regex) return std::nullopt;
  const bool fraction = node.schema->contains(kFraction);
  if (fraction && integer) return std::nullopt;  // integers that are no integer
  // Languages the bounds' numbers are intersected with, written in fixed
  // point: multiples of 10^e (at most -e fraction digits, or e zeros at the
  // end of the integer), numbers no integer (a fraction digit other than 0).
  std::vector<std::string> spellings;
  const std::optional<int> e = power_of_ten_step(*node.schema);
  if (e && (!integer || *e > 0))
    spellings.push_back(*e < 0    ? fmt::format("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]{{1,{}}})?", -*e)
                        : *e == 0 ? std::string("-?(?:0|[1-9][0-9]*)")
                                  : fmt::format("-?(?:0|[1-9][0-9]*0{{{}}})", *e));
  if (fraction) spellings.push_back("-?(?:0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*");
  // Other steps: the multiples of m·10^-e by the remainder of their digits.
  const std::optional<std::pair<uint64_t, uint32_t>> step = e ? std::nullopt : decimal_step(*node.schema);
  if (spellings.empty() && !step) return "#'" + *regex + "'";
  std::optional<json::CharDfa> language = json::CharDfa::of_regex(std::get<ir::RegexNode>(ir::parse_regex(*regex)));
  if (step && language) language = language->intersect(json::CharDfa::multiples(step->first, step->second));
  for (const std::string& spelling : spellings) {
    const auto one = json::CharDfa::of_regex(std::get<ir::RegexNode>(ir::parse_regex(spelling)));
    language = language && one ? language->intersect(*one) : std::nullopt;
  }
  if (language && language->empty()) return std::nullopt;
  const auto written = language ? language->to_regex() : std::nullopt;
  const auto text = written ? json::encode_regex(*written) : std::nullopt;  // (no number character is escaped)
  if (!text) {
    diagnostics_.permissive(node.pointer + (e || step ? "/multipleOf" : ""),
               "'multipleOf' or a number's being no integer is not enforced here (its automaton passes the limits)");
    return "#'" + *regex + "'";
  }
  return "#'" + *text + "'";
}

std::optional<uint64_t> ScalarWriter::count(const Node& node, const char* key) {
  const Json& s = *node.schema;
  if (!s.contains(key)) return std::nullopt;
  const Json& v = s[key];
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) return v.get<uint64_t>();
  // A float like 2.0 counts; one past 2^63 would not convert (and is no length anyway).
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= 0 && d < 0x1p63 && std::trunc(d) == d) return static_cast<uint64_t>(d);
  }
  diagnostics_.error(node.pointer + "/" + key, fmt::format("'{}' must be a non-negative integer", key));
  return std::nullopt;
}

// A format cgram does not check. One the specification defines (uri-reference,
// duration…) is a loosening, with a warning; any other (OpenAPI's byte, a
// vendor's own) is an annotation, as the specification says of unknown
// formats: a note, which --strict accepts.
bool specified_format(const std::string& name) {
  static const std::set<std::string> specified = {
      "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
      "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
      "relative-json-pointer", "regex"};
  return specified.count(name) > 0;
}

void ScalarWriter::unchecked_format(const std::string& pointer, const std::string& name) {
  if (specified_format(name)) {
    diagnostics_.permissive(pointer, fmt::format("format '{}' is not supported and is not checked", name));
    return;
  }
  if (!diagnostics_.first_time(pointer + "\nformat note")) return;
  diagnostics_.note(pointer, fmt::format("format '{}' is no JSON Schema format: an annotation, not checked "
                                             "(as the specification says of unknown formats)",
                                             name));
}

// A `not` that the strings say: {pattern: P}, {format: F} (one enforced
// whole), or {enum}/{const} of strings
// where the schema allows nothing but strings. The strings excluded, as a
// regex over decoded characters; nullopt for any other `not`.
std::optional<std::string> excluded_strings(const Json& s) {
  if (!s.contains("not") || !s["not"].is_object()) return std::nullopt;
  return strings_excluded_by(s["not"], declared_types(s));
}

// The strings `inner` matches, as a regex, where it says nothing but
// strings (of a schema of `types`); an anyOf of such schemas too.
std::optional<std::string> strings_excluded_by(const Json& inner, const std::set<std::string>& types) {
  if (!inner.is_object()) return std::nullopt;
  if (inner.size() == 1 && inner.contains("anyOf") && inner["anyOf"].is_array()) {
    std::string alternatives;
    for (const Json& part : inner["anyOf"]) {
      const std::optional<std::string> one = strings_excluded_by(part, types);
      if (!one) return std::nullopt;
      if (!one->empty()) alternatives += (alternatives.empty() ? "(?:" : "|(?:") + *one + ")";
    }
    return alternatives;
  }
  std::vector<std::string> keys;
  for (const auto& [key, unused] : inner.items())
    if (constrains(key) || key == "enum" || key == "const") keys.push_back(key);
  if (keys == std::vector<std::string>{"pattern"} && inner["pattern"].is_string()) {
    auto converted = json::ecma_pattern_to_regex(inner["pattern"].get<std::string>());
    return converted.ok() ? std::optional<std::string>(*converted) : std::nullopt;
  }
  if (keys == std::vector<std::string>{"format"} && inner["format"].is_string()) {
    const auto format = json::format_regex(inner["format"].get<std::string>());
    return format && format->not_enforced.empty() ? std::optional<std::string>(format->regex) : std::nullopt;
  }
  if (keys.size() != 1 || (keys[0] != "enum" && keys[0] != "const")) return std::nullopt;
  if (types != std::set<std::string>{"string"}) return std::nullopt;
  const Json values = keys[0] == "const" ? Json::array({inner["const"]}) : inner["enum"];
  if (!values.is_array()) return std::nullopt;
  std::string alternatives;
  for (const Json& v : values) {
    if (!v.is_string()) continue;  // (no string is it)
    alternatives += (alternatives.empty() ? "(?:" : "|(?:") + json::regex_literal(v.get<std::string>()) + ")";
  }
  return alternatives;  // empty: no string is excluded
}

// The decoded strings in every language of `all` and in none of `none`, as
// one regex: Empty when there is none, TooLarge past the automaton limits.
ScalarWriter::Intersection ScalarWriter::strings_of(const std::vector<ir::RegexNode>& all,
                                           const std::vector<ir::RegexNode>& none, ir::RegexNode& out) {
  // A language of more states than this is written back as a regex whose
  // lexer automaton takes seconds to build (an email pattern cut to 254
  // characters): the first language alone is kept instead.
  json::CharDfaLimits limits;
  limits.max_states = kMaxStringStates;
  std::optional<json::CharDfa> language = json::CharDfa::everything();
  for (const ir::RegexNode& r : all) {
    const std::optional<json::CharDfa> one = json::CharDfa::of_regex(r);
    language = one && language ? language->intersect(*one, limits) : std::nullopt;
  }
  for (const ir::RegexNode& r : none) {
    const std::optional<json::CharDfa> one = json::CharDfa::of_regex(r);
    language = one && language ? language->minus(*one, limits) : std::nullopt;
  }
  if (!language) return Intersection::TooLarge;
  if (language->empty()) return Intersection::Empty;
  // One language alone is written as it came: state elimination would only
  // make it longer (an email address: 1 KB became 99 KB, 100 ms to convert).
  if (all.size() == 1 && none.empty()) {
    out = all[0];
    return Intersection::Done;
  }
  std::optional<ir::RegexNode> written = language->to_regex();
  if (!written) return Intersection::TooLarge;
  out = std::move(*written);
  return Intersection::Done;
}

Expr ScalarWriter::string(const Node& node) {
  const Json& s = *node.schema;
  const auto min_length = count(node, "minLength");
  const auto max_length = count(node, "maxLength");
  const std::string quote = "\\\"";
  // The languages a string must be in (pattern, format, lengths) and not in
  // (`not`), intersected on automata over code points where there is more
  // than a length alone.
  std::vector<ir::RegexNode> all, none;
  std::string at = node.pointer;
  auto read = [&](const std::string& regex, const std::string& where, std::vector<ir::RegexNode>& into) {
    auto parsed = ir::parse_regex(regex, limits_.max_nesting);
    if (auto* e = std::get_if<ir::RegexError>(&parsed)) {
      diagnostics_.error(where, "'pattern': " + e->message);
      return false;
    }
    into.push_back(std::move(std::get<ir::RegexNode>(parsed)));
    return true;
  };
  if (s.contains("pattern")) {
    at = node.pointer + "/pattern";
    if (!s["pattern"].is_string()) {
      diagnostics_.error(at, "'pattern' must be a string");
      return std::nullopt;
    }
    // Each pattern's language; one that starts with look-aheads, as the
    // languages it is within and outside (json::leading_lookaheads).
    auto read_pattern = [&](const std::string& pattern, std::vector<ir::RegexNode>& into) {
      auto converted = json::ecma_pattern_to_regex(pattern);
      if (auto* e = converted.if_error()) {
        diagnostics_.error(at, "'pattern': " + e->message);
        return false;
      }
      return read(*converted, at, into);
    };
    for (const std::string& pattern : patterns_of(s)) {  // (more than one after a merge)
      const std::optional<json::LookaheadParts> parts = json::leading_lookaheads(pattern);
      if (!parts) {
        if (!read_pattern(pattern, all)) return std::nullopt;
        continue;
      }
      if (!read_pattern(parts->rest, all)) return std::nullopt;
      for (const std::string& within : parts->within)
        if (!read_pattern(within, all)) return std::nullopt;
      for (const std::string& outside : parts->outside)
        if (!read_pattern(outside, none)) return std::nullopt;
    }
  }
  if (s.contains("format")) {
    const std::string where = node.pointer + "/format";
    const std::string name = s["format"].is_string() ? s["format"].get<std::string>() : "";
    if (auto format = json::format_regex(name)) {
      if (!format->not_enforced.empty())
        diagnostics_.permissive(where, fmt::format("format '{}': {} is not enforced", name, format->not_enforced));
      if (!read(format->regex, where, all)) return std::nullopt;
      if (all.size() == 1) at = where;
    } else {
      unchecked_format(where, name);
    }
  }
  if (const std::optional<std::string> excluded = excluded_strings(s); excluded && !excluded->empty())
    if (!read(*excluded, node.pointer + "/not", none)) return std::nullopt;
  if (!all.empty() || !none.empty()) {
    const bool lengths = (min_length || max_length) && min_length.value_or(0) <= ir::kMaxRegexRepeat &&
                         max_length.value_or(0) <= ir::kMaxRegexRepeat;
    if (max_length && *max_length < min_length.value_or(0)) return std::nullopt;
    std::vector<ir::RegexNode> every = all;
    if (lengths) {
      ir::RegexNode any;
      any.kind = ir::RegexNode::Kind::Set;
      any.set = ir::CodePointSet::all();
      ir::RegexNode sized;
      sized.kind = ir::RegexNode::Kind::Repeat;
      sized.min = static_cast<uint32_t>(min_length.value_or(0));
      sized.max = max_length ? static_cast<uint32_t>(*max_length) : ir::kRegexUnbounded;
      sized.children.push_back(std::move(any));
      every.push_back(std::move(sized));
    }
    ir::RegexNode regex;
    switch (strings_of(every, none, regex)) {
      case Intersection::Empty: return std::nullopt;  // no string has them all: no value
      case Intersection::Done:
        if ((min_length || max_length) && !lengths)
          diagnostics_.permissive(at, "'minLength' and 'maxLength' above 1000 beside 'pattern' or 'format' are not enforced");
        break;
      case Intersection::TooLarge:
        // The first language alone, the others not enforced.
        if (all.empty()) {
          diagnostics_.permissive(node.pointer + "/not", "'not' is not supported here (its automaton passes the limits) and is "
                                            "ignored: the grammar accepts more than the schema");
          return fmt::format("#'{0}(?:{1})*{0}'", quote, json::any_string_char_regex());
        }
        regex = all[0];
        diagnostics_.permissive(at, "the pattern, format, lengths and 'not' of this string are not all enforced (their "
                       "intersection is past the automaton limits): the grammar accepts more than the schema");
        break;
    }
    auto encoded = json::encode_regex(regex);
    if (!encoded) return std::nullopt;
    return fmt::format("#'{0}{1}{0}'", quote, *encoded);
  }
  const uint64_t lo = min_length.value_or(0);
  uint64_t hi = max_length.value_or(UINT64_MAX);  // UINT64_MAX: no bound
  if (hi < lo) return std::nullopt;
  const std::string c = json::any_string_char_regex();
  // Up to kMaxCountedRepeat the bound is a counter on the string's lexeme
  // (automata/counted.h), which costs no state per character.
  if (hi != UINT64_MAX && hi > ir::kMaxCountedRepeat) {
    diagnostics_.permissive(node.pointer + "/maxLength", fmt::format("'maxLength' above {} is not enforced", ir::kMaxCountedRepeat));
    hi = UINT64_MAX;
  }
  if (lo > limits_.max_repeat_bound) {
    diagnostics_.error(node.pointer + "/minLength", fmt::format("'minLength' above {} is not supported", limits_.max_repeat_bound));
    return std::nullopt;
  }
  if (lo == 0 && hi == UINT64_MAX) return fmt::format("#'{0}(?:{1})*{0}'", quote, c);
  if (hi == 0) return std::string("'\"\"'");  // the empty string only
  // A regex copies its lower bound: past kMaxRegexRepeat, a rule's
  // repetition, whose bounds stop at max_repeat_bound.
  if (lo > ir::kMaxRegexRepeat && hi != UINT64_MAX && hi > limits_.max_repeat_bound) {
    diagnostics_.permissive(node.pointer + "/maxLength", fmt::format("'maxLength' above {} beside a 'minLength' above {} is not "
                                                        "enforced",
                                                        limits_.max_repeat_bound, ir::kMaxRegexRepeat));
    hi = UINT64_MAX;
  }
  const std::string bounds = hi != UINT64_MAX ? fmt::format("{{{},{}}}", lo, hi) : fmt::format("{{{},}}", lo);
  if (lo <= ir::kMaxRegexRepeat) return fmt::format("#'{0}(?:{1}){2}{0}'", quote, c, bounds);
  if (string_char_rule_.empty()) string_char_rule_ = rules_.add("string_char", fmt::format("#'{}'", c), "");
  return fmt::format("'\"' {}{} '\"'", string_char_rule_, bounds);
}

}  // namespace cgram::json_schema_detail

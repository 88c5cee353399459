// JSON Schema → .cgram: the driver. The public entry points, where each
// value of the schema text starts (for diagnostics), the keyword tables,
// dispatch from a schema to its keyword family, the rules written, their
// layout and whitespace. The families are in json_schema_*.cpp.
#include "json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cgram_text.h"
#include "json_schema_converter.h"
#include "json_text.h"
#include "memory_budget.h"

namespace cgram::json_schema_detail {

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : (c == '/' ? "~1" : std::string(1, c));
  return out;
}

// --- Where each value of the schema text starts -----------------------------

// JSON pointer → byte offset of the value, for diagnostics. The text has
// already been parsed, so this scan only has to find the values.
class JsonLocator {
 public:
  explicit JsonLocator(std::string_view text) : text_(text) {
    size_t pos = 0;
    value(pos, "");
  }
  uint32_t offset_of(const std::string& pointer) const {
    // The nearest enclosing value that was seen (merged schemas have none).
    std::string p = pointer;
    for (;;) {
      auto it = offsets_.find(p);
      if (it != offsets_.end()) return it->second;
      const size_t slash = p.rfind('/');
      if (slash == std::string::npos) return 0;
      p.resize(slash);
    }
  }

 private:
  void skip_space(size_t& pos) const {
    while (pos < text_.size() && (text_[pos] == ' ' || text_[pos] == '\t' || text_[pos] == '\n' || text_[pos] == '\r'))
      ++pos;
  }
  // A string token: its decoded value (escapes other than \" and \\ kept as
  // written: only key lookups use it, and schema keys rarely hold escapes).
  std::string string(size_t& pos) const {
    std::string out;
    ++pos;
    while (pos < text_.size() && text_[pos] != '"') {
      if (text_[pos] == '\\' && pos + 1 < text_.size()) {
        ++pos;
        if (text_[pos] != '"' && text_[pos] != '\\' && text_[pos] != '/') out += '\\';
      }
      out += text_[pos++];
    }
    ++pos;
    return out;
  }
  void value(size_t& pos, const std::string& pointer) {
    skip_space(pos);
    offsets_.emplace(pointer, static_cast<uint32_t>(pos));
    if (pos >= text_.size()) return;
    const char c = text_[pos];
    if (c == '{' || c == '[') {
      ++pos;
      for (size_t index = 0;; ++index) {
        skip_space(pos);
        if (pos >= text_.size() || text_[pos] == '}' || text_[pos] == ']') break;
        std::string child = pointer + "/" + std::to_string(index);
        if (c == '{') {
          child = pointer + "/" + pointer_token(string(pos));
          skip_space(pos);
          ++pos;  // ':'
        }
        value(pos, child);
        skip_space(pos);
        if (pos < text_.size() && text_[pos] == ',') ++pos;
      }
      ++pos;
    } else if (c == '"') {
      string(pos);
    } else {
      while (pos < text_.size() && !strchr(",]} \t\r\n", text_[pos])) ++pos;
    }
  }

  std::string_view text_;
  std::map<std::string, uint32_t> offsets_;
};

// --- Keywords ---------------------------------------------------------------

namespace {
// Every draft's keywords (04 to 2020-12), by what cgram does with them.
const std::map<std::string, KeywordUse>& keywords() {
  static const std::map<std::string, KeywordUse> table = [] {
    std::map<std::string, KeywordUse> out;
    for (const char* k : {"$schema", "$id", "$comment", "$anchor", "$defs", "definitions", "$vocabulary", "title",
                          "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
                          "contentEncoding", "contentMediaType", "contentSchema"})
      out[k] = KeywordUse::Annotation;
    for (const char* k : {"type", "enum", "const", "properties", "required", "additionalProperties", "items",
                          "prefixItems", "additionalItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref",
                          "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                          "exclusiveMaximum", "patternProperties", kMorePatterns, kFraction, kContains})
      out[k] = KeywordUse::Supported;
    for (const char* k : {"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"})
      out[k] = KeywordUse::Refused;
    // They constrain, and cgram does not say them yet.
    for (const char* k : {"not", "if", "then", "else", "dependentSchemas", "dependentRequired", "dependencies",
                          "propertyNames", "unevaluatedProperties", "unevaluatedItems",
                          "contains", "minContains", "maxContains", "uniqueItems", "multipleOf", "minProperties",
                          kConditionals,
                          "maxProperties"})
      out[k] = KeywordUse::IgnoredWarning;
    return out;
  }();
  return table;
}
}  // namespace

KeywordUse keyword_use(const std::string& key) {
  const auto found = keywords().find(key);
  return found == keywords().end() ? KeywordUse::NotAKeyword : found->second;
}

std::optional<std::string> keyword_like(const std::string& key) {
  // The nearest by edit distance (insertions, deletions, substitutions,
  // swaps of two neighbours): at most two edits from a keyword longer than
  // six characters, one from a shorter one (`minLenght`, `requried`).
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
      for (size_t j = 1; j <= b.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    return d[a.size()][b.size()];
  };
  if (key.size() < 4 || key.size() > 40) return std::nullopt;
  std::optional<std::string> nearest;
  size_t best = SIZE_MAX;
  for (const auto& [k, use] : keywords()) {
    const size_t d = distance(key, k);
    if (k != key && d <= (k.size() > 6 ? 2u : 1u) && d < best) {
      best = d;
      nearest = k;
    }
  }
  return nearest;
}

std::vector<std::string> patterns_of(const Json& s) {
  std::vector<std::string> out;
  if (s.contains("pattern") && s["pattern"].is_string()) out.push_back(s["pattern"].get<std::string>());
  if (s.contains(kMorePatterns) && s[kMorePatterns].is_array())
    for (const Json& p : s[kMorePatterns])
      if (p.is_string()) out.push_back(p.get<std::string>());
  return out;
}

bool constrains(const std::string& key) {
  return keyword_use(key) == KeywordUse::Supported || keyword_use(key) == KeywordUse::IgnoredWarning;
}

bool has_constraints(const Json& s) {
  for (const auto& [key, unused] : s.items())
    if (constrains(key) || key == "enum" || key == "const") return true;
  return false;
}

// --- Converter --------------------------------------------------------------

// The parts are made in the order they are declared, each holding parts
// made before it, except the Converter and the CombinatorWriter (the writers'
// recursion): those references are bound here and used only once run() starts.
Converter::Converter(const Json& root, const JsonLocator& where, const SourceFile& file, Diagnostics& diags,
                     const JsonSchemaOptions& options, const SyntaxLimits& limits)
    : options_(options),
      limits_(limits),
      file_(file),
      diagnostics_(where, file, diags, options_.strict, attempts_),
      rules_(diagnostics_),
      layout_(options_.whitespace),
      automata_(limits_.max_nesting),
      checks_(automata_),
      document_(root, diagnostics_),
      proof_(document_, automata_, checks_),
      merger_(diagnostics_, document_, work_, checks_),
      complement_(document_, automata_, proof_),
      keywords_(diagnostics_, document_, options_),
      any_value_(rules_, layout_),
      scalars_(diagnostics_, rules_, limits_),
      arrays_(*this, combinators_, diagnostics_, rules_, layout_, document_, scalars_, limits_),
      others_(*this, combinators_, diagnostics_, layout_, document_, limits_),
      objects_(*this, combinators_, others_, diagnostics_, rules_, layout_, options_),
      combinators_(*this, diagnostics_, rules_, layout_, work_, document_, proof_, merger_, complement_, attempts_),
      values_(diagnostics_, layout_, scalars_, automata_, checks_),
      references_(*this, combinators_, diagnostics_, rules_, layout_, document_, attempts_) {}

std::optional<SchemaTranslation> Converter::run() {
  Expr top = references_.rule_for(&document_.root(), "", 0);
  if (diagnostics_.has_errors()) return std::nullopt;
  if (!top) {
    no_value_ = true;
    diagnostics_.error("", "the schema accepts no JSON value");
    return std::nullopt;
  }
  const bool flexible = options_.whitespace == JsonWhitespace::Flexible;
  SchemaTranslation out;
  out.cgram = fmt::format("(* Translated by cgram from the JSON Schema {} ({} whitespace{}). *)\n", file_.name(),
                          layout_.whitespace_name(),
                          options_.property_order == JsonPropertyOrder::Any ? ", members in any order" : "");
  out.offsets.emplace_back(0, 0);
  const std::string start_body = flexible ? "ws " + *top + " ws" : *top;
  out.cgram += fmt::format("start ::= {} ;\n", start_body);
  const std::vector<bool> used = rules_.reachable(start_body);
  const std::vector<Rule>& rules = rules_.all();
  for (size_t i = 0; i < rules.size(); ++i) {
    if (!used[i]) continue;
    out.offsets.emplace_back(static_cast<uint32_t>(out.cgram.size()), rules[i].schema_offset);
    out.cgram += fmt::format("{} ::= {} ;\n", rules[i].name, rules[i].body);
  }
  if (flexible)
    out.cgram += options_.max_whitespace ? fmt::format("ws ::= #'[ \\t\\n\\r]{{0,{}}}' ;\n", *options_.max_whitespace)
                                         : std::string("ws ::= #'[ \\t\\n\\r]*' ;\n");
  return out;
}

// Rules that the start rule uses, directly or not (alternatives that were
// dropped, a branch that matched nothing, leave rules nobody uses).
std::vector<bool> RuleSet::reachable(const std::string& start_body) const {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < rules_.size(); ++i) index[rules_[i].name] = i;
  std::vector<bool> used(rules_.size(), false);
  std::vector<const std::string*> pending{&start_body};
  while (!pending.empty()) {
    const std::string& body = *pending.back();
    pending.pop_back();
    for (size_t i = 0; i < body.size();) {
      const char c = body[i];
      if (c == '\'' || c == '"') {  // a literal or a regex: skip it
        for (++i; i < body.size() && body[i] != c; ++i)
          if (body[i] == '\\') ++i;
        ++i;
      } else if (isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end = i;
        while (end < body.size() && (isalnum(static_cast<unsigned char>(body[end])) || body[end] == '_')) ++end;
        auto found = index.find(body.substr(i, end - i));
        if (found != index.end() && !used[found->second]) {
          used[found->second] = true;
          pending.push_back(&rules_[found->second].body);
        }
        i = end;
      } else {
        ++i;
      }
    }
  }
  return used;
}

// --- Diagnostics -----------------------------------------------------------
uint32_t SchemaDiagnostics::offset_of(const std::string& pointer) const { return where_.offset_of(pointer); }

SourceRange SchemaDiagnostics::range_of(const std::string& pointer) const {
  SourceLoc at = file_.location_of(where_.offset_of(pointer));
  return {at, at};
}

void SchemaDiagnostics::error(const std::string& pointer, std::string message) {
  diags_.error(range_of(pointer), std::move(message));
}

void SchemaDiagnostics::note(const std::string& pointer, std::string message) {
  diags_.note(range_of(pointer), std::move(message));
}

void SchemaDiagnostics::permissive(const std::string& pointer, const std::string& message) {
  if (!first_time(pointer + "\n" + message)) return;
  if (strict_) error(pointer, message + " (--strict)");
  else diags_.warning(range_of(pointer), message);
}

bool SchemaDiagnostics::first_time(const std::string& key) {
  if (!warned_.insert(key).second) return false;
  warned_journal_.added(key);  // (taken back with a failed attempt)
  return true;
}

void SchemaDiagnostics::take_back(const Mark& mark) {
  diags_.rewind(mark.diagnostics);
  warned_journal_.take_back(mark.warned, warned_);
}

MergeWork::Step MergeWork::take_step() {
  if (++merge_steps_ <= merge_steps_cap_) return Step::Taken;
  return merge_steps_ == merge_steps_cap_ + 1 ? Step::FirstRefused : Step::Refused;
}

MergeWork::Caps MergeWork::halve() {
  const Caps before{merges_cap_, merge_steps_cap_, merged_bytes_cap_};
  auto half_left = [](auto used, auto cap) { return used >= cap ? cap : used + (cap - used) / 2; };
  merges_cap_ = half_left(merges_, merges_cap_);
  merge_steps_cap_ = half_left(merge_steps_, merge_steps_cap_);
  merged_bytes_cap_ = half_left(merged_bytes_, merged_bytes_cap_);
  return before;
}

void MergeWork::restore(const Caps& caps) {
  merges_cap_ = caps.merges;
  merge_steps_cap_ = caps.steps;
  merged_bytes_cap_ = caps.bytes;
}

Converter::Attempt Converter::begin_attempt() {
  ++attempts_;
  return {diagnostics_.mark(), combinators_.journal_mark(), references_.journal_mark(), work_.halve(),
          others_.key_budget()};
}

bool Converter::failed(const Attempt& attempt) {
  const bool failed = diagnostics_.errors_since(attempt.diagnostics);
  work_.restore(attempt.caps);
  if (failed) {
    diagnostics_.take_back(attempt.diagnostics);
    combinators_.take_back(attempt.merged_keys);
    references_.take_back(attempt.ref_keys);
    // (The key regexes the attempt wrote are left out of the grammar with
    // its rules, which nothing reaches.)
    others_.restore(attempt.keys);
  }
  if (--attempts_ == 0) {
    diagnostics_.forget_journal();
    combinators_.forget_journal();
    references_.forget_journal();
  }
  return failed;
}

const char* JsonLayout::whitespace_name() const {
  switch (whitespace_) {
    case JsonWhitespace::Compact: return "compact";
    case JsonWhitespace::Pretty: return "pretty";
    case JsonWhitespace::Flexible: return "flexible";
  }
  return "";
}

// --- Layout ----------------------------------------------------------------
// Rules depend on the depth only in pretty layout, up to kPrettyDepth + 1.
int JsonLayout::depth(int depth) const {
  return whitespace_ == JsonWhitespace::Pretty ? std::min(depth, kPrettyDepth + 1) : 0;
}

std::string JsonLayout::newline_indent(int depth) const {
  if (depth > kPrettyDepth) return "#'\\n *'";
  return quote_literal("\n" + std::string(static_cast<size_t>(2 * depth), ' '));
}

// After '{' or '[' (before the first member), between members, before the closing bracket.
std::string JsonLayout::open(int depth) const {
  switch (whitespace_) {
    case JsonWhitespace::Compact: return "";
    case JsonWhitespace::Flexible: return " ws";
    case JsonWhitespace::Pretty: return " " + newline_indent(depth + 1);
  }
  return "";
}

std::string JsonLayout::separator(int depth) const {
  switch (whitespace_) {
    case JsonWhitespace::Compact: return "','";
    case JsonWhitespace::Flexible: return "ws ',' ws";
    case JsonWhitespace::Pretty: return "',' " + newline_indent(depth + 1);
  }
  return "";
}

std::string JsonLayout::close(int depth) const {
  switch (whitespace_) {
    case JsonWhitespace::Compact: return "";
    case JsonWhitespace::Flexible: return "ws ";
    case JsonWhitespace::Pretty: return newline_indent(depth) + " ";
  }
  return "";
}

std::string JsonLayout::colon() const {
  switch (whitespace_) {
    case JsonWhitespace::Compact: return "':'";
    case JsonWhitespace::Flexible: return "ws ':' ws";
    case JsonWhitespace::Pretty: return "': '";
  }
  return "";
}

std::string JsonLayout::empty_container(char open_bracket) const {
  const std::string pair = open_bracket == '{' ? "{}" : "[]";
  if (whitespace_ == JsonWhitespace::Flexible) return fmt::format("'{}' ws '{}'", pair[0], pair[1]);
  return quote_literal(pair);
}

// '[' or '{', the items (already separated), the closing bracket.
std::string JsonLayout::container(char open_bracket, const std::string& items, int depth) const {
  const char close_bracket = open_bracket == '{' ? '}' : ']';
  return fmt::format("'{}'{} {} {}'{}'", open_bracket, open(depth), items, close(depth), close_bracket);
}

std::string RuleSet::add(std::string base, std::string body, const std::string& pointer) {
  for (char& c : base)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  if (base.empty() || isdigit(static_cast<unsigned char>(base[0]))) base = "r" + base;
  std::string name = base;
  for (int n = 2; used_names_.count(name) || name == "start" || name == "ws"; ++n) name = fmt::format("{}_{}", base, n);
  used_names_.insert(name);
  charge_memory(sizeof(Rule) + 2 * name.size() + body.size());
  rules_.push_back({name, std::move(body), diagnostics_.offset_of(pointer)});
  return name;
}

// A rule whose body is set later (recursion reaches it first).
size_t RuleSet::reserve(const std::string& base, const std::string& pointer) {
  add(base, "", pointer);
  return rules_.size() - 1;
}

// --- Any value (the schema `true`) -----------------------------------------
std::string AnyValueWriter::any_value(int depth) {
  depth = layout_.depth(depth);
  auto found = rules_by_depth_.find(depth);
  if (found != rules_by_depth_.end()) return found->second;
  const size_t index = rules_.reserve(depth ? fmt::format("any_value_{}", depth) : "any_value", "");
  rules_by_depth_[depth] = rules_[index].name;
  const std::string inner = any_value(depth + 1);
  const std::string key = fmt::format("#'\"(?:{})*\"'", json::any_string_char_regex());
  const std::string member = fmt::format("{} {} {}", key, layout_.colon(), inner);
  const std::string object = fmt::format("{} | {}", layout_.empty_container('{'),
                                         layout_.container('{', fmt::format("{0} ({1} {0})*", member, layout_.separator(depth)), depth));
  const std::string array = fmt::format("{} | {}", layout_.empty_container('['),
                                        layout_.container('[', fmt::format("{0} ({1} {0})*", inner, layout_.separator(depth)), depth));
  rules_[index].body = fmt::format("{} | {} | {} | {} | 'true' | 'false' | 'null'", object, array, key,
                                   "#'" + *json::number_regex(std::nullopt, std::nullopt, false) + "'");
  return rules_[index].name;
}

// --- Schemas ----------------------------------------------------------------
Expr Converter::value(const Node& node, int depth) {
  // The text's nesting is bounded before this runs (max_nesting). Each
  // $ref's target is translated inside the reference, so a chain of
  // definitions nests deeper than any of them (Kubernetes' are hundreds of
  // levels): that has a bound of its own, which the large stack the
  // translation runs on holds (tests/unit/syntax/ceiling_test.cpp, under
  // the sanitizers too).
  const uint32_t limit = std::max(std::min(limits_.max_nesting, kMaxNestingCeiling), kMaxReferenceNesting);
  if (++nesting_ > limit) {
    --nesting_;
    diagnostics_.error(node.pointer, fmt::format("the schema, followed through its references, nests deeper than {} levels here",
                                    limit));
    return std::nullopt;
  }
  Expr out = value_inner(node, depth);
  --nesting_;
  if (out) charge_memory(out->size());  // the translation as it grows
  return out;
}

Expr Converter::value_inner(const Node& node, int depth) {
  const Json& s = *node.schema;
  if (s.is_boolean()) return s.get<bool>() ? Expr(any_value_.any_value(depth)) : std::nullopt;
  if (!s.is_object()) {
    diagnostics_.error(node.pointer, "a schema must be an object or a boolean");
    return std::nullopt;
  }
  // Said without them where that is exact (and within the limits): `not`,
  // then `if` and dependencies (beside a $ref, once the reference is merged
  // or dropped, by the draft).
  std::optional<Json> said;
  if (s.contains("not")) said = not_said_otherwise(s);
  if (!said && (s.contains("if") || s.contains(kConditionals)) && document_.in_draft("if") && !s.contains("$ref"))
    said = complement_.conditional_said(s);
  if (!said && (s.contains("dependencies") || s.contains("dependentRequired") || s.contains("dependentSchemas")) &&
      !s.contains("$ref"))
    said = complement_.dependencies_said(s);
  if (said) {
    if (*said == false) return std::nullopt;  // no value: nothing else to say
    const Attempt attempt = begin_attempt();
    Expr e = combinators_.value_of_merged(*said, node.pointer, depth);
    if (!failed(attempt)) return e;
  }
  keywords_.check_keywords(node);
  if (s.contains("$ref")) return references_.reference(node, depth);
  if (s.contains("allOf")) return combinators_.all_of(node, depth);
  if (s.contains("anyOf") || s.contains("oneOf")) return combinators_.any_of(node, depth);
  if (s.contains("enum") || s.contains("const")) return values_.enumeration(node, depth);
  return by_type(node, depth);
}

void KeywordCheck::check_keywords(const Node& node) {
  const Json& s = *node.schema;
  if (s.contains("$schema") && !known_meta_schema(s["$schema"]))
    diagnostics_.error(node.pointer + "/$schema",
          fmt::format("'$schema' {}: only the JSON Schema drafts' own meta-schemas (2020-12, 2019-09, 07, 06, 04) "
                      "are known",
                      s["$schema"].dump()));
  for (const auto& [key, v] : s.items()) {
    const std::string at = node.pointer + "/" + pointer_token(key);
    if (!document_.in_draft(key)) continue;  // no keyword of the schema's draft: ignored
    switch (keyword_use(key)) {
      case KeywordUse::Annotation:
      case KeywordUse::Supported: break;
      case KeywordUse::NotAKeyword:
        // Ignored, as the specification says (an annotation: `readonly`,
        // `example`, OpenAPI's `x-…`); a near miss of a keyword gets a note.
        if (const std::optional<std::string> like = keyword_like(key))
          diagnostics_.note(at, fmt::format("'{}' is not a JSON Schema keyword and is ignored; did you mean '{}'?",
                                                key, *like));
        break;
      case KeywordUse::Refused:
        diagnostics_.error(at, fmt::format("'{}' is not supported", key));
        break;
      case KeywordUse::IgnoredWarning:
        if (key == "uniqueItems" && v == false) break;
        if (key == kConditionals)
          diagnostics_.permissive(node.pointer, "'if' beside another part's 'if' is not supported and is ignored: the grammar "
                                   "accepts more than the schema");
        else if (!ignorable_no_op(key, s))
          diagnostics_.permissive(at, fmt::format("'{}' is not supported and is ignored: the grammar accepts more than the schema",
                                     key));
        break;
    }
  }
  for (const char* key : {"exclusiveMinimum", "exclusiveMaximum"})
    if (s.contains(key) && s[key].is_boolean())
      diagnostics_.error(node.pointer + "/" + key, fmt::format("'{}' must be a number (draft 2020-12); a boolean is draft-04", key));
}

bool known_meta_schema(const Json& uri) {
  if (!uri.is_string()) return false;
  std::string u = uri.get<std::string>();
  if (u.ends_with("#")) u.pop_back();
  if (u.starts_with("https://")) u.erase(4, 1);
  static const std::set<std::string> known = {
      "http://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft/2019-09/schema",
      "http://json-schema.org/draft-07/schema", "http://json-schema.org/draft-06/schema",
      "http://json-schema.org/draft-04/schema"};
  return known.count(u) > 0;
}

// then/else without if, minContains/maxContains without contains: no effect.
// A schema with `not` said with the other keywords, where that is exact:
// `not: {}` (or true) accepts no value (false); `not: false` says nothing;
// `not: {"type": T}` takes T from the types; any other `not` whose
// complement can be written is merged with the rest (negation.cpp), except
// the strings' own (scalars.cpp). nullopt for any other `not`, which is
// ignored with a warning.
std::optional<Json> Converter::not_said_otherwise(const Json& s) {
  const Json& inner = s["not"];
  Json rest = s;
  rest.erase("not");
  if (inner.is_boolean()) return inner.get<bool>() ? Json(false) : rest;
  if (!inner.is_object()) return std::nullopt;
  if (!has_constraints(inner)) return Json(false);
  std::vector<std::string> keys;
  for (const auto& [key, unused] : inner.items())
    if (constrains(key) || key == "enum" || key == "const") keys.push_back(key);
  if (keys == std::vector<std::string>{"type"}) {
    const std::set<std::string> excluded = declared_types(inner);
    if (excluded.count("integer") && !excluded.count("number")) return std::nullopt;  // numbers that are no integer
    Json types = Json::array();
    for (const std::string& t : declared_types(s))
      if (!excluded.count(t) && !(t == "integer" && excluded.count("number"))) types.push_back(t);
    if (types.empty()) return Json(false);
    rest["type"] = types;
    return rest;
  }
  if (s.contains("type") && declared_types(s).empty()) return Json(false);  // (no value: nothing else to say)
  // Said by the strings (scalars.cpp) where nothing but strings is allowed
  // (`not: {pattern}` fails every value of another type).
  if (excluded_strings(s) && only_strings(s)) return std::nullopt;
  if (std::optional<Json> failing = complement_.negation(inner, 0, {&rest})) return Json{{"allOf", Json::array({rest, *failing})}};
  return std::nullopt;
}

// propertyNames says nothing (it accepts every string, or the schema no
// object), or the object's grammar says it (objects.cpp: no name is
// listed, so the keys are its strings).
bool KeywordCheck::property_names_said(const Json& s) const {
  const Json* names = document_.followed(s["propertyNames"]);
  if (!names) return false;
  if (*names == true || (names->is_object() && !has_constraints(*names))) return true;
  if (names->is_object() && names->size() == 1 && names->contains("type") && declared_types(*names).count("string"))
    return true;
  if (!declared_types(s).count("object")) return true;
  return !s.contains("properties") && !s.contains("required") && !s.contains("patternProperties");
}

size_t listed_names(const Json& s) {
  std::set<std::string> names;
  if (s.contains("properties") && s["properties"].is_object())
    for (const auto& [name, unused] : s["properties"].items()) names.insert(name);
  if (s.contains("required") && s["required"].is_array())
    for (const Json& r : s["required"])
      if (r.is_string()) names.insert(r.get<std::string>());
  return names.size();
}

bool only_strings(const Json& s) {
  const std::set<std::string> types = declared_types(s);
  return types.empty() || types == std::set<std::string>{"string"};
}

bool KeywordCheck::ignorable_no_op(const std::string& key, const Json& s) const {
  if ((key == "then" || key == "else") && !s.contains("if")) return true;
  if ((key == "minContains" || key == "maxContains") && !s.contains("contains")) return true;
  // Said by the numbers' spelling, or their digits' remainder (scalars.cpp); beside values, not checked.
  if (key == "multipleOf" && (power_of_ten_step(s) || decimal_step(s)) && !s.contains("enum") && !s.contains("const"))
    return true;
  if (key == "propertyNames" && property_names_said(s)) return true;
  if ((key == "contains" || key == "minContains") && simple_contains(s) && !s.contains("enum") && !s.contains("const") &&
      document_.in_draft("contains") && !s.contains(kContains))
    return true;  // said by the array's grammar (arrays.cpp)
  if (key == "not" && excluded_strings(s) && only_strings(s)) return true;  // said by the strings (scalars.cpp)
  // Said by the array's grammar (arrays.cpp); beside allOf, the merged
  // schema is checked again, and says whether it is.
  if (key == "uniqueItems" && (unique_item_values(s) || s.contains("allOf"))) return true;
  // Said exactly by the object's grammar (objects.cpp).
  if ((key == "minProperties" || key == "maxProperties") && s[key].is_number_unsigned() &&
      (s[key].get<uint64_t>() <= 1 || ObjectWriter::counted_members(s, listed_names(s), options_.property_order)))
    return true;
  return false;
}

}  // namespace cgram::json_schema_detail

namespace cgram {

using json_schema_detail::Converter;
using json_schema_detail::Json;
using json_schema_detail::JsonLocator;

std::optional<JsonWhitespace> parse_json_whitespace(std::string_view name) {
  if (name == "compact") return JsonWhitespace::Compact;
  if (name == "pretty") return JsonWhitespace::Pretty;
  if (name == "flexible") return JsonWhitespace::Flexible;
  return std::nullopt;
}

std::optional<JsonPropertyOrder> parse_json_property_order(std::string_view name) {
  if (name == "schema") return JsonPropertyOrder::Schema;
  if (name == "any") return JsonPropertyOrder::Any;
  return std::nullopt;
}

uint32_t SchemaTranslation::schema_offset(uint32_t offset) const { return original_offset(offsets, offset); }

bool is_json_schema_path(std::string_view path) { return path.ends_with(".json"); }

std::optional<SchemaTranslation> translate_json_schema(const SourceFile& file, Diagnostics& diags,
                                                       const JsonSchemaOptions& options, const SyntaxLimits& limits,
                                                       bool* no_value) {
  if (no_value) *no_value = false;
  const std::string_view text = file.text();
  if (text.size() > limits.max_source_bytes) {
    diags.error_at_file(fmt::format("schema file is {} bytes; the limit is {} bytes", text.size(), limits.max_source_bytes));
    return std::nullopt;
  }
  // Nesting is bounded before anything recursive reads the text.
  uint32_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limits.max_nesting) {
        SourceLoc at = file.location_of(static_cast<uint32_t>(i));
        diags.error({at, at}, fmt::format("the schema nests deeper than {} levels here", limits.max_nesting));
        return std::nullopt;
      }
    } else if (c == '}' || c == ']') {
      if (depth) --depth;
    }
  }
  MemoryStage stage("translating the JSON Schema");
  // nlohmann's tree: about 16 bytes of nodes for each byte of JSON text.
  charge_memory(16 * text.size());
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    const uint32_t at = static_cast<uint32_t>(std::min<size_t>(e.byte ? e.byte - 1 : 0, text.size()));
    SourceLoc loc = file.location_of(at);
    std::string message = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while parsing value - …"
    const size_t dash = message.find(" - ");
    diags.error({loc, loc}, "invalid JSON: " + (dash == std::string::npos ? message : message.substr(dash + 3)));
    return std::nullopt;
  } catch (const Json::exception& e) {
    // A number too large for a double, say: nlohmann names no position.
    std::string message = e.what();
    const size_t bracket = message.find("] ");
    diags.error_at_file("invalid JSON: " + (bracket == std::string::npos ? message : message.substr(bracket + 2)));
    return std::nullopt;
  }
  JsonLocator where(text);
  Converter converter(root, where, file, diags, options, limits);
  auto out = converter.run();
  if (no_value) *no_value = converter.accepts_no_value();
  return out;
}

namespace {

// Rule names in a .cgram text (not in literals, regexes, comments, nor the
// any! and except! keywords) renamed by `rename`.
std::string rename_rules(std::string_view text, const std::function<std::string(const std::string&)>& rename) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\'' || c == '"' || (c == '#' && i + 1 < text.size() && (text[i + 1] == '\'' || text[i + 1] == '"'))) {
      const size_t open = c == '#' ? i + 1 : i;
      size_t j = open + 1;
      while (j < text.size() && text[j] != text[open]) j += text[j] == '\\' ? 2 : 1;
      out.append(text.substr(i, j + 1 - i));
      i = j + 1;
    } else if (c == '(' && i + 1 < text.size() && text[i + 1] == '*') {
      const size_t end = text.find("*)", i + 2);
      const size_t stop = end == std::string_view::npos ? text.size() : end + 2;
      out.append(text.substr(i, stop - i));
      i = stop;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      const std::string word(text.substr(i, j - i));
      out += j < text.size() && text[j] == '!' ? word : rename(word);
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

}  // namespace

std::vector<EmbeddedRule> embed_schema_rules(const SchemaTranslation& translation, const std::string& start_name,
                                             const std::map<std::string, std::string>& shared,
                                             const std::function<std::string(const std::string&)>& unique) {
  std::map<std::string, std::string> renamed = shared;
  renamed[translation.start] = start_name;
  auto rename = [&](const std::string& name) {
    auto [it, inserted] = renamed.emplace(name, std::string());
    if (inserted) it->second = unique(start_name + "_" + name);
    return it->second;
  };
  std::vector<EmbeddedRule> out;
  const std::string& text = translation.cgram;
  for (size_t line = 0; line < text.size();) {
    size_t end = text.find('\n', line);
    if (end == std::string::npos) end = text.size();
    const std::string_view content(text.data() + line, end - line);
    const size_t name_end = content.find(' ');
    const bool skipped = content.starts_with("(*") ||
                         (name_end != std::string_view::npos && shared.count(std::string(content.substr(0, name_end))));
    if (!skipped) out.push_back({rename_rules(content, rename), translation.schema_offset(static_cast<uint32_t>(line))});
    line = end + 1;
  }
  return out;
}

}  // namespace cgram

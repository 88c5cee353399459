#include "json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cgram_text.h"
#include "json_text.h"
#include "memory_budget.h"
#include "regex.h"

namespace cgram {
namespace {

using Json = nlohmann::ordered_json;
// A grammar expression (.cgram text); nullopt when no value matches.
using Expr = std::optional<std::string>;

// A key as a JSON pointer token (RFC 6901: ~ and / escaped).
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

enum class KeywordUse { Annotation, Supported, IgnoredWarning, Refused };

KeywordUse keyword_use(const std::string& key) {
  static const std::set<std::string> annotations = {
      "$schema", "$id", "$comment", "$anchor", "$defs", "definitions", "$vocabulary", "title", "description",
      "default", "examples", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType",
      "contentSchema"};
  static const std::set<std::string> supported = {
      "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
      "additionalItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength",
      "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  static const std::set<std::string> refused = {"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"};
  if (annotations.count(key)) return KeywordUse::Annotation;
  if (supported.count(key)) return KeywordUse::Supported;
  if (refused.count(key)) return KeywordUse::Refused;
  return KeywordUse::IgnoredWarning;
}

// Keywords that constrain a value whatever its type (enum and const aside).
bool constrains(const std::string& key) {
  return keyword_use(key) == KeywordUse::Supported || keyword_use(key) == KeywordUse::IgnoredWarning;
}

// Whether a schema object says anything about the value (beyond annotations).
bool has_constraints(const Json& s) {
  for (const auto& [key, unused] : s.items())
    if (constrains(key) || key == "enum" || key == "const") return true;
  return false;
}

const std::vector<std::string>& all_types() {
  static const std::vector<std::string> types = {"null", "boolean", "object", "array", "string", "number"};
  return types;
}

// Types a value of `type` may have; "number" includes "integer".
bool type_allows(const std::set<std::string>& types, const std::string& t) {
  return types.count(t) || (t == "integer" && types.count("number"));
}

std::string json_type_of(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::number_float: {
      const double d = v.get<double>();
      return std::isfinite(d) && std::trunc(d) == d ? "integer" : "number";
    }
    default: return "integer";
  }
}

// JSON Schema equality: numbers by value (1 equals 1.0), objects unordered.
bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    auto da = json::parse_decimal(a.dump()), db = json::parse_decimal(b.dump());
    return da && db && json::compare(*da, *db) == 0;
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items())
      if (!b.contains(k) || !json_equal(v, b[k])) return false;
    return true;
  }
  return a == b;
}


struct Rule {
  std::string name;
  std::string body;
  uint32_t schema_offset = 0;
};

// A schema met while converting: its JSON and where it is (its pointer, or
// that of the schema it was merged from).
struct Node {
  const Json* schema;
  std::string pointer;
};

class Converter {
 public:
  Converter(const Json& root, const JsonLocator& where, const SourceFile& file, Diagnostics& diags,
            const JsonSchemaOptions& options, const SyntaxLimits& limits)
      : root_(root), where_(where), file_(file), diags_(diags), options_(options), limits_(limits) {}

  std::optional<SchemaTranslation> run() {
    Expr top = rule_for(&root_, "", 0);
    if (diags_.has_errors()) return std::nullopt;
    if (!top) {
      error("", "the schema accepts no JSON value");
      return std::nullopt;
    }
    const bool flexible = options_.whitespace == JsonWhitespace::Flexible;
    SchemaTranslation out;
    out.cgram = fmt::format("(* Translated by cgram from the JSON Schema {} ({} whitespace). *)\n", file_.name(),
                            whitespace_name());
    out.offsets.emplace_back(0, 0);
    const std::string start_body = flexible ? "ws " + *top + " ws" : *top;
    out.cgram += fmt::format("start ::= {} ;\n", start_body);
    const std::vector<bool> used = reachable(start_body);
    for (size_t i = 0; i < rules_.size(); ++i) {
      if (!used[i]) continue;
      out.offsets.emplace_back(static_cast<uint32_t>(out.cgram.size()), rules_[i].schema_offset);
      out.cgram += fmt::format("{} ::= {} ;\n", rules_[i].name, rules_[i].body);
    }
    if (flexible)
      out.cgram += options_.max_whitespace ? fmt::format("ws ::= #'[ \\t\\n\\r]{{0,{}}}' ;\n", *options_.max_whitespace)
                                           : std::string("ws ::= #'[ \\t\\n\\r]*' ;\n");
    return out;
  }

 private:
  // Rules that the start rule uses, directly or not (alternatives that were
  // dropped, a branch that matched nothing, leave rules nobody uses).
  std::vector<bool> reachable(const std::string& start_body) const {
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
  SourceRange range_of(const std::string& pointer) const {
    SourceLoc at = file_.location_of(where_.offset_of(pointer));
    return {at, at};
  }
  void error(const std::string& pointer, std::string message) { diags_.error(range_of(pointer), std::move(message)); }
  // Something ignored that makes the grammar accept more than the schema.
  void permissive(const std::string& pointer, const std::string& message) {
    const std::string key = pointer + "\n" + message;
    if (!warned_.insert(key).second) return;
    if (options_.strict) error(pointer, message + " (--strict)");
    else diags_.warning(range_of(pointer), message);
  }

  const char* whitespace_name() const {
    switch (options_.whitespace) {
      case JsonWhitespace::Compact: return "compact";
      case JsonWhitespace::Pretty: return "pretty";
      case JsonWhitespace::Flexible: return "flexible";
    }
    return "";
  }

  // --- Layout ----------------------------------------------------------------
  // Rules depend on the depth only in pretty layout, up to kPrettyDepth + 1.
  int layout_depth(int depth) const {
    return options_.whitespace == JsonWhitespace::Pretty ? std::min(depth, kPrettyDepth + 1) : 0;
  }
  std::string newline_indent(int depth) const {
    if (depth > kPrettyDepth) return "#'\\n *'";
    return quote_literal("\n" + std::string(static_cast<size_t>(2 * depth), ' '));
  }
  // After '{' or '[' (before the first member), between members, before the closing bracket.
  std::string open(int depth) const {
    switch (options_.whitespace) {
      case JsonWhitespace::Compact: return "";
      case JsonWhitespace::Flexible: return " ws";
      case JsonWhitespace::Pretty: return " " + newline_indent(depth + 1);
    }
    return "";
  }
  std::string separator(int depth) const {
    switch (options_.whitespace) {
      case JsonWhitespace::Compact: return "','";
      case JsonWhitespace::Flexible: return "ws ',' ws";
      case JsonWhitespace::Pretty: return "',' " + newline_indent(depth + 1);
    }
    return "";
  }
  std::string close(int depth) const {
    switch (options_.whitespace) {
      case JsonWhitespace::Compact: return "";
      case JsonWhitespace::Flexible: return "ws ";
      case JsonWhitespace::Pretty: return newline_indent(depth) + " ";
    }
    return "";
  }
  std::string colon() const {
    switch (options_.whitespace) {
      case JsonWhitespace::Compact: return "':'";
      case JsonWhitespace::Flexible: return "ws ':' ws";
      case JsonWhitespace::Pretty: return "': '";
    }
    return "";
  }
  std::string empty_container(char open_bracket) const {
    const std::string pair = open_bracket == '{' ? "{}" : "[]";
    if (options_.whitespace == JsonWhitespace::Flexible) return fmt::format("'{}' ws '{}'", pair[0], pair[1]);
    return quote_literal(pair);
  }
  // '[' or '{', the items (already separated), the closing bracket.
  std::string container(char open_bracket, const std::string& items, int depth) const {
    const char close_bracket = open_bracket == '{' ? '}' : ']';
    return fmt::format("'{}'{} {} {}'{}'", open_bracket, open(depth), items, close(depth), close_bracket);
  }

  std::string add_rule(std::string base, std::string body, const std::string& pointer) {
    for (char& c : base)
      if (!isalnum(static_cast<unsigned char>(c))) c = '_';
    if (base.empty() || isdigit(static_cast<unsigned char>(base[0]))) base = "r" + base;
    std::string name = base;
    for (int n = 2; used_names_.count(name) || name == "start" || name == "ws"; ++n) name = fmt::format("{}_{}", base, n);
    used_names_.insert(name);
    charge_memory(sizeof(Rule) + 2 * name.size() + body.size());
    rules_.push_back({name, std::move(body), where_.offset_of(pointer)});
    return name;
  }
  // A rule whose body is set later (recursion reaches it first).
  size_t reserve_rule(const std::string& base, const std::string& pointer) {
    add_rule(base, "", pointer);
    return rules_.size() - 1;
  }

  // --- Any value (the schema `true`) -----------------------------------------
  std::string any_value(int depth) {
    depth = layout_depth(depth);
    auto found = any_rules_.find(depth);
    if (found != any_rules_.end()) return found->second;
    const size_t index = reserve_rule(depth ? fmt::format("any_value_{}", depth) : "any_value", "");
    any_rules_[depth] = rules_[index].name;
    const std::string inner = any_value(depth + 1);
    const std::string key = fmt::format("#'\"(?:{})*\"'", json::any_string_char_regex());
    const std::string member = fmt::format("{} {} {}", key, colon(), inner);
    const std::string object = fmt::format("{} | {}", empty_container('{'),
                                           container('{', fmt::format("{0} ({1} {0})*", member, separator(depth)), depth));
    const std::string array = fmt::format("{} | {}", empty_container('['),
                                          container('[', fmt::format("{0} ({1} {0})*", inner, separator(depth)), depth));
    rules_[index].body = fmt::format("{} | {} | {} | {} | 'true' | 'false' | 'null'", object, array, key,
                                     "#'" + *json::number_regex(std::nullopt, std::nullopt, false) + "'");
    return rules_[index].name;
  }

  // --- Schemas ----------------------------------------------------------------
  Expr value(const Node& node, int depth) {
    if (++nesting_ > limits_.max_nesting) {
      --nesting_;
      error(node.pointer, fmt::format("the schema nests deeper than {} levels here", limits_.max_nesting));
      return std::nullopt;
    }
    Expr out = value_inner(node, depth);
    --nesting_;
    if (out) charge_memory(out->size());  // the translation as it grows
    return out;
  }

  Expr value_inner(const Node& node, int depth) {
    const Json& s = *node.schema;
    if (s.is_boolean()) return s.get<bool>() ? Expr(any_value(depth)) : std::nullopt;
    if (!s.is_object()) {
      error(node.pointer, "a schema must be an object or a boolean");
      return std::nullopt;
    }
    check_keywords(node);
    if (s.contains("$ref")) return reference(node, depth);
    if (s.contains("allOf")) return all_of(node, depth);
    if (s.contains("anyOf") || s.contains("oneOf")) return any_of(node, depth);
    if (s.contains("enum") || s.contains("const")) return enumeration(node, depth);
    return by_type(node, depth);
  }

  void check_keywords(const Node& node) {
    const Json& s = *node.schema;
    if (s.contains("$schema") && !known_meta_schema(s["$schema"]))
      error(node.pointer + "/$schema",
            fmt::format("'$schema' {}: only the JSON Schema drafts' own meta-schemas (2020-12, 2019-09, 07, 06, 04) "
                        "are known",
                        s["$schema"].dump()));
    for (const auto& [key, v] : s.items()) {
      const std::string at = node.pointer + "/" + pointer_token(key);
      switch (keyword_use(key)) {
        case KeywordUse::Annotation:
        case KeywordUse::Supported: break;
        case KeywordUse::Refused:
          error(at, fmt::format("'{}' is not supported", key));
          break;
        case KeywordUse::IgnoredWarning:
          if (key == "patternProperties" && s.contains("additionalProperties") && s["additionalProperties"] != true)
            error(at, "'patternProperties' with 'additionalProperties' is not supported");
          else if (key == "uniqueItems" && v == false) break;
          else if (!ignorable_no_op(key, s))
            permissive(at, fmt::format("'{}' is not supported and is ignored: the grammar accepts more than the schema",
                                       key));
          break;
      }
    }
    for (const char* key : {"exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(key) && s[key].is_boolean())
        error(node.pointer + "/" + key, fmt::format("'{}' must be a number (draft 2020-12); a boolean is draft-04", key));
  }
  static bool known_meta_schema(const Json& uri) {
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
  static bool ignorable_no_op(const std::string& key, const Json& s) {
    if ((key == "then" || key == "else") && !s.contains("if")) return true;
    if ((key == "minContains" || key == "maxContains") && !s.contains("contains")) return true;
    return false;
  }

  // --- $ref -------------------------------------------------------------------
  const Json* resolve(const std::string& ref, const std::string& at, std::string& target_pointer) {
    if (ref.empty() || ref[0] != '#') {
      error(at, fmt::format("'$ref' to '{}': only references inside the schema ('#…') are supported", ref));
      return nullptr;
    }
    std::string pointer = ref.substr(1);
    // Percent-decoding of the URI fragment.
    std::string decoded;
    for (size_t i = 0; i < pointer.size(); ++i) {
      if (pointer[i] == '%' && i + 2 < pointer.size() && isxdigit(static_cast<unsigned char>(pointer[i + 1])) &&
          isxdigit(static_cast<unsigned char>(pointer[i + 2]))) {
        decoded += static_cast<char>(std::stoi(pointer.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        decoded += pointer[i];
      }
    }
    if (!decoded.empty() && decoded[0] != '/') {
      const Json* anchored = find_anchor(root_, decoded, "", target_pointer);
      if (!anchored) error(at, fmt::format("'$ref': no '$anchor' named '{}' in the schema", decoded));
      return anchored;
    }
    try {
      const Json* target = &root_.at(Json::json_pointer(decoded));
      target_pointer = decoded;
      return target;
    } catch (const std::exception&) {
      error(at, fmt::format("'$ref': '{}' names nothing in the schema", ref));
      return nullptr;
    }
  }
  const Json* find_anchor(const Json& s, const std::string& name, const std::string& pointer, std::string& found) {
    if (s.is_object()) {
      if (s.contains("$anchor") && s["$anchor"] == name) {
        found = pointer;
        return &s;
      }
      for (const auto& [k, v] : s.items())
        if (const Json* hit = find_anchor(v, name, pointer + "/" + pointer_token(k), found)) return hit;
    } else if (s.is_array()) {
      for (size_t i = 0; i < s.size(); ++i)
        if (const Json* hit = find_anchor(s[i], name, pointer + "/" + std::to_string(i), found)) return hit;
    }
    return nullptr;
  }

  Expr reference(const Node& node, int depth) {
    const Json& s = *node.schema;
    const std::string at = node.pointer + "/$ref";
    if (!s["$ref"].is_string()) {
      error(at, "'$ref' must be a string");
      return std::nullopt;
    }
    std::string target_pointer;
    const Json* target = resolve(s["$ref"].get<std::string>(), at, target_pointer);
    if (!target) return std::nullopt;
    // Other constraints beside $ref apply too (2020-12): merge them.
    Json rest = s;
    rest.erase("$ref");
    if (has_constraints(rest)) return value_of_merged(Json{{"allOf", Json::array({*target, rest})}}, node.pointer, depth);
    return rule_for(target, target_pointer, depth);
  }

  // The rule for the schema at `pointer` (one for each depth in pretty layout).
  Expr rule_for(const Json* target, const std::string& pointer, int depth) {
    const std::pair<std::string, int> key{pointer, layout_depth(depth)};
    auto found = ref_rules_.find(key);
    if (found != ref_rules_.end()) return found->second;
    std::string base = pointer.substr(pointer.rfind('/') + 1);
    if (base.empty()) base = "root";
    if (key.second) base += fmt::format("_{}", key.second);
    const size_t index = reserve_rule(base, pointer);
    const std::string name = rules_[index].name;
    ref_rules_[key] = name;
    Expr body = value({target, pointer}, depth);
    // No value: the rule must not be used (.cgram has no empty language).
    if (!body) ref_rules_[key] = std::nullopt;
    else rules_[index].body = *body;
    return body ? Expr(name) : std::nullopt;
  }

  // --- allOf -------------------------------------------------------------------
  // A merged schema is converted once per layout depth. A recursive schema
  // merged with another meets the same merge again inside itself: that
  // meeting becomes a rule (as a recursive $ref does), so the translation
  // stays finite and linear instead of unrolling the recursion to the
  // nesting limit. A long translation met again is named too, so the text
  // never repeats it.
  Expr value_of_merged(const Json& merged_source, const std::string& pointer, int depth) {
    if (++merges_ > kMaxMerges) {
      error(pointer, "allOf: too many schemas to merge (a recursive schema merged with another)");
      return std::nullopt;
    }
    std::string dumped = merged_source.dump();
    charge_memory(3 * dumped.size() + sizeof(Json) * 4);  // the key, the copy converted, their nodes
    // Work: every merge copies and writes out what it merges.
    merged_bytes_ += dumped.size();
    if (merged_bytes_ > kMaxMergedBytes) {
      error(pointer, fmt::format("allOf: the schemas merged (allOf, and $ref beside other keywords) come to more "
                                 "than {} MiB of JSON in all (the limit): the schema repeats large definitions in "
                                 "its merges",
                                 kMaxMergedBytes >> 20));
      return std::nullopt;
    }
    auto [entry, inserted] = merged_rules_.try_emplace({std::move(dumped), layout_depth(depth)});
    Merged& merged = entry->second;
    if (!inserted) {
      const bool name_it = merged.converting || (merged.expr && merged.expr->size() > kInlineBytes);
      if (!name_it) return merged.expr;
      if (!merged.rule) {
        merged.rule = reserve_rule(pointer.substr(pointer.rfind('/') + 1), pointer);
        if (!merged.converting) rules_[*merged.rule].body = *merged.expr;  // else set when it is done
      }
      return rules_[*merged.rule].name;
    }
    merged_.push_back(std::make_unique<Json>(merged_source));
    merged.converting = true;
    Expr body = value({merged_.back().get(), pointer}, depth);
    merged.converting = false;
    merged.expr = body;
    if (!merged.rule) return body;
    if (!body) {  // recursion into a schema with no value: .cgram has no empty language
      error(pointer, "allOf: this recursive merge of schemas accepts no JSON value");
      return std::nullopt;
    }
    rules_[*merged.rule].body = *body;
    return rules_[*merged.rule].name;
  }

  Expr all_of(const Node& node, int depth) {
    const Json& s = *node.schema;
    const std::string at = node.pointer + "/allOf";
    if (!s["allOf"].is_array() || s["allOf"].empty()) {
      error(at, "'allOf' must be a non-empty array");
      return std::nullopt;
    }
    Json merged = s;
    merged.erase("allOf");
    std::string pointer = node.pointer;
    for (size_t i = 0; i < s["allOf"].size(); ++i) {
      std::string part_pointer = at + "/" + std::to_string(i);
      const Json* part = &s["allOf"][i];
      // A part that is a reference is merged with what it refers to.
      for (int hops = 0; part->is_object() && part->contains("$ref") && hops < 64; ++hops) {
        Json rest = *part;
        rest.erase("$ref");
        std::string target_pointer;
        const Json* target = resolve((*part)["$ref"].is_string() ? (*part)["$ref"].get<std::string>() : "", part_pointer,
                                     target_pointer);
        if (!target) return std::nullopt;
        if (!rest.empty()) {
          auto m = merge(merged, rest, part_pointer);
          if (!m) return std::nullopt;
          merged = std::move(*m);
        }
        part = target;
        part_pointer = target_pointer;
      }
      auto m = merge(merged, *part, part_pointer);
      if (!m) return std::nullopt;
      merged = std::move(*m);
    }
    return value_of_merged(merged, pointer, depth);
  }

  // Both schemas at once, as one schema; nullopt (after an error) where they do not merge.
  std::optional<Json> merge(const Json& a, const Json& b, const std::string& at) {
    if (b.is_boolean()) return b.get<bool>() ? a : Json(false);
    if (a.is_boolean()) return a.get<bool>() ? b : Json(false);
    if (!b.is_object()) {
      error(at, "a schema must be an object or a boolean");
      return std::nullopt;
    }
    if (b.contains("allOf") || b.contains("$ref")) {
      // Nested: merged when the result is converted.
      Json out = a;
      Json parts = out.contains("allOf") ? out["allOf"] : Json::array();
      out.erase("allOf");
      parts.push_back(b);
      out["allOf"] = parts;
      return out;
    }
    Json out = a;
    for (const auto& [key, v] : b.items()) {
      if (!out.contains(key)) {
        out[key] = v;
        continue;
      }
      Json& mine = out[key];
      if (key == "type") {
        auto as_set = [](const Json& t) {
          std::set<std::string> s;
          if (t.is_string()) s.insert(t.get<std::string>());
          else if (t.is_array())
            for (const Json& e : t)
              if (e.is_string()) s.insert(e.get<std::string>());
          return s;
        };
        const auto ta = as_set(mine), tb = as_set(v);
        Json both = Json::array();
        for (const char* t : {"null", "boolean", "object", "array", "string", "number", "integer"})
          if (type_allows(ta, t) && type_allows(tb, t)) both.push_back(t);
        mine = both;
      } else if (key == "required") {
        for (const Json& name : v)
          if (std::find(mine.begin(), mine.end(), name) == mine.end()) mine.push_back(name);
      } else if (key == "minimum" || key == "exclusiveMinimum" || key == "minLength" || key == "minItems") {
        if (greater(v, mine)) mine = v;
      } else if (key == "maximum" || key == "exclusiveMaximum" || key == "maxLength" || key == "maxItems") {
        if (greater(mine, v)) mine = v;
      } else if (key == "enum" || key == "const") {
        const Json va = key == "const" ? Json::array({mine}) : mine, vb = key == "const" ? Json::array({v}) : v;
        Json both = Json::array();
        for (const Json& x : va)
          for (const Json& y : vb)
            if (json_equal(x, y)) both.push_back(x);
        out.erase(key);
        out["enum"] = both;
      } else if (key == "properties" || key == "additionalProperties") {
        // Handled below, together.
      } else if (key == "prefixItems" || key == "items") {
        // Handled below, together.
      } else if (key == "anyOf" || key == "oneOf") {
        // (∪A) ∩ (∪B) = ∪ (a ∩ b).
        Json pairs = Json::array();
        for (const Json& x : mine)
          for (const Json& y : v) pairs.push_back(Json{{"allOf", Json::array({x, y})}});
        mine = pairs;
        if (key == "oneOf") permissive(at, "'oneOf' merged with another 'oneOf' is read as 'anyOf'");
      } else if (keyword_use(key) == KeywordUse::Annotation) {
      } else if (!json_equal(mine, v)) {
        error(at, fmt::format("allOf: two different '{}' cannot be merged", key));
        return std::nullopt;
      }
    }
    merge_properties(a, b, out);
    merge_items(a, b, out);
    return out;
  }
  static bool greater(const Json& x, const Json& y) {
    if (!x.is_number() || !y.is_number()) return false;
    auto dx = json::parse_decimal(x.dump()), dy = json::parse_decimal(y.dump());
    return dx && dy && json::compare(*dx, *dy) > 0;
  }
  // A property's schema in `s`: its own, or additionalProperties (true when absent).
  static Json property_schema(const Json& s, const std::string& name) {
    if (s.contains("properties") && s["properties"].is_object() && s["properties"].contains(name))
      return s["properties"][name];
    return s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
  }
  static Json both(const Json& x, const Json& y) {
    if (x == true) return y;
    if (y == true) return x;
    return Json{{"allOf", Json::array({x, y})}};
  }
  static void merge_properties(const Json& a, const Json& b, Json& out) {
    if (!a.contains("properties") && !b.contains("properties") && !a.contains("additionalProperties") &&
        !b.contains("additionalProperties"))
      return;
    Json props = Json::object();
    for (const Json* s : {&a, &b})
      if (s->contains("properties") && (*s)["properties"].is_object())
        for (const auto& [name, v] : (*s)["properties"].items())
          if (!props.contains(name)) props[name] = both(property_schema(a, name), property_schema(b, name));
    out["properties"] = props;
    const Json extra = both(a.contains("additionalProperties") ? a["additionalProperties"] : Json(true),
                            b.contains("additionalProperties") ? b["additionalProperties"] : Json(true));
    if (extra == true) out.erase("additionalProperties");
    else out["additionalProperties"] = extra;
  }
  static Json item_schema(const Json& s, size_t i) {
    if (s.contains("prefixItems") && s["prefixItems"].is_array() && i < s["prefixItems"].size())
      return s["prefixItems"][i];
    return s.contains("items") ? s["items"] : Json(true);
  }
  static void merge_items(const Json& a, const Json& b, Json& out) {
    auto prefix = [](const Json& s) {
      return s.contains("prefixItems") && s["prefixItems"].is_array() ? s["prefixItems"].size() : 0;
    };
    const size_t n = std::max(prefix(a), prefix(b));
    if (n) {
      Json items = Json::array();
      for (size_t i = 0; i < n; ++i) items.push_back(both(item_schema(a, i), item_schema(b, i)));
      out["prefixItems"] = items;
    }
    if (a.contains("items") || b.contains("items")) {
      const Json rest = both(a.contains("items") ? a["items"] : Json(true), b.contains("items") ? b["items"] : Json(true));
      if (rest == true) out.erase("items");
      else out["items"] = rest;
    }
  }

  // --- anyOf, oneOf -------------------------------------------------------------
  Expr any_of(const Node& node, int depth) {
    const Json& s = *node.schema;
    const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
    const std::string at = node.pointer + "/" + key;
    if (!s[key].is_array() || s[key].empty()) {
      error(at, fmt::format("'{}' must be a non-empty array", key));
      return std::nullopt;
    }
    // Everything else (a oneOf beside an anyOf too) constrains each branch.
    Json rest = s;
    rest.erase(key);
    const bool others = has_constraints(rest);
    if (std::string(key) == "oneOf" && !disjoint(s[key])) {
      permissive(at,
                 "'oneOf' is read as 'anyOf': its alternatives may overlap, and a value that matches two of them "
                 "is accepted");
    }
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < s[key].size(); ++i) {
      const std::string branch_pointer = at + "/" + std::to_string(i);
      Expr branch = others ? value_of_merged(Json{{"allOf", Json::array({rest, s[key][i]})}}, branch_pointer, depth)
                           : value({&s[key][i], branch_pointer}, depth);
      if (branch && std::find(alternatives.begin(), alternatives.end(), *branch) == alternatives.end())
        alternatives.push_back(*branch);
    }
    return alternation(alternatives);
  }
  static Expr alternation(const std::vector<std::string>& alternatives) {
    if (alternatives.empty()) return std::nullopt;
    if (alternatives.size() == 1) return alternatives[0];
    std::string out = "(";
    for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
    return out + ")";
  }
  // Whether no value can match two alternatives: their types differ, or
  // they are objects that require one property with different constants.
  bool disjoint(const Json& alternatives) {
    std::vector<std::set<std::string>> types;
    for (const Json& a : alternatives) types.push_back(possible_types(a));
    bool by_type = true;
    for (size_t i = 0; i < types.size(); ++i)
      for (size_t j = i + 1; j < types.size(); ++j)
        for (const std::string& t : types[i])
          if (types[j].count(t) || (t == "number" && types[j].count("integer")) ||
              (t == "integer" && types[j].count("number")))
            by_type = false;
    if (by_type) return true;
    // A discriminating property: required in each, with constants no two share.
    if (!alternatives[0].is_object() || !alternatives[0].contains("properties")) return false;
    for (const auto& [name, unused] : alternatives[0]["properties"].items()) {
      std::vector<Json> seen;
      bool ok = true;
      for (const Json& a : alternatives) {
        const Json values = constants_of_required(a, name);
        if (values.empty()) {
          ok = false;
          break;
        }
        for (const Json& v : values) {
          for (const Json& w : seen) ok = ok && !json_equal(v, w);
          seen.push_back(v);
        }
      }
      if (ok) return true;
    }
    return false;
  }
  static Json constants_of_required(const Json& s, const std::string& name) {
    if (!s.is_object() || !s.contains("required") || !s["required"].is_array()) return Json::array();
    if (std::find(s["required"].begin(), s["required"].end(), name) == s["required"].end()) return Json::array();
    if (!s.contains("properties") || !s["properties"].contains(name)) return Json::array();
    const Json& p = s["properties"][name];
    if (!p.is_object()) return Json::array();
    if (p.contains("const")) return Json::array({p["const"]});
    if (p.contains("enum") && p["enum"].is_array() && !p["enum"].empty()) return p["enum"];
    return Json::array();
  }
  std::set<std::string> possible_types(const Json& s) {
    std::set<std::string> out;
    if (!s.is_object()) {
      if (s == false) return out;
      return {"null", "boolean", "object", "array", "string", "number"};
    }
    if (s.contains("const")) return {json_type_of(s["const"])};
    if (s.contains("enum") && s["enum"].is_array()) {
      for (const Json& v : s["enum"]) out.insert(json_type_of(v));
      return out;
    }
    if (s.contains("$ref") || s.contains("anyOf") || s.contains("oneOf") || s.contains("allOf"))
      return {"null", "boolean", "object", "array", "string", "number"};
    return declared_types(s);
  }
  static std::set<std::string> declared_types(const Json& s) {
    std::set<std::string> out;
    if (!s.contains("type")) return {all_types().begin(), all_types().end()};
    const Json& t = s["type"];
    if (t.is_string()) out.insert(t.get<std::string>());
    else if (t.is_array())
      for (const Json& e : t)
        if (e.is_string()) out.insert(e.get<std::string>());
    return out;
  }

  // --- enum, const ---------------------------------------------------------------
  Expr enumeration(const Node& node, int depth) {
    const Json& s = *node.schema;
    if (s.contains("enum") && !s["enum"].is_array()) {
      error(node.pointer + "/enum", "'enum' must be an array");
      return std::nullopt;
    }
    Json values = s.contains("enum") ? s["enum"] : Json::array({s["const"]});
    if (s.contains("enum") && s.contains("const")) {
      Json kept = Json::array();
      for (const Json& v : values)
        if (json_equal(v, s["const"])) kept.push_back(v);
      values = kept;
    }
    const std::set<std::string> types = declared_types(s);
    for (const auto& [key, v] : s.items())
      if (constrains(key) && key != "type" && key != "enum" && key != "const") {
        error(node.pointer + "/" + pointer_token(key),
              fmt::format("'{}' together with 'enum' or 'const' is not supported", key));
        return std::nullopt;
      }
    std::vector<std::string> alternatives;
    for (const Json& v : values)
      if (type_allows(types, json_type_of(v))) {
        std::string text = literal_value(v, depth);
        if (std::find(alternatives.begin(), alternatives.end(), text) == alternatives.end()) alternatives.push_back(text);
      }
    return alternation(alternatives);
  }

  // A JSON value exactly as the layout writes it.
  std::string literal_value(const Json& v, int depth) {
    if (v.is_object() || v.is_array()) {
      if (v.empty()) return empty_container(v.is_object() ? '{' : '[');
      std::string items;
      bool first = true;
      for (const auto& [key, child] : v.items()) {
        if (!first) items += " " + separator(layout_depth(depth)) + " ";
        first = false;
        if (v.is_object()) items += quote_literal(json::json_string_text(key)) + " " + colon() + " ";
        items += literal_value(child, depth + 1);
      }
      return container(v.is_object() ? '{' : '[', items, layout_depth(depth));
    }
    if (v.is_string()) return quote_literal(json::json_string_text(v.get<std::string>()));
    if (v.is_number()) {
      auto d = json::parse_decimal(v.dump());
      return quote_literal(d ? json::to_string(*d) : v.dump());
    }
    return quote_literal(v.dump());
  }

  // --- Types ----------------------------------------------------------------------
  Expr by_type(const Node& node, int depth) {
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
        error(node.pointer + "/type", "'type' must be one of null, boolean, object, array, string, number, integer, "
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
    if (types.count("number")) add(number(node, false));
    else if (types.count("integer")) add(number(node, true));
    if (types.count("string")) add(string(node));
    if (types.count("array")) add(array(node, depth));
    if (types.count("object")) add(object(node, depth));
    return alternation(alternatives);
  }

  std::optional<json::NumberBound> bound(const Node& node, const char* inclusive_key, const char* exclusive_key,
                                         bool lower) {
    const Json& s = *node.schema;
    std::optional<json::NumberBound> out;
    for (const char* key : {inclusive_key, exclusive_key}) {
      if (!s.contains(key)) continue;
      const Json& v = s[key];
      auto d = v.is_number() ? json::parse_decimal(v.dump()) : std::nullopt;
      if (!d) {
        error(node.pointer + "/" + key, fmt::format("'{}' must be a number (with an exponent of at most {})", key,
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

  Expr number(const Node& node, bool integer) {
    auto lower = bound(node, "minimum", "exclusiveMinimum", true);
    auto upper = bound(node, "maximum", "exclusiveMaximum", false);
    auto regex = json::number_regex(lower, upper, integer);
    if (!regex) return std::nullopt;
    return "#'" + *regex + "'";
  }

  std::optional<uint64_t> count(const Node& node, const char* key) {
    const Json& s = *node.schema;
    if (!s.contains(key)) return std::nullopt;
    const Json& v = s[key];
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) return v.get<uint64_t>();
    // A float like 2.0 counts; one past 2^63 would not convert (and is no length anyway).
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d >= 0 && d < 0x1p63 && std::trunc(d) == d) return static_cast<uint64_t>(d);
    }
    error(node.pointer + "/" + key, fmt::format("'{}' must be a non-negative integer", key));
    return std::nullopt;
  }

  Expr string(const Node& node) {
    const Json& s = *node.schema;
    const auto min_length = count(node, "minLength");
    const auto max_length = count(node, "maxLength");
    const std::string quote = "\\\"";
    if (s.contains("pattern") || s.contains("format")) {
      std::optional<std::string> decoded;
      std::string at;
      if (s.contains("pattern")) {
        at = node.pointer + "/pattern";
        if (!s["pattern"].is_string()) {
          error(at, "'pattern' must be a string");
          return std::nullopt;
        }
        auto converted = json::ecma_pattern_to_regex(s["pattern"].get<std::string>());
        if (auto* e = std::get_if<json::PatternError>(&converted)) {
          error(at, "'pattern': " + e->message);
          return std::nullopt;
        }
        decoded = std::get<std::string>(converted);
        if (s.contains("format"))
          permissive(node.pointer + "/format", "'format' beside 'pattern' is ignored: the grammar accepts more than the schema");
      } else {
        at = node.pointer + "/format";
        const std::string name = s["format"].is_string() ? s["format"].get<std::string>() : "";
        auto format = json::format_regex(name);
        if (!format) {
          permissive(at, fmt::format("format '{}' is not supported and is not checked", name));
          return fmt::format("#'{0}(?:{1})*{0}'", quote, json::any_string_char_regex());
        }
        if (!format->not_enforced.empty())
          permissive(at, fmt::format("format '{}': {} is not enforced", name, format->not_enforced));
        decoded = format->regex;
      }
      if (min_length || max_length)
        permissive(at, "'minLength' and 'maxLength' beside 'pattern' or 'format' are ignored: the grammar accepts "
                       "more than the schema");
      auto parsed = ir::parse_regex(*decoded, limits_.max_nesting);
      if (auto* e = std::get_if<ir::RegexError>(&parsed)) {
        error(at, "'pattern': " + e->message);
        return std::nullopt;
      }
      auto encoded = json::encode_regex(std::get<ir::RegexNode>(parsed));
      if (!encoded) return std::nullopt;
      return fmt::format("#'{0}{1}{0}'", quote, *encoded);
    }
    const uint64_t lo = min_length.value_or(0);
    uint64_t hi = max_length.value_or(UINT64_MAX);  // UINT64_MAX: no bound
    if (hi < lo) return std::nullopt;
    const std::string c = json::any_string_char_regex();
    if (hi != UINT64_MAX && hi > limits_.max_repeat_bound) {
      permissive(node.pointer + "/maxLength",
                 fmt::format("'maxLength' above {} is not enforced", limits_.max_repeat_bound));
      hi = UINT64_MAX;
    }
    if (lo > limits_.max_repeat_bound) {
      error(node.pointer + "/minLength", fmt::format("'minLength' above {} is not supported", limits_.max_repeat_bound));
      return std::nullopt;
    }
    if (lo == 0 && hi == UINT64_MAX) return fmt::format("#'{0}(?:{1})*{0}'", quote, c);
    const std::string bounds = hi != UINT64_MAX ? fmt::format("{{{},{}}}", lo, hi) : fmt::format("{{{},}}", lo);
    if ((hi == UINT64_MAX || hi <= ir::kMaxRegexRepeat) && lo <= ir::kMaxRegexRepeat)
      return fmt::format("#'{0}(?:{1}){2}{0}'", quote, c, bounds);
    if (string_char_rule_.empty()) string_char_rule_ = add_rule("string_char", fmt::format("#'{}'", c), "");
    return fmt::format("'\"' {}{} '\"'", string_char_rule_, bounds);
  }

  Expr array(const Node& node, int depth) {
    const Json& s = *node.schema;
    const uint64_t min_items = count(node, "minItems").value_or(0);
    std::optional<uint64_t> max_items = count(node, "maxItems");
    if (max_items && *max_items < min_items) return std::nullopt;
    // The first items (prefixItems, or draft-07's array `items`), then the rest.
    const Json* prefix = nullptr;
    std::string prefix_pointer;
    const Json* rest = nullptr;
    std::string rest_pointer;
    if (s.contains("prefixItems")) {
      prefix = &s["prefixItems"];
      prefix_pointer = node.pointer + "/prefixItems";
      if (s.contains("items")) rest = &s["items"], rest_pointer = node.pointer + "/items";
    } else if (s.contains("items") && s["items"].is_array()) {
      prefix = &s["items"];
      prefix_pointer = node.pointer + "/items";
      if (s.contains("additionalItems")) rest = &s["additionalItems"], rest_pointer = node.pointer + "/additionalItems";
    } else if (s.contains("items")) {
      rest = &s["items"];
      rest_pointer = node.pointer + "/items";
    }
    if (prefix && !prefix->is_array()) {
      error(prefix_pointer, "'prefixItems' must be an array");
      return std::nullopt;
    }
    std::vector<Expr> firsts;
    if (prefix)
      for (size_t i = 0; i < prefix->size(); ++i)
        firsts.push_back(value({&(*prefix)[i], prefix_pointer + "/" + std::to_string(i)}, depth + 1));
    static const Json any = true;
    Expr rest_value = value(rest ? Node{rest, rest_pointer} : Node{&any, node.pointer}, depth + 1);
    // The first of the rest is written apart from the others: a long one is
    // named, so that nested arrays stay linear in the schema (each level
    // would double the text).
    if (rest_value && rest_value->size() > kInlineBytes)
      rest_value = add_rule("items", *rest_value, rest ? rest_pointer : node.pointer);
    const uint64_t k = firsts.size();
    if (max_items && *max_items > limits_.max_repeat_bound) {
      permissive(node.pointer + "/maxItems", fmt::format("'maxItems' above {} is not enforced", limits_.max_repeat_bound));
      max_items.reset();
    }
    if (min_items > limits_.max_repeat_bound) {
      error(node.pointer + "/minItems", fmt::format("'minItems' above {} is not supported", limits_.max_repeat_bound));
      return std::nullopt;
    }
    const std::string sep = separator(layout_depth(depth));
    auto bounds = [](uint64_t lo, std::optional<uint64_t> hi) {
      if (hi && lo == *hi) return fmt::format("{{{}}}", lo);
      return hi ? fmt::format("{{{},{}}}", lo, *hi) : fmt::format("{{{},}}", lo);
    };
    // The items from position i on, i written already, at least one in all:
    // the empty array is written apart (an empty list inside the brackets
    // would give it a second, wrong, layout).
    std::function<Expr(uint64_t)> from = [&](uint64_t i) -> Expr {
      if (max_items && i >= *max_items) return i > 0 ? Expr("") : std::nullopt;
      const bool may_stop = i > 0 && i >= min_items;
      if (i >= k) {
        // r more items, r from max(min - i, 0) (at least 1 at the start) to max - i.
        uint64_t lo = min_items > i ? min_items - i : 0;
        if (i == 0) lo = std::max<uint64_t>(lo, 1);
        const std::optional<uint64_t> hi = max_items ? std::optional<uint64_t>(*max_items - i) : std::nullopt;
        if (!rest_value) return lo == 0 ? Expr("") : std::nullopt;
        if (i > 0) return fmt::format("({} {}){}", sep, *rest_value, bounds(lo, hi));
        return fmt::format("{} ({} {}){}", *rest_value, sep, *rest_value,
                           bounds(lo - 1, hi ? std::optional<uint64_t>(*hi - 1) : std::nullopt));
      }
      Expr next = firsts[i] ? from(i + 1) : std::nullopt;
      Expr with_it;
      if (next) with_it = (i ? sep + " " : "") + *firsts[i] + (next->empty() ? "" : " " + *next);
      if (!with_it) return may_stop ? Expr("") : std::nullopt;
      return may_stop ? fmt::format("({})?", *with_it) : *with_it;
    };
    std::vector<std::string> alternatives;
    if (min_items == 0) alternatives.push_back(empty_container('['));
    if (Expr items = from(0)) alternatives.push_back(container('[', *items, layout_depth(depth)));
    return alternation(alternatives);
  }

  Expr object(const Node& node, int depth) {
    const Json& s = *node.schema;
    struct Member {
      std::string name;
      Expr value;
      bool required;
    };
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) {
        error(node.pointer + "/required", "'required' must be an array of strings");
        return std::nullopt;
      }
      for (const Json& r : s["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
        else error(node.pointer + "/required", "'required' must be an array of strings");
    }
    static const Json any = true;
    const Json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : &any;
    const std::string extra_pointer = node.pointer + "/additionalProperties";
    std::vector<Member> members;
    std::vector<std::string> names;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) {
        error(node.pointer + "/properties", "'properties' must be an object");
        return std::nullopt;
      }
      for (const auto& [name, schema] : s["properties"].items()) {
        const std::string at = node.pointer + "/properties/" + pointer_token(name);
        members.push_back({name, value({&schema, at}, depth + 1), required.count(name) > 0});
        names.push_back(name);
      }
    }
    if (s.contains("required"))
      for (const Json& r : s["required"])
        if (r.is_string() && std::find(names.begin(), names.end(), r.get<std::string>()) == names.end()) {
          members.push_back({r.get<std::string>(), value({extra, extra_pointer}, depth + 1), true});
          names.push_back(r.get<std::string>());
        }
    Expr extra_value = value({extra, extra_pointer}, depth + 1);
    const int d = layout_depth(depth);
    std::vector<std::string> written;  // "key": value of each member that can appear
    std::vector<bool> is_required;
    for (const Member& m : members) {
      if (!m.value) {
        if (m.required) return std::nullopt;
        continue;
      }
      written.push_back(fmt::format("{} {} {}", quote_literal(json::json_string_text(m.name)), colon(), *m.value));
      is_required.push_back(m.required);
    }
    Expr extra_member;
    if (extra_value) {
      // A key other than the listed ones is a regex that grows with the
      // names (a trie of them, with "any string" after each place a key
      // leaves it): past a size its automaton takes seconds to build.
      // Every node of the names' trie writes at least 32 bytes of regex: a
      // trie past kMaxKeyRegexBytes / 32 nodes is refused before it is built.
      const std::optional<std::string> made = json::key_not_in_regex(names, kMaxKeyRegexBytes / 32);
      const std::string other_keys = made.value_or("");
      key_regex_bytes_ += other_keys.size();
      if (!made || other_keys.size() > kMaxKeyRegexBytes || key_regex_bytes_ > 2 * kMaxKeyRegexBytes) {
        const std::string at = s.contains("additionalProperties") ? extra_pointer : node.pointer;
        if (!made)
          error(at, fmt::format("the keys allowed beside these {} properties (additionalProperties is not false) need "
                                "a regex of more than {} KiB (the names have more than {} characters apart from "
                                "shared prefixes): give 'additionalProperties': false, or fewer properties",
                                names.size(), kMaxKeyRegexBytes >> 10, kMaxKeyRegexBytes / 32));
        else if (other_keys.size() > kMaxKeyRegexBytes)
          error(at, fmt::format("the keys allowed beside these {} properties (additionalProperties is not false) need "
                                "a regex of {} KiB, more than the limit of {} KiB: give 'additionalProperties': false, "
                                "or fewer properties",
                                names.size(), other_keys.size() >> 10, kMaxKeyRegexBytes >> 10));
        else
          error(at, fmt::format("the keys allowed beside the properties of the schema's objects (where "
                                "additionalProperties is not false) need regexes of more than {} KiB in all (the "
                                "limit): give 'additionalProperties': false to more of them",
                                2 * kMaxKeyRegexBytes >> 10));
        return std::nullopt;
      }
      extra_member = fmt::format("#'{}' {} {}", other_keys, colon(), *extra_value);
    }
    const std::string sep = separator(d);
    // tail(i): members i.. after one was written already; some(i): members
    // i.., at least one (the empty object is written apart, for the same
    // reason as the empty array).
    const size_t n = written.size();
    std::vector<std::string> tail(n + 1);
    std::vector<Expr> some(n + 1);
    bool may_be_empty = true;
    tail[n] = extra_member ? fmt::format("({} {})*", sep, *extra_member) : "";
    if (extra_member) some[n] = fmt::format("{0} ({1} {0})*", *extra_member, sep);
    for (size_t i = n; i-- > 0;) {
      const std::string with_it = written[i] + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
      if (is_required[i]) {
        tail[i] = fmt::format("{} {}", sep, with_it);
        some[i] = with_it;
        may_be_empty = false;
      } else {
        tail[i] = fmt::format("({} {})?", sep, written[i]) + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
        some[i] = some[i + 1] ? fmt::format("({} | {})", with_it, *some[i + 1]) : with_it;
      }
      // Long chains are named, so that the text stays linear in the members.
      if (i > 0 && tail[i].size() > 200) tail[i] = add_rule(fmt::format("members_{}", i), tail[i], node.pointer);
      if (i > 0 && some[i]->size() > 200) some[i] = add_rule(fmt::format("some_members_{}", i), *some[i], node.pointer);
    }
    std::vector<std::string> alternatives;
    if (may_be_empty) alternatives.push_back(empty_container('{'));
    if (some[0]) alternatives.push_back(container('{', *some[0], d));
    return alternation(alternatives);
  }

  static constexpr int kMaxMerges = 10000;

  const Json& root_;
  const JsonLocator& where_;
  const SourceFile& file_;
  Diagnostics& diags_;
  JsonSchemaOptions options_;
  SyntaxLimits limits_;
  std::vector<Rule> rules_;
  std::set<std::string> used_names_;
  std::map<std::pair<std::string, int>, Expr> ref_rules_;
  // Merged schemas by their text and layout depth: their translation, and
  // the rule made for them when they recur (or are long and met again).
  struct Merged {
    Expr expr;
    std::optional<size_t> rule;
    bool converting = false;
  };
  static constexpr size_t kInlineBytes = 200;
  // The regexes of keys other than an object's listed properties: one, and
  // all of them (limits on the time their automata take; docs/LIMITS.md).
  static constexpr size_t kMaxKeyRegexBytes = size_t{128} << 10;
  size_t key_regex_bytes_ = 0;
  // The JSON of every merged schema, written out (a work limit).
  static constexpr size_t kMaxMergedBytes = size_t{8} << 20;
  size_t merged_bytes_ = 0;
  std::map<std::pair<std::string, int>, Merged> merged_rules_;
  std::map<int, std::string> any_rules_;
  std::vector<std::unique_ptr<Json>> merged_;
  std::set<std::string> warned_;
  std::string string_char_rule_;
  uint32_t nesting_ = 0;
  int merges_ = 0;
};

}  // namespace

std::optional<JsonWhitespace> parse_json_whitespace(std::string_view name) {
  if (name == "compact") return JsonWhitespace::Compact;
  if (name == "pretty") return JsonWhitespace::Pretty;
  if (name == "flexible") return JsonWhitespace::Flexible;
  return std::nullopt;
}

uint32_t SchemaTranslation::schema_offset(uint32_t offset) const { return original_offset(offsets, offset); }

bool is_json_schema_path(std::string_view path) { return path.ends_with(".json"); }

std::optional<SchemaTranslation> translate_json_schema(const SourceFile& file, Diagnostics& diags,
                                                       const JsonSchemaOptions& options, const SyntaxLimits& limits) {
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
  return converter.run();
}

}  // namespace cgram

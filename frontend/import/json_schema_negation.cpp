// JSON Schema → .cgram: the complement of a schema, written as a schema the
// rest of the converter says exactly, where one can be written. It makes
// exact what a grammar cannot say directly: `not`, `if`/`then`/`else`, and
// the alternatives of a oneOf that may overlap (each one then excludes the
// others it may meet). Dependencies, said as alternatives too, live here.
//
// A schema is the conjunction of its keywords, so its complement is the
// union of theirs: ¬(k1 ∧ k2 ∧ …) = ¬k1 ∨ ¬k2 ∨ …. A keyword about one type
// (minLength, required, …) holds on every value of another type, so its
// complement is "of that type, and failing it": ¬{required: [n]} is
// {type: object, properties: {n: false}}, not every value without n. A
// keyword whose complement cannot be written (additionalProperties, items,
// format, multipleOf…) makes the whole complement unavailable, and the
// caller keeps its warning.
#include "json_schema_converter.h"

#include <algorithm>

#include "json_text.h"

namespace cgram::json_schema_detail {

namespace {

// The union of `alternatives` as one schema (`false` for none).
Json union_of(std::vector<Json> alternatives) {
  if (alternatives.empty()) return Json(false);
  if (alternatives.size() == 1) return std::move(alternatives[0]);
  return Json{{"anyOf", std::move(alternatives)}};
}

// Values of `type` with `keyword` set to `value`.
Json typed(const char* type, const char* keyword, Json value) { return Json{{"type", type}, {keyword, std::move(value)}}; }

// The complement of a bound on a size (a count of characters, items or
// members): `minX: n` fails exactly on sizes up to n - 1, `maxX: n` on sizes
// from n + 1.
std::optional<Json> size_bound_failing(const char* type, const std::string& key, const Json& bound) {
  if (!bound.is_number_unsigned() && !(bound.is_number_integer() && bound.get<int64_t>() >= 0)) return std::nullopt;
  const uint64_t n = bound.get<uint64_t>();
  const bool lower = key.starts_with("min");
  const std::string other = (lower ? "max" : "min") + key.substr(3);
  if (lower && n == 0) return Json(false);  // every size is at least 0
  return typed(type, other.c_str(), lower ? n - 1 : n + 1);
}

}  // namespace

std::optional<Json> SchemaComplement::negation(const Json& s, int depth, const Around& around) {
  if (depth > kMaxNegationDepth) return std::nullopt;
  if (s.is_boolean()) return Json(!s.get<bool>());
  if (!s.is_object()) return std::nullopt;
  if (s.contains("$ref")) {
    const Json* target = document_.followed(s);  // (a reference with constraints beside it is not followed)
    if (!target || target == &s) return std::nullopt;
    return negation(*target, depth + 1, around);
  }
  std::vector<Json> failing;  // a value fails s exactly when it matches one of these
  for (const auto& [key, value] : s.items()) {
    if (!constrains(key) && key != "enum" && key != "const") continue;  // annotations
    if (!document_.in_draft(key)) continue;  // no keyword of the schema's draft
    std::optional<Json> one = keyword_failing(s, key, value, depth, around);
    if (!one) return std::nullopt;
    if (one->is_boolean() && !one->get<bool>()) continue;  // no value fails it
    if (one->is_object() && one->size() == 1 && one->contains("anyOf"))
      for (const Json& alternative : (*one)["anyOf"]) failing.push_back(alternative);
    else
      failing.push_back(std::move(*one));
    if (failing.size() > kMaxNegationAlternatives) return std::nullopt;
  }
  return union_of(std::move(failing));
}

// The values that fail keyword `key` (of schema `s`, valued `value`), as a schema.
std::optional<Json> SchemaComplement::keyword_failing(const Json& s, const std::string& key, const Json& value, int depth,
                                               const Around& around) {
  if (key == "type") {
    const std::set<std::string> allowed = declared_types(s);
    Json others = Json::array();
    for (const char* t : {"null", "boolean", "object", "array", "string", "number"})
      if (!allowed.count(t)) others.push_back(t);
    std::vector<Json> out;
    if (!others.empty()) out.push_back(Json{{"type", others}});
    // Integers but no other number: the numbers with a fraction are left.
    if (allowed.count("integer") && !allowed.count("number")) {
      others.erase(std::find(others.begin(), others.end(), "number"));
      out.back() = others.empty() ? Json(false) : Json{{"type", others}};
      if (out.back() == false) out.pop_back();
      out.push_back(Json{{"type", "number"}, {kFraction, true}});
    }
    return union_of(std::move(out));
  }
  if (key == kFraction) return Json{{"type", Json::array({"null", "boolean", "object", "array", "string", "integer"})}};
  if (key == "required") {
    if (!value.is_array()) return std::nullopt;
    std::vector<Json> out;
    for (const Json& name : value) {
      if (!name.is_string()) return std::nullopt;
      out.push_back(Json{{"type", "object"}, {"properties", Json{{name.get<std::string>(), false}}}});
    }
    return union_of(std::move(out));
  }
  if (key == "properties") {
    if (!value.is_object()) return std::nullopt;
    std::vector<Json> out;
    const Keys keys = closed_keys(around);
    for (const auto& [name, schema] : value.items()) {
      if (keys && !keys->count(name)) continue;  // the context has no such member
      // What the member's value also meets: the context's schemas of it.
      const Around inside = member_context(around, name);
      std::optional<Json> bad = negation(schema, depth + 1, inside);
      if (!bad) return std::nullopt;
      if (bad->is_boolean() && !bad->get<bool>()) continue;  // every value of the member passes
      out.push_back(Json{{"type", "object"}, {"required", Json::array({name})}, {"properties", Json{{name, *bad}}}});
    }
    return union_of(std::move(out));
  }
  if (key == "minLength" || key == "maxLength") return size_bound_failing("string", key, value);
  if (key == "minItems" || key == "maxItems") return size_bound_failing("array", key, value);
  if (key == "minProperties" || key == "maxProperties") return size_bound_failing("object", key, value);
  if (key == "pattern" || key == kMorePatterns) {
    std::vector<Json> out;
    for (const Json& p : key == "pattern" ? Json::array({value}) : value) {
      if (!p.is_string()) return std::nullopt;
      out.push_back(typed("string", "not", Json{{"pattern", p}}));
    }
    return union_of(std::move(out));
  }
  if (key == "format") {
    if (!value.is_string()) return std::nullopt;
    const std::string name = value.get<std::string>();
    if (const auto format = json::format_regex(name); format && format->not_enforced.empty())
      return typed("string", "not", Json{{"format", value}});
    if (!specified_format(name)) return Json(false);  // an annotation: no value fails it
    return std::nullopt;
  }
  if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" || key == "exclusiveMaximum") {
    // Draft 04's boolean exclusive bounds change what minimum means: not read here.
    for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k) && !s[k].is_number()) return std::nullopt;
    if (!value.is_number()) return std::nullopt;
    static const std::map<std::string, const char*> opposite = {{"minimum", "exclusiveMaximum"},
                                                                {"exclusiveMinimum", "maximum"},
                                                                {"maximum", "exclusiveMinimum"},
                                                                {"exclusiveMaximum", "minimum"}};
    return typed("number", opposite.at(key), value);
  }
  if (key == "enum" || key == "const") return values_failing(key == "const" ? Json::array({value}) : value);
  if (key == "anyOf" || key == "oneOf" || key == "allOf") {
    if (!value.is_array() || value.empty()) return std::nullopt;
    // oneOf as anyOf only where no two alternatives meet.
    if (key == "oneOf" && proof_.overlapping(value, Json::object())) return std::nullopt;
    std::vector<Json> parts;
    for (const Json& part : value) {
      std::optional<Json> bad = negation(part, depth + 1, around);
      if (!bad) return std::nullopt;
      parts.push_back(std::move(*bad));
    }
    if (key == "allOf") return union_of(std::move(parts));  // fails one part
    return Json{{"allOf", std::move(parts)}};               // fails every alternative
  }
  if (key == "not") return value.is_object() || value.is_boolean() ? std::optional<Json>(value) : std::nullopt;
  if (key == "if") {  // with then and else: (if ∧ ¬then) ∨ (¬if ∧ ¬else)
    std::vector<Json> out;
    for (const auto& [branch, met] : {std::pair{"then", true}, std::pair{"else", false}}) {
      if (!s.contains(branch)) continue;
      std::optional<Json> bad = negation(s[branch], depth + 1, around);
      std::optional<Json> condition = met ? std::optional<Json>(value) : negation(value, depth + 1, around);
      if (!bad || !condition) return std::nullopt;
      out.push_back(Json{{"allOf", Json::array({*condition, *bad})}});
    }
    return union_of(std::move(out));
  }
  if (key == "then" || key == "else") return Json(false);  // said with `if`, or nothing without it
  if (key == kConditionals) {  // fails one of them
    if (!value.is_array()) return std::nullopt;
    std::vector<Json> out;
    for (const Json& c : value) {
      if (!c.is_object() || !c.contains("if")) continue;
      std::optional<Json> bad = keyword_failing(c, "if", c["if"], depth, around);
      if (!bad) return std::nullopt;
      out.push_back(std::move(*bad));
    }
    return union_of(std::move(out));
  }
  if (key == "dependencies" || key == "dependentRequired" || key == "dependentSchemas") {
    // Member n there, and one of its needs missing or its schema failed.
    if (!value.is_object()) return std::nullopt;
    std::vector<Json> out;
    for (const auto& [name, needs] : value.items()) {
      const Json there{{"type", "object"}, {"required", Json::array({name})}};
      if (needs.is_array()) {
        for (const Json& n : needs) {
          if (!n.is_string()) return std::nullopt;
          if (n != name) out.push_back(Json{{"allOf", Json::array({there, Json{{"properties", Json{{n, false}}}}})}});
        }
        continue;
      }
      std::optional<Json> bad = negation(needs, depth + 1, around);
      if (!bad) return std::nullopt;
      out.push_back(Json{{"allOf", Json::array({there, *bad})}});
    }
    return union_of(std::move(out));
  }
  if (key == "additionalProperties" || key == "patternProperties") {
    if (value == true || value == Json::object()) return Json(false);
    return members_failing(s, key, value, depth, around);
  }
  if (key == "items" && (value == true || value == Json::object())) return Json(false);  // says nothing
  if (key == "items" && value.is_object() && !s.contains("prefixItems")) {
    // Some item fails it (written as the converter's own contains, which
    // every draft reads: draft 04 has no contains).
    std::optional<Json> bad = negation(value, depth + 1);
    if (!bad) return std::nullopt;
    return *bad == false ? Json(false) : typed("array", kContains, *bad);
  }
  if ((key == "contains" || key == kContains) && !s.contains("minContains") && !s.contains("maxContains")) {
    // Every item fails it (the empty array too).
    std::optional<Json> bad = negation(value, depth + 1);
    if (!bad) return std::nullopt;
    return typed("array", "items", *bad);
  }
  if (key == "uniqueItems" && value == false) return Json(false);
  return std::nullopt;
}

// The objects with a member that fails additionalProperties or a pattern's
// schema. The member's name can be anything, which no schema can say: this
// is written only where the objects of the context have names from a known
// list (`keys`; the other side of a oneOf or the rest of the schema has
// additionalProperties false), one alternative per name that can fail.
std::optional<Json> SchemaComplement::members_failing(const Json& s, const std::string& key, const Json& value, int depth,
                                               const Around& around) {
  const Keys keys = closed_keys(around);
  if (!keys) return std::nullopt;
  auto listed = [&](const std::string& name) {
    return s.contains("properties") && s["properties"].is_object() && s["properties"].contains(name);
  };
  std::vector<Json> out;
  for (const std::string& name : *keys) {
    // The schemas this member's value must meet under `key`.
    std::vector<const Json*> schemas;
    bool by_pattern = false;
    if (s.contains("patternProperties")) {
      if (!s["patternProperties"].is_object()) return std::nullopt;
      for (const auto& [pattern, schema] : s["patternProperties"].items()) {
        const std::optional<bool> match = automata_.pattern_matches(pattern, name);
        if (!match) return std::nullopt;
        if (!*match) continue;
        by_pattern = true;
        if (key == "patternProperties") schemas.push_back(&schema);
      }
    }
    if (key == "additionalProperties" && !listed(name) && !by_pattern) schemas.push_back(&value);
    for (const Json* schema : schemas) {
      std::optional<Json> bad = negation(*schema, depth + 1);
      if (!bad) return std::nullopt;
      if (*bad == false) continue;
      out.push_back(Json{{"type", "object"}, {"required", Json::array({name})}, {"properties", Json{{name, *bad}}}});
    }
  }
  return union_of(std::move(out));
}

// The names an object that meets every schema of `around` may have, where
// one lists them (additionalProperties false, no patternProperties); nullopt
// where any.
SchemaComplement::Keys SchemaComplement::closed_keys(const Around& around) {
  Keys out;
  for (const Json* s : around) {
    const Json* at = document_.followed(*s);
    if (!at || !at->is_object() || !at->contains("additionalProperties") ||
        (*at)["additionalProperties"] != false || at->contains("patternProperties"))
      continue;
    std::set<std::string> names;
    if (at->contains("properties") && (*at)["properties"].is_object())
      for (const auto& [name, unused] : (*at)["properties"].items())
        if (!out || out->count(name)) names.insert(name);
    out = std::move(names);
  }
  return out;
}

// The schemas a member `name` of such an object meets: each one's
// `properties` entry for it (patterns, which may or may not match, are left out).
SchemaComplement::Around SchemaComplement::member_context(const Around& around, const std::string& name) {
  Around out;
  for (const Json* s : around)
    if (const Json* at = document_.followed(*s);
        at && at->is_object() && at->contains("properties") && (*at)["properties"].is_object() &&
        (*at)["properties"].contains(name))
      out.push_back(&(*at)["properties"][name]);
  return out;
}

// The values other than `values` (an enum's), where they are strings,
// booleans and null: the types without any of them, strings but those, and
// the boolean not listed.
std::optional<Json> values_failing(const Json& values) {
  if (!values.is_array()) return std::nullopt;
  Json strings = Json::array();
  bool null = false, yes = false, no = false;
  for (const Json& v : values) {
    if (v.is_string()) strings.push_back(v);
    else if (v.is_null()) null = true;
    else if (v.is_boolean()) (v.get<bool>() ? yes : no) = true;
    else return std::nullopt;  // numbers, arrays, objects: no complement written here
  }
  Json untouched = Json::array();
  if (!null) untouched.push_back("null");
  if (!yes && !no) untouched.push_back("boolean");
  for (const char* t : {"object", "array", "number"}) untouched.push_back(t);
  if (strings.empty()) untouched.push_back("string");
  std::vector<Json> out{Json{{"type", untouched}}};
  if (!strings.empty()) out.push_back(typed("string", "not", Json{{"enum", strings}}));
  if (yes != no) out.push_back(Json{{"const", !yes}});
  return union_of(std::move(out));
}

}  // namespace cgram::json_schema_detail

namespace cgram::json_schema_detail {

std::optional<Json> SchemaComplement::conditional_said(const Json& s) {
  Json rest = s;
  for (const char* k : {"if", "then", "else", kConditionals}) rest.erase(k);
  // The schema's own if/then/else, and those of the parts an allOf merged.
  std::vector<Json> conditionals;
  if (s.contains("if")) {
    Json own = Json::object();
    for (const char* k : {"if", "then", "else"})
      if (s.contains(k)) own[k] = s[k];
    conditionals.push_back(own);
  }
  if (s.contains(kConditionals) && s[kConditionals].is_array())
    for (const Json& c : s[kConditionals]) conditionals.push_back(c);
  // Each doubles the alternatives the object is written in.
  if (conditionals.size() > kMaxConditionals) return std::nullopt;
  Json parts = Json::array({rest});
  for (const Json& c : conditionals) {
    if (!c.is_object() || !c.contains("if")) continue;
    const Json& condition = c["if"];
    std::optional<Json> failing = negation(condition, 0, {&rest});
    if (!failing) return std::nullopt;
    Json met = c.contains("then") ? Json{{"allOf", Json::array({condition, c["then"]})}} : condition;
    Json unmet = c.contains("else") ? Json{{"allOf", Json::array({*failing, c["else"]})}} : *failing;
    parts.push_back(Json{{"anyOf", Json::array({met, unmet})}});
  }
  return Json{{"allOf", std::move(parts)}};
}

std::optional<Json> SchemaComplement::dependencies_said(const Json& s) {
  Json rest = s;
  std::vector<Json> parts;
  size_t alternatives = 1;
  std::set<std::string> required;
  if (s.contains("required") && s["required"].is_array())
    for (const Json& r : s["required"])
      if (r.is_string()) required.insert(r.get<std::string>());
  bool any = false;
  for (const char* key : {"dependencies", "dependentRequired", "dependentSchemas"}) {
    if (!s.contains(key) || !document_.in_draft(key)) continue;
    any = true;
    rest.erase(key);
    if (!s[key].is_object()) return std::nullopt;
    for (const auto& [name, needs] : s[key].items()) {
      Json present;  // the object has member `name`, and what that needs
      if (needs.is_array()) {
        if (needs.empty()) continue;
        // (In the schema's order: where they are no listed property, the
        // object's members follow this one.)
        Json names = Json::array({name});
        for (const Json& n : needs) {
          if (!n.is_string()) return std::nullopt;
          names.push_back(n);
        }
        if (required.count(name)) {  // always there in an object: its needs are required too
          parts.push_back(Json{{"required", names}});
          continue;
        }
        present = Json{{"type", "object"}, {"required", names}};
      } else if (needs.is_object() || needs.is_boolean()) {
        if (needs == true || needs == Json::object()) continue;
        present = Json{{"allOf", Json::array({Json{{"type", "object"}, {"required", Json::array({name})}}, needs})}};
      } else {
        return std::nullopt;
      }
      alternatives *= 2;
      if (alternatives > kMaxNegationAlternatives) return std::nullopt;
      parts.push_back(Json{{"anyOf", Json::array({Json{{"properties", Json{{name, false}}}}, present})}});
    }
  }
  if (!any) return std::nullopt;
  parts.insert(parts.begin(), std::move(rest));
  return Json{{"allOf", std::move(parts)}};
}

// The complement of the other alternative, or any value of a type the two
// were told apart on (only values of the `overlap` types may match both):
// the complement's alternatives of those types alone are kept.
Json SchemaComplement::beyond_overlap(Json failing, const std::set<std::string>& overlap) {
  Json apart = Json::array();
  for (const char* t : {"null", "boolean", "object", "array", "string", "number"})
    if (!overlap.count(t) && !(std::string(t) == "number" && overlap.count("integer"))) apart.push_back(t);
  if (apart.empty()) return failing;
  std::vector<Json> out{Json{{"type", apart}}};
  // Integers may overlap where numbers do not: the numbers that are no integer are apart too.
  if (overlap.count("integer") && !overlap.count("number")) out.push_back(Json{{"type", "number"}, {kFraction, true}});
  const std::vector<Json> parts = failing.is_object() && failing.size() == 1 && failing.contains("anyOf")
                                      ? failing["anyOf"].get<std::vector<Json>>()
                                      : std::vector<Json>{failing};
  for (const Json& part : parts) {
    if (part == false) continue;
    const std::set<std::string> theirs = proof_.possible_types(part);
    // (Within the types apart, it adds nothing.)
    if (std::all_of(theirs.begin(), theirs.end(), [&](const std::string& t) {
          return t != "integer" && std::find(apart.begin(), apart.end(), t) != apart.end();
        }))
      continue;
    out.push_back(part);
  }
  return union_of(std::move(out));
}

// The alternatives of a complement that some value of the context's types
// can match (the others are empty once merged, and would only multiply the
// branches).
Json SchemaComplement::within_types(Json failing, const Around& around) {
  if (!failing.is_object() || !failing.contains("anyOf") || failing.size() != 1) return failing;
  std::set<std::string> types = {"null", "boolean", "object", "array", "string", "number"};
  for (const Json* s : around) {
    std::set<std::string> keep;
    const std::set<std::string> theirs = proof_.possible_types(*s);
    for (const std::string& t : types)
      if (theirs.count(t) || (t == "number" && theirs.count("integer"))) keep.insert(t);
    types = std::move(keep);
  }
  std::vector<Json> kept;
  for (const Json& alternative : failing["anyOf"]) {
    const std::set<std::string> theirs = proof_.possible_types(alternative);
    if (std::any_of(theirs.begin(), theirs.end(), [&](const std::string& t) {
          return types.count(t) || (t == "integer" && types.count("number"));
        }))
      kept.push_back(alternative);
  }
  return union_of(std::move(kept));
}

std::optional<std::vector<Json>> SchemaComplement::exclusive_alternatives(const Json& alternatives, const Json& rest,
                                                                   const std::vector<Overlap>& pairs) {
  // Per alternative: the others it may meet, and on values of which types.
  std::vector<std::vector<std::pair<size_t, const std::set<std::string>*>>> meets(alternatives.size());
  for (const Overlap& o : pairs) {
    meets[o.i].emplace_back(o.j, &o.types);
    meets[o.j].emplace_back(o.i, &o.types);
  }
  auto width = [](const Json& s) -> size_t { return s.is_object() && s.contains("anyOf") ? s["anyOf"].size() : 1; };
  std::vector<Json> out;
  for (size_t i = 0; i < alternatives.size(); ++i) {
    if (meets[i].empty()) {
      out.push_back(alternatives[i]);
      continue;
    }
    Json parts = Json::array({alternatives[i]});
    size_t product = 1;
    // What a value of this alternative meets: it and the rest of the schema.
    const Around around{&alternatives[i], &rest};
    for (const auto& [j, types] : meets[i]) {
      std::optional<Json> failing = negation(alternatives[j], 0, around);
      if (!failing) return std::nullopt;
      failing = beyond_overlap(std::move(*failing), *types);
      failing = within_types(std::move(*failing), around);
      product *= width(*failing);
      if (product > kMaxExclusiveProduct) return std::nullopt;
      parts.push_back(std::move(*failing));
    }
    out.push_back(Json{{"allOf", std::move(parts)}});
  }
  return out;
}

}  // namespace cgram::json_schema_detail

// JSON Schema → .cgram: whether the alternatives of a oneOf can overlap. A
// grammar writes oneOf as a union, which is exact only where no value
// matches two alternatives; each pair is proved disjoint here, or named.
//
// A pair is disjoint when (after following local $refs):
//  - one is `false`;
//  - the values of one (enum/const) all fail the other;
//  - every type both allow is told apart: objects by a property one requires
//    and the other forbids (additionalProperties false, not listed, no
//    pattern matching it) or by a property both require whose schemas are
//    disjoint (a discriminator, nested ones too); strings by patterns whose
//    languages do not meet or by lengths that do not; numbers by ranges.
// Anything else counts as overlapping: the proof is sound, not complete.
#include "json_schema_converter.h"

#include <fmt/format.h>

#include <algorithm>

#include "char_dfa.h"
#include "json_text.h"

namespace cgram::json_schema_detail {

namespace {

const std::set<std::string> kAllTypes = {"null", "boolean", "object", "array", "string", "number"};

bool is_false(const Json& s) { return s.is_boolean() && !s.get<bool>(); }

// Types that `a` and `b` both allow ("integer" meets "number").
std::set<std::string> common_types(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const std::string& t : a) {
    if (b.count(t)) out.insert(t);
    else if (t == "integer" && b.count("number")) out.insert("integer");
    else if (t == "number" && b.count("integer")) out.insert("integer");
  }
  return out;
}

}  // namespace

// The schema a chain of local references leads to; nullptr where one cannot
// be followed quietly (the translation reports it) or the reference has
// constraints beside it.
const Json* SchemaDocument::followed(const Json& s) const {
  const Json* at = &s;
  for (int hops = 0; hops < 32 && at->is_object() && at->contains("$ref"); ++hops) {
    const Json& ref = (*at)["$ref"];
    if (!ref.is_string() || at->size() != 1) {
      Json rest = *at;
      rest.erase("$ref");
      if (!ref.is_string() || has_constraints(rest)) return nullptr;
    }
    const std::string text = ref.get<std::string>();
    if (text.empty() || text[0] != '#') return nullptr;
    try {
      at = &root_.at(Json::json_pointer(text.substr(1)));
    } catch (const std::exception&) {  // nlohmann's lookup reports a missing pointer so; we only ask
      return nullptr;
    }
  }
  return at;
}

// Whether the value fails `s` on a keyword checked here (sound: true only
// where it certainly fails).
bool SchemaChecks::value_fails(const Json& s, const Json& value) {
  if (is_false(s)) return true;
  if (!s.is_object()) return false;
  if (s.contains("const")) return !json_equal(s["const"], value);
  if (s.contains("enum") && s["enum"].is_array())
    return std::none_of(s["enum"].begin(), s["enum"].end(), [&](const Json& v) { return json_equal(v, value); });
  if (s.contains("type") && !type_allows(declared_types(s), json_type_of(value))) return true;
  return !satisfies_beside_values(s, value);
}

bool OverlapProof::disjoint_pair(const Json& x, const Json& y, int depth, const std::set<std::string>& within) {
  return overlap_types(x, y, depth, within).empty();
}

std::set<std::string> OverlapProof::overlap_types(const Json& x, const Json& y, int depth,
                                               const std::set<std::string>& within) {
  // Bounded: each level compares the schemas of every name both require.
  if (depth > kMaxDisjointDepth || ++disjoint_steps_ > kMaxDisjointSteps) return within;
  const Json* a = document_.followed(x);
  const Json* b = document_.followed(y);
  if (!a || !b) return within;
  if (is_false(*a) || is_false(*b)) return {};
  if (!a->is_object() || !b->is_object()) return within;
  // Values on one side, all failing the other.
  for (const auto& [one, other] : {std::pair{a, b}, std::pair{b, a}}) {
    const Json* values = one->contains("const") ? nullptr : (one->contains("enum") ? &(*one)["enum"] : nullptr);
    if (one->contains("const")) {
      if (checks_.value_fails(*other, (*one)["const"])) return {};
    } else if (values && values->is_array() &&
               std::all_of(values->begin(), values->end(), [&](const Json& v) { return checks_.value_fails(*other, v); })) {
      return {};
    }
  }
  std::set<std::string> types = common_types(common_types(possible_types(*a), possible_types(*b)), within);
  std::erase_if(types, [&](const std::string& t) { return told_apart(*a, *b, t, depth); });
  return types;
}

// Whether no value of type `type` matches both.
bool OverlapProof::told_apart(const Json& a, const Json& b, const std::string& type, int depth) {
  if (type == "object") {
    auto forbids = [&](const Json& s, const std::string& name) {
      if (!s.contains("additionalProperties") || s["additionalProperties"] != false) return false;
      if (s.contains("properties") && s["properties"].is_object() && s["properties"].contains(name)) return false;
      if (s.contains("patternProperties") && s["patternProperties"].is_object())
        for (const auto& [pattern, unused] : s["patternProperties"].items())
          if (automata_.pattern_matches(pattern, name) != false) return false;  // (unknown: it may match)
      return true;
    };
    auto required = [](const Json& s) {
      std::vector<std::string> out;
      if (s.contains("required") && s["required"].is_array())
        for (const Json& r : s["required"])
          if (r.is_string()) out.push_back(r.get<std::string>());
      return out;
    };
    for (const auto& [one, other] : {std::pair{&a, &b}, std::pair{&b, &a}})
      for (const std::string& name : required(*one))
        if (forbids(*other, name)) return true;
    for (const std::string& name : required(a)) {
      const std::vector<std::string> in_b = required(b);
      if (std::find(in_b.begin(), in_b.end(), name) == in_b.end()) continue;
      if (disjoint_pair(checks_.property_schema(a, name), checks_.property_schema(b, name), depth + 1, kAllTypes)) return true;
    }
    return false;
  }
  if (type == "string") {
    if (a.contains("pattern") && b.contains("pattern") && a["pattern"].is_string() && b["pattern"].is_string()) {
      const json::CharDfa* one = automata_.pattern_automaton(a["pattern"].get<std::string>());
      const json::CharDfa* two = automata_.pattern_automaton(b["pattern"].get<std::string>());
      if (one && two)
        if (const auto both = one->intersect(*two); both && both->empty()) return true;
    }
    auto length = [](const Json& s, const char* key) -> std::optional<double> {
      return s.contains(key) && s[key].is_number() ? std::optional<double>(s[key].get<double>()) : std::nullopt;
    };
    for (const auto& [one, other] : {std::pair{&a, &b}, std::pair{&b, &a}})
      if (auto most = length(*one, "maxLength"), least = length(*other, "minLength"); most && least && *most < *least)
        return true;
    return false;
  }
  if (type == "number" || type == "integer") {
    // One's upper bound below the other's lower bound (equal bounds meet
    // unless one of them is exclusive).
    for (const auto& [one, other] : {std::pair{&a, &b}, std::pair{&b, &a}})
      for (const char* upper : {"maximum", "exclusiveMaximum"})
        for (const char* lower : {"minimum", "exclusiveMinimum"}) {
          if (!one->contains(upper) || !other->contains(lower)) continue;
          const Json& hi = (*one)[upper];
          const Json& lo = (*other)[lower];
          if (!hi.is_number() || !lo.is_number()) continue;
          const bool strict = std::string(upper) == "exclusiveMaximum" || std::string(lower) == "exclusiveMinimum";
          if (greater(lo, hi) || (strict && !greater(hi, lo))) return true;
        }
    return false;
  }
  return false;
}


// The first pair of alternatives not proved disjoint, if any; `beside` is
// the rest of the schema, whose types every alternative shares.
std::optional<std::pair<size_t, size_t>> OverlapProof::overlapping(const Json& alternatives, const Json& beside) {
  const std::vector<Overlap> all = overlaps(alternatives, beside);
  return all.empty() ? std::nullopt : std::optional(std::pair{all.front().i, all.front().j});
}

std::vector<Overlap> OverlapProof::overlaps(const Json& alternatives, const Json& beside) {
  const std::set<std::string> within = beside.contains("type") ? declared_types(beside) : kAllTypes;
  std::vector<Overlap> out;
  disjoint_steps_ = 0;
  for (size_t i = 0; i < alternatives.size(); ++i)
    for (size_t j = i + 1; j < alternatives.size(); ++j)
      if (std::set<std::string> types = overlap_types(alternatives[i], alternatives[j], 0, within); !types.empty())
        out.push_back({i, j, std::move(types)});
  return out;
}

std::set<std::string> OverlapProof::possible_types(const Json& s, int depth) {
  std::set<std::string> out;
  if (!s.is_object()) return s == false ? out : kAllTypes;
  if (s.contains("const")) return {json_type_of(s["const"])};
  if (s.contains("enum") && s["enum"].is_array()) {
    for (const Json& v : s["enum"]) out.insert(json_type_of(v));
    return out;
  }
  if (depth > kMaxDisjointDepth) return kAllTypes;
  out = declared_types(s);
  if (s.contains("$ref")) {
    const Json* target = document_.followed(s);
    return target && target != &s ? common_types(out, possible_types(*target, depth + 1)) : kAllTypes;
  }
  // The types of some alternative; of every part.
  for (const char* key : {"anyOf", "oneOf"})
    if (s.contains(key) && s[key].is_array()) {
      std::set<std::string> some;
      for (const Json& alternative : s[key])
        for (const std::string& t : possible_types(alternative, depth + 1)) some.insert(t);
      out = common_types(out, some);
    }
  if (s.contains("allOf") && s["allOf"].is_array())
    for (const Json& part : s["allOf"]) out = common_types(out, possible_types(part, depth + 1));
  return out;
}

}  // namespace cgram::json_schema_detail

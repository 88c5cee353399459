// JSON Schema → .cgram: the keywords that combine schemas or list values.
// allOf (schemas merged into one, with their properties and items), anyOf
// and oneOf (alternatives, and when oneOf's cannot overlap), enum and const;
// with the automata of regexes and patterns (TextAutomata) and the checks of
// a value or a name against a schema (SchemaChecks) that they and the other
// families use.
#include "json_schema_converter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "cgram_text.h"
#include "json_text.h"
#include "memory_budget.h"

namespace cgram::json_schema_detail {

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

// --- allOf -------------------------------------------------------------------
// A merged schema is converted once per layout depth. A recursive schema
// merged with another meets the same merge again inside itself: that
// meeting becomes a rule (as a recursive $ref does), so the translation
// stays finite and linear instead of unrolling the recursion to the
// nesting limit. A long translation met again is named too, so the text
// never repeats it.
Expr CombinatorWriter::value_of_merged(const Json& merged_source, const std::string& pointer, int depth) {
  if (!work_.take_merge()) {
    diagnostics_.error(pointer, "allOf: too many schemas to merge (a recursive schema merged with another)");
    return std::nullopt;
  }
  std::string dumped = merged_source.dump();
  charge_memory(3 * dumped.size() + sizeof(Json) * 4);  // the key, the copy converted, their nodes
  // Work: every merge copies and writes out what it merges.
  if (!work_.take_bytes(dumped.size())) {
    diagnostics_.error(pointer, fmt::format("allOf: the schemas merged (allOf, and $ref beside other keywords) come to more "
                               "than {} MiB of JSON in all (the limit): the schema repeats large definitions in "
                               "its merges",
                               MergeWork::kMaxMergedBytes >> 20));
    return std::nullopt;
  }
  auto [entry, inserted] = merged_rules_.try_emplace({std::move(dumped), layout_.depth(depth)});
  if (inserted) journal_.added(entry->first);
  Merged& merged = entry->second;
  if (!inserted) {
    const bool name_it = merged.converting || (merged.expr && merged.expr->size() > kInlineBytes);
    if (!name_it) return merged.expr;
    if (!merged.rule) {
      merged.rule = rules_.reserve(pointer.substr(pointer.rfind('/') + 1), pointer);
      if (!merged.converting) rules_[*merged.rule].body = *merged.expr;  // else set when it is done
    }
    return rules_[*merged.rule].name;
  }
  merged_.push_back(std::make_unique<Json>(merged_source));
  merged.converting = true;
  Expr body = converter_.value({merged_.back().get(), pointer}, depth);
  merged.converting = false;
  merged.expr = body;
  if (!merged.rule) return body;
  if (!body) {  // recursion into a schema with no value: .cgram has no empty language
    diagnostics_.error(pointer, "allOf: this recursive merge of schemas accepts no JSON value");
    return std::nullopt;
  }
  rules_[*merged.rule].body = *body;
  return rules_[*merged.rule].name;
}

Expr CombinatorWriter::all_of(const Node& node, int depth) {
  const Json& s = *node.schema;
  const std::string at = node.pointer + "/allOf";
  if (!s["allOf"].is_array() || s["allOf"].empty()) {
    diagnostics_.error(at, "'allOf' must be a non-empty array");
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
      const Json* target = document_.resolve((*part)["$ref"].is_string() ? (*part)["$ref"].get<std::string>() : "", part_pointer,
                                   target_pointer);
      if (!target) return std::nullopt;
      if (!rest.empty()) {
        auto m = merger_.merge(merged, rest, part_pointer);
        if (!m) return std::nullopt;
        merged = std::move(*m);
      }
      part = target;
      part_pointer = target_pointer;
    }
    auto m = merger_.merge(merged, *part, part_pointer);
    if (!m) return std::nullopt;
    merged = std::move(*m);
  }
  return value_of_merged(merged, pointer, depth);
}

// Both schemas at once, as one schema; nullopt (after an error) where they do not merge.
std::optional<Json> SchemaMerger::merge(const Json& a, const Json& b, const std::string& at) {
  if (a == b) return a;
  // Work: a merge copies what it merges, and merges the parts of nested allOfs.
  if (const MergeWork::Step step = work_.take_step(); step != MergeWork::Step::Taken) {
    if (step == MergeWork::Step::FirstRefused)
      diagnostics_.error(at, fmt::format("allOf: merging the schemas takes more than {} steps (the limit)", MergeWork::kMaxMergeSteps));
    return std::nullopt;
  }
  if (b.is_boolean()) return b.get<bool>() ? a : Json(false);
  if (a.is_boolean()) return a.get<bool>() ? b : Json(false);
  if (!b.is_object()) {
    diagnostics_.error(at, "a schema must be an object or a boolean");
    return std::nullopt;
  }
  // A part's if/then/else go together, and belong to it alone (another
  // part's `then` is not this `if`'s): then/else without if say nothing, and
  // a second part's conditional beside the first's is not enforced (saying
  // both as alternatives here multiplies them at every merge).
  if ((b.contains("if") || b.contains("then") || b.contains("else")) && document_.in_draft("if") &&
      (a.contains("if") || a.contains("then") || a.contains("else") || !b.contains("if"))) {
    Json rest = b;
    Json conditional = Json::object();
    for (const char* k : {"if", "then", "else"})
      if (b.contains(k)) {
        conditional[k] = b[k];
        rest.erase(k);
      }
    std::optional<Json> out = merge(a, rest, at);
    if (out && b.contains("if")) {
      Json& list = (*out)[kConditionals];
      if (!list.is_array()) list = Json::array();
      if (std::find(list.begin(), list.end(), conditional) == list.end()) list.push_back(conditional);
    }
    return out;
  }
  if (b.contains("allOf") && !b.contains("$ref") && b["allOf"].is_array() && !b["allOf"].empty()) {
    // Its parts, one by one: kept nested, the merge would meet itself again
    // when converted (allOf [x] beside the rest is the same schema).
    Json rest = b;
    rest.erase("allOf");
    std::optional<Json> out = merge(a, rest, at);
    for (size_t i = 0; out && i < b["allOf"].size(); ++i)
      out = merge(*out, b["allOf"][i], at + "/allOf/" + std::to_string(i));
    return out;
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
    } else if (key == "minimum" || key == "exclusiveMinimum" || key == "minLength" || key == "minItems" ||
               key == "minProperties") {
      if (greater(v, mine)) mine = v;
    } else if (key == "maximum" || key == "exclusiveMaximum" || key == "maxLength" || key == "maxItems" ||
               key == "maxProperties") {
      if (greater(mine, v)) mine = v;
    } else if (key == "pattern" || key == kMorePatterns) {
      // Every pattern of both: the first stays `pattern`, the others are added.
      if (!mine.is_string() && key == "pattern") {
        diagnostics_.error(at, "'pattern' must be a string");
        return std::nullopt;
      }
      Json more = out.contains(kMorePatterns) ? out[kMorePatterns] : Json::array();
      for (const Json& p : key == "pattern" ? Json::array({v}) : v) {
        if (!p.is_string()) {
          diagnostics_.error(at, "'pattern' must be a string");
          return std::nullopt;
        }
        if (p != out.value("pattern", Json()) && std::find(more.begin(), more.end(), p) == more.end())
          more.push_back(p);
      }
      if (!more.empty()) out[kMorePatterns] = more;
    } else if (key == "enum" || key == "const") {
      const Json va = key == "const" ? Json::array({mine}) : mine, vb = key == "const" ? Json::array({v}) : v;
      Json both = Json::array();
      for (const Json& x : va)
        for (const Json& y : vb)
          if (json_equal(x, y)) both.push_back(x);
      out.erase(key);
      out["enum"] = both;
    } else if (key == "properties" || key == "additionalProperties" || key == "patternProperties") {
      // Handled below, together.
    } else if (key == "prefixItems" || key == "items") {
      // Handled below, together.
    } else if (key == "anyOf" || key == "oneOf") {
      // (∪A) ∩ (∪B) = ∪ (a ∩ b), within a bound on the pairs.
      if (!mine.is_array() || !v.is_array() || mine.size() * v.size() > MergeWork::kMaxAlternativePairs) {
        diagnostics_.error(at, fmt::format("allOf: the alternatives of two '{}' make more than {} pairs (the limit)", key,
                              MergeWork::kMaxAlternativePairs));
        return std::nullopt;
      }
      Json pairs = Json::array();
      for (const Json& x : mine)
        for (const Json& y : v) pairs.push_back(Json{{"allOf", Json::array({x, y})}});
      // For oneOf too: the pairs a value matches are as many as the product
      // of the alternatives it matches on each side, which is 1 exactly
      // when it is 1 on both. So the pairs stay a oneOf (said exactly where
      // its alternatives are disjoint or exclude each other).
      mine = pairs;
    } else if (key == kContains) {
      if (!json_equal(mine, v))
        diagnostics_.permissive(at, "'contains' is not supported and is ignored: the grammar accepts more than the schema");
    } else if (key == kConditionals) {
      if (!mine.is_array() || !v.is_array()) continue;
      for (const Json& c : v)
        if (std::find(mine.begin(), mine.end(), c) == mine.end()) mine.push_back(c);
    } else if (key == "not") {
      // Neither: not the union (said where the union's complement can be).
      Json parts = mine.is_object() && mine.size() == 1 && mine.contains("anyOf") ? mine["anyOf"] : Json::array({mine});
      if (std::find(parts.begin(), parts.end(), v) == parts.end()) parts.push_back(v);
      mine = parts.size() == 1 ? parts[0] : Json{{"anyOf", parts}};
    } else if (keyword_use(key) == KeywordUse::Annotation || keyword_use(key) == KeywordUse::NotAKeyword) {
    } else if (keyword_use(key) == KeywordUse::IgnoredWarning) {
      // Not enforced either way ('if', 'not', 'dependencies'…): the merged
      // schema keeps one, and the warning is given here, since the one kept
      // may be a no-op the translation would not warn of (uniqueItems: false).
      if (!json_equal(mine, v))
        diagnostics_.permissive(at, fmt::format("'{}' is not supported and is ignored: the grammar accepts more than the schema",
                                   key));
    } else if (!json_equal(mine, v)) {
      diagnostics_.error(at, fmt::format("allOf: two different '{}' cannot be merged", key));
      return std::nullopt;
    }
  }
  if (!merge_properties(a, b, out, at)) return std::nullopt;
  merge_items(a, b, out);
  return out;
}

bool greater(const Json& x, const Json& y) {
  if (!x.is_number() || !y.is_number()) return false;
  auto dx = json::parse_decimal(x.dump()), dy = json::parse_decimal(y.dump());
  return dx && dy && json::compare(*dx, *dy) > 0;
}

// The strings a regex over decoded characters (cgram's syntax) matches;
// nullptr when it cannot be read (converting the schema says why) or passes
// the automaton limits.
const json::CharDfa* TextAutomata::regex_automaton(const std::string& regex) {
  auto [entry, inserted] = automata_.try_emplace(regex);
  if (inserted) {
    auto parsed = ir::parse_regex(regex, max_nesting_);
    if (auto* node = std::get_if<ir::RegexNode>(&parsed)) entry->second = json::CharDfa::of_regex(*node);
  }
  return entry->second ? &*entry->second : nullptr;
}

// The strings an ECMAScript pattern (patternProperties, pattern) is found in.
const json::CharDfa* TextAutomata::pattern_automaton(const std::string& pattern) {
  auto converted = json::ecma_pattern_to_regex(pattern);
  return converted.ok() ? regex_automaton(*converted) : nullptr;
}

std::optional<bool> TextAutomata::regex_matches(const std::string& regex, const std::string& text) {
  const json::CharDfa* dfa = regex_automaton(regex);
  return dfa ? std::optional<bool>(dfa->matches(text)) : std::nullopt;
}

std::optional<bool> TextAutomata::pattern_matches(const std::string& pattern, const std::string& text) {
  const json::CharDfa* dfa = pattern_automaton(pattern);
  return dfa ? std::optional<bool>(dfa->matches(text)) : std::nullopt;
}

// A property's schema in `s`: its own and that of every pattern matching
// its name; additionalProperties (true when absent) where there is neither.
Json SchemaChecks::property_schema(const Json& s, const std::string& name) {
  Json parts = Json::array();
  if (s.contains("properties") && s["properties"].is_object() && s["properties"].contains(name))
    parts.push_back(s["properties"][name]);
  if (s.contains("patternProperties") && s["patternProperties"].is_object())
    for (const auto& [pattern, schema] : s["patternProperties"].items())
      if (automata_.pattern_matches(pattern, name) != false) parts.push_back(schema);  // (unreadable: refused when translated)
  if (parts.empty()) return s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
  if (parts.size() == 1) return parts[0];
  return Json{{"allOf", parts}};
}

Json both(const Json& x, const Json& y) {
  // A ∧ A = A: equal schemas merged would double at every level of a recursive one.
  if (x == true || x == y) return y;
  if (y == true) return x;
  return Json{{"allOf", Json::array({x, y})}};
}

// properties, patternProperties and additionalProperties of both parts. The
// patterns of both are kept side by side, which is exact where a key that
// only one part's patterns match gets `true` from the other part: its
// additionalProperties is absent or true. Otherwise the merge is an error.
bool SchemaMerger::merge_properties(const Json& a, const Json& b, Json& out, const std::string& at) {
  auto has = [](const Json& s, const char* key) { return s.contains(key); };
  if (!has(a, "properties") && !has(b, "properties") && !has(a, "additionalProperties") &&
      !has(b, "additionalProperties") && !has(a, "patternProperties") && !has(b, "patternProperties"))
    return true;
  auto extra_of = [](const Json& s) { return s.contains("additionalProperties") ? s["additionalProperties"] : Json(true); };
  auto patterns_of = [](const Json& s) {
    return s.contains("patternProperties") && s["patternProperties"].is_object() ? s["patternProperties"]
                                                                                  : Json::object();
  };
  const Json pa = patterns_of(a), pb = patterns_of(b);
  if ((!pa.empty() && extra_of(b) != true) || (!pb.empty() && extra_of(a) != true)) {
    diagnostics_.error(at, "allOf: 'patternProperties' of one part beside 'additionalProperties' of another cannot be merged");
    return false;
  }
  Json props = Json::object();
  for (const Json* s : {&a, &b})
    if (s->contains("properties") && (*s)["properties"].is_object())
      for (const auto& [name, v] : (*s)["properties"].items())
        if (!props.contains(name)) props[name] = both(checks_.property_schema(a, name), checks_.property_schema(b, name));
  if (props.empty()) out.erase("properties");
  else out["properties"] = props;
  Json patterns = pa;
  for (const auto& [pattern, schema] : pb.items())
    patterns[pattern] = patterns.contains(pattern) ? both(patterns[pattern], schema) : schema;
  if (patterns.empty()) out.erase("patternProperties");
  else out["patternProperties"] = patterns;
  const Json extra = both(extra_of(a), extra_of(b));
  if (extra == true) out.erase("additionalProperties");
  else out["additionalProperties"] = extra;
  return true;
}

Json item_schema(const Json& s, size_t i) {
  if (s.contains("prefixItems") && s["prefixItems"].is_array() && i < s["prefixItems"].size())
    return s["prefixItems"][i];
  return s.contains("items") ? s["items"] : Json(true);
}

void merge_items(const Json& a, const Json& b, Json& out) {
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
Expr CombinatorWriter::any_of(const Node& node, int depth) {
  const Json& s = *node.schema;
  const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
  const std::string at = node.pointer + "/" + key;
  if (!s[key].is_array() || s[key].empty()) {
    diagnostics_.error(at, fmt::format("'{}' must be a non-empty array", key));
    return std::nullopt;
  }
  // Everything else (a oneOf beside an anyOf too) constrains each branch.
  Json rest = s;
  rest.erase(key);
  const bool others = has_constraints(rest);
  // The alternatives as they are, or (`exclusive`) each excluding the others it may meet.
  auto alternatives_of = [&](const std::vector<Json>* exclusive) {
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < s[key].size(); ++i) {
      const std::string branch_pointer = at + "/" + std::to_string(i);
      const Json& alternative = exclusive ? (*exclusive)[i] : s[key][i];
      Expr branch = others || exclusive
                        ? value_of_merged(others ? Json{{"allOf", Json::array({rest, alternative})}} : alternative,
                                          branch_pointer, depth)
                        : converter_.value({&alternative, branch_pointer}, depth);
      if (branch && std::find(alternatives.begin(), alternatives.end(), *branch) == alternatives.end())
        alternatives.push_back(*branch);
    }
    return alternation(alternatives);
  };
  if (std::string(key) == "oneOf")
    if (const auto pairs = proof_.overlaps(s[key], rest); !pairs.empty()) {
      std::string why = "no complement to exclude";
      if (const std::optional<std::vector<Json>> exclusive = complement_.exclusive_alternatives(s[key], rest, pairs)) {
        const Converter::Attempt attempt = converter_.begin_attempt();
        Expr e = alternatives_of(&*exclusive);
        if (!converter_.failed(attempt)) return e;
        why = "excluding it passes the limits";
      }
      diagnostics_.permissive(at, fmt::format("'oneOf' is read as 'anyOf': alternatives {} and {} may overlap (no proof that "
                                 "they do not, and {}), and a value that matches both is accepted",
                                 pairs[0].i, pairs[0].j, why));
    }
  return alternatives_of(nullptr);
}

Expr alternation(const std::vector<std::string>& alternatives) {
  if (alternatives.empty()) return std::nullopt;
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

// --- enum, const ---------------------------------------------------------------
namespace {
// Keywords beside enum/const whose verdict on a value is checked here.
bool checkable_beside_values(const std::string& key) {
  static const std::set<std::string> keys = {"minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
                                             "exclusiveMaximum", "minItems", "maxItems", "required", "pattern",
                                             "format", kMorePatterns, kFraction};
  return keys.count(key) > 0;
}

size_t code_points(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<uint8_t>(c) & 0xC0) != 0x80; }));
}
}  // namespace

// Whether `value` meets the keywords beside enum/const that apply to its
// type (checkable_beside_values; the rest do not apply to it).
bool SchemaChecks::satisfies_beside_values(const Json& s, const Json& value) {
  auto size_bound = [&](const char* key, size_t size, bool at_least) {
    if (!s.contains(key) || !s[key].is_number()) return true;  // (refused before, where malformed)
    const double bound = s[key].get<double>();  // an integer, perhaps written 2.0
    return at_least ? static_cast<double>(size) >= bound : static_cast<double>(size) <= bound;
  };
  auto within = [&](const char* key, bool above, bool or_equal) {
    if (!s.contains(key)) return true;
    const Json& bound = s[key];
    return above ? greater(value, bound) || (or_equal && !greater(bound, value))
                 : greater(bound, value) || (or_equal && !greater(value, bound));
  };
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    const size_t n = code_points(text);
    // (A pattern or format that cannot be read or passes the automaton limits
    // says nothing here: ValueListWriter::enumeration() refuses it first.)
    for (const std::string& pattern : patterns_of(s))
      if (automata_.pattern_matches(pattern, text) == false) return false;
    // A `not` the strings say (excluded_strings): the value must miss it.
    if (const std::optional<std::string> excluded = excluded_strings(s); excluded && !excluded->empty())
      if (automata_.regex_matches(*excluded, text) != false) return false;  // (unknown: not kept)
    if (s.contains("format") && s["format"].is_string())
      if (const auto format = json::format_regex(s["format"].get<std::string>());
          format && automata_.regex_matches(format->regex, text) == false)
        return false;
    return size_bound("minLength", n, true) && size_bound("maxLength", n, false);
  }
  const bool whole = value.is_number_integer() || (value.is_number() && std::trunc(value.get<double>()) == value.get<double>());
  if (value.is_number() && s.contains(kFraction) && whole) return false;  // a number that must be no integer
  if (value.is_number())
    return within("minimum", true, true) && within("maximum", false, true) && within("exclusiveMinimum", true, false) &&
           within("exclusiveMaximum", false, false);
  if (value.is_array()) return size_bound("minItems", value.size(), true) && size_bound("maxItems", value.size(), false);
  if (value.is_object() && s.contains("required") && s["required"].is_array())
    for (const Json& name : s["required"])
      if (name.is_string() && !value.contains(name.get<std::string>())) return false;
  return true;
}

Expr ValueListWriter::enumeration(const Node& node, int depth) {
  const Json& s = *node.schema;
  if (s.contains("enum") && !s["enum"].is_array()) {
    diagnostics_.error(node.pointer + "/enum", "'enum' must be an array");
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
  // Beside the values, other keywords only take some of them away: those
  // the values can be checked against here are; the others are refused
  // (the keywords cgram ignores were warned about already), unless no value
  // has the type they apply to (`properties` beside null).
  auto some_value = [&](bool object) {
    return std::any_of(values.begin(), values.end(), [&](const Json& v) {
      return (object ? v.is_object() : v.is_array()) && type_allows(types, json_type_of(v));
    });
  };
  static const std::set<std::string> of_objects = {"properties", "additionalProperties", "patternProperties"};
  static const std::set<std::string> of_arrays = {"items", "prefixItems", "additionalItems", kContains};
  for (const auto& [key, v] : s.items())
    if (keyword_use(key) == KeywordUse::Supported && key != "type" && key != "enum" && key != "const" &&
        !checkable_beside_values(key) && !(of_objects.count(key) && !some_value(true)) &&
        !(of_arrays.count(key) && !some_value(false))) {
      diagnostics_.error(node.pointer + "/" + pointer_token(key),
            fmt::format("'{}' together with 'enum' or 'const' is not supported", key));
      return std::nullopt;
    }
  // A pattern or format beside the values, read as everywhere else (their
  // errors; an unknown format is not checked, with a warning).
  if (s.contains("pattern") && !s["pattern"].is_string()) diagnostics_.error(node.pointer + "/pattern", "'pattern' must be a string");
  for (const std::string& pattern : patterns_of(s)) {
    if (auto converted = json::ecma_pattern_to_regex(pattern); !converted.ok())
      diagnostics_.error(node.pointer + "/pattern", "'pattern': " + converted.error().message);
    else if (!automata_.regex_automaton(*converted))
      diagnostics_.error(node.pointer + "/pattern",
            fmt::format("'pattern' beside 'enum' or 'const': the pattern cannot be read as a regex, or its automaton "
                        "needs more than {} states (the limit)",
                        json::CharDfaLimits{}.max_states));
  }
  if (s.contains("format")) {
    const std::string name = s["format"].is_string() ? s["format"].get<std::string>() : "";
    if (!s["format"].is_string()) diagnostics_.error(node.pointer + "/format", "'format' must be a string");
    else if (auto format = json::format_regex(name); !format || !automata_.regex_automaton(format->regex))
      scalars_.unchecked_format(node.pointer + "/format", name);
    else if (!format->not_enforced.empty())
      diagnostics_.permissive(node.pointer + "/format", fmt::format("format '{}': {} is not enforced", name, format->not_enforced));
  }
  // The bounds beside the values, read as everywhere else (their errors).
  for (const char* key : {"minLength", "maxLength", "minItems", "maxItems"}) scalars_.count(node, key);
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
    if (s.contains(key) && !s[key].is_number() && !s[key].is_boolean())  // (a boolean: check_keywords says)
      diagnostics_.error(node.pointer + "/" + key, fmt::format("'{}' must be a number", key));
  if (diagnostics_.has_errors()) return std::nullopt;
  std::vector<std::string> alternatives;
  for (const Json& v : values)
    if (type_allows(types, json_type_of(v)) && checks_.satisfies_beside_values(s, v)) {
      std::string text = literal_value(v, depth);
      if (std::find(alternatives.begin(), alternatives.end(), text) == alternatives.end()) alternatives.push_back(text);
    }
  return alternation(alternatives);
}

// A JSON value exactly as the layout writes it.
std::string ValueListWriter::literal_value(const Json& v, int depth) {
  if (v.is_object() || v.is_array()) {
    if (v.empty()) return layout_.empty_container(v.is_object() ? '{' : '[');
    std::string items;
    bool first = true;
    for (const auto& [key, child] : v.items()) {
      if (!first) items += " " + layout_.separator(layout_.depth(depth)) + " ";
      first = false;
      if (v.is_object()) items += quote_literal(json::json_string_text(key)) + " " + layout_.colon() + " ";
      items += literal_value(child, depth + 1);
    }
    return layout_.container(v.is_object() ? '{' : '[', items, layout_.depth(depth));
  }
  if (v.is_string()) return quote_literal(json::json_string_text(v.get<std::string>()));
  if (v.is_number()) {
    // In fixed point, with as many zeros after it as a writer leaves
    // (`2.0` for 2, as Python and JavaScript's toFixed write it): every
    // spelling of the value without an exponent.
    auto d = json::parse_decimal(v.dump());
    const std::string fixed = d ? json::to_string(*d) : v.dump();
    if (fixed.find_first_of("eE") != std::string::npos) return quote_literal(fixed);
    return quote_literal(fixed) + (fixed.find('.') == std::string::npos ? " ( '.' '0'+ )?" : " '0'*");
  }
  return quote_literal(v.dump());
}

}  // namespace cgram::json_schema_detail

// JSON Schema → .cgram: an object's other members, those whose key is none
// of the names it lists: patternProperties (the keys split into the
// languages its patterns match together), propertyNames, and any other key
// with additionalProperties' value, within the limits on key regexes.
#include "json_schema_converter.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <tuple>
#include <utility>

#include "cgram_text.h"
#include "char_dfa.h"
#include "json_text.h"

namespace cgram::json_schema_detail {

// The keys each patternProperties pattern matches, in schema order; nullopt
// (after an error) where a pattern cannot be read.
std::optional<std::vector<OtherMembersWriter::KeyPattern>> OtherMembersWriter::key_patterns(const Node& node) {
  const Json& s = *node.schema;
  std::vector<KeyPattern> patterns;
  if (!s.contains("patternProperties")) return patterns;
  const std::string at = node.pointer + "/patternProperties";
  if (!s["patternProperties"].is_object()) {
    diagnostics_.error(at, "'patternProperties' must be an object");
    return std::nullopt;
  }
  for (const auto& [pattern, schema] : s["patternProperties"].items()) {
    const std::string pointer = at + "/" + pointer_token(pattern);
    auto converted = json::ecma_pattern_to_regex(pattern);
    if (auto* e = converted.if_error()) {
      diagnostics_.error(pointer, "'patternProperties': " + e->message);
      return std::nullopt;
    }
    auto parsed = ir::parse_regex(*converted, limits_.max_nesting);
    if (auto* e = std::get_if<ir::RegexError>(&parsed)) {
      diagnostics_.error(pointer, "'patternProperties': " + e->message);
      return std::nullopt;
    }
    std::optional<json::CharDfa> keys = json::CharDfa::of_regex(std::get<ir::RegexNode>(parsed));
    if (!keys) {
      diagnostics_.error(pointer, fmt::format("'patternProperties': the keys this pattern matches need an automaton of more "
                                 "than {} states (the limit)",
                                 json::CharDfaLimits{}.max_states));
      return std::nullopt;
    }
    patterns.push_back({std::move(*keys), &schema, pointer});
  }
  return patterns;
}

// The members whose key is none of `names`: the keys are split into disjoint
// languages by the patterns each matches (none: additionalProperties), and
// each language is a key regex with the value its patterns' schemas allow
// together. nullopt with `failed` set after an error; nullopt alone when no
// such member can appear.
Expr OtherMembersWriter::pattern_members(const Node& node, const std::vector<std::string>& names,
                              const std::vector<KeyPattern>& patterns, const Json* extra, int depth, bool& failed) {
  struct Region {
    json::CharDfa keys;
    std::vector<size_t> patterns;
  };
  std::vector<Region> regions;
  bool too_large = false;
  std::function<void(size_t, json::CharDfa, std::vector<size_t>)> split = [&](size_t j, json::CharDfa keys,
                                                                             std::vector<size_t> chosen) {
    if (too_large) return;
    if (j == patterns.size()) {
      if (regions.size() >= kMaxKeyRegions) too_large = true;
      else regions.push_back({std::move(keys), std::move(chosen)});
      return;
    }
    std::optional<json::CharDfa> in = keys.intersect(patterns[j].keys), out = keys.minus(patterns[j].keys);
    if (!in || !out) {
      too_large = true;
      return;
    }
    if (!in->empty()) {
      std::vector<size_t> with = chosen;
      with.push_back(j);
      split(j + 1, std::move(*in), std::move(with));
    }
    if (!out->empty()) split(j + 1, std::move(*out), std::move(chosen));
  };
  std::optional<json::CharDfa> listed = json::CharDfa::of_strings(names);
  std::optional<json::CharDfa> others = listed ? json::CharDfa::everything().minus(*listed) : std::nullopt;
  const std::string at = node.pointer + "/patternProperties";
  if (!others) {
    diagnostics_.error(at, fmt::format("the keys beside these {} properties need an automaton of more than {} states (the limit)",
                          names.size(), json::CharDfaLimits{}.max_states));
    failed = true;
    return std::nullopt;
  }
  split(0, std::move(*others), {});
  if (too_large) {
    diagnostics_.error(at, fmt::format("the keys these patterns split need more than {} key languages or an automaton of more "
                          "than {} states (the limits)",
                          kMaxKeyRegions, json::CharDfaLimits{}.max_states));
    failed = true;
    return std::nullopt;
  }
  std::vector<std::string> members;
  for (const Region& region : regions) {
    Expr value_of_key;
    if (region.patterns.empty()) {
      value_of_key = converter_.value({extra, node.pointer + "/additionalProperties"}, depth + 1);
    } else if (region.patterns.size() == 1) {
      const KeyPattern& p = patterns[region.patterns[0]];
      value_of_key = converter_.value({p.schema, p.pointer}, depth + 1);
    } else {
      Json parts = Json::array();
      for (size_t i : region.patterns) parts.push_back(*patterns[i].schema);
      value_of_key = combinators_.value_of_merged(Json{{"allOf", parts}}, patterns[region.patterns[0]].pointer, depth + 1);
    }
    if (!value_of_key) continue;
    const std::optional<ir::RegexNode> regex = region.keys.to_regex();
    const std::optional<std::string> encoded = regex ? json::encode_regex(*regex) : std::nullopt;
    if (encoded) key_regex_bytes_ += encoded->size();
    if (!encoded || encoded->size() > kMaxKeyRegexBytes || key_regex_bytes_ > kMaxAllKeyRegexBytes) {
      if (encoded && encoded->size() <= kMaxKeyRegexBytes && std::exchange(all_key_regexes_refused_, true)) {
        failed = true;
        return std::nullopt;
      }
      diagnostics_.error(at, fmt::format("the keys these patterns split need a regex of more than {} nodes or {} KiB, or key "
                            "regexes of more than {} KiB in all (the limits)",
                            json::CharDfaLimits{}.max_regex_nodes, kMaxKeyRegexBytes >> 10,
                            kMaxAllKeyRegexBytes >> 10));
      failed = true;
      return std::nullopt;
    }
    members.push_back(fmt::format("#'\"{}\"' {} {}", *encoded, layout_.colon(), *value_of_key));
  }
  return alternation(members);
}

// The members whose key is none of `names`: by the languages the patterns
// split the other keys into, by propertyNames where no name is listed, or
// any other key (a regex of the names' complement) with additionalProperties'
// value. nullopt with `failed` set after an error; nullopt alone when no such
// member can appear.
Expr OtherMembersWriter::members(const Node& node, const std::vector<std::string>& names,
                                 const std::vector<KeyPattern>& patterns, const Json* extra,
                                 const std::string& extra_pointer, int depth, bool& failed) {
  const Json& s = *node.schema;
  if (!patterns.empty()) return pattern_members(node, names, patterns, extra, depth, failed);
  if (names.empty() && s.contains("propertyNames") && document_.in_draft("propertyNames")) {
    // No name listed: the keys are the strings propertyNames accepts.
    Expr keys = combinators_.value_of_merged(Json{{"allOf", Json::array({Json{{"type", "string"}}, s["propertyNames"]})}},
                                node.pointer + "/propertyNames", depth + 1);
    Expr extra_value = converter_.value({extra, extra_pointer}, depth + 1);
    if (!keys || !extra_value) return std::nullopt;
    return fmt::format("{} {} {}", *keys, layout_.colon(), *extra_value);
  }
  const Expr extra_value = converter_.value({extra, extra_pointer}, depth + 1);
  if (!extra_value) return std::nullopt;
  {
    // A key other than the listed ones is a regex that grows with the
    // names (a trie of them, with "any string" after each place a key
    // leaves it): past a size its automaton takes seconds to build.
    // Every node of the names' trie writes at least 32 bytes of regex: a
    // trie past kMaxKeyRegexBytes / 32 nodes is refused before it is built.
    const std::optional<std::string> made = json::key_not_in_regex(names, kMaxKeyRegexBytes / 32);
    const std::string other_keys = made.value_or("");
    key_regex_bytes_ += other_keys.size();
    if (!made || other_keys.size() > kMaxKeyRegexBytes || key_regex_bytes_ > kMaxAllKeyRegexBytes) {
      const std::string at = s.contains("additionalProperties") ? extra_pointer : node.pointer;
      if (!made)
        diagnostics_.error(at, fmt::format("the keys allowed beside these {} properties (additionalProperties is not false) need "
                              "a regex of more than {} KiB (the names have more than {} characters apart from "
                              "shared prefixes): give 'additionalProperties': false, or fewer properties",
                              names.size(), kMaxKeyRegexBytes >> 10, kMaxKeyRegexBytes / 32));
      else if (other_keys.size() > kMaxKeyRegexBytes)
        diagnostics_.error(at, fmt::format("the keys allowed beside these {} properties (additionalProperties is not false) need "
                              "a regex of {} KiB, more than the limit of {} KiB: give 'additionalProperties': false, "
                              "or fewer properties",
                              names.size(), other_keys.size() >> 10, kMaxKeyRegexBytes >> 10));
      else if (!std::exchange(all_key_regexes_refused_, true))  // said once, not at every object after
        diagnostics_.error(at, fmt::format("the keys allowed beside the properties of the schema's objects (where "
                              "additionalProperties is not false) need regexes of more than {} KiB in all (the "
                              "limit): give 'additionalProperties': false to more of them",
                              kMaxAllKeyRegexBytes >> 10));
      failed = true;
      return std::nullopt;
    }
    return fmt::format("#'{}' {} {}", other_keys, layout_.colon(), *extra_value);
  }
}

void OtherMembersWriter::restore(const KeyBudget& budget) {
  key_regex_bytes_ = budget.bytes;
  all_key_regexes_refused_ = budget.refused;
}

}  // namespace cgram::json_schema_detail

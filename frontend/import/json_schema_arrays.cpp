// JSON Schema → .cgram: arrays. Items (prefixItems, items, draft-07's array
// items and additionalItems) with minItems and maxItems, `contains`, and
// uniqueItems over a few values.
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

Expr ArrayWriter::array(const Node& node, int depth) {
  const Json& s = *node.schema;
  const uint64_t min_items = scalars_.count(node, "minItems").value_or(0);
  std::optional<uint64_t> max_items = scalars_.count(node, "maxItems");
  if (max_items && *max_items < min_items) return std::nullopt;
  // Distinct items from a few values: at most that many, whatever the bounds say.
  if (const std::optional<std::vector<std::vector<Json>>> values = unique_item_values(s))
    return unique_items(node, *values, min_items, max_items, depth);
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
    diagnostics_.error(prefix_pointer, "'prefixItems' must be an array");
    return std::nullopt;
  }
  std::vector<Expr> firsts;
  if (prefix)
    for (size_t i = 0; i < prefix->size(); ++i)
      firsts.push_back(converter_.value({&(*prefix)[i], prefix_pointer + "/" + std::to_string(i)}, depth + 1));
  static const Json any = true;
  Expr rest_value = converter_.value(rest ? Node{rest, rest_pointer} : Node{&any, node.pointer}, depth + 1);
  // The first of the rest is written apart from the others: a long one is
  // named, so that nested arrays stay linear in the schema (each level
  // would double the text).
  if (rest_value && rest_value->size() > kInlineBytes)
    rest_value = rules_.add("items", *rest_value, rest ? rest_pointer : node.pointer);
  const uint64_t k = firsts.size();
  if (max_items && *max_items > limits_.max_repeat_bound) {
    diagnostics_.permissive(node.pointer + "/maxItems", fmt::format("'maxItems' above {} is not enforced", limits_.max_repeat_bound));
    max_items.reset();
  }
  if (min_items > limits_.max_repeat_bound) {
    diagnostics_.error(node.pointer + "/minItems", fmt::format("'minItems' above {} is not supported", limits_.max_repeat_bound));
    return std::nullopt;
  }
  const std::string sep = layout_.separator(layout_.depth(depth));
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
      // (No repetition where it could only be empty: a grammar warns of one.)
      if (i > 0) return hi == 0u ? Expr("") : Expr(fmt::format("({} {}){}", sep, *rest_value, bounds(lo, hi)));
      if (hi == 1u) return *rest_value;
      return fmt::format("{} ({} {}){}", *rest_value, sep, *rest_value,
                         bounds(lo - 1, hi ? std::optional<uint64_t>(*hi - 1) : std::nullopt));
    }
    Expr next = firsts[i] ? from(i + 1) : std::nullopt;
    Expr with_it;
    if (next) with_it = (i ? sep + " " : "") + *firsts[i] + (next->empty() ? "" : " " + *next);
    if (!with_it) return may_stop ? Expr("") : std::nullopt;
    return may_stop ? fmt::format("({})?", *with_it) : *with_it;
  };
  const bool user = s.contains("contains") && document_.in_draft("contains"), internal = s.contains(kContains);
  if (internal && (user || !simple_contains(s)))
    diagnostics_.permissive(node.pointer, "'contains' is not supported and is ignored: the grammar accepts more than the schema");
  else if (user || internal) {
    // Some item (any one) matches `contains` as well as the items' schema:
    // the items before it and after it are any items.
    Json both = Json{{"allOf", Json::array({rest ? *rest : Json(true), s[internal ? kContains : "contains"]})}};
    const Expr found = combinators_.value_of_merged(both, node.pointer + "/contains", depth + 1);
    if (!found) return std::nullopt;
    if (!rest_value) return layout_.container('[', *found, layout_.depth(depth));
    return layout_.container('[', fmt::format("({0} {1})* {2} ({1} {0})*", *rest_value, sep, *found), layout_.depth(depth));
  }
  std::vector<std::string> alternatives;
  if (min_items == 0) alternatives.push_back(layout_.empty_container('['));
  if (Expr items = from(0)) alternatives.push_back(layout_.container('[', *items, layout_.depth(depth)));
  return alternation(alternatives);
}

std::optional<std::vector<std::vector<Json>>> unique_item_values(const Json& s) {
  if (!s.contains("uniqueItems") || s["uniqueItems"] != true || !s.contains("items") || !s["items"].is_object())
    return std::nullopt;
  for (const char* other : {"prefixItems", "contains", kContains, "enum", "const"})
    if (s.contains(other)) return std::nullopt;
  const Json& items = s["items"];
  std::vector<Json> listed;
  if (items.contains("enum") && items["enum"].is_array()) listed.assign(items["enum"].begin(), items["enum"].end());
  else if (items.contains("const")) listed = {items["const"]};
  else if (items.size() == 1 && items.contains("type") && items["type"] == "boolean") listed = {true, false};
  else return std::nullopt;
  // Distinct as JSON values: 1 and 1.0 are one, and so are two objects
  // whose members come in another order (json_equal, as the merge reads
  // them); each keeps the spellings listed (an object in each order).
  std::vector<std::vector<Json>> values;
  for (const Json& v : listed) {
    const auto same = std::find_if(values.begin(), values.end(),
                                   [&](const std::vector<Json>& spellings) { return json_equal(spellings[0], v); });
    if (same == values.end()) values.push_back({v});
    else if (std::find(same->begin(), same->end(), v) == same->end()) same->push_back(v);
  }
  if (values.empty() || values.size() > kMaxUniqueValues) return std::nullopt;
  return values;
}

Expr ArrayWriter::unique_items(const Node& node, const std::vector<std::vector<Json>>& values, uint64_t min_items,
                             std::optional<uint64_t> max_items, int depth) {
  const Json& items = (*node.schema)["items"];
  const std::string at = node.pointer + "/items";
  // Each value as the items' schema allows it (one it does not is left out:
  // exact, since no array can hold it).
  std::vector<std::string> each;
  for (const std::vector<Json>& spellings : values) {
    std::vector<std::string> written;
    for (const Json& v : spellings)
      if (Expr e = combinators_.value_of_merged(Json{{"allOf", Json::array({items, Json{{"const", v}}})}}, at, depth + 1))
        if (std::find(written.begin(), written.end(), *e) == written.end()) written.push_back(*e);
    if (written.empty()) continue;
    // Named when long: each value is written in up to 2^(k-1) + 1 places.
    const std::string e = *alternation(written);
    each.push_back(e.size() > kInlineBytes ? rules_.add("unique_item", e, at) : e);
  }
  const size_t k = each.size();
  const uint64_t most = std::min<uint64_t>(k, max_items.value_or(k));
  const std::string sep = layout_.separator(layout_.depth(depth));
  // rest[used]: the items after those of the set `used` (a bit per value):
  // "" when none may follow, nullopt when the array cannot be finished.
  // Sets are made after their supersets (a larger number first).
  std::vector<Expr> rest(size_t{1} << k);
  for (uint32_t used = (1u << k) - 1; used > 0; --used) {
    const auto count = static_cast<uint64_t>(std::popcount(used));
    std::vector<std::string> next;
    for (size_t i = 0; i < k && count < most; ++i) {
      const uint32_t with = used | 1u << i;
      if (with != used && rest[with])
        next.push_back(sep + " " + each[i] + (rest[with]->empty() ? "" : " " + *rest[with]));
    }
    const bool may_stop = count >= min_items;
    if (next.empty()) {
      rest[used] = may_stop ? Expr("") : std::nullopt;
      continue;
    }
    const std::string body = *alternation(next);
    rest[used] = rules_.add("unique_items", may_stop ? fmt::format("({})?", body) : body, node.pointer);
  }
  std::vector<std::string> firsts;
  for (size_t i = 0; i < k && most >= 1; ++i)
    if (rest[1u << i]) firsts.push_back(each[i] + (rest[1u << i]->empty() ? "" : " " + *rest[1u << i]));
  std::vector<std::string> alternatives;
  if (min_items == 0) alternatives.push_back(layout_.empty_container('['));
  if (!firsts.empty()) alternatives.push_back(layout_.container('[', *alternation(firsts), layout_.depth(depth)));
  return alternation(alternatives);
}

bool simple_contains(const Json& s) {
  auto at_most_one = [&](const char* key) {
    return !s.contains(key) || (s[key].is_number_unsigned() && s[key].get<uint64_t>() <= 1);
  };
  return (s.contains("contains") || s.contains(kContains)) && !s.contains("prefixItems") &&
         !(s.contains("items") && s["items"].is_array()) && !s.contains("maxItems") && at_most_one("minItems") &&
         !s.contains("maxContains") && (!s.contains("minContains") || s["minContains"] == 1);
}

}  // namespace cgram::json_schema_detail

// JSON Schema → .cgram: objects. The listed members (properties,
// required) in the schema's property order or in any order, and their
// counts (minProperties, maxProperties); the other members are
// json_schema_other_members.cpp's.
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

// The members in the schema's order, at least one (the empty object is
// written apart, for the same reason as the empty array), the additional
// ones after them; `may_be_empty` is cleared when one is required.
Expr ObjectWriter::members_in_order(const MemberList& list, bool& may_be_empty) {
  const std::vector<std::string>& written = list.written;
  const std::string& sep = list.separator;
  // tail(i): members i.. after one was written already; some(i): members i.., at least one.
  const size_t n = written.size();
  std::vector<std::string> tail(n + 1);
  std::vector<Expr> some(n + 1);
  tail[n] = list.extra ? fmt::format("({} {})*", sep, *list.extra) : "";
  if (list.extra) some[n] = fmt::format("{0} ({1} {0})*", *list.extra, sep);
  for (size_t i = n; i-- > 0;) {
    const std::string with_it = written[i] + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
    if (list.required[i]) {
      tail[i] = fmt::format("{} {}", sep, with_it);
      some[i] = with_it;
      may_be_empty = false;
    } else {
      tail[i] = fmt::format("({} {})?", sep, written[i]) + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
      some[i] = some[i + 1] ? fmt::format("({} | {})", with_it, *some[i + 1]) : with_it;
    }
    // Long chains are named, so that the text stays linear in the members.
    if (i > 0 && tail[i].size() > 200) tail[i] = rules_.add(fmt::format("members_{}", i), tail[i], list.pointer);
    if (i > 0 && some[i]->size() > 200) some[i] = rules_.add(fmt::format("some_members_{}", i), *some[i], list.pointer);
  }
  return some[0];
}

// Whether minProperties/maxProperties past 1 are said by counting members
// (schema order, bounds up to kMaxCountedMembers), given how many names the
// object lists.
bool ObjectWriter::counted_members(const Json& s, size_t listed, JsonPropertyOrder order) {
  if (order != JsonPropertyOrder::Schema) return false;
  bool any = false;
  for (const char* key : {"minProperties", "maxProperties"}) {
    if (!s.contains(key)) continue;
    if (!s[key].is_number_unsigned() || s[key].get<uint64_t>() > kMaxCountedMembers) return false;
    any = any || s[key].get<uint64_t>() > 1;
  }
  return any && listed <= kMaxCountedMembers;
}

// The members in the schema's order, at least one, between `at_least` and
// `at_most` of them in all (listed and additional): one rule per member and
// count written so far (the count stops mattering past at_least when there
// is no at_most).
Expr ObjectWriter::members_counted(const MemberList& list, uint64_t at_least, std::optional<uint64_t> at_most) {
  const size_t n = list.written.size();
  const std::string& sep = list.separator;
  std::map<std::tuple<size_t, uint64_t, bool>, Expr> memo;
  std::function<Expr(size_t, uint64_t, bool)> rest = [&](size_t i, uint64_t c, bool first) -> Expr {
    if (!at_most) c = std::min(c, at_least);
    const auto key = std::tuple{i, c, first};
    if (auto found = memo.find(key); found != memo.end()) return found->second;
    Expr out;
    if (i == n) {
      // k additional members, c + k within the bounds (at least one if none was written).
      const uint64_t lo = std::max<uint64_t>(at_least > c ? at_least - c : 0, first ? 1 : 0);
      const std::optional<uint64_t> hi = at_most ? std::optional<uint64_t>(*at_most - c) : std::nullopt;
      if (hi && *hi < lo) out = std::nullopt;
      else if (!list.extra) out = lo == 0 ? Expr("") : std::nullopt;
      else if (hi == 0u) out = "";
      else {
        const uint64_t skip = first ? 1 : 0;  // the first one is written without a separator
        const std::string more =
            hi ? fmt::format("({} {}){{{},{}}}", sep, *list.extra, lo - skip, *hi - skip)
               : fmt::format("({} {}){{{},}}", sep, *list.extra, lo - skip);
        out = first ? *list.extra + (hi == 1u ? "" : " " + more) : more;
      }
    } else {
      std::vector<std::string> ways;
      if (!at_most || c < *at_most)
        if (Expr after = rest(i + 1, c + 1, false))
          ways.push_back((first ? "" : sep + " ") + list.written[i] + (after->empty() ? "" : " " + *after));
      if (!list.required[i])
        if (Expr without = rest(i + 1, c, first)) ways.push_back(*without);
      if (ways.size() == 1) out = ways[0];
      else if (ways.size() == 2) out = ways[1].empty() ? fmt::format("({})?", ways[0]) : *alternation(ways);
    }
    if (out && out->size() > 200) out = rules_.add("counted_members", *out, list.pointer);
    memo[key] = out;
    return out;
  };
  return rest(0, 0, true);
}

// The members in any order, each at most once, the required ones all there,
// additional ones anywhere: one rule per set of members still to come (2^n
// rules, so exact up to kMaxAnyOrderMembers members). A larger object takes
// any member any number of times, with a warning.
Expr ObjectWriter::members_any_order(const MemberList& list, bool& may_be_empty) {
  const size_t n = list.written.size();
  const std::string& sep = list.separator;
  std::vector<std::string> member(list.written);
  for (std::string& m : member)
    if (m.size() > 60) m = rules_.add("member", m, list.pointer);
  const bool any_required = std::find(list.required.begin(), list.required.end(), true) != list.required.end();
  if (any_required) may_be_empty = false;
  if (n > kMaxAnyOrderMembers) {
    diagnostics_.permissive(list.pointer, fmt::format("with any property order, an object of more than {} properties takes them "
                                         "in any order without checking that each appears once{}",
                                         kMaxAnyOrderMembers, any_required ? " or that the required ones appear" : ""));
    may_be_empty = true;
    if (list.extra) member.push_back(*list.extra);
    const std::string one = rules_.add("any_member", *alternation(member), list.pointer);
    return fmt::format("{0} ({1} {0})*", one, sep);
  }
  const Expr& extra = list.extra;
  const std::string extras = extra ? fmt::format("({} {})*", sep, *extra) : "";
  std::map<uint32_t, std::string> rest;  // after a member: the members of the mask still to come
  std::function<std::string(uint32_t)> rest_of = [&](uint32_t left) -> std::string {
    if (auto found = rest.find(left); found != rest.end()) return found->second;
    std::vector<std::string> next;
    bool must = false;
    for (size_t i = 0; i < n; ++i)
      if (left >> i & 1) {
        must = must || list.required[i];
        const std::string after = rest_of(left & ~(uint32_t{1} << i));
        next.push_back(fmt::format("{} {}{}", sep, member[i], after.empty() ? "" : " " + after));
      }
    std::string body = extras;
    if (!next.empty()) {
      const std::string choice = *alternation(next);
      body += (body.empty() ? "" : " ") + (must ? choice : "(" + choice + ")?");
    }
    if (body.empty()) return rest[left] = "";
    return rest[left] = rules_.add("members_left", body, list.pointer);
  };
  const uint32_t all = (uint32_t{1} << n) - 1;
  std::vector<std::string> first;
  for (size_t i = 0; i < n; ++i) {
    const std::string after = rest_of(all & ~(uint32_t{1} << i));
    first.push_back(member[i] + (after.empty() ? "" : " " + after));
  }
  if (extra) first.push_back(*extra + (rest_of(all).empty() ? "" : " " + rest_of(all)));
  return alternation(first);
}

Expr ObjectWriter::object(const Node& node, int depth) {
  const Json& s = *node.schema;
  struct Member {
    std::string name;
    Expr value;
    bool required;
  };
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) {
      diagnostics_.error(node.pointer + "/required", "'required' must be an array of strings");
      return std::nullopt;
    }
    for (const Json& r : s["required"])
      if (r.is_string()) required.insert(r.get<std::string>());
      else diagnostics_.error(node.pointer + "/required", "'required' must be an array of strings");
  }
  static const Json any = true, none = false;
  // JSON Schema's default lets any other member in; closed objects (a tool's
  // arguments, where a model must not invent parameters) let none in unless
  // the schema says otherwise.
  const bool closed = options_.closed_objects && !s.contains("patternProperties");
  const Json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : closed ? &none : &any;
  const std::string extra_pointer = node.pointer + "/additionalProperties";
  const std::optional<std::vector<OtherMembersWriter::KeyPattern>> patterns = others_.key_patterns(node);
  if (!patterns) return std::nullopt;
  // A listed name's value: its schema, with every pattern's that matches it
  // (a name no property lists but `required` does: additionalProperties
  // where no pattern matches it).
  auto member_value = [&](const std::string& name, const Json* schema, const std::string& at) -> Expr {
    // The schemas of the patterns that match the name, but none that says
    // nothing or repeats one already there (schemas often list a name and a
    // pattern with the same schema; merged, a recursive one grows at every level).
    std::vector<const Json*> parts;
    if (schema) parts.push_back(schema);
    std::string pointer = at;
    for (const OtherMembersWriter::KeyPattern& p : *patterns)
      if (p.keys.matches(name) && (p.schema->is_object() ? has_constraints(*p.schema) : *p.schema != true) &&
          std::none_of(parts.begin(), parts.end(), [&](const Json* q) { return *q == *p.schema; })) {
        if (parts.empty()) pointer = p.pointer;
        parts.push_back(p.schema);
      }
    if (parts.empty()) {
      // A closed object allows the names it lists, `required` among them,
      // with any value where nothing else says one.
      const bool pattern_allows_anything =
          (closed && !s.contains("additionalProperties")) ||
          std::any_of(patterns->begin(), patterns->end(), [&](const OtherMembersWriter::KeyPattern& p) { return p.keys.matches(name); });
      static const Json anything = true;
      return converter_.value({pattern_allows_anything ? &anything : extra, pattern_allows_anything ? at : extra_pointer},
                   depth + 1);
    }
    if (parts.size() == 1) return converter_.value({parts[0], pointer}, depth + 1);
    Json all = Json::array();
    for (const Json* part : parts) all.push_back(*part);
    return combinators_.value_of_merged(Json{{"allOf", all}}, at, depth + 1);
  };
  std::vector<Member> members;
  std::vector<std::string> names;
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) {
      diagnostics_.error(node.pointer + "/properties", "'properties' must be an object");
      return std::nullopt;
    }
    for (const auto& [name, schema] : s["properties"].items()) {
      const std::string at = node.pointer + "/properties/" + pointer_token(name);
      members.push_back({name, member_value(name, &schema, at), required.count(name) > 0});
      names.push_back(name);
    }
  }
  if (s.contains("required"))
    for (const Json& r : s["required"])
      if (r.is_string() && std::find(names.begin(), names.end(), r.get<std::string>()) == names.end()) {
        members.push_back({r.get<std::string>(), member_value(r.get<std::string>(), nullptr, node.pointer + "/required"),
                           true});
        names.push_back(r.get<std::string>());
      }
  const int d = layout_.depth(depth);
  std::vector<std::string> written;  // "key": value of each member that can appear
  std::vector<bool> is_required;
  for (const Member& m : members) {
    if (!m.value) {
      if (m.required) return std::nullopt;
      continue;
    }
    written.push_back(fmt::format("{} {} {}", quote_literal(json::json_string_text(m.name)), layout_.colon(), *m.value));
    is_required.push_back(m.required);
  }
  bool failed = false;
  Expr extra_member = others_.members(node, names, *patterns, extra, extra_pointer, depth, failed);
  if (failed) return std::nullopt;
  // Written in several places (after each member, and alone): named once when long.
  if (extra_member && extra_member->size() > kInlineBytes)
    extra_member = rules_.add("other_member", *extra_member, node.pointer);
  // minProperties and maxProperties of 0 or 1 are said exactly (larger ones
  // are ignored with a warning, check_keywords).
  auto property_count = [&](const char* key) -> std::optional<uint64_t> {
    if (!s.contains(key) || !s[key].is_number_unsigned()) return std::nullopt;
    return s[key].get<uint64_t>();
  };
  const uint64_t at_least = property_count("minProperties").value_or(0);
  const std::optional<uint64_t> at_most = property_count("maxProperties");
  const size_t required_count = static_cast<size_t>(std::count(is_required.begin(), is_required.end(), true));
  if (at_most && at_least > *at_most) return std::nullopt;  // no object has both
  if (at_most && *at_most <= 1) {
    // No member, or one: a required one if there is one.
    std::vector<std::string> alternatives;
    if (required_count == 0 && at_least == 0) alternatives.push_back(layout_.empty_container('{'));
    if (*at_most == 1 && required_count <= 1) {
      for (size_t i = 0; i < written.size(); ++i)
        if (required_count == 0 || is_required[i]) alternatives.push_back(layout_.container('{', written[i], d));
      if (required_count == 0 && extra_member) alternatives.push_back(layout_.container('{', *extra_member, d));
    }
    return alternation(alternatives);
  }
  const MemberList list{written, is_required, extra_member, layout_.separator(d), node.pointer};
  if (counted_members(s, listed_names(s), options_.property_order)) {  // (as check_keywords asks it)
    // Other counts, in the schema's order: how many members are written so far.
    std::vector<std::string> alternatives;
    if (at_least == 0 && required_count == 0) alternatives.push_back(layout_.empty_container('{'));
    if (Expr some = members_counted(list, at_least, at_most)) alternatives.push_back(layout_.container('{', *some, d));
    return alternation(alternatives);
  }
  bool may_be_empty = at_least == 0;
  // (Any order matters once two members can appear: one listed beside additional ones too.)
  const Expr some = options_.property_order == JsonPropertyOrder::Any && !written.empty() &&
                            (written.size() > 1 || extra_member)
                        ? members_any_order(list, may_be_empty)
                        : members_in_order(list, may_be_empty);
  std::vector<std::string> alternatives;
  if (may_be_empty) alternatives.push_back(layout_.empty_container('{'));
  if (some) alternatives.push_back(layout_.container('{', *some, d));
  return alternation(alternatives);
}

}  // namespace cgram::json_schema_detail

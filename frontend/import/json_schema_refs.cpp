// JSON Schema → .cgram: references. '$ref' inside the schema (JSON pointers
// and '$anchor' names), constraints beside a '$ref', and the one rule made
// for each schema referred to (per layout depth), which recursion needs.
#include "json_schema_converter.h"

#include <fmt/format.h>

#include <exception>
#include <string>

namespace cgram::json_schema_detail {

// --- $ref -------------------------------------------------------------------
const Json* SchemaDocument::resolve(const std::string& ref, const std::string& at, std::string& target_pointer) {
  if (ref.empty() || ref[0] != '#') {
    diagnostics_.error(at, fmt::format("'$ref' to '{}': only references inside the schema ('#…') are supported", ref));
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
    if (!anchored) diagnostics_.error(at, fmt::format("'$ref': no '$anchor' named '{}' in the schema", decoded));
    return anchored;
  }
  try {
    const Json* target = &root_.at(Json::json_pointer(decoded));
    target_pointer = decoded;
    return target;
  } catch (const std::exception&) {
    diagnostics_.error(at, fmt::format("'$ref': '{}' names nothing in the schema", ref));
    return nullptr;
  }
}

const Json* SchemaDocument::find_anchor(const Json& s, const std::string& name, const std::string& pointer,
                                   std::string& found) {
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

// Whether the root names draft 04, 06 or 07, where $ref stands alone.
bool SchemaDocument::refs_stand_alone() const {
  const int draft = declared_draft();
  return draft == 4 || draft == 6 || draft == 7;
}

int SchemaDocument::declared_draft() const {
  if (!root_.is_object() || !root_.contains("$schema") || !root_["$schema"].is_string()) return 0;
  const std::string uri = root_["$schema"].get<std::string>();
  for (const auto& [name, draft] : {std::pair{"draft-04", 4}, std::pair{"draft-06", 6}, std::pair{"draft-07", 7},
                                    std::pair{"2019-09", 2019}, std::pair{"2020-12", 2020}})
    if (uri.find(name) != std::string::npos) return draft;
  return 0;
}

bool SchemaDocument::in_draft(const std::string& key) const {
  const int draft = declared_draft();
  if (draft == 0) return true;
  if (key == "if" || key == "then" || key == "else") return draft >= 7;
  if (key == "contains" || key == "propertyNames") return draft >= 6;
  if (key == "dependentRequired" || key == "dependentSchemas") return draft >= 2019;
  if (key == "dependencies") return draft <= 7;
  return true;
}

Expr ReferenceWriter::reference(const Node& node, int depth) {
  const Json& s = *node.schema;
  const std::string at = node.pointer + "/$ref";
  if (!s["$ref"].is_string()) {
    diagnostics_.error(at, "'$ref' must be a string");
    return std::nullopt;
  }
  std::string target_pointer;
  const Json* target = document_.resolve(s["$ref"].get<std::string>(), at, target_pointer);
  if (!target) return std::nullopt;
  // Other constraints beside $ref apply too (2019-09 and 2020-12): merge
  // them. Drafts 04 to 07 ignore them ("All other properties in a $ref
  // object MUST be ignored"), and a schema that names one of them says so.
  Json rest = s;
  rest.erase("$ref");
  if (has_constraints(rest) && !document_.refs_stand_alone())
    return combinators_.value_of_merged(Json{{"allOf", Json::array({*target, rest})}}, node.pointer, depth);
  return rule_for(target, target_pointer, depth);
}

// The rule for the schema at `pointer` (one for each depth in pretty layout).
Expr ReferenceWriter::rule_for(const Json* target, const std::string& pointer, int depth) {
  const std::pair<std::string, int> key{pointer, layout_.depth(depth)};
  auto found = ref_rules_.find(key);
  if (found != ref_rules_.end()) return found->second;
  std::string base = pointer.substr(pointer.rfind('/') + 1);
  if (base.empty()) base = "root";
  if (key.second) base += fmt::format("_{}", key.second);
  const size_t index = rules_.reserve(base, pointer);
  const std::string name = rules_[index].name;
  ref_rules_[key] = name;
  journal_.added(key);
  Expr body = converter_.value({target, pointer}, depth);
  // No value: the rule must not be used (.cgram has no empty language).
  if (!body) ref_rules_[key] = std::nullopt;
  else rules_[index].body = *body;
  return body ? Expr(name) : std::nullopt;
}

}  // namespace cgram::json_schema_detail

#include "qwen_parameters.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "cgram_text.h"
#include "char_dfa.h"
#include "json_text.h"
#include "regex.h"

namespace cgram {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 32;           // $ref hops and nested allOf/anyOf/oneOf
constexpr size_t kMaxShapes = 64;       // alternatives of the object after distributing anyOf/oneOf
constexpr size_t kMaxCountStates = 4096;  // (parameter, count) pairs for minProperties/maxProperties
constexpr size_t kMaxShapeCalls = 10000;  // schemas read for one tool's parameters (shared $refs add up)

// Keywords that say nothing about an object's members.
const std::set<std::string> kAnnotations = {"$schema", "$id",     "$comment", "$anchor",  "title",     "description",
                                            "examples", "default", "deprecated", "readOnly", "writeOnly", "strict",
                                            "$defs",   "definitions"};
// Object keywords this format cannot write: refused by name.
const std::set<std::string> kUnwritable = {"patternProperties", "propertyNames", "dependentRequired",
                                           "dependencies",      "dependentSchemas", "unevaluatedProperties",
                                           "if",                "then",          "else",
                                           "not",               "const",         "enum"};

std::string escaped(const std::string& text) {
  const std::string quoted = quote_literal(text);
  return quoted.substr(1, quoted.size() - 2);
}

std::string kind_of(const Json& value) {
  if (value.is_string()) return "a string";
  if (value.is_null()) return "null";
  if (value.is_array()) return "a list";
  if (value.is_number()) return "a number";
  return "an object";
}

bool allows_object(const Json& type) {
  if (type.is_string()) return type == "object";
  if (type.is_array()) return std::any_of(type.begin(), type.end(), [](const Json& t) { return t == "object"; });
  return false;
}

}  // namespace

QwenParameters::QwenParameters(std::string tool, const Json& root, bool closed, QwenCallbacks callbacks)
    : tool_(std::move(tool)), root_(root), closed_(closed), callbacks_(std::move(callbacks)) {}

void QwenParameters::report(std::string message) {
  failed_ = true;
  // A place in the schema ("#/…") is named with its tool.
  callbacks_.error(message.starts_with("#") ? fmt::format("tool '{}': {}", tool_, message) : std::move(message));
}

// --- Reading the schema into shapes --------------------------------------------

std::optional<Json> QwenParameters::resolved(const Json& schema, const std::string& pointer, int depth) {
  Json out = schema;
  for (int hops = depth; out.is_object() && out.contains("$ref"); ++hops) {
    const std::string at = pointer + "/$ref";
    if (hops > kMaxDepth) {
      report(fmt::format("{}: $ref goes round in a cycle, or deeper than {}", at, kMaxDepth));
      return std::nullopt;
    }
    if (!out["$ref"].is_string() || !out["$ref"].get<std::string>().starts_with("#")) {
      report(fmt::format("{}: a $ref here names a place in the tool's parameters (\"#\", \"#/$defs/…\")", at));
      return std::nullopt;
    }
    const std::string ref = out["$ref"];
    const Json* target = nullptr;
    try {
      target = &root_.at(Json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      report(fmt::format("{}: '{}' names nothing in the tool's parameters", at, ref));
      return std::nullopt;
    }
    Json siblings = out;
    siblings.erase("$ref");
    const bool constrains = std::any_of(siblings.items().begin(), siblings.items().end(),
                                        [](const auto& entry) { return !kAnnotations.count(entry.key()); });
    out = constrains ? Json{{"allOf", Json::array({*target, siblings})}} : *target;
  }
  return out;
}

std::optional<QwenParameters::Shape> QwenParameters::own_shape(const Json& s, const std::string& pointer) {
  for (const auto& [key, value] : s.items())
    if (kUnwritable.count(key)) {
      report(fmt::format("{}/{}: not read in the qwen format, whose parameters are written one by one; "
                                   "another format (hermes) reads it",
                                   pointer, key));
      return std::nullopt;
    }
  if (s.contains("type") && !allows_object(s["type"])) {
    report(fmt::format("{}/type: a tool's parameters are an object, and this schema's type is {}", pointer,
                                 s["type"].dump()));
    return std::nullopt;
  }
  Shape shape;
  shape.others = nullptr;  // unsaid: closed or open once the shapes are merged (translate)
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) {
      report(fmt::format("{}/properties: must be an object", pointer));
      return std::nullopt;
    }
    for (const auto& [name, schema] : s["properties"].items()) {
      if (name.find_first_of(">\n") != std::string::npos || name.empty()) {
        report(fmt::format("{}/properties: parameter '{}' cannot be written in the qwen format: a name there "
                                     "is not empty and holds no '>' or newline (it ends <parameter=…>)",
                                     pointer, escaped(name)));
        return std::nullopt;
      }
      shape.properties.emplace_back(name, schema);
    }
  }
  if (s.contains("required")) {
    if (!s["required"].is_array()) {
      report(fmt::format("{}/required: must be a list of names", pointer));
      return std::nullopt;
    }
    for (const Json& name : s["required"]) {
      if (!name.is_string()) {
        report(fmt::format("{}/required: must be a list of names", pointer));
        return std::nullopt;
      }
      shape.required.insert(name.get<std::string>());
    }
  }
  if (s.contains("additionalProperties")) {
    const Json& others = s["additionalProperties"];
    if (!others.is_boolean() && !others.is_object()) {
      report(fmt::format("{}/additionalProperties: must be a schema", pointer));
      return std::nullopt;
    }
    shape.others = others;
  }
  for (const char* key : {"minProperties", "maxProperties"})
    if (s.contains(key) && !s[key].is_number_unsigned()) {
      report(fmt::format("{}/{}: must be a whole number", pointer, key));
      return std::nullopt;
    }
  shape.min = s.value("minProperties", uint64_t{0});
  if (s.contains("maxProperties")) shape.max = s["maxProperties"].get<uint64_t>();
  return shape;
}

Json QwenParameters::both(const Json& a, const Json& b) {
  if (a.is_null()) return b;  // unsaid: no constraint of its own
  if (b.is_null()) return a;
  if (a == Json(true)) return b;
  if (b == Json(true) || a == b) return a;
  if (a == Json(false) || b == Json(false)) return false;
  return Json{{"allOf", Json::array({a, b})}};
}

QwenParameters::Shape QwenParameters::merge(const Shape& a, const Shape& b) {
  Shape m;
  auto find = [](const Shape& s, const std::string& name) -> const Json* {
    for (const auto& [n, schema] : s.properties)
      if (n == name) return &schema;
    return nullptr;
  };
  for (const auto& [name, schema] : a.properties) {
    const Json* other = find(b, name);
    m.properties.emplace_back(name, both(schema, other ? *other : b.others));
  }
  for (const auto& [name, schema] : b.properties)
    if (!find(a, name)) m.properties.emplace_back(name, both(a.others, schema));
  m.required = a.required;
  m.required.insert(b.required.begin(), b.required.end());
  m.others = both(a.others, b.others);
  m.min = std::max(a.min, b.min);
  m.max = a.max && b.max ? std::min(*a.max, *b.max) : a.max ? a.max : b.max;
  return m;
}

bool QwenParameters::dead(const Shape& shape) {
  auto schema_of = [&](const std::string& name) -> const Json& {
    for (const auto& [n, schema] : shape.properties)
      if (n == name) return schema;
    return shape.others;
  };
  for (const std::string& name : shape.required)
    if (schema_of(name) == Json(false)) return true;
  if (shape.max && (*shape.max < shape.min || *shape.max < shape.required.size())) return true;
  if (shape.others == Json(false)) {
    const auto possible = std::count_if(shape.properties.begin(), shape.properties.end(),
                                        [](const auto& p) { return p.second != Json(false); });
    if (shape.min > static_cast<uint64_t>(possible)) return true;
  }
  return false;
}

// Whether no parameter list can be in both: one requires a member the other forbids.
bool QwenParameters::exclusive(const Shape& a, const Shape& b) const {
  auto forbids = [&](const Shape& s, const std::string& name) {
    for (const auto& [n, schema] : s.properties)
      if (n == name) return schema == Json(false);
    return s.others == Json(false);  // unsaid forbids nothing yet: a parent may list the name
  };
  for (const std::string& name : a.required)
    if (forbids(b, name)) return true;
  for (const std::string& name : b.required)
    if (forbids(a, name)) return true;
  return false;
}

std::optional<std::vector<QwenParameters::Shape>> QwenParameters::shapes(const Json& schema,
                                                                          const std::string& pointer, int depth) {
  if (depth > kMaxDepth) {
    report(fmt::format("{}: allOf, anyOf and oneOf nest deeper than {}", pointer, kMaxDepth));
    return std::nullopt;
  }
  std::optional<Json> found = resolved(schema, pointer, depth);
  if (!found) return std::nullopt;
  const Json& s = *found;
  if (++shape_calls_ > kMaxShapeCalls) {
    if (shape_calls_ == kMaxShapeCalls + 1)
      report(fmt::format("{}: the parameters' $ref, allOf, anyOf and oneOf take more than {} steps to read",
                         pointer, kMaxShapeCalls));
    return std::nullopt;
  }
  if (s.is_boolean()) {
    if (!s.get<bool>()) return std::vector<Shape>{};
    Shape any;  // `true` says nothing: at the root, any parameters; below it, what the rest says
    any.others = depth == 0 ? Json(true) : Json(nullptr);
    return std::vector<Shape>{any};
  }
  if (!s.is_object()) {
    report(fmt::format("{}: a tool's parameters are a JSON Schema object, not {}", pointer, kind_of(s)));
    return std::nullopt;
  }
  std::optional<Shape> own = own_shape(s, pointer);
  if (!own) return std::nullopt;
  std::vector<Shape> out = {*own};
  // Each keyword holds of every value: the shapes so far times each of its.
  auto times = [&](const std::vector<Shape>& alternatives, const std::string& at) {
    std::vector<Shape> next;
    for (const Shape& a : out)
      for (const Shape& b : alternatives)
        if (Shape m = merge(a, b); !dead(m)) next.push_back(std::move(m));
    if (next.size() > kMaxShapes) {
      report(fmt::format("{}: more than {} alternative parameter lists", at, kMaxShapes));
      return false;
    }
    out = std::move(next);
    return true;
  };
  for (const char* key : {"allOf", "anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    const std::string at = pointer + "/" + key;
    if (!s[key].is_array() || s[key].empty()) {
      report(fmt::format("{}: must be a non-empty list of schemas", at));
      return std::nullopt;
    }
    if (std::string_view(key) == "allOf") {
      for (size_t i = 0; i < s[key].size(); ++i) {
        auto branch = shapes(s[key][i], fmt::format("{}/{}", at, i), depth + 1);
        if (!branch || !times(*branch, at)) return std::nullopt;
      }
      continue;
    }
    std::vector<Shape> alternatives;
    std::vector<size_t> branch_of;
    for (size_t i = 0; i < s[key].size(); ++i) {
      auto branch = shapes(s[key][i], fmt::format("{}/{}", at, i), depth + 1);
      if (!branch) return std::nullopt;
      for (Shape& b : *branch) alternatives.push_back(std::move(b)), branch_of.push_back(i);
    }
    if (std::string_view(key) == "oneOf")
      for (size_t i = 0; i < alternatives.size(); ++i)
        for (size_t j = i + 1; j < alternatives.size(); ++j)
          if (branch_of[i] != branch_of[j] && !exclusive(alternatives[i], alternatives[j])) {
            callbacks_.warning(fmt::format("tool '{}': {}: 'oneOf' is read as 'anyOf': alternatives {} and {} may overlap (no "
                                           "member one requires is forbidden by the other), and a call that matches "
                                           "both is accepted",
                                           tool_, at, branch_of[i], branch_of[j]));
            i = j = alternatives.size();
          }
    if (!times(alternatives, at)) return std::nullopt;
  }
  return out;
}

// --- Writing the shapes ----------------------------------------------------------

Json QwenParameters::with_definitions(const Json& schema) const {
  if (!schema.is_object()) return schema;
  Json out = schema;
  for (const char* key : {"$defs", "definitions"})
    if (root_.is_object() && root_.contains(key) && !out.contains(key)) out[key] = root_[key];
  return out;
}

std::optional<std::string> QwenParameters::value(const Json& schema, const std::string& what) {
  bool failed = false;
  // A $ref to a string schema is still raw text.
  std::optional<Json> found = schema.is_object() && schema.contains("$ref") ? resolved(schema, "#", 0) : schema;
  if (!found) return std::nullopt;
  if (auto raw = raw_string_value(*found, what, failed)) return raw;
  if (failed) return std::nullopt;
  return callbacks_.json_value(with_definitions(*found == Json(true) ? Json::object() : *found), what);
}

std::optional<std::string> QwenParameters::other_names(const Shape& shape) {
  std::vector<std::string> listed;
  for (const auto& [name, schema] : shape.properties) listed.push_back(name);
  for (const std::string& name : shape.required) listed.push_back(name);
  auto any = ir::parse_regex("[^>\\n]+");
  std::optional<json::CharDfa> names = json::CharDfa::of_regex(std::get<ir::RegexNode>(any));
  if (names && !listed.empty())
    if (auto taken = json::CharDfa::of_strings(listed)) names = names->minus(*taken);
  auto regex = names && !names->empty() ? names->to_regex() : std::nullopt;
  if (!regex) {
    report(fmt::format("the parameters of tool '{}': the names of its other parameters are too many to write",
                                 tool_));
    return std::nullopt;
  }
  return fmt::format("#'{}'", ir::regex_text(*regex));
}

std::optional<std::string> QwenParameters::counted(const std::vector<Item>& items,
                                                   const std::optional<std::string>& other, const Shape& shape,
                                                   std::string& rules) {
  // Counts past min are alike without a max; without other members no
  // count passes the listed ones.
  uint64_t cap = shape.max ? *shape.max : shape.min;
  if (!other) cap = std::min<uint64_t>(cap, items.size());
  if ((items.size() + 1) * (cap + 1) > kMaxCountStates) {
    report(fmt::format("the parameters of tool '{}': minProperties/maxProperties over {} parameters are "
                                 "too many to count in the qwen format",
                                 tool_, items.size()));
    return std::nullopt;
  }
  std::map<std::pair<size_t, uint64_t>, std::optional<std::string>> made;
  const std::string base = callbacks_.allocate(fmt::format("qwen_{}_counted", tool_));
  // The parameter lists from item i on, c parameters written before it.
  std::function<std::optional<std::string>(size_t, uint64_t)> from = [&](size_t i, uint64_t c) {
    if (auto it = made.find({i, c}); it != made.end()) return it->second;
    std::vector<std::string> alternatives;
    if (i == items.size()) {
      const uint64_t need = shape.min > c ? shape.min - c : 0;
      if (!other && need == 0) alternatives.push_back("''");
      if (other && shape.max && *shape.max == c) alternatives.push_back("''");
      if (other && shape.max && *shape.max > c && need <= *shape.max - c)
        alternatives.push_back(fmt::format("( {} ){{{},{}}}", *other, need, *shape.max - c));
      if (other && !shape.max) alternatives.push_back(fmt::format("( {} ){{{},}}", *other, need));
    } else {
      const uint64_t next = shape.max && other ? c + 1 : std::min<uint64_t>(c + 1, cap);
      if (!shape.max || c + 1 <= *shape.max)
        if (auto rest = from(i + 1, next)) alternatives.push_back(items[i].text + " " + *rest);
      if (!items[i].required)
        if (auto rest = from(i + 1, c)) alternatives.push_back(*rest);
    }
    std::optional<std::string> name;
    if (alternatives.size() == 1 && alternatives[0] == "''") {
      name = "''";  // nothing left to write: no rule of its own
    } else if (!alternatives.empty()) {
      name = fmt::format("{}_{}_{}", base, i, c);
      std::string body;
      for (const std::string& a : alternatives) body += (body.empty() ? "" : " | ") + a;
      rules += fmt::format("{} ::= {} ;\n", *name, body);
    }
    made[{i, c}] = name;
    return name;
  };
  return from(0, 0);
}

std::optional<std::string> QwenParameters::shape_expression(const Shape& shape, std::string& rules) {
  std::vector<Item> items;
  auto item = [&](const std::string& name, const Json& schema, bool required) -> bool {
    auto v = value(schema, fmt::format("parameter '{}' of tool '{}'", name, tool_));
    if (!v) failed_ = true;  // json_value said why
    if (!v) return false;
    items.push_back({fmt::format("'<parameter={}>\\n' {} '\\n</parameter>\\n'", escaped(name), *v), required});
    return true;
  };
  for (const auto& [name, schema] : shape.properties)
    if (schema != Json(false) && !item(name, schema, shape.required.count(name) > 0)) return std::nullopt;
  for (const std::string& name : shape.required)  // required, not listed, allowed as another member
    if (std::none_of(shape.properties.begin(), shape.properties.end(), [&](const auto& p) { return p.first == name; }))
      if (!item(name, shape.others, true)) return std::nullopt;
  std::optional<std::string> other;
  if (shape.others != Json(false)) {
    auto names = other_names(shape);
    auto v = names ? value(shape.others, fmt::format("the other parameters of tool '{}'", tool_)) : std::nullopt;
    if (!v) failed_ = true;
    if (!v) return std::nullopt;
    other = fmt::format("'<parameter=' {} '>\\n' {} '\\n</parameter>\\n'", *names, *v);
  }
  const auto required = static_cast<uint64_t>(std::count_if(items.begin(), items.end(), [](const Item& i) { return i.required; }));
  // A maxProperties the listed parameters cannot pass bounds nothing.
  const bool max_binds = shape.max && (other || *shape.max < items.size());
  if (shape.min > required || max_binds) {
    Shape bounds = shape;
    if (!max_binds) bounds.max.reset();
    return counted(items, other, bounds, rules);
  }
  std::string out;
  for (const Item& i : items) out += (out.empty() ? "" : " ") + (i.required ? i.text : "( " + i.text + " )?");
  if (other) out += (out.empty() ? "" : " ") + fmt::format("( {} )*", *other);
  return out.empty() ? std::string("''") : out;
}

QwenParameters::Outcome QwenParameters::translate(std::string& expression, std::string& rules) {
  auto list = shapes(root_, "#", 0);
  if (!list) return Outcome::Failed;
  std::vector<std::string> alternatives;
  for (Shape shape : *list) {
    // An object that says nothing of other members: the tools' default.
    if (shape.others.is_null()) shape.others = closed_ ? Json(false) : Json(true);
    for (auto& [name, schema] : shape.properties)
      if (schema.is_null()) schema = true;
    if (dead(shape)) continue;
    auto e = shape_expression(shape, rules);
    if (!e) {
      if (failed_) return Outcome::Failed;
      continue;
    }
    if (std::find(alternatives.begin(), alternatives.end(), *e) == alternatives.end()) alternatives.push_back(*e);
  }
  if (alternatives.empty()) {
    expression = "no list of parameters satisfies its schema (a required parameter is forbidden, or the counts "
                 "cannot be met)";
    return Outcome::NoValue;
  }
  expression = alternatives.size() == 1 ? alternatives[0] : "( " + fmt::format("{}", fmt::join(alternatives, " | ")) + " )";
  return Outcome::Translated;
}

// --- A string's raw text ----------------------------------------------------------

std::optional<std::string> QwenParameters::raw_string_value(const Json& schema, const std::string& what,
                                                            bool& failed) {
  static const std::set<std::string> kString = {"type",     "enum",       "const",    "pattern", "minLength",
                                                "maxLength", "format",    "description", "title", "examples",
                                                "default",  "$comment",   "deprecated", "readOnly", "writeOnly",
                                                "$id",      "$schema",    "$anchor"};
  auto fail = [&](std::string message) {
    report(fmt::format("{}: {}", what, message));
    failed = true;
    return std::nullopt;
  };
  if (!schema.is_object()) return std::nullopt;
  for (const auto& [key, value] : schema.items())
    if (!kString.count(key)) return std::nullopt;
  const bool typed = schema.contains("type") && schema["type"] == "string";
  if (schema.contains("type") && !typed) return std::nullopt;
  std::vector<std::string> regexes;
  if (schema.contains("enum") || schema.contains("const")) {
    const Json values = schema.contains("const") ? Json::array({schema["const"]}) : schema["enum"];
    if (!values.is_array() || values.empty()) return std::nullopt;
    std::string alternatives;
    for (const Json& v : values) {
      if (!v.is_string()) return std::nullopt;
      alternatives += (alternatives.empty() ? "" : "|") + json::regex_literal(v.get<std::string>());
    }
    regexes.push_back(alternatives);
  } else if (!typed) {
    return std::nullopt;
  }
  if (schema.contains("pattern") && schema["pattern"].is_string()) {
    auto pattern = json::ecma_pattern_to_regex(schema["pattern"].get<std::string>());
    if (!pattern) return fail("its pattern: " + pattern.error().message);
    regexes.push_back(*pattern);
  }
  if (schema.contains("format") && schema["format"].is_string())
    if (auto format = json::format_regex(schema["format"].get<std::string>())) regexes.push_back(format->regex);
  if (schema.contains("minLength") || schema.contains("maxLength")) {
    for (const char* key : {"minLength", "maxLength"})
      if (schema.contains(key) && !schema[key].is_number_unsigned()) return fail(fmt::format("{} must be a whole number", key));
    const uint64_t min = schema.value("minLength", uint64_t{0}), max = schema.value("maxLength", UINT64_MAX);
    regexes.push_back(max == UINT64_MAX ? fmt::format("[\\s\\S]{{{},}}", min) : fmt::format("[\\s\\S]{{{},{}}}", min, max));
  }
  if (regexes.empty()) return std::string("except!('\\n</parameter>')");
  // The schema's strings, less those holding the end of the parameter.
  std::optional<json::CharDfa> values = json::CharDfa::everything();
  for (const std::string& r : regexes) {
    auto parsed = ir::parse_regex(r);
    auto dfa = std::holds_alternative<ir::RegexNode>(parsed) ? json::CharDfa::of_regex(std::get<ir::RegexNode>(parsed))
                                                           : std::nullopt;
    if (dfa) values = values->intersect(*dfa);
    if (!dfa || !values) return fail("its string constraints are too large to write as raw text");
  }
  static const auto holding_end =
      json::CharDfa::of_regex(std::get<ir::RegexNode>(ir::parse_regex("[\\s\\S]*\\n</parameter>[\\s\\S]*")));
  values = values->minus(*holding_end);
  auto regex = values && !values->empty() ? values->to_regex() : std::nullopt;
  if (!regex)
    return fail(values && values->empty() ? "no string is allowed" : "its string constraints are too large to write as raw text");
  return fmt::format("#'{}'", ir::regex_text(*regex));
}

}  // namespace cgram

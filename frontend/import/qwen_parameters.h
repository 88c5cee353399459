#pragma once
// Qwen3-Coder's tool calls write each argument on its own:
//
//   <function=NAME>
//   <parameter=KEY>
//   VALUE
//   </parameter>
//   ...
//
// a string as raw text up to "\n</parameter>", anything else as compact
// JSON. This translates a tool's parameters schema into the .cgram
// expression of the parameter lists it allows: the listed properties in
// the schema's order (the required ones there), then, where the schema
// allows other members, parameters of other names; minProperties and
// maxProperties count them all. `$ref` (to `#`, `$defs` or `definitions`),
// allOf, anyOf and oneOf over objects are read, at the top and at any
// depth of them; what the format cannot express is an error that names
// the keyword, never dropped.
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cgram {

struct QwenCallbacks {
  // A parameter's JSON value: the rule name of its schema (translated as
  // JSON Schema, compact), or nullopt after an error said why.
  std::function<std::optional<std::string>(const nlohmann::ordered_json& schema, const std::string& what)> json_value;
  // A new rule name from `base`, distinct from every other.
  std::function<std::string(const std::string& base)> allocate;
  std::function<void(std::string)> error, warning;
};

class QwenParameters {
 public:
  enum class Outcome { Translated, NoValue, Failed };

  // `closed`: an object that says nothing of additionalProperties allows no
  // other members (the tools' default, import/tools.h).
  QwenParameters(std::string tool, const nlohmann::ordered_json& root, bool closed, QwenCallbacks callbacks);

  // The expression (into `expression`) and its rules (appended to `rules`).
  // NoValue: no parameter list is valid (why: into `expression`).
  Outcome translate(std::string& expression, std::string& rules);

  // A string schema's values as a regex over the raw text, none holding
  // "\n</parameter>"; nullopt when the schema is not only a string's (its
  // value is then JSON). `failed` is set after an error.
  std::optional<std::string> raw_string_value(const nlohmann::ordered_json& schema, const std::string& what,
                                              bool& failed);

 private:
  using Json = nlohmann::ordered_json;
  // One shape of the object: members by name, in order, and what else it allows.
  struct Shape {
    std::vector<std::pair<std::string, Json>> properties;
    std::set<std::string> required;
    Json others = true;  // the schema of members not listed (false: none)
    uint64_t min = 0;
    std::optional<uint64_t> max;
  };
  struct Item {
    std::string text;  // the parameter written whole
    bool required = false;
  };

  void report(std::string message);  // an error: the translation fails
  std::optional<std::vector<Shape>> shapes(const Json& schema, const std::string& pointer, int depth);
  std::optional<Shape> own_shape(const Json& schema, const std::string& pointer);
  // `schema` with its top-level $ref followed (siblings kept as allOf).
  std::optional<Json> resolved(const Json& schema, const std::string& pointer, int depth);
  static Shape merge(const Shape& a, const Shape& b);
  static Json both(const Json& a, const Json& b);
  static bool dead(const Shape& shape);
  bool exclusive(const Shape& a, const Shape& b) const;
  std::optional<std::string> shape_expression(const Shape& shape, std::string& rules);
  std::optional<std::string> value(const Json& schema, const std::string& what);
  std::optional<std::string> other_names(const Shape& shape);
  std::optional<std::string> counted(const std::vector<Item>& items, const std::optional<std::string>& other,
                                     const Shape& shape, std::string& rules);
  // The root's $defs and definitions, beside a parameter's own schema, so
  // that its $refs find them.
  Json with_definitions(const Json& schema) const;

  std::string tool_;
  const Json& root_;
  bool closed_;
  QwenCallbacks callbacks_;
  bool failed_ = false;
  size_t shape_calls_ = 0;  // shapes() calls so far: a bound on shared $refs read again and again
};

}  // namespace cgram

// JSON Schema's logic keywords (not, oneOf, if/then/else, dependencies),
// which the translator says through complements (import/json_schema_negation.cpp):
// random schemas of those shapes against a small reference validator written
// from the specification, on a fixed universe of documents. LOGIC_SEED and
// LOGIC_ROUNDS (environment) run other and more random schemas.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "grammar.h"
#include "helpers.h"

using namespace cgram;
using namespace cgram::test;
using Json = nlohmann::ordered_json;

namespace {

// --- The reference: the keywords the generator writes, as the specification says them.

bool is_type(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_number_integer() || v.is_number_unsigned();
  return false;
}

bool valid(const Json& s, const Json& v);

bool all_valid(const Json& schemas, const Json& v) {
  return std::all_of(schemas.begin(), schemas.end(), [&](const Json& s) { return valid(s, v); });
}

bool valid(const Json& s, const Json& v) {
  if (s.is_boolean()) return s.get<bool>();
  for (const auto& [key, k] : s.items()) {
    bool ok = true;
    if (key == "type") {
      ok = k.is_string() ? is_type(v, k.get<std::string>())
                         : std::any_of(k.begin(), k.end(), [&](const Json& t) { return is_type(v, t.get<std::string>()); });
    } else if (key == "enum") {
      ok = std::any_of(k.begin(), k.end(), [&](const Json& e) { return e == v; });
    } else if (key == "const") {
      ok = k == v;
    } else if (key == "required" && v.is_object()) {
      ok = std::all_of(k.begin(), k.end(), [&](const Json& n) { return v.contains(n.get<std::string>()); });
    } else if (key == "properties" && v.is_object()) {
      for (const auto& [name, sub] : k.items()) ok = ok && (!v.contains(name) || valid(sub, v[name]));
    } else if (key == "additionalProperties" && v.is_object()) {
      for (const auto& [name, member] : v.items())
        if (!s.contains("properties") || !s["properties"].contains(name)) ok = ok && valid(k, member);
    } else if ((key == "minLength" || key == "maxLength") && v.is_string()) {
      const size_t n = v.get<std::string>().size();  // (ASCII only)
      ok = key == "minLength" ? n >= k.get<size_t>() : n <= k.get<size_t>();
    } else if ((key == "minProperties" || key == "maxProperties") && v.is_object()) {
      ok = key == "minProperties" ? v.size() >= k.get<size_t>() : v.size() <= k.get<size_t>();
    } else if (key == "pattern" && v.is_string()) {
      ok = std::regex_search(v.get<std::string>(), std::regex(k.get<std::string>(), std::regex::ECMAScript));
    } else if (v.is_number() && (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" ||
                                 key == "exclusiveMaximum")) {
      const double x = v.get<double>(), b = k.get<double>();
      ok = key == "minimum" ? x >= b : key == "maximum" ? x <= b : key == "exclusiveMinimum" ? x > b : x < b;
    } else if (key == "items" && v.is_array()) {
      for (const Json& item : v) ok = ok && valid(k, item);
    } else if (key == "contains" && v.is_array()) {
      ok = std::any_of(v.begin(), v.end(), [&](const Json& item) { return valid(k, item); });
    } else if (key == "allOf") {
      ok = all_valid(k, v);
    } else if (key == "anyOf") {
      ok = std::any_of(k.begin(), k.end(), [&](const Json& sub) { return valid(sub, v); });
    } else if (key == "oneOf") {
      ok = std::count_if(k.begin(), k.end(), [&](const Json& sub) { return valid(sub, v); }) == 1;
    } else if (key == "not") {
      ok = !valid(k, v);
    } else if (key == "if") {
      ok = valid(k, v) ? !s.contains("then") || valid(s["then"], v) : !s.contains("else") || valid(s["else"], v);
    } else if ((key == "dependencies" || key == "dependentRequired" || key == "dependentSchemas") && v.is_object()) {
      for (const auto& [name, needs] : k.items()) {
        if (!v.contains(name)) continue;
        if (needs.is_array())
          ok = ok && std::all_of(needs.begin(), needs.end(), [&](const Json& n) { return v.contains(n.get<std::string>()); });
        else
          ok = ok && valid(needs, v);
      }
    }
    if (!ok) return false;
  }
  return true;
}

// Compact, members in any order (the documents' order is not the schemas').
Grammar::Outcome compact(std::string_view schema) {
  return parse_json_schema(schema, JsonWhitespace::Compact, JsonPropertyOrder::Any);
}

// --- Random schemas of the shapes the complements say, and documents to try.

const std::vector<std::string> kNames = {"a", "b", "c"};

Json small_value(std::mt19937_64& rng) {
  static const Json values = Json::parse(R"([null, true, false, 0, 1, -3, 2.5, "", "x", "ab", "xyz", "b9"])");
  return values[rng() % values.size()];
}

Json random_schema(std::mt19937_64& rng, int depth);

// One keyword (or two that go together) as a schema of its own.
Json random_keyword(std::mt19937_64& rng, int depth) {
  static const std::vector<std::string> types = {"null", "boolean", "object", "array", "string", "number", "integer"};
  const std::string name = kNames[rng() % kNames.size()];
  const int pick = static_cast<int>(rng() % (depth > 0 ? 19 : 11));
  switch (pick) {
    case 0: return Json{{"type", types[rng() % types.size()]}};
    case 1: return Json{{"type", Json::array({types[rng() % types.size()], types[rng() % types.size()]})}};
    case 2: {
      Json values = Json::array();
      for (int i = 0, n = 1 + static_cast<int>(rng() % 3); i < n; ++i) {
        Json v = small_value(rng);
        if (!v.is_number()) values.push_back(v);  // (numbers have no complement written)
      }
      return values.empty() ? Json{{"const", "x"}} : Json{{"enum", values}};
    }
    case 3: {
      Json names = Json::array({name});
      if (rng() % 2) names.push_back(kNames[1 + rng() % 2]);
      return Json{{"required", names}};
    }
    case 4: return Json{{"minLength", rng() % 3}};
    case 5: return Json{{"maxLength", rng() % 3}};
    case 6: return Json{{"pattern", rng() % 2 ? "^x" : "b"}};
    case 7: return Json{{rng() % 2 ? "minimum" : "exclusiveMinimum", static_cast<int>(rng() % 3) - 1}};
    case 8: return Json{{rng() % 2 ? "maximum" : "exclusiveMaximum", static_cast<int>(rng() % 3)}};
    case 9: return Json{{"minProperties", 1}};
    case 10: return Json{{"type", "object"}, {"additionalProperties", false},
                         {"properties", Json{{"a", true}, {"b", true}, {"c", true}}}};
    case 11: return Json{{"properties", Json{{name, random_schema(rng, depth - 1)}}}};
    case 12: return Json{{"not", random_schema(rng, depth - 1)}};
    case 13:
    case 14: {
      Json parts = Json::array();
      for (int i = 0, n = 2 + static_cast<int>(rng() % 2); i < n; ++i) parts.push_back(random_schema(rng, depth - 1));
      static const char* combinators[] = {"anyOf", "oneOf", "allOf"};
      return Json{{combinators[pick == 14 ? 1 : rng() % 3], parts}};
    }
    case 15: {
      Json out{{"if", random_schema(rng, depth - 1)}};
      if (rng() % 3) out["then"] = random_schema(rng, depth - 1);
      if (rng() % 3) out["else"] = random_schema(rng, depth - 1);
      return out;
    }
    case 17: return Json{{"items", random_schema(rng, depth - 1)}};
    case 18: return Json{{"contains", random_schema(rng, depth - 1)}};
    default: {
      Json needs = rng() % 2 ? Json(Json::array({kNames[(rng() % 2) + 1]})) : random_schema(rng, depth - 1);
      return Json{{rng() % 2 ? "dependencies" : (needs.is_array() ? "dependentRequired" : "dependentSchemas"),
                   Json{{name, needs}}}};
    }
  }
}

Json random_schema(std::mt19937_64& rng, int depth) {
  Json out = Json::object();
  for (int i = 0, n = 1 + static_cast<int>(rng() % 2); i < n; ++i) {
    const Json keyword = random_keyword(rng, depth);
    for (const auto& [key, value] : keyword.items())
      if (!out.contains(key)) out[key] = value;
  }
  return out;
}

// Every document tried: the small values, and objects of them.
std::vector<Json> universe() {
  std::vector<Json> out;
  for (const char* text : {"null", "true", "false", "0", "1", "-3", "2.5", R"("")", R"("x")", R"("ab")", R"("xyz")",
                           R"("b9")", "[]", "[1]", R"(["x",2.5])", "[null,true,1]", "{}"})
    out.push_back(Json::parse(text));
  const Json members = Json::parse(R"([null, 1, "x", "ab", true, {}, {"a": 1}])");
  for (int mask = 1; mask < 8; ++mask)
    for (size_t pick = 0; pick < members.size(); pick += 2) {
      Json object = Json::object();
      for (int i = 0; i < 3; ++i)
        if (mask & (1 << i)) object[kNames[i]] = members[(pick + i) % members.size()];
      out.push_back(object);
    }
  return out;
}

}  // namespace

TEST_CASE("not, oneOf, if/then/else and dependencies: random schemas against a reference validator",
          "[json-schema][json-schema-logic]") {
  const std::vector<Json> documents = universe();
  std::mt19937_64 rng(getenv("LOGIC_SEED") ? std::stoull(getenv("LOGIC_SEED")) : 20261127);
  int exact = 0, tried = 0;
  for (int round = 0; round < (getenv("LOGIC_ROUNDS") ? std::stoi(getenv("LOGIC_ROUNDS")) : 1500); ++round) {
    const Json schema = random_schema(rng, 2);
    const Grammar::Outcome outcome = compact(schema.dump());
    const std::string diagnostics = outcome.diagnostics.render();
    INFO(schema.dump() << "\n" << diagnostics);
    ++tried;
    if (!outcome.ok()) {
      // A schema no value matches has no grammar (none has an empty language).
      if (diagnostics.find("accepts no JSON value") != std::string::npos)
        for (const Json& d : documents) CHECK_FALSE(valid(schema, d));
      else
        CHECK_THAT(diagnostics, Catch::Contains("is not supported"));
      continue;
    }
    const bool loosened = diagnostics.find("warning") != std::string::npos;
    exact += !loosened;
    const auto oracle = oracle_grammar(*outcome.grammar);
    for (const Json& d : documents) {
      INFO(d.dump());
      const bool accepted = verdict(oracle, d.dump()) == oracle::Verdict::Complete;
      if (loosened) CHECK((accepted || !valid(schema, d)));  // more, never less
      else CHECK(accepted == valid(schema, d));
    }
  }
  // Most of them are exact. The rest have a complement that cannot be
  // written here: additionalProperties false, a number among enum values,
  // `not` of integers, a oneOf whose alternatives overlap inside a `not`.
  CHECK(exact * 10 >= tried * 7);
}

namespace {


// Every text of `in` complete and every one of `out` not, with no warning.
void check_exact(std::string_view schema, std::initializer_list<const char*> in,
                 std::initializer_list<const char*> out) {
  const Grammar::Outcome outcome = compact(schema);
  INFO(schema << "\n" << outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  CHECK(outcome.diagnostics.render().find("warning") == std::string::npos);
  const auto oracle = oracle_grammar(*outcome.grammar);
  for (const char* text : in) {
    INFO(text);
    CHECK(verdict(oracle, text) == oracle::Verdict::Complete);
  }
  for (const char* text : out) {
    INFO(text);
    CHECK_FALSE(verdict(oracle, text) == oracle::Verdict::Complete);
  }
}

}  // namespace

TEST_CASE("oneOf alternatives that overlap exclude each other: exactly one of two required sets",
          "[json-schema][json-schema-logic]") {
  // Glaive's calculate_area: a circle's radius or a rectangle's sides, never both.
  check_exact(R"({"type": "object", "properties": {"length": {"type": "number"}, "width": {"type": "number"},
                  "radius": {"type": "number"}}, "additionalProperties": false,
                  "oneOf": [{"required": ["length", "width"]}, {"required": ["radius"]}]})",
              {R"({"length":1,"width":2})", R"({"radius":1})", R"({"width":2,"radius":1})"},
              {R"({"length":1,"width":2,"radius":3})", R"({"length":1})", "{}"});
  // A string, or a string that is no hex id: each excludes the other.
  check_exact(R"({"oneOf": [{"type": "string", "pattern": "^[0-9a-f]{4}$"}, {"type": "string"}]})", {R"("abcz")", "\"\""},
              {R"("ab12")", "1"});
}

TEST_CASE("if/then/else is (if and then) or (not if and else)", "[json-schema][json-schema-logic]") {
  check_exact(R"({"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "integer"},
                  "y": {"type": "string"}}, "required": ["kind"],
                  "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]},
                  "else": {"required": ["y"]}})",
              {R"({"kind":"a","x":1})", R"({"kind":"b","y":"s"})", R"({"kind":"a","x":1,"y":"s"})"},
              {R"({"kind":"a","y":"s"})", R"({"kind":"b","x":1})", R"({"kind":"b"})"});
  // Without else: anything the condition rejects.
  check_exact(R"({"if": {"type": "string"}, "then": {"minLength": 2}})", {R"("ab")", "1", "null"}, {R"("a")"});
}

TEST_CASE("dependencies: a member's presence requires others, or a schema of the whole object",
          "[json-schema][json-schema-logic]") {
  check_exact(R"({"type": "object", "properties": {"card": {"type": "integer"}, "address": {"type": "string"}},
                  "dependencies": {"card": ["address"]}})",
              {"{}", R"({"address":"x"})", R"({"card":1,"address":"x"})"}, {R"({"card":1})"});
  check_exact(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                  "dependentSchemas": {"a": {"properties": {"b": {"minimum": 10}}, "required": ["b"]}}})",
              {"{}", R"({"b":1})", R"({"a":1,"b":10})"}, {R"({"a":1})", R"({"a":1,"b":9})"});
  // Not objects: dependencies say nothing.
  check_exact(R"({"dependentRequired": {"a": ["b"]}})", {"1", R"("s")", R"({"a":1,"b":2})"}, {R"({"a":1})"});
}

TEST_CASE("not of a schema of several keywords is the union of their complements", "[json-schema][json-schema-logic]") {
  check_exact(R"({"not": {"type": "object", "required": ["a"]}})", {"1", R"({"b":1})", "[]"}, {R"({"a":1})"});
  // A pattern fails every value that is no string: not of it accepts strings only.
  check_exact(R"({"not": {"pattern": "^x"}})", {R"("ab")"}, {R"("xa")", "1", "null", "{}"});
  // Not of a required name holds on objects only.
  check_exact(R"({"not": {"required": ["c"]}})", {"{}", R"({"a":1})"}, {R"({"c":1})", "1", R"("s")"});
  check_exact(R"({"type": "object", "properties": {"n": {"type": "integer"}},
                  "not": {"properties": {"n": {"minimum": 5}}, "required": ["n"]}})",
              {"{}", R"({"n":4})"}, {R"({"n":5})", R"({"n":7})"});
}

TEST_CASE("numbers that are no integer, and arrays that contain one", "[json-schema][json-schema-logic]") {
  // An integer, or a number that is no integer (written in fixed point).
  check_exact(R"({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]})", {"-3", "2.5", "0.01"},
              {"2", "-2.5", "2.0", "2e3"});
  check_exact(R"({"type": "array", "contains": {"type": "string"}})", {R"(["a"])", R"([1,"a",2])", R"([1,2,"a"])"},
              {"[]", "[1,2]"});
  // Some item fails the items' schema: an array with a string.
  check_exact(R"({"type": "array", "not": {"items": {"type": "integer"}}})", {R"([1,"a"])", "[1.5]"}, {"[]", "[1,2]"});
}

TEST_CASE("complements of additionalProperties where the names are listed, and of formats",
          "[json-schema][json-schema-logic]") {
  // Two closed objects: those with y alone (or nothing) match both.
  check_exact(R"({"oneOf": [{"type": "object", "properties": {"x": {}, "y": {}}, "additionalProperties": false},
                            {"type": "object", "properties": {"y": {}, "z": {}}, "additionalProperties": false}]})",
              {R"({"x":1})", R"({"x":1,"y":2})", R"({"y":2,"z":3})", R"({"z":3})"},
              {R"({"y":2})", "{}", R"({"x":1,"z":3})"});
  // A value schema for the other names.
  check_exact(R"({"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": false,
                  "oneOf": [{"properties": {"a": {}}, "additionalProperties": {"type": "string"}},
                            {"required": ["a"]}]})",
              {R"({"a":1,"b":2})", R"({"b":"s"})", "{}"}, {R"({"a":1})", R"({"b":2})", R"({"a":1,"b":"s"})"});
  check_exact(R"({"type": "string", "not": {"format": "date"}})", {R"("2024-13-01")", R"("x")"}, {R"("2024-02-29")"});
  check_exact(R"({"oneOf": [{"type": "string", "format": "uuid"}, {"type": "string", "maxLength": 5}]})",
              {R"("abc")", R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("abcdef")", "1"});
}

TEST_CASE("keywords of another draft than the schema's are no keywords: ignored", "[json-schema][json-schema-logic]") {
  // Draft 04 has no if/then: python-jsonschema's Draft4Validator ignores them, and so does the grammar.
  check_exact(R"({"$schema": "http://json-schema.org/draft-04/schema#", "type": "string",
                  "if": {"maxLength": 1}, "then": {"pattern": "^x"}})",
              {R"("a")", R"("xa")"}, {"1"});
  // 2020-12 has dependentRequired, and no dependencies.
  check_exact(R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                  "dependencies": {"a": ["b"]}, "dependentRequired": {"b": ["c"]}})",
              {R"({"a":1})", R"({"b":1,"c":2})"}, {R"({"b":1})"});
  // Without $schema every draft's keywords are read.
  check_exact(R"({"type": "object", "dependencies": {"a": ["b"]}})", {R"({"a":1,"b":2})"}, {R"({"a":1})"});
}

TEST_CASE("allOf of two oneOfs: one pair of alternatives, as exactly one of each", "[json-schema][json-schema-logic]") {
  check_exact(R"({"allOf": [{"oneOf": [{"type": "string"}, {"minLength": 2}]},
                            {"oneOf": [{"maxLength": 3}, {"type": "integer"}]}]})",
              {R"("a")", "null", "true"}, {R"("ab")", "1", R"("abcd")"});
}

TEST_CASE("oneOf alternatives told apart on objects exclude each other on the other types only",
          "[json-schema][json-schema-logic]") {
  // No "type": every value that is no object matches both (their keywords
  // are about objects), so the oneOf takes objects only.
  check_exact(R"({"oneOf": [{"properties": {"kind": {"enum": ["a"]}, "x": {"type": "number"}}, "required": ["kind"],
                             "additionalProperties": false},
                            {"properties": {"kind": {"enum": ["b"]}, "y": {"type": "string"}}, "required": ["kind"],
                             "additionalProperties": false}]})",
              {R"({"kind":"a","x":1})", R"({"kind":"b"})"}, {R"("s")", "1", "null", "[]", R"({"kind":"c"})"});
}

TEST_CASE("propertyNames: the keys of an object that lists no name", "[json-schema][json-schema-logic]") {
  check_exact(R"({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "integer"}})",
              {"{}", R"({"ab":1})", R"({"ab":1,"c":2})"}, {R"({"Ab":1})", R"({"ab":"x"})", R"({"":1})"});
  check_exact(R"({"type": "object", "propertyNames": {"enum": ["x", "y"]}})", {R"({"x":1,"y":[2]})"}, {R"({"z":1})"});
  // Keys are strings anyway: a propertyNames of strings says nothing.
  check_exact(R"({"type": "object", "properties": {"a": {}}, "propertyNames": {"type": "string"}})",
              {R"({"a":1,"b":2})"}, {"[]"});
}

TEST_CASE("minProperties and maxProperties past 1: the members counted, in the schema's order",
          "[json-schema][json-schema-logic]") {
  const Json schemas = Json::parse(R"([
    {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": false, "minProperties": 2},
    {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": false, "maxProperties": 2},
    {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"], "minProperties": 2, "maxProperties": 3},
    {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2, "maxProperties": 3}])");
  // Objects in the schemas' order: a, b, c, then others.
  const std::vector<Json> objects = [] {
    std::vector<Json> out;
    const std::vector<std::string> names = {"a", "b", "c", "x", "y", "z"};
    for (int mask = 0; mask < 64; ++mask) {
      Json o = Json::object();
      for (int i = 0; i < 6; ++i)
        if (mask & (1 << i)) o[names[i]] = i;
      out.push_back(o);
    }
    return out;
  }();
  for (const Json& schema : schemas) {
    const Grammar::Outcome outcome = parse_json_schema(schema.dump());  // (the schema's order)
    INFO(schema.dump() << "\n" << outcome.diagnostics.render());
    REQUIRE(outcome.ok());
    CHECK(outcome.diagnostics.render().find("warning") == std::string::npos);
    const auto oracle = oracle_grammar(*outcome.grammar);
    for (const Json& o : objects) {
      INFO(o.dump());
      CHECK((verdict(oracle, o.dump()) == oracle::Verdict::Complete) == valid(schema, o));
    }
  }
}

TEST_CASE("allOf parts with an if/then each: every one holds, none mixed with another's",
          "[json-schema][json-schema-logic]") {
  check_exact(R"({"type": "object", "properties": {"a": {"type": ["integer", "null"]}, "b": {"type": ["integer", "null"]}},
                  "allOf": [{"if": {"not": {"properties": {"a": {"const": null}}}}, "then": {"properties": {"b": {"const": null}}}},
                            {"if": {"not": {"properties": {"b": {"const": null}}}}, "then": {"properties": {"a": {"const": null}}}},
                            {"then": {"required": ["zzz"]}}]})",
              {"{}", R"({"a":1})", R"({"b":2})", R"({"a":null,"b":null})", R"({"a":1,"b":null})"},
              {R"({"a":1,"b":2})"});
}

TEST_CASE("the complement of items holds in every draft, draft 04 without contains too", "[json-schema][json-schema-logic]") {
  // (It is written with the converter's own contains: a draft-04 schema's
  // `contains` is no keyword, and once made the exclusion accept anything.)
  check_exact(R"({"$schema": "http://json-schema.org/draft-04/schema#", "type": "array", "not": {"items": {"type": "integer"}}})",
              {R"([1,"a"])"}, {"[]", "[1]"});
  check_exact(R"({"$schema": "http://json-schema.org/draft-04/schema#", "type": "array", "contains": {"type": "integer"}})",
              {"[]", R"(["a"])"}, {});
  check_exact(R"({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "not": {"items": {"type": "integer"}}})",
              {R"([1,"a"])"}, {"[]", "[1]"});
}

#pragma once
// JSON Schema (draft 2020-12, with draft-07's `definitions` and array
// `items`) → .cgram text: a grammar whose sentences are the JSON documents
// the schema accepts, written in one whitespace style. docs/JSON_SCHEMA.md
// lists each keyword, what is exact, and what is written one way only
// (object members in the schema's property order, numbers with bounds in
// fixed point, one spelling per string character).
//
// An unsupported keyword is an error, or, where ignoring it only makes the
// grammar accept more, a warning that names it (an error with `strict`).
// Diagnostics point into the schema file.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "diagnostics.h"
#include "parse.h"
#include "source.h"

namespace cgram {

// How the documents are laid out:
//   compact  {"a":1,"b":[1,2]}
//   pretty   two-space indentation, one member or element per line, ": "
//            after keys, as json.dumps(indent=2) and JSON.stringify(v, null, 2)
//            write it (deeper than kPrettyDepth levels, any indentation);
//   flexible any JSON whitespace between tokens (RFC 8259), and around the document.
enum class JsonWhitespace { Compact, Pretty, Flexible };
inline constexpr int kPrettyDepth = 16;
std::optional<JsonWhitespace> parse_json_whitespace(std::string_view name);

// The longest run of whitespace the flexible layout allows between two
// tokens: models under a JSON grammar sometimes emit whitespace until their
// token limit (llama.cpp's converter bounds runs at 20 as well).
inline constexpr uint32_t kDefaultMaxWhitespace = 20;
// Schemas translated one inside another, following references (a chain of
// definitions each referring to the next): at most this many, or the
// text's nesting limit if higher (docs/LIMITS.md).
inline constexpr uint32_t kMaxReferenceNesting = 2048;

// The order of an object's members: the schema's (`properties`, then the
// required names it lacks, then additional members), which a model follows
// best; or any order, each member at most once, as JSON allows.
enum class JsonPropertyOrder { Schema, Any };
std::optional<JsonPropertyOrder> parse_json_property_order(std::string_view name);

struct JsonSchemaOptions {
  JsonWhitespace whitespace = JsonWhitespace::Flexible;
  JsonPropertyOrder property_order = JsonPropertyOrder::Schema;
  // Flexible layout: the longest whitespace run (nullopt: any length).
  std::optional<uint32_t> max_whitespace = kDefaultMaxWhitespace;
  // Warnings about ignored keywords become errors.
  bool strict = false;
  // An object schema that says nothing of additionalProperties (nor
  // patternProperties) allows no members beyond its properties, as
  // OpenAI's strict function calling and XGrammar's strict mode read it;
  // false: any other member, as JSON Schema says. The tools' arguments
  // default to closed (import/tools.h).
  bool closed_objects = false;
  bool operator==(const JsonSchemaOptions&) const = default;
};

struct SchemaTranslation {
  std::string cgram;            // the grammar's text
  std::string start = "start";  // its start rule
  // (offset in `cgram`, offset in the schema) at the start of every rule, ascending in the first.
  OffsetMap offsets;

  // The schema offset of the rule that holds .cgram offset `offset`.
  uint32_t schema_offset(uint32_t offset) const;
};

// Translates the schema in `file`; errors go to `diags` (bound to `file`).
// Nothing is returned when there was an error; `no_value`, when given, says
// whether that error is that the schema accepts no value at all.
std::optional<SchemaTranslation> translate_json_schema(const SourceFile& file, Diagnostics& diags,
                                                       const JsonSchemaOptions& options = {},
                                                       const SyntaxLimits& limits = {}, bool* no_value = nullptr);

// A translation's rules renamed apart, so that several schemas fit in one
// grammar (Lark's %json, the tools of `cgram tools`): the start rule
// becomes `start_name`; a rule named in `shared` takes that name and is
// left out (the caller defines it once, as `ws`); every other rule takes
// the name `unique` gives for start_name + "_" + its name. One rule a
// line, comments dropped, each with the schema offset its rule came from.
struct EmbeddedRule {
  std::string text;
  uint32_t schema_offset = 0;
};
std::vector<EmbeddedRule> embed_schema_rules(const SchemaTranslation& translation, const std::string& start_name,
                                             const std::map<std::string, std::string>& shared,
                                             const std::function<std::string(const std::string&)>& unique);

// Whether a path names a JSON Schema file (by its extension: .json).
bool is_json_schema_path(std::string_view path);

}  // namespace cgram

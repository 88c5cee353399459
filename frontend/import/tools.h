#pragma once
// A list of tools (OpenAI-style: name, description, JSON Schema parameters)
// → the .cgram grammar of a model's reply: free text, then zero or more
// tool calls in the model family's own format, each call's name choosing
// its arguments' schema.
//
//   hermes      <tool_call>{"name": "f", "arguments": {…}}</tool_call>
//               (Hermes 2/3, Qwen 2.5 and Qwen 3)
//   llama3      {"name": "f", "parameters": {…}}   (Llama 3.1 to 3.3's JSON calls)
//   qwen        <tool_call><function=f><parameter=p>value</parameter>…</function></tool_call>
//               (Qwen3-Coder: a string value as raw text, others as JSON)
//   mistral     [TOOL_CALLS][{"name": "f", "arguments": {…}}, …]
//   json-array  [{"name": "f", "arguments": {…}}, …] and nothing else
//
// Whitespace between JSON tokens and around the tags is the JSON Schema
// converter's (flexible by default, runs of at most 20). Tools with the
// same parameters schema share its rules; the names are alternatives of
// literals, which the lexer reads as one automaton (a trie). docs/TOOLS.md
// has the grammars in full.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diagnostics.h"
#include "json_schema.h"
#include "parse.h"
#include "source.h"

namespace cgram {

enum class ToolFormat { Hermes, Llama3, Qwen, Mistral, JsonArray };
std::optional<ToolFormat> parse_tool_format(std::string_view name);
const char* tool_format_name(ToolFormat format);

// The arguments' JSON Schema options for tools: closed objects (no member
// beyond the listed parameters unless the schema allows them), the rest as
// for any schema.
inline JsonSchemaOptions tool_arguments_options(JsonSchemaOptions options = {}) {
  options.closed_objects = true;
  return options;
}

struct ToolsOptions {
  ToolFormat format = ToolFormat::Hermes;
  JsonSchemaOptions json = tool_arguments_options();  // the arguments' layout
  // The free text before, between and after calls (not for json-array);
  // false: the reply is calls only.
  bool free_text = true;
  // Find the tools whose schema no finite call satisfies (a recursive
  // schema that requires itself, say), to leave them out: a parse of the
  // list's rules, about a fifth of a large list's translation, so
  // Grammar::parse asks for it only after a grammar without it has an
  // unproductive rule. Tools the schema translators refuse at once
  // (parameters `false`, a schema that accepts no value) are left out
  // either way.
  bool find_dead_tools = false;
};

struct ToolsTranslation {
  std::string cgram;
  std::string start = "start";
  size_t tools = 0;
  size_t distinct_schemas = 0;
};

// Reads `file`, a JSON list of tools (or an object with a "tools" list):
// each {"type": "function", "function": {"name", "parameters"}} or
// {"name", "parameters"} directly. Errors go to `diags` (bound to `file`):
// a tool without a name, two tools of one name, a schema cgram refuses
// (its diagnostics, prefixed with the tool's name).
std::optional<ToolsTranslation> translate_tools(const SourceFile& file, Diagnostics& diags,
                                                const ToolsOptions& options = {},
                                                const SyntaxLimits& limits = {});

// The same reply cut at every call's name, for compiling one tool at a time
// (calls/tool_calls.h): the grammar from the reply's start up to and
// including a call's name, and for each tool the grammar from just after
// its name (its arguments, then the reply on to the next call's name). A
// name is written between two delimiters, `open` and `close` ("name" in the
// JSON formats, =name> in qwen's); each grammar ends only there, where
// nothing may follow, or where the reply itself may end.
class ToolSegments {
 public:
  ToolSegments();  // no tools
  ~ToolSegments();
  ToolSegments(ToolSegments&&) noexcept;
  ToolSegments& operator=(ToolSegments&&) noexcept;

  // nullopt, with the errors in `diags`, for a list translate_tools
  // refuses, or for names the cut cannot delimit: a name holding a
  // delimiter, a backslash or a control character (the error says so; the
  // whole grammar of translate_tools still serves them).
  static std::optional<ToolSegments> read(const SourceFile& file, Diagnostics& diags, const ToolsOptions& options = {},
                                          const SyntaxLimits& limits = {});

  size_t size() const { return names_.size(); }
  char open() const { return open_; }
  char close() const { return close_; }
  // Tool k's name as its bytes stand between the delimiters.
  const std::string& name(size_t k) const { return names_[k]; }
  // The grammar (.cgram) from the reply's start to the end of a call's
  // name.
  const std::string& start_grammar() const { return start_; }
  // Tool k's grammar: from just after its name's closing delimiter to the
  // end of the next call's name. Its schema is translated now; errors go to
  // `diags`. One call at a time: the translation reuses the list's reader.
  // find_dead_tools: see ToolsOptions (an error naming the tool, if so).
  std::optional<std::string> after_name_grammar(size_t k, Diagnostics& diags, bool find_dead_tools = false) const;
  // Equal for two tools whose after_name_grammar texts are equal.
  const std::string& after_name_key(size_t k) const { return keys_[k]; }

 private:
  struct Reader;
  std::unique_ptr<Reader> reader_;
  std::vector<std::string> names_, keys_;
  std::string start_;
  char open_ = '"', close_ = '"';
};

}  // namespace cgram

#include "tools.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <simdjson.h>
#include <vector>

#include "cgram_text.h"
#include "char_dfa.h"
#include "json_text.h"
#include "regex.h"
#include "memory_budget.h"

namespace cgram {

namespace {

using Json = nlohmann::ordered_json;

struct Tool {
  std::string name;
  std::optional<std::string> parameters;  // the schema's JSON text, parsed when its rules are written
  size_t index = 0;
};

constexpr std::string_view kFormatNames[] = {"hermes", "llama3", "qwen", "mistral", "json-array"};

// A JSON string literal as .cgram text: the quotes and the name, one spelling.
std::string json_name_literal(const std::string& name) { return quote_literal(json::json_string_text(name)); }

class ToolsBuilder {
 public:
  ToolsBuilder(const SourceFile& file, Diagnostics& diags, const ToolsOptions& options, const SyntaxLimits& limits)
      : file_(file), diags_(diags), options_(options), limits_(limits) {
    taken_ = {"start", "text", "call", "calls", "tool", "ws", "any", "except"};
  }

  std::optional<ToolsTranslation> run() {
    if (!read_tools()) return std::nullopt;
    ToolsTranslation out;
    out.tools = tools_.size();
    std::vector<std::string> alternatives;
    for (const Tool& tool : tools_) {
      auto rest = rest_after_name(tool);
      if (!rest) return std::nullopt;
      alternatives.push_back(name_literal(tool) + " " + *rest);
    }
    out.distinct_schemas = distinct_;
    out.cgram = fmt::format("(* The replies of a model with {} tools ({} format), written by cgram tools from {}. *)\n",
                            tools_.size(), tool_format_name(options_.format), file_.name());
    out.cgram += reply();
    out.cgram += "tool ::= ";
    for (size_t i = 0; i < alternatives.size(); ++i) out.cgram += (i ? "\n     | " : "") + alternatives[i];
    out.cgram += " ;\n";
    out.cgram += ws_rule();
    out.cgram += schema_rules_;
    charge_memory(out.cgram.size());
    return out;
  }

  // For ToolSegments: the tools read, with the text of each cut.
  bool read() { return read_tools(); }
  const std::vector<Tool>& tools() const { return tools_; }
  char open() const { return options_.format == ToolFormat::Qwen ? '=' : '"'; }
  char close() const { return options_.format == ToolFormat::Qwen ? '>' : '"'; }

  // The reply from its start up to and including a call's name.
  std::string start_grammar() const {
    return fmt::format("start ::= {} ;\n{}", segment_shape().first, segment_rules());
  }

  // Tool k's cut: from after its name to the end of the next call's name.
  std::optional<std::string> after_name_grammar(size_t k) {
    schema_rules_.clear();
    rule_of_schema_.clear();
    taken_ = {"start", "text", "call", "calls", "tool", "ws", "any", "except", "head", "object_head", "names", "more"};
    auto rest = rest_after_name(tools_[k]);
    if (!rest) return std::nullopt;
    return fmt::format("start ::= {} {} ;\n{}{}", *rest, segment_shape().second, segment_rules(), schema_rules_);
  }

  // The key of tool k's cut: its arguments' schema (the cuts of two tools
  // differ only there).
  std::string after_name_key(size_t k) const {
    return tools_[k].parameters.value_or("{}");
  }

  void error(std::string message) { diags_.error_at_file(std::move(message)); }

  static std::string escaped(const std::string& text) {
    const std::string quoted = quote_literal(text);
    return quoted.substr(1, quoted.size() - 2);
  }

  // The list, read by simdjson (a list of 400 tools is 400 KB of JSON, and
  // only the names are needed before a call is written): each tool's name
  // and its parameters' JSON text. A number simdjson cannot hold (an
  // integer past 64 bits) sends the list to nlohmann's reader, which takes
  // it as a double.
  bool read_tools() {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    const simdjson::error_code parsed = parser.parse(file_.text().data(), file_.text().size()).get(root);
    if (parsed == simdjson::NUMBER_ERROR) return read_tools_slowly();
    if (parsed) {
      error(fmt::format("invalid JSON: {}", simdjson::error_message(parsed)));
      return false;
    }
    simdjson::dom::element list = root, inner;
    if (root.is_object() && root["tools"].get(inner) == simdjson::SUCCESS) list = inner;
    simdjson::dom::array array;
    if (list.get_array().get(array)) return not_a_list();
    std::set<std::string> names;
    size_t i = 0;
    for (simdjson::dom::element entry : array) {
      simdjson::dom::element function = entry, found;
      if (entry.is_object() && entry["function"].get(found) == simdjson::SUCCESS) function = found;
      std::string_view name;
      if (!function.is_object() || function["name"].get_string().get(name) || name.empty()) return unnamed(i);
      Tool tool{std::string(name), std::nullopt, i++};
      simdjson::dom::element parameters;
      if (function["parameters"].get(parameters) == simdjson::SUCCESS) tool.parameters = simdjson::minify(parameters);
      if (!add_tool(std::move(tool), names)) return false;
    }
    return some_tools();
  }

  bool read_tools_slowly() {
    Json root;
    try {
      root = Json::parse(file_.text());
    } catch (const Json::exception& e) {
      std::string message = e.what();
      const size_t dash = message.find(" - ");
      error("invalid JSON: " + (dash == std::string::npos ? message : message.substr(dash + 3)));
      return false;
    }
    const Json* list = &root;
    if (root.is_object() && root.contains("tools")) list = &root["tools"];
    if (!list->is_array()) return not_a_list();
    std::set<std::string> names;
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& entry = (*list)[i];
      const Json* function = entry.is_object() && entry.contains("function") ? &entry["function"] : &entry;
      if (!function->is_object() || !function->contains("name") || !(*function)["name"].is_string() ||
          (*function)["name"].get<std::string>().empty())
        return unnamed(i);
      Tool tool{(*function)["name"].get<std::string>(), std::nullopt, i};
      if (function->contains("parameters")) tool.parameters = (*function)["parameters"].dump();
      if (!add_tool(std::move(tool), names)) return false;
    }
    return some_tools();
  }

  bool not_a_list() {
    error("expecting a JSON list of tools, or an object with a \"tools\" list");
    return false;
  }

  bool unnamed(size_t i) {
    error(fmt::format("tool {} has no name: a tool is {{\"type\": \"function\", \"function\": {{\"name\": …, "
                      "\"parameters\": {{…}}}}}} or {{\"name\": …, \"parameters\": {{…}}}}",
                      i));
    return false;
  }

  bool add_tool(Tool tool, std::set<std::string>& names) {
    if (!names.insert(tool.name).second) {
      error(fmt::format("tool {} is named '{}', as an earlier tool is: a call's name must say which tool it is",
                        tool.index, tool.name));
      return false;
    }
    tools_.push_back(std::move(tool));
    return true;
  }

  bool some_tools() {
    if (tools_.empty()) {
      error("the list has no tools");
      return false;
    }
    return true;
  }

  std::string allocate(std::string base) {
    for (char& c : base)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "r" + base;
    std::string name = base;
    for (int n = 2; taken_.count(name); ++n) name = fmt::format("{}_{}", base, n);
    taken_.insert(name);
    return name;
  }

  // The rule of a schema's values, translated once per distinct schema.
  std::optional<std::string> schema_rule(const Json& schema, const std::string& base, const std::string& what,
                                         const JsonSchemaOptions& layout) {
    const std::string key = schema.dump() + (layout == options_.json ? "" : "\x1F" "compact");
    auto found = rule_of_schema_.find(key);
    if (found != rule_of_schema_.end()) return found->second;
    std::string file_name = fmt::format("{} ({})", file_.name(), what);
    for (char& c : file_name)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';  // the name goes into a comment line
    SourceFile schema_file(std::move(file_name), schema.dump(2));
    Diagnostics schema_diags(&schema_file);
    std::optional<SchemaTranslation> translation = translate_json_schema(schema_file, schema_diags, layout, limits_);
    for (const Diagnostic& d : schema_diags.all()) {
      if (d.severity == Severity::Error) failed_ = true;
      Diagnostic placed = d;
      placed.range = {};
      placed.range.begin.line = placed.range.end.line = 0;
      placed.message = fmt::format("{}: {}", what, d.message);
      diags_.add(std::move(placed));
    }
    if (!translation) {
      failed_ = true;
      return std::nullopt;
    }
    const std::string name = allocate(base);
    std::map<std::string, std::string> shared;
    if (layout.whitespace == JsonWhitespace::Flexible) shared["ws"] = "ws";
    for (const EmbeddedRule& rule :
         embed_schema_rules(*translation, name, shared, [&](const std::string& n) { return allocate(n); }))
      schema_rules_ += rule.text + "\n";
    ++distinct_;
    rule_of_schema_.emplace(key, name);
    return name;
  }

  // A tool's parameters schema, parsed on first use (no parameters: an
  // object with none).
  const Json& parameters(const Tool& tool) {
    static const Json kNoParameters = Json::parse(R"({"type": "object", "properties": {}})");
    if (!tool.parameters) return kNoParameters;
    auto [entry, added] = parsed_.try_emplace(tool.index);
    if (added) entry->second = Json::parse(*tool.parameters);  // simdjson's own JSON text: valid
    return entry->second;
  }

  std::optional<std::string> arguments_rule(const Tool& tool) {
    return schema_rule(parameters(tool), "args_" + tool.name,
                       fmt::format("the parameters of tool '{}'", tool.name), options_.json);
  }

  // Qwen3-Coder writes a string value as itself, not as JSON. The values a
  // string schema allows, as a .cgram expression over that raw text, none
  // holding the parameter's end ("\n</parameter>"); nullopt when the schema
  // is not only a string's (its value is then JSON); an error is reported.
  std::optional<std::string> raw_string_value(const Json& schema, const std::string& what, bool& failed) {
    static const std::set<std::string> kString = {"type",   "enum",        "const", "pattern", "minLength", "maxLength",
                                                  "format", "description", "title", "examples", "default", "$comment"};
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
      if (!pattern) {
        error(fmt::format("{}: its pattern: {}", what, pattern.error().message));
        failed = true;
        return std::nullopt;
      }
      regexes.push_back(*pattern);
    }
    if (schema.contains("format") && schema["format"].is_string())
      if (auto format = json::format_regex(schema["format"].get<std::string>())) regexes.push_back(format->regex);
    if (schema.contains("minLength") || schema.contains("maxLength")) {
      for (const char* key : {"minLength", "maxLength"})
        if (schema.contains(key) && !schema[key].is_number_unsigned()) {
          error(fmt::format("{}: {} must be a whole number", what, key));
          failed = true;
          return std::nullopt;
        }
      const uint64_t min = schema.value("minLength", uint64_t{0}), max = schema.value("maxLength", UINT64_MAX);
      regexes.push_back(max == UINT64_MAX ? fmt::format("[\\s\\S]{{{},}}", min)
                                          : fmt::format("[\\s\\S]{{{},{}}}", min, max));
    }
    if (regexes.empty()) return std::string("except!('\\n</parameter>')");
    // The schema's strings, less those holding the end of the parameter.
    std::optional<json::CharDfa> values = json::CharDfa::everything();
    for (const std::string& r : regexes) {
      auto parsed = ir::parse_regex(r);
      auto dfa = std::holds_alternative<ir::RegexNode>(parsed) ? json::CharDfa::of_regex(std::get<ir::RegexNode>(parsed))
                                                             : std::nullopt;
      if (dfa) values = values->intersect(*dfa);
      if (!dfa || !values) {
        error(fmt::format("{}: its string constraints are too large to write as raw text", what));
        failed = true;
        return std::nullopt;
      }
    }
    static const auto holding_end = json::CharDfa::of_regex(
        std::get<ir::RegexNode>(ir::parse_regex("[\\s\\S]*\\n</parameter>[\\s\\S]*")));
    values = values->minus(*holding_end);
    auto regex = values && !values->empty() ? values->to_regex() : std::nullopt;
    if (!regex) {
      error(fmt::format("{}: {}", what, values && values->empty() ? "no string is allowed"
                                                                  : "its string constraints are too large to write as raw text"));
      failed = true;
      return std::nullopt;
    }
    return fmt::format("#'{}'", ir::regex_text(*regex));
  }

  // Qwen3-Coder: each parameter on its own, in the schema's order, the
  // required ones there; a string as raw text up to "\n</parameter>",
  // anything else as compact JSON.
  std::optional<std::string> qwen_parameters(const Tool& tool) {
    const Json& schema = parameters(tool);
    if (!tool.parameters || !schema.contains("properties")) return std::string("''");
    const Json& properties = schema["properties"];
    std::set<std::string> required;
    if (schema.contains("required") && schema["required"].is_array())
      for (const Json& r : schema["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    std::string out;
    JsonSchemaOptions compact = options_.json;
    compact.whitespace = JsonWhitespace::Compact;
    for (const auto& [name, schema] : properties.items()) {
      std::string value;
      const std::string what = fmt::format("parameter '{}' of tool '{}'", name, tool.name);
      bool failed = false;
      if (auto raw = raw_string_value(schema, what, failed)) {
        value = *raw;
      } else if (failed) {
        return std::nullopt;
      } else {
        auto rule = schema_rule(schema, fmt::format("param_{}_{}", tool.name, name), what, compact);
        if (!rule) return std::nullopt;
        value = *rule;
      }
      const std::string item = fmt::format("'<parameter={}>\\n' {} '\\n</parameter>\\n'", escaped(name), value);
      out += (out.empty() ? "" : " ") + (required.count(name) ? item : "( " + item + " )?");
    }
    return out.empty() ? std::string("''") : out;
  }

  // A call's name as the grammar writes it, delimiters included.
  std::string name_literal(const Tool& tool) const {
    return options_.format == ToolFormat::Qwen ? fmt::format("'{}>'", escaped(tool.name)) : json_name_literal(tool.name);
  }

  // What follows a tool's name in its call: its arguments.
  std::optional<std::string> rest_after_name(const Tool& tool) {
    if (options_.format == ToolFormat::Qwen) {
      auto params = qwen_parameters(tool);
      if (!params) return std::nullopt;
      return "'\\n' " + *params;
    }
    auto args = arguments_rule(tool);
    if (!args) return std::nullopt;
    // Flexible arguments begin and end with their own whitespace.
    const bool flexible = options_.json.whitespace == JsonWhitespace::Flexible;
    return fmt::format("ws ',' ws '\"{}\"' ws ':'{} {}{}",
                       options_.format == ToolFormat::Llama3 ? "parameters" : "arguments", flexible ? "" : " ws", *args,
                       flexible ? "" : " ws");
  }

  std::string ws_rule() const {
    return options_.json.max_whitespace ? fmt::format("ws ::= #'[ \\t\\n\\r]{{0,{}}}' ;\n", *options_.json.max_whitespace)
                                        : std::string("ws ::= #'[ \\t\\n\\r]*' ;\n");
  }

  bool has_text() const { return options_.free_text && options_.format != ToolFormat::JsonArray; }

  std::string trigger() const {
    switch (options_.format) {
      case ToolFormat::Hermes:
      case ToolFormat::Qwen: return "'<tool_call>'";
      case ToolFormat::Llama3: return "'{\"name\"'";
      case ToolFormat::Mistral: return "'[TOOL_CALLS]'";
      case ToolFormat::JsonArray: break;
    }
    return "";
  }

  // The cut reply's two shapes: from its start to a call's name, and from
  // the end of a tool's arguments to the next call's name. Every name is
  // `names`; `head` is a call up to its name, `more` what may follow a
  // call.
  std::pair<std::string, std::string> segment_shape() const {
    const std::string start = has_text() ? "text ( head )?" : "head";
    const std::string more = has_text() ? "more" : "( ws head )?";
    switch (options_.format) {
      case ToolFormat::Hermes: return {start, "'}' ws '</tool_call>' " + more};
      case ToolFormat::Llama3: return {start, "'}' " + more};
      case ToolFormat::Qwen: return {start, "'</function>\\n</tool_call>' " + more};
      case ToolFormat::Mistral: return {start, "'}' ( ws ',' ws object_head | ws ']' " + more + " )"};
      case ToolFormat::JsonArray:
        return {"ws '[' ws ( object_head | ']' ws )", "'}' ( ws ',' ws object_head | ws ']' ws )"};
    }
    return {};
  }

  // The rules the cut grammars share: the call heads, the names as one
  // regex (a trie), the free text and the whitespace.
  std::string segment_rules() const {
    std::string names;
    for (const Tool& tool : tools_) names += (names.empty() ? "" : "|") + json::regex_literal(tool.name);
    const std::string quote = options_.format == ToolFormat::Qwen ? "" : "\"";
    std::string out = fmt::format("names ::= #'{}({}){}' ;\n", quote, names, options_.format == ToolFormat::Qwen ? ">" : "\"");
    out += "object_head ::= '{' ws '\"name\"' ws ':' ws names ;\n";
    switch (options_.format) {
      case ToolFormat::Hermes: out += "head ::= '<tool_call>' ws object_head ;\n"; break;
      case ToolFormat::Llama3: out += "head ::= '{\"name\"' ws ':' ws names ;\n"; break;
      case ToolFormat::Qwen: out += "head ::= '<tool_call>\\n<function=' names ;\n"; break;
      case ToolFormat::Mistral: out += "head ::= '[TOOL_CALLS]' ws '[' ws object_head ;\n"; break;
      case ToolFormat::JsonArray: break;
    }
    if (has_text()) {
      out += fmt::format("text ::= except!({}) ;\n", trigger());
      out += "more ::= text ( head )? ;\n";
    }
    return out + ws_rule();
  }

  // The reply around the calls, per format.
  std::string reply() const {
    // `tool` ends with whitespace of its own (its arguments').
    const std::string object = "'{' ws '\"name\"' ws ':' ws tool '}'";
    std::string call;
    switch (options_.format) {
      case ToolFormat::Hermes: call = fmt::format("{} ws {} ws '</tool_call>'", trigger(), object); break;
      case ToolFormat::Llama3: call = "'{\"name\"' ws ':' ws tool '}'"; break;
      case ToolFormat::Qwen: call = "'<tool_call>\\n<function=' tool '</function>\\n</tool_call>'"; break;
      case ToolFormat::Mistral:
        call = fmt::format("{} ws '[' ws {} ( ws ',' ws {} )* ws ']'", trigger(), object, object);
        break;
      case ToolFormat::JsonArray:
        return fmt::format("start ::= ws '[' ws ( {} ( ws ',' ws {} )* ws )? ']' ws ;\n", object, object);
    }
    std::string out;
    if (has_text()) {
      out += "start ::= text ( call text )* ;\n";
      out += fmt::format("text ::= except!({}) ;\n", trigger());
    } else {
      out += "start ::= call ( ws call )* ;\n";
    }
    out += fmt::format("call ::= {} ;\n", call);
    return out;
  }

  const SourceFile& file_;
  Diagnostics& diags_;
  ToolsOptions options_;
  SyntaxLimits limits_;
  std::map<size_t, Json> parsed_;  // tool index → its parameters
  std::vector<Tool> tools_;
  std::set<std::string> taken_;
  std::map<std::string, std::string> rule_of_schema_;
  std::string schema_rules_;
  size_t distinct_ = 0;
  bool failed_ = false;
};

}  // namespace

std::optional<ToolFormat> parse_tool_format(std::string_view name) {
  for (size_t i = 0; i < std::size(kFormatNames); ++i)
    if (name == kFormatNames[i]) return static_cast<ToolFormat>(i);
  return std::nullopt;
}

const char* tool_format_name(ToolFormat format) { return kFormatNames[static_cast<size_t>(format)].data(); }

std::optional<ToolsTranslation> translate_tools(const SourceFile& file, Diagnostics& diags, const ToolsOptions& options,
                                                const SyntaxLimits& limits) {
  if (file.text().size() > limits.max_source_bytes) {
    diags.error_at_file(
        fmt::format("tools file is {} bytes; the limit is {} bytes", file.text().size(), limits.max_source_bytes));
    return std::nullopt;
  }
  MemoryStage stage("translating the tools");
  charge_memory(16 * file.text().size());
  return ToolsBuilder(file, diags, options, limits).run();
}

}  // namespace cgram

namespace cgram {

struct ToolSegments::Reader {
  SourceFile file;
  Diagnostics diags;
  ToolsBuilder builder;
  Reader(const SourceFile& source, const ToolsOptions& options, const SyntaxLimits& limits)
      : file(source), diags(&file), builder(file, diags, options, limits) {}
};

ToolSegments::ToolSegments() = default;
ToolSegments::~ToolSegments() = default;
ToolSegments::ToolSegments(ToolSegments&&) noexcept = default;
ToolSegments& ToolSegments::operator=(ToolSegments&&) noexcept = default;

std::optional<ToolSegments> ToolSegments::read(const SourceFile& file, Diagnostics& diags, const ToolsOptions& options,
                                               const SyntaxLimits& limits) {
  if (file.text().size() > limits.max_source_bytes) {
    diags.error_at_file(
        fmt::format("tools file is {} bytes; the limit is {} bytes", file.text().size(), limits.max_source_bytes));
    return std::nullopt;
  }
  ToolSegments out;
  out.reader_ = std::make_unique<Reader>(file, options, limits);
  ToolsBuilder& builder = out.reader_->builder;
  const bool read = builder.read();
  for (const Diagnostic& d : out.reader_->diags.all()) diags.add(d);
  if (!read) return std::nullopt;
  out.open_ = builder.open();
  out.close_ = builder.close();
  for (const auto& tool : builder.tools()) {
    for (unsigned char c : tool.name)
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '\'' || c == out.open_ || c == out.close_) {
        diags.error_at_file(fmt::format(
            "tool '{}': a name cut at its delimiters must be printable ASCII without {}, {}, a quote or a backslash",
            tool.name, out.open_, out.close_));
        return std::nullopt;
      }
    out.names_.push_back(tool.name);
  }
  for (size_t k = 0; k < out.names_.size(); ++k) out.keys_.push_back(builder.after_name_key(k));
  out.start_ = builder.start_grammar();
  return out;
}

std::optional<std::string> ToolSegments::after_name_grammar(size_t k, Diagnostics& diags) const {
  MemoryStage stage("translating a tool's arguments");
  const size_t before = reader_->diags.all().size();
  auto text = reader_->builder.after_name_grammar(k);
  const auto& all = reader_->diags.all();
  for (size_t i = before; i < all.size(); ++i) diags.add(all[i]);
  return text;
}

}  // namespace cgram

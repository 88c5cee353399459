#include "tools.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <simdjson.h>
#include <vector>

#include "cgram_text.h"
#include "json_text.h"
#include "qwen_parameters.h"
#include "rule_liveness.h"
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

// The rule names the reply grammars write themselves (the whole one and the
// cuts), which a schema's rules must not take.
const std::set<std::string> kReservedRules = {"start", "text",  "call",        "calls", "tool", "ws",
                                              "any",   "except", "head", "object_head", "names", "more"};

class ToolsBuilder {
 public:
  ToolsBuilder(const SourceFile& file, Diagnostics& diags, const ToolsOptions& options, const SyntaxLimits& limits)
      : file_(file), diags_(diags), options_(options), limits_(limits) {
    taken_ = kReservedRules;
  }

  std::optional<ToolsTranslation> run() {
    if (!read_tools()) return std::nullopt;
    ToolsTranslation out;
    std::vector<std::string> alternatives;  // one per tool; empty for a tool that accepts no call
    for (const Tool& tool : tools_) {
      no_value_.reset();
      auto rest = rest_after_name(tool);
      if (!rest && !no_value_) return std::nullopt;
      alternatives.push_back(rest ? name_literal(tool) + " " + *rest : "");
      if (no_value_) dead_.emplace(tool.index, *no_value_);
    }
    if (!leave_out_dead_tools(alternatives)) return std::nullopt;
    std::string tool_rule;
    for (const std::string& alternative : alternatives)
      if (!alternative.empty()) tool_rule += (tool_rule.empty() ? "tool ::= " : "\n     | ") + alternative;
    out.tools = tools_.size() - dead_.size();
    out.distinct_schemas = distinct_;
    out.cgram = fmt::format("(* The replies of a model with {} tools ({} format), written by cgram tools from {}. *)\n",
                            out.tools, tool_format_name(options_.format), file_.name());
    out.cgram += reply();
    out.cgram += tool_rule + " ;\n";
    out.cgram += schema_rules_;
    out.cgram = with_ws_if_used(std::move(out.cgram));
    charge_memory(out.cgram.size());
    return out;
  }

  // A tool whose schema no call satisfies is left out with a warning that
  // names it (an error in strict mode, or when every tool is so), and the
  // rules only it used go with it: one dead tool must not fail a server's
  // request. The schema translators say so for what they see at once
  // (no_value); the rest is what RuleLiveness finds cannot finish.
  bool leave_out_dead_tools(std::vector<std::string>& alternatives) {
    std::optional<RuleLiveness> liveness;
    if (options_.find_dead_tools) {
      std::string probe = schema_rules_ + ws_rule();
      for (size_t k = 0; k < alternatives.size(); ++k)
        if (!alternatives[k].empty()) probe += fmt::format("tool_probe_{} ::= {} ;\n", k, alternatives[k]);
      liveness = RuleLiveness::read(probe);
      if (liveness)  // else the compile reports what does not parse
        for (size_t k = 0; k < alternatives.size(); ++k)
          if (!alternatives[k].empty() && !liveness->productive(fmt::format("tool_probe_{}", k)))
            dead_.emplace(tools_[k].index, "no value satisfies its parameters' schema (some required part can "
                                           "never be written)");
    }
    if (dead_.empty()) return true;
    for (const auto& [index, why] : dead_) {
      const std::string message = fmt::format("tool '{}' accepts no call: {}", tools_[index].name, why);
      if (options_.json.strict || dead_.size() == tools_.size()) error(message);
      else warning(message + "; it is left out of the grammar (--strict makes this an error)");
    }
    if (options_.json.strict || dead_.size() == tools_.size()) {
      if (dead_.size() == tools_.size() && tools_.size() > 1) error("no tool of the list accepts a call");
      return false;
    }
    std::vector<std::string> roots = {"ws"};
    for (size_t k = 0; k < alternatives.size(); ++k)
      if (dead_.count(tools_[k].index)) alternatives[k].clear();
      else roots.push_back(fmt::format("tool_probe_{}", k));
    // Without the parse, a dead tool's rules were never written (its schema
    // was refused whole) or only its own unused ones remain.
    if (liveness) schema_rules_ = rules_used(schema_rules_, liveness->reachable(roots));
    return true;
  }

  // The lines of `rules` (one rule a line) whose rule is in `used`.
  static std::string rules_used(const std::string& rules, const std::set<std::string>& used) {
    std::string out;
    for (size_t at = 0; at < rules.size();) {
      size_t end = rules.find('\n', at);
      if (end == std::string::npos) end = rules.size();
      const std::string_view line(rules.data() + at, end - at);
      const size_t name_end = line.find(" ::=");
      if (name_end == std::string_view::npos || used.count(std::string(line.substr(0, name_end))))
        out.append(line).append("\n");
      at = end + 1;
    }
    return out;
  }

  // The grammar with the whitespace rule, where something uses it (Qwen's
  // calls around raw text do not).
  std::string with_ws_if_used(std::string text) const {
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '\'' || c == '"'; };
    for (size_t at = text.find("ws"); at != std::string::npos; at = text.find("ws", at + 2))
      if ((at == 0 || !word(text[at - 1])) && (at + 2 == text.size() || !word(text[at + 2]))) return text + ws_rule();
    return text;
  }

  // For ToolSegments: the tools read, with the text of each cut.
  bool read() { return read_tools(); }
  const std::vector<Tool>& tools() const { return tools_; }
  char open() const { return options_.format == ToolFormat::Qwen ? '=' : '"'; }
  char close() const { return options_.format == ToolFormat::Qwen ? '>' : '"'; }

  // The reply from its start up to and including a call's name.
  std::string start_grammar() const {
    return with_ws_if_used(fmt::format("start ::= {} ;\n{}", segment_shape().first, segment_rules()));
  }

  // Tool k's cut: from after its name to the end of the next call's name.
  std::optional<std::string> after_name_grammar(size_t k, bool find_dead_tools) {
    schema_rules_.clear();
    rule_of_schema_.clear();
    taken_ = kReservedRules;
    no_value_.reset();
    auto rest = rest_after_name(tools_[k]);
    std::string text;
    if (rest)
      text = with_ws_if_used(
          fmt::format("start ::= {} {} ;\n{}{}", *rest, segment_shape().second, segment_rules(), schema_rules_));
    if (rest && !no_value_ && find_dead_tools)
      if (auto liveness = RuleLiveness::read(text); liveness && !liveness->productive("start"))
        no_value_ = "no value satisfies its parameters' schema (some required part can never be written)";
    if (no_value_) error(fmt::format("tool '{}' accepts no call: {}", tools_[k].name, *no_value_));
    if (!rest || no_value_) return std::nullopt;
    return text;
  }

  // The key of tool k's cut: its arguments' schema (the cuts of two tools
  // differ only there).
  std::string after_name_key(size_t k) const {
    return tools_[k].parameters.value_or("{}");
  }

  void error(std::string message) { diags_.error_at_file(std::move(message)); }
  // The tool being translated accepts no call: why, for leave_out_dead_tools.
  void no_value(std::string why) { no_value_ = std::move(why); }
  void warning(std::string message) {
    SourceRange none;
    none.begin.line = 0;
    diags_.warning(none, std::move(message));
  }

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
    bool no_value = false;
    std::optional<SchemaTranslation> translation =
        translate_json_schema(schema_file, schema_diags, layout, limits_, &no_value);
    if (no_value) {  // the tool accepts no call: leave_out_dead_tools says so by its name
      no_value_ = "no value satisfies " + what;
      return std::nullopt;
    }
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

  // A call's arguments are a JSON object: the schema says which. Another
  // type is an error; a schema that names none is given "object".
  std::optional<Json> arguments_schema(const Tool& tool) {
    const Json& p = parameters(tool);
    if (p.is_boolean()) {
      if (p.get<bool>()) return Json{{"type", "object"}, {"additionalProperties", true}};
      no_value("its parameters are false");
      return std::nullopt;
    }
    if (!p.is_object()) {
      error(fmt::format("tool '{}': its parameters are a JSON Schema object, not {}", tool.name,
                        p.is_string() ? "a string" : p.is_null() ? "null" : p.is_array() ? "a list" : "a number"));
      return std::nullopt;
    }
    Json out = p;
    if (!out.contains("type")) {
      out["type"] = "object";
    } else if (out["type"] == "object") {
    } else if (out["type"].is_array() && std::count(out["type"].begin(), out["type"].end(), Json("object"))) {
      out["type"] = "object";
    } else {
      error(fmt::format("tool '{}': its parameters' type is {}: a call's arguments are an object", tool.name,
                        out["type"].dump()));
      return std::nullopt;
    }
    return out;
  }

  std::optional<std::string> arguments_rule(const Tool& tool) {
    std::optional<Json> schema = arguments_schema(tool);
    if (!schema) return std::nullopt;
    return schema_rule(*schema, "args_" + tool.name, fmt::format("the parameters of tool '{}'", tool.name),
                       options_.json);
  }

  // Qwen3-Coder: each parameter on its own (import/qwen_parameters.h), a
  // string as raw text up to "\n</parameter>", anything else as compact JSON.
  std::optional<std::string> qwen_parameters(const Tool& tool) {
    JsonSchemaOptions compact = options_.json;
    compact.whitespace = JsonWhitespace::Compact;
    QwenCallbacks callbacks;
    callbacks.json_value = [&](const Json& schema, const std::string& what) {
      return schema_rule(schema, fmt::format("param_{}", tool.name), what, compact);
    };
    callbacks.allocate = [&](const std::string& base) { return allocate(base); };
    callbacks.error = [&](std::string message) { error(std::move(message)); };
    callbacks.warning = [&](std::string message) { warning(std::move(message)); };
    QwenParameters reader(tool.name, parameters(tool), options_.json.closed_objects, std::move(callbacks));
    std::string expression;
    switch (reader.translate(expression, schema_rules_)) {
      case QwenParameters::Outcome::Translated: return expression;
      case QwenParameters::Outcome::NoValue: no_value(expression); break;
      case QwenParameters::Outcome::Failed: break;
    }
    failed_ = true;
    return std::nullopt;
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
    return out;
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
  std::optional<std::string> no_value_;     // why the tool being translated accepts no call
  std::map<size_t, std::string> dead_;      // tool index → why it accepts no call
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
        const std::string delimiters =
            out.open_ == out.close_ ? "" : fmt::format("'{}', '{}', ", out.open_, out.close_);
        diags.error_at_file(fmt::format(
            "tool '{}': a name cut at its delimiters is printable ASCII without {}a quote or a backslash "
            "(compile the list whole, without the cut, for other names)",
            tool.name, delimiters));
        return std::nullopt;
      }
    out.names_.push_back(tool.name);
  }
  for (size_t k = 0; k < out.names_.size(); ++k) out.keys_.push_back(builder.after_name_key(k));
  out.start_ = builder.start_grammar();
  return out;
}

std::optional<std::string> ToolSegments::after_name_grammar(size_t k, Diagnostics& diags, bool find_dead_tools) const {
  MemoryStage stage("translating a tool's arguments");
  const size_t before = reader_->diags.all().size();
  auto text = reader_->builder.after_name_grammar(k, find_dead_tools);
  const auto& all = reader_->diags.all();
  for (size_t i = before; i < all.size(); ++i) diags.add(all[i]);
  return text;
}

}  // namespace cgram

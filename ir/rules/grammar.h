#pragma once
// The front door: .cgram text → checked grammar IR, or diagnostics.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "diagnostics.h"
#include "grammar_ir.h"
#include "json_schema.h"
#include "memory_budget.h"
#include "parse.h"
#include "tools.h"

namespace cgram {

// What the text is written in: .cgram, llama.cpp's GBNF, Lark, or a JSON
// Schema (the last three translated to .cgram first, import/gbnf.h,
// import/lark.h and import/json_schema.h; diagnostics point into the text
// given).
// A list of tools (import/tools.h) is read as the grammar of a reply that
// calls them.
enum class GrammarFormat { Cgram, Gbnf, Lark, JsonSchema, Tools };
// The format called `name` ("cgram", "gbnf", "lark", "json-schema" or
// "tools"); for
// "auto", the one `path`'s extension says (.gbnf GBNF, .lark Lark, .json a
// JSON Schema, anything else .cgram). Nothing for another name.
std::optional<GrammarFormat> grammar_format(std::string_view name, std::string_view path);
// The name of `format`: "cgram", "gbnf", "lark", "json-schema" or "tools".
const char* grammar_format_name(GrammarFormat format);

struct ParseOptions {
  // For GBNF, "start" (the default) means `root`; another name is a GBNF rule.
  std::string start = "start";
  GrammarFormat format = GrammarFormat::Cgram;
  SyntaxLimits syntax;
  ir::AutomatonLimits limits;
  // For a JSON Schema (and Lark's %json): the layout of the documents, and
  // whether ignored keywords are errors.
  JsonSchemaOptions schema;
  // For a list of tools: the model family's call format (the arguments'
  // layout is `schema`'s).
  ToolFormat tool_format = ToolFormat::Hermes;
  // The tools' argument objects allow members their schema does not list
  // (JSON Schema's default) rather than only those it lists.
  bool open_tool_arguments = false;
  // The memory parsing may take (support/memory_budget.h): the parser's
  // tokens and tree, the translation of GBNF or a JSON Schema, the grammar's
  // rules and automata. Past it, an error says which stage reached it.
  size_t max_memory_bytes = kDefaultCompileMemoryBytes;

  // The start rule by the grammar's own name (GBNF's default is root).
  std::string entry_rule() const { return format == GrammarFormat::Gbnf && start == "start" ? "root" : start; }
  bool operator==(const ParseOptions&) const = default;
  // The options of a tool list's translation (import/tools.h).
  ToolsOptions tools() const {
    ToolsOptions out;
    out.format = tool_format;
    out.json = schema;
    out.json.closed_objects = !open_tool_arguments;
    return out;
  }
};

// A checked grammar: immutable once built, safe to share between threads.
class Grammar {
 public:
  struct Outcome;
  static Outcome parse(std::string_view source, std::string_view filename,
                       const ParseOptions& options = {});

  const ir::GrammarIR& ir() const { return ir_; }
  const SourceFile& file() const { return *file_; }
  const std::shared_ptr<const SourceFile>& file_ptr() const { return file_; }

  // What the grammar keeps, as its compile charges it against the memory
  // budget: its source, rules and automata.
  size_t memory_bytes() const { return memory_bytes_; }

  Grammar(std::shared_ptr<const SourceFile> file, ir::GrammarIR ir);

 private:
  std::shared_ptr<const SourceFile> file_;
  ir::GrammarIR ir_;
  size_t memory_bytes_ = 0;

  static Outcome parse_within_budget(std::string_view source, std::string_view filename, const ParseOptions& options);
};

struct Grammar::Outcome {
  std::shared_ptr<const SourceFile> file;
  Diagnostics diagnostics;
  std::shared_ptr<const Grammar> grammar;  // null when there were errors

  bool ok() const { return grammar != nullptr; }
};

}  // namespace cgram

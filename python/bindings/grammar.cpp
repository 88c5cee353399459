// cgram.Grammar (parsing .cgram, GBNF and JSON Schemas, with diagnostics),
// cgram.CompiledGrammar, cgram.compile and cgram.load.
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <optional>

#include "bindings.h"
#include "file_io.h"
#include "compiler.h"
#include "parse.h"
#include "shared_object.h"

namespace cgram::python {
namespace {

using GrammarPtr = std::shared_ptr<PyGrammar>;
using CompiledPtr = std::shared_ptr<PyCompiledGrammar>;

const char* default_filename(GrammarFormat format) {
  switch (format) {
    case GrammarFormat::Cgram: return "grammar.cgram";
    case GrammarFormat::Gbnf: return "grammar.gbnf";
    case GrammarFormat::Lark: return "grammar.lark";
    case GrammarFormat::JsonSchema: return "schema.json";
    case GrammarFormat::Tools: return "tools.json";
  }
  return "grammar";
}


PyDiagnostic to_python(const Diagnostics& all, const Diagnostic& d) {
  PyDiagnostic out;
  out.severity = severity_name(d.severity);
  out.message = d.message;
  out.filename = all.file() ? all.file()->name() : "";
  if (d.range.begin.line != 0) {
    out.line = d.range.begin.line;
    out.column = d.range.begin.column;
    out.end_line = d.range.end.line;
    out.end_column = d.range.end.column;
  }
  out.rendered = all.render_one(d);
  return out;
}

[[noreturn]] void raise_grammar_error(const Diagnostics& diagnostics) {
  py::list list;
  for (const Diagnostic& d : diagnostics.sorted()) list.append(py::cast(to_python(diagnostics, d)));
  py::object error = exceptions().grammar_error(diagnostics.render(false));
  error.attr("diagnostics") = list;
  PyErr_SetObject(exceptions().grammar_error.ptr(), error.ptr());
  throw py::error_already_set();
}

}  // namespace

ParseOptions parse_options(const Reading& reading) {
  const std::string path = reading.filename.value_or("");
  std::optional<GrammarFormat> format = grammar_format(reading.format, path);
  if (!format)
    throw py::value_error(fmt::format("format must be 'auto', 'cgram', 'gbnf', 'lark', 'json-schema' or 'tools', not '{}'",
                                      reading.format));
  std::optional<ToolFormat> tool_format = parse_tool_format(reading.tool_format);
  if (!tool_format)
    throw py::value_error(fmt::format("tool_format must be 'hermes', 'llama3', 'qwen', 'mistral' or 'json-array', not '{}'",
                                      reading.tool_format));
  std::optional<JsonWhitespace> whitespace = parse_json_whitespace(reading.whitespace);
  if (!whitespace)
    throw py::value_error(fmt::format("whitespace must be 'compact', 'pretty' or 'flexible', not '{}'", reading.whitespace));
  std::optional<JsonPropertyOrder> property_order = parse_json_property_order(reading.property_order);
  if (!property_order)
    throw py::value_error(fmt::format("property_order must be 'schema' or 'any', not '{}'", reading.property_order));
  ParseOptions options;
  options.format = *format;
  options.start = reading.start;
  options.schema.property_order = *property_order;
  options.tool_format = *tool_format;
  options.open_tool_arguments = reading.open_arguments;
  options.schema.whitespace = *whitespace;
  options.schema.strict = reading.strict;
  options.schema.max_whitespace = reading.max_whitespace;
  options.max_memory_bytes = reading.max_memory_bytes;
  return options;
}

namespace {

GrammarPtr parse(std::string_view source, const Reading& reading) {
  const ParseOptions options = parse_options(reading);
  auto wrapper = std::make_shared<PyGrammar>();
  wrapper->format = options.format;
  wrapper->filename = reading.filename.value_or(default_filename(options.format));
  std::optional<Grammar::Outcome> outcome;
  {
    py::gil_scoped_release released;
    outcome = Grammar::parse(source, wrapper->filename, options);
  }
  if (!outcome->ok()) raise_grammar_error(outcome->diagnostics);
  wrapper->grammar = outcome->grammar;
  for (const Diagnostic& d : outcome->diagnostics.sorted())
    wrapper->diagnostics.push_back(to_python(outcome->diagnostics, d));
  return wrapper;
}

GrammarPtr parse_file(const std::string& path, Reading reading) {
  auto read = read_regular_file(path, "grammar", kMaxSourceBytes);
  if (!read) {
    PyErr_SetString(PyExc_OSError, read.error().message.c_str());
    throw py::error_already_set();
  }
  std::string& text = *read;
  reading.filename = path;
  return parse(text, reading);
}

// A str (as UTF-8) or bytes argument; TypeError for anything else.
std::string text_argument(const py::object& value, const char* what) {
  if (!py::isinstance<py::str>(value) && !py::isinstance<py::bytes>(value))
    throw py::type_error(fmt::format("{} must be str or bytes, not {}", what,
                                     std::string(py::str(py::type::of(value).attr("__name__")))));
  return py::cast<std::string>(value);
}

// A JSON Schema given as a Python value is written as indented JSON, so
// that diagnostics have lines to point at.
}  // namespace

std::string schema_text(const py::object& schema) {
  if (py::isinstance<py::str>(schema) || py::isinstance<py::bytes>(schema)) return py::cast<std::string>(schema);
  py::object dumps = py::module_::import("json").attr("dumps");
  return py::cast<std::string>(dumps(schema, py::arg("indent") = 2));
}

namespace {

std::shared_ptr<const Vocabulary> vocabulary_or_bundled(const std::shared_ptr<PyVocabulary>& vocab) {
  if (vocab) return vocab->vocab;
  // Built once per process: loading it costs milliseconds.
  static const std::shared_ptr<const Vocabulary> bundled = [] {
    VocabularyResult result = Vocabulary::bundled();
    if (auto* error = result.if_error()) raise(exceptions().vocabulary_error, error->message);
    return *result;
  }();
  return bundled;
}

CompiledPtr compile(const GrammarPtr& grammar, const std::shared_ptr<PyVocabulary>& vocab, const std::string& tier,
                    bool eager_index, bool canonical, size_t max_memory_bytes, size_t mask_memo_bytes) {
  if (!grammar) throw py::type_error("grammar must be a cgram.Grammar");
  if (tier != "table" && tier != "jit") throw py::value_error(fmt::format("tier must be 'table' or 'jit', not '{}'", tier));
  std::shared_ptr<const Vocabulary> vocabulary = vocabulary_or_bundled(vocab);
  CompileOptions options;
  options.eager_index = eager_index;
  options.canonical = canonical;
  options.max_memory_bytes = max_memory_bytes;
  options.mask_memo_bytes = mask_memo_bytes;
  CompileOutcome outcome;
  {
    py::gil_scoped_release released;
    outcome = Compiler().compile(grammar->grammar, vocabulary, options, tier == "jit" ? Tier::Jit : Tier::Table);
  }
  if (!outcome.ok()) raise(exceptions().compile_error, outcome.message);
  auto wrapper = std::make_shared<PyCompiledGrammar>();
  wrapper->compiled = std::move(outcome.grammar);
  return wrapper;
}

CompiledPtr load(const std::string& path, const std::shared_ptr<PyVocabulary>& vocab) {
  std::shared_ptr<const Vocabulary> vocabulary = vocabulary_or_bundled(vocab);
  std::optional<CompileResult> result;
  {
    py::gil_scoped_release released;
    result = load_shared_object(path, vocabulary);
  }
  if (auto* error = result->if_error()) raise(exceptions().load_error, error->message);
  auto wrapper = std::make_shared<PyCompiledGrammar>();
  wrapper->compiled = **result;
  return wrapper;
}

void save(const PyCompiledGrammar& self, const std::string& path) {
  Result<void> result;
  {
    py::gil_scoped_release released;
    result = save_shared_object(*self.compiled, path);
  }
  if (auto* error = result.if_error()) raise(exceptions().compile_error, error->message);
}

void bind_diagnostic(py::module_& m) {
  py::class_<PyDiagnostic>(m, "Diagnostic", "One error, warning or note about a grammar, at its place in the file.")
      .def_readonly("severity", &PyDiagnostic::severity, "'error', 'warning' or 'note'.")
      .def_readonly("message", &PyDiagnostic::message)
      .def_readonly("filename", &PyDiagnostic::filename)
      .def_readonly("line", &PyDiagnostic::line, "1-based; 0 when the diagnostic has no place in the file.")
      .def_readonly("column", &PyDiagnostic::column, "1-based, in characters.")
      .def_readonly("end_line", &PyDiagnostic::end_line)
      .def_readonly("end_column", &PyDiagnostic::end_column)
      .def("__str__", [](const PyDiagnostic& d) { return d.rendered; })
      .def("__repr__", [](const PyDiagnostic& d) {
        return fmt::format("<cgram.Diagnostic {}:{}:{}: {}: {}>", d.filename, d.line, d.column, d.severity, d.message);
      });
}

void bind_grammar_class(py::module_& m) {
  py::class_<PyGrammar, GrammarPtr> cls(m, "Grammar", R"doc(
A checked grammar: .cgram text, llama.cpp GBNF, Lark, a JSON Schema or a
list of tools (translated to .cgram). Parsing raises GrammarError, which carries the diagnostics;
warnings are kept in `warnings`. Immutable; compile it with cgram.compile.)doc");
  cls.def(py::init([](py::object source, const std::string& format, std::optional<std::string> filename,
                      const std::string& start, const std::string& whitespace, bool strict,
                      std::optional<uint32_t> max_whitespace, const std::string& property_order,
                      const std::string& tool_format) {
            Reading reading{format, filename, start, whitespace, strict, max_whitespace};
            reading.property_order = property_order;
            reading.tool_format = tool_format;
            return parse(text_argument(source, "source"), reading);
          }),
          py::arg("source"), py::kw_only(), py::arg("format") = "auto", py::arg("filename") = py::none(),
          py::arg("start") = "start", py::arg("whitespace") = "flexible", py::arg("strict") = false,
          py::arg("max_whitespace") = kDefaultMaxWhitespace, py::arg("property_order") = "schema",
          py::arg("tool_format") = "hermes",
          "Parses `source` (str or bytes). format: 'auto' (by the filename's extension: .gbnf GBNF, "
          ".lark Lark, .json a JSON Schema, else .cgram), 'cgram', 'gbnf', 'lark', 'json-schema' or 'tools' (a "
          "JSON list of tools, read as the grammar of a reply in tool_format's calls). start: the start rule "
          "('start' means root for GBNF). whitespace and strict: JSON Schema documents' layout "
          "('compact', 'pretty', 'flexible') and whether ignored keywords are errors; max_whitespace: with "
          "the flexible layout, the longest whitespace run between tokens (None: any length). property_order: "
          "JSON Schema object members in the schema's order ('schema') or in any order ('any': each at most "
          "once, the required ones all there).")
      .def_static(
          "from_file",
          [](const std::string& path, const std::string& format, const std::string& start,
             const std::string& whitespace, bool strict, std::optional<uint32_t> max_whitespace,
             const std::string& property_order) {
            Reading reading{format, std::nullopt, start, whitespace, strict, max_whitespace};
            reading.property_order = property_order;
            return parse_file(path, reading);
          },
          py::arg("path"), py::kw_only(), py::arg("format") = "auto", py::arg("start") = "start",
          py::arg("whitespace") = "flexible", py::arg("strict") = false,
          py::arg("max_whitespace") = kDefaultMaxWhitespace, py::arg("property_order") = "schema",
          "Reads and parses a grammar file (the format by its extension unless given).")
      .def_static(
          "from_gbnf",
          [](py::object source, const std::string& start, const std::string& filename) {
            return parse(text_argument(source, "source"), Reading{"gbnf", filename, start, "flexible", false});
          },
          py::arg("source"), py::kw_only(), py::arg("start") = "root", py::arg("filename") = "grammar.gbnf",
          "Parses llama.cpp GBNF.")
      .def_static(
          "from_lark",
          [](py::object source, const std::string& start, const std::string& filename) {
            return parse(text_argument(source, "source"), Reading{"lark", filename, start, "flexible", false});
          },
          py::arg("source"), py::kw_only(), py::arg("start") = "start", py::arg("filename") = "grammar.lark",
          "Parses a Lark grammar (llguidance's and XGrammar's dialect, %json included; docs/LARK.md).")
      .def_static(
          "from_tools",
          [](py::object tools, const std::string& format, const std::string& whitespace, std::optional<uint32_t> max_whitespace,
             const std::string& property_order, bool open_arguments) {
            Reading reading{"tools", "tools.json", "start", whitespace, false, max_whitespace};
            reading.tool_format = format;
            reading.property_order = property_order;
            reading.open_arguments = open_arguments;
            return parse(schema_text(tools), reading);
          },
          py::arg("tools"), py::kw_only(), py::arg("format") = "hermes", py::arg("whitespace") = "flexible",
          py::arg("max_whitespace") = kDefaultMaxWhitespace, py::arg("property_order") = "schema",
          py::arg("open_arguments") = false,
          "The grammar of a model's reply given OpenAI-style tools (a list, or its JSON text): free text, then "
          "calls in the format of the model family ('hermes', 'llama3', 'qwen', 'mistral', 'json-array'), each "
          "call's arguments checked against its tool's parameters schema (docs/TOOLS.md). An argument object holds "
          "only the members its schema lists unless it says additionalProperties (open_arguments=True: JSON "
          "Schema's default, any other member).")
      .def_static(
          "from_json_schema",
          [](py::object schema, const std::string& whitespace, bool strict, const std::string& filename,
             std::optional<uint32_t> max_whitespace, const std::string& property_order) {
            Reading reading{"json-schema", filename, "start", whitespace, strict, max_whitespace};
            reading.property_order = property_order;
            return parse(schema_text(schema), reading);
          },
          py::arg("schema"), py::kw_only(), py::arg("whitespace") = "flexible", py::arg("strict") = false,
          py::arg("filename") = "schema.json", py::arg("max_whitespace") = kDefaultMaxWhitespace,
          py::arg("property_order") = "schema",
          "Translates a JSON Schema: a dict (or bool), or its JSON text. With the flexible layout, runs of "
          "whitespace are at most max_whitespace long (None: any length). property_order: 'schema' (the "
          "schema's order) or 'any' (any order, each member at most once, the required ones all there).")
      .def_property_readonly("format", [](const PyGrammar& g) { return grammar_format_name(g.format); })
      .def_property_readonly("filename", [](const PyGrammar& g) { return g.filename; })
      .def_property_readonly(
          "source", [](const PyGrammar& g) { return std::string(g.grammar->file().text()); },
          "The .cgram text (for GBNF and JSON Schemas, the translation).")
      .def_property_readonly("diagnostics", [](const PyGrammar& g) { return g.diagnostics; },
                             "Every warning and note, in file order.")
      .def_property_readonly(
          "warnings",
          [](const PyGrammar& g) {
            std::vector<PyDiagnostic> out;
            for (const PyDiagnostic& d : g.diagnostics)
              if (d.severity == "warning") out.push_back(d);
            return out;
          })
      .def("__repr__", [](const PyGrammar& g) -> std::string {
        return fmt::format("<cgram.Grammar '{}' ({}), {} rules>", g.filename, grammar_format_name(g.format),
                           g.grammar->ir().user_rule_count());
      });
}

void bind_compiled_grammar(py::module_& m) {
  py::class_<PyCompiledGrammar, CompiledPtr>(m, "CompiledGrammar", R"doc(
A grammar compiled for one vocabulary: immutable, shared by every matcher
made from it, safe to use from many threads. Made by cgram.compile or
cgram.load.)doc")
      .def_property_readonly("vocab",
                             [](const PyCompiledGrammar& g) {
                               auto wrapper = std::make_shared<PyVocabulary>();
                               wrapper->vocab = g.compiled->vocabulary_ptr();
                               return wrapper;
                             })
      .def_property_readonly("vocab_size", [](const PyCompiledGrammar& g) { return g.compiled->vocabulary().size(); })
      .def_property_readonly("mask_words", [](const PyCompiledGrammar& g) { return g.compiled->mask_words(); },
                             "int32 words in one mask: ceil(vocab_size / 32).")
      .def_property_readonly("tier", [](const PyCompiledGrammar& g) { return std::string(g.compiled->tier()); },
                             "Which code matchers run: 'table', 'jit' or 'aot'.")
      .def_property_readonly("memory_bytes", [](const PyCompiledGrammar& g) { return g.compiled->memory_bytes(); })
      .def_property_readonly("source_name", [](const PyCompiledGrammar& g) { return g.compiled->source_name(); })
      .def_property_readonly("timings",
                             [](const PyCompiledGrammar& g) {
                               py::dict out;
                               out["lower_ms"] = g.compiled->timings().lower_ms;
                               out["index_ms"] = g.compiled->timings().index_ms;
                               return out;
                             })
      .def("save", &save, py::arg("path"),
           "Writes an AOT shared object (the file `cgram compile` writes); load it with cgram.load.")
      .def("__repr__", [](const PyCompiledGrammar& g) {
        return fmt::format("<cgram.CompiledGrammar '{}' for '{}' ({} ids), tier {}>", g.compiled->source_name(),
                           g.compiled->vocabulary().name(), g.compiled->vocabulary().size(), g.compiled->tier());
      });

  m.def("compile", &compile, py::arg("grammar"), py::arg("vocab") = py::none(), py::kw_only(),
        py::arg("tier") = "table", py::arg("eager_index") = false, py::arg("canonical") = false,
        py::arg("max_memory_bytes") = kDefaultCompileMemoryBytes, py::arg("mask_memo_bytes") = kDefaultMaskMemoBytes,
        "Compiles a Grammar for a Vocabulary (default: the bundled one). tier='jit' compiles native "
        "kernels with LLVM first; eager_index=True builds the whole token index now rather than on "
        "first use; canonical=True allows a token only where the tokenizer itself would write it there; "
        "max_memory_bytes bounds the memory compiling may take (the error names the stage that reached it); "
        "mask_memo_bytes is the budget of the grammar's memo of masks, shared by its matchers (a cache: "
        "speed, never a mask; 0 turns it off). The GIL is released meanwhile. Raises CompileError.");
  m.def(
      "compile",
      [](py::str source, const std::shared_ptr<PyVocabulary>& vocab, const std::string& tier, bool eager_index,
         bool canonical, size_t max_memory_bytes, size_t mask_memo_bytes) {
        Reading reading;
        reading.max_memory_bytes = max_memory_bytes;
        return compile(parse(py::cast<std::string>(source), reading), vocab, tier, eager_index, canonical,
                       max_memory_bytes, mask_memo_bytes);
      },
      py::arg("grammar"), py::arg("vocab") = py::none(), py::kw_only(), py::arg("tier") = "table",
      py::arg("eager_index") = false, py::arg("canonical") = false,
      py::arg("max_memory_bytes") = kDefaultCompileMemoryBytes, py::arg("mask_memo_bytes") = kDefaultMaskMemoBytes,
      "The same for .cgram text.");
  m.def("load", &load, py::arg("path"), py::arg("vocab") = py::none(),
        "Loads an AOT shared object made for `vocab` (default: the bundled one). Raises LoadError.");
}

}  // namespace

void bind_grammar(py::module_& m) {
  bind_diagnostic(m);
  bind_grammar_class(m);
  bind_compiled_grammar(m);
}

}  // namespace cgram::python

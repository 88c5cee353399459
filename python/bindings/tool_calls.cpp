// cgram.ToolCallsGrammar and cgram.ToolCallsMatcher: many tools compiled
// one at a time (calls/tool_calls.h).
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "bindings.h"
#include "tool_calls.h"

namespace cgram::python {
namespace {

struct PyToolCallsGrammar {
  std::shared_ptr<const ToolCallsGrammar> grammar;
};
using ToolsPtr = std::shared_ptr<PyToolCallsGrammar>;

void check_width(const py::array& words, const ToolCallsMatcher& matcher) {
  const size_t width = static_cast<size_t>(words.shape(words.ndim() - 1));
  if (width < matcher.mask_words())
    throw py::value_error(fmt::format("the mask has {} words per row; the vocabulary needs {} (ceil({} / 32))", width,
                                      matcher.mask_words(), matcher.grammar().vocabulary().size()));
}

ToolsPtr create(const std::shared_ptr<PyVocabulary>& vocab, const py::object& tools, const std::string& format,
                const std::string& whitespace, std::optional<uint32_t> max_whitespace, const std::string& property_order,
                bool open_arguments) {
  if (!vocab) throw py::type_error("vocab must be a cgram.Vocabulary");
  Reading reading{"tools", "tools.json", "start", whitespace, false, max_whitespace};
  reading.tool_format = format;
  reading.property_order = property_order;
  reading.open_arguments = open_arguments;
  ToolCallsOptions options;
  options.parse = parse_options(reading);
  const std::string text = schema_text(tools);
  std::optional<Result<std::shared_ptr<ToolCallsGrammar>>> made;
  {
    py::gil_scoped_release released;
    made.emplace(ToolCallsGrammar::create(text, "tools.json", vocab->vocab, options));
  }
  if (!*made) raise(exceptions().grammar_error, made->error().message);
  return std::make_shared<PyToolCallsGrammar>(PyToolCallsGrammar{**made});
}

void fill_tool_calls_mask(ToolCallsMatcher& self, const py::object& out, std::optional<py::ssize_t> row) {
  py::array words = mask_array(out, row ? 2 : 1, row ? "the bitmask (with a row)" : "the mask");
  check_width(words, self);
  if (row && (*row < 0 || *row >= words.shape(0)))
    throw py::index_error(fmt::format("row {} is outside the bitmask ({} rows)", *row, words.shape(0)));
  self.fill_row(mask_rows(words)[row ? static_cast<size_t>(*row) : 0]);
}

}  // namespace

void bind_tool_calls(py::module_& m) {
  py::class_<PyToolCallsGrammar, ToolsPtr>(m, "ToolCallsGrammar", R"doc(
A reply's grammar given many tools, compiled one tool at a time: the reply
up to a call's name now, each tool's arguments when a call to it is written
(docs/TOOLS.md). Its masks are those of Grammar.from_tools compiled whole.)doc")
      .def(py::init(&create), py::arg("vocab"), py::arg("tools"), py::kw_only(), py::arg("format") = "hermes",
           py::arg("whitespace") = "flexible", py::arg("max_whitespace") = kDefaultMaxWhitespace,
           py::arg("property_order") = "schema", py::arg("open_arguments") = false,
           "tools: a list of OpenAI-style tools, or its JSON text; the options as Grammar.from_tools's. "
           "GrammarError for a list it refuses, or names that hold a delimiter of the format.")
      .def_property_readonly("vocab_size", [](const PyToolCallsGrammar& g) { return g.grammar->vocabulary().size(); })
      .def_property_readonly("tools", [](const PyToolCallsGrammar& g) { return g.grammar->tools(); })
      .def_property_readonly("compiled_tools", [](const PyToolCallsGrammar& g) { return g.grammar->compiled_tools(); },
                             "How many distinct tool grammars were compiled so far.")
      .def_property_readonly("memory_bytes", [](const PyToolCallsGrammar& g) { return g.grammar->memory_bytes(); });

  py::class_<ToolCallsMatcher>(m, "ToolCallsMatcher", R"doc(
A matcher of a ToolCallsGrammar: the same calls as cgram.Matcher (advance,
fill_mask, is_allowed, rollback, ...). Not thread-safe.)doc")
      .def(py::init([](const ToolsPtr& grammar) {
             if (!grammar) throw py::type_error("grammar must be a cgram.ToolCallsGrammar");
             return std::make_unique<ToolCallsMatcher>(grammar->grammar);
           }),
           py::arg("grammar"))
      .def("advance", &ToolCallsMatcher::advance, py::arg("token"),
           "Accepts the token if the mask allows it (a tool's grammar is compiled when its name is written); "
           "REJECTED leaves the state unchanged.")
      .def("fill_mask", &fill_tool_calls_mask, py::arg("out"), py::arg("row") = py::none(),
           "Writes the mask into `out` (1-D, or row `row` of a 2-D bitmask); words past the vocabulary's are "
           "cleared.")
      .def("mask",
           [](ToolCallsMatcher& self) {
             py::array_t<int32_t> out(static_cast<py::ssize_t>(self.mask_words()));
             self.fill_mask({reinterpret_cast<uint32_t*>(out.mutable_data()), self.mask_words()});
             return out;
           })
      .def("is_allowed", &ToolCallsMatcher::is_allowed, py::arg("token"))
      .def("can_end", &ToolCallsMatcher::can_end)
      .def("is_finished", &ToolCallsMatcher::is_finished)
      .def("validate_tokens",
           [](ToolCallsMatcher& self, const std::vector<int64_t>& tokens) {
             std::vector<uint32_t> ids;
             for (int64_t t : tokens) {
               if (t < 0 || t > UINT32_MAX) break;
               ids.push_back(static_cast<uint32_t>(t));
             }
             return self.validate_tokens(ids);
           },
           py::arg("tokens"))
      .def("rollback",
           [](ToolCallsMatcher& self, size_t n) {
             if (!self.rollback(n))
               throw py::value_error(
                   fmt::format("cannot roll back {} tokens: {} accepted", n, self.tokens_accepted()));
           },
           py::arg("n") = 1)
      .def("reset", &ToolCallsMatcher::reset)
      .def("forced_text",
           [](ToolCallsMatcher& self, size_t limit) { return py::bytes(self.forced_text(limit)); },
           py::arg("limit") = Matcher::kDefaultForcedTextLimit)
      .def("jump_forward", [](ToolCallsMatcher&) { return py::make_tuple(0, std::vector<uint32_t>{}); },
           "Nothing gained, always: jump-forward is not offered across a tool list's cuts.")
      .def("clone", [](const ToolCallsMatcher& self) { return ToolCallsMatcher(self); })
      .def_property_readonly("tokens_accepted", &ToolCallsMatcher::tokens_accepted)
      .def_property_readonly("mask_words", &ToolCallsMatcher::mask_words)
      .def_property_readonly("error",
                             [](const ToolCallsMatcher& self) -> std::optional<std::string> {
                               if (!self.has_error()) return std::nullopt;
                               return self.error();
                             })
      .def_property_readonly("current_tool", [](const ToolCallsMatcher& self) -> std::optional<std::string> {
        const auto tool = self.current_tool();
        if (!tool) return std::nullopt;
        return self.grammar().tool_name(*tool);
      }, "The name of the tool whose call the text is in or after (None before any call).");
}

}  // namespace cgram::python

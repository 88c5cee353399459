// The module: exceptions, mask arrays, and the parts bound by the other files.
#include <fmt/format.h>

#include <exception>
#include <mutex>

#include "bindings.h"
#include "version.h"

namespace cgram::python {
namespace {

Exceptions* g_exceptions = nullptr;

// A new exception class, owned by the module (the handle borrows it).
py::handle new_exception(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  const std::string qualified = fmt::format("cgram.{}", name);
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::reinterpret_steal<py::object>(type));
  return type;
}

void make_exceptions(py::module_& m) {
  static Exceptions made;
  py::handle value_error = PyExc_ValueError;
  made.error = new_exception(m, "Error", py::make_tuple(py::handle(PyExc_Exception)),
                             "Every error cgram raises.");
  made.vocabulary_error = new_exception(m, "VocabularyError", py::make_tuple(made.error, value_error),
                                        "A vocabulary file or token list that cannot be loaded, or text "
                                        "that cannot be encoded.");
  made.grammar_error = new_exception(m, "GrammarError", py::make_tuple(made.error, value_error),
                                     "A grammar with errors. str() is every diagnostic rendered; "
                                     "`diagnostics` is the list of Diagnostic objects.");
  made.compile_error = new_exception(m, "CompileError", py::make_tuple(made.error),
                                     "Compiling a grammar for a vocabulary failed (a limit, the JIT, the linker).");
  made.load_error = new_exception(m, "LoadError", py::make_tuple(made.error),
                                  "An AOT shared object refused: not a cgram object, another version or "
                                  "vocabulary, damaged.");
  g_exceptions = &made;
}

bool is_words_dtype(const py::dtype& dtype) {
  return dtype.itemsize() == 4 && (dtype.kind() == 'i' || dtype.kind() == 'u');
}

}  // namespace

const Exceptions& exceptions() { return *g_exceptions; }

void raise(py::handle type, const std::string& message) {
  PyErr_SetString(type.ptr(), message.c_str());
  throw py::error_already_set();
}

void check_writable_layout(const py::array& array, int ndim, const char* what) {
  if (array.ndim() != ndim)
    throw py::value_error(fmt::format("{} must have {} dimension{}, not {}", what, ndim, ndim == 1 ? "" : "s",
                                      array.ndim()));
  if (!array.writeable()) throw py::value_error(fmt::format("{} is read-only", what));
  if (array.size() == 0) return;  // nothing is written: any strides will do
  const py::ssize_t item = array.itemsize();
  if (reinterpret_cast<uintptr_t>(array.data()) % static_cast<uintptr_t>(item) != 0)
    throw py::value_error(fmt::format("{} is not aligned to its {}-byte elements", what, item));
  if (array.shape(ndim - 1) > 1 && array.strides(ndim - 1) != item)
    throw py::value_error(fmt::format("{} must be contiguous along its last axis", what));
  // Rows written from several threads must not overlap (an expanded
  // tensor's rows share their memory).
  if (ndim == 2 && array.shape(0) > 1 && (array.strides(0) < item * array.shape(1) || array.strides(0) % item != 0))
    throw py::value_error(
        fmt::format("{} has rows that overlap, or a row stride that is not a multiple of its element size", what));
}

py::array mask_array(const py::object& object, int ndim, const char* what) {
  py::object candidate = object;
  // A torch tensor: its NumPy view shares the memory (CPU tensors only;
  // torch says why for the others).
  if (!py::isinstance<py::array>(candidate) && py::hasattr(candidate, "numpy") &&
      py::hasattr(candidate, "data_ptr"))
    candidate = candidate.attr("numpy")();
  if (!py::isinstance<py::array>(candidate))
    throw py::type_error(fmt::format("{} must be a NumPy array or a CPU torch tensor of int32, not {}", what,
                                     std::string(py::str(py::type::of(object).attr("__name__")))));
  py::array words = py::reinterpret_borrow<py::array>(candidate);
  if (!is_words_dtype(words.dtype()))
    throw py::type_error(fmt::format("{} must hold int32 (or uint32) words, not {}", what,
                                     std::string(py::str(words.dtype()))));
  check_writable_layout(words, ndim, what);
  return words;
}

std::vector<std::span<uint32_t>> mask_rows(py::array& words) {
  auto* base = static_cast<char*>(words.mutable_data());
  const size_t width = static_cast<size_t>(words.shape(words.ndim() - 1));
  const size_t rows = words.ndim() == 2 ? static_cast<size_t>(words.shape(0)) : 1;
  const size_t stride = words.ndim() == 2 ? static_cast<size_t>(words.strides(0)) : 0;
  std::vector<std::span<uint32_t>> out;
  for (size_t row = 0; row < rows; ++row) out.emplace_back(reinterpret_cast<uint32_t*>(base + row * stride), width);
  return out;
}

void run_on_pool(PyThreadPool& pool, size_t count, const std::function<void(size_t)>& job) {
  std::lock_guard lock(pool.running);
  pool.pool.run(count, job);  // rethrows the first exception of a job, once all have ended
}

}  // namespace cgram::python

PYBIND11_MODULE(_cgram, m) {
  namespace py = pybind11;
  using namespace cgram::python;
  m.doc() = "cgram: grammars compiled for a tokenizer vocabulary into exact next-token masks.";
  m.attr("__version__") = cgram::kVersion;
  m.attr("ABI_VERSION") = cgram::kAbiVersion;
  make_exceptions(m);
  bind_vocabulary(m);
  bind_grammar(m);
  bind_matcher(m);
  bind_logits(m);
  bind_tool_calls(m);
}

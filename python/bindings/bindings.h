#pragma once
// The Python module `cgram._cgram` (pybind11): what the binding files share.
//
// Python owns each object through a wrapper that holds the C++ object's
// shared_ptr (vocabularies, grammars, compiled grammars) or the matcher
// itself. Every C++ error value becomes a Python exception from the
// hierarchy below; nothing aborts the interpreter.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "grammar.h"
#include "compiled_grammar.h"
#include "encoder.h"
#include "batch.h"
#include "matcher.h"
#include "vocabulary.h"

namespace cgram::python {

namespace py = pybind11;

// The exception classes (cgram.Error and its subclasses), made once at
// import. The module's attributes own them; these handles borrow, so that
// nothing touches Python objects from static destructors after the
// interpreter has gone.
struct Exceptions {
  py::handle error;             // cgram.Error(Exception)
  py::handle vocabulary_error;  // cgram.VocabularyError(Error, ValueError)
  py::handle grammar_error;     // cgram.GrammarError(Error, ValueError): .diagnostics
  py::handle compile_error;     // cgram.CompileError(Error)
  py::handle load_error;        // cgram.LoadError(Error): an AOT object refused
};
const Exceptions& exceptions();

// Raises `type(message)`.
[[noreturn]] void raise(py::handle type, const std::string& message);

// A vocabulary and, made on first use, its encoder (compiling the
// pre-tokenizer's regex costs milliseconds: not paid by callers who never encode).
struct PyVocabulary {
  std::shared_ptr<const Vocabulary> vocab;
  std::unique_ptr<Encoder> encoder;

  const Encoder& get_encoder();
};

// One diagnostic, rendered while its source file was at hand.
struct PyDiagnostic {
  std::string severity;  // "error", "warning" or "note"
  std::string message;
  std::string filename;
  uint32_t line = 0, column = 0, end_line = 0, end_column = 0;  // 0: no place in the file
  std::string rendered;                                          // clang style, with the line and a caret
};

// What a grammar's text is and how to read it.
struct Reading {
  std::string format = "auto";
  std::optional<std::string> filename;
  std::string start = "start";
  std::string whitespace = "flexible";
  bool strict = false;
  std::optional<uint32_t> max_whitespace = kDefaultMaxWhitespace;
  size_t max_memory_bytes = kDefaultCompileMemoryBytes;
  std::string property_order = "schema";
  std::string tool_format = "hermes";
  bool open_arguments = false;
};
// The options `reading` names (ValueError for a name that is none).
ParseOptions parse_options(const Reading& reading);
// A JSON value given as a Python value (a dict, a list), written as
// indented JSON so that diagnostics have lines to point at; str and bytes
// as they are.
std::string schema_text(const py::object& schema);

struct PyGrammar {
  std::shared_ptr<const Grammar> grammar;
  std::vector<PyDiagnostic> diagnostics;  // warnings and notes (errors were raised)
  GrammarFormat format = GrammarFormat::Cgram;
  std::string filename;
};

struct PyCompiledGrammar {
  std::shared_ptr<const CompiledGrammar> compiled;
};

// A matcher, and whether a batch fill that released the GIL is using it:
// every other call on it is then refused (a matcher is not thread-safe).
struct PyMatcher {
  Matcher matcher;
  std::shared_ptr<const CompiledGrammar> grammar;
  bool busy = false;

  PyMatcher(Matcher m, std::shared_ptr<const CompiledGrammar> g) : matcher(std::move(m)), grammar(std::move(g)) {}
  Matcher& use();  // raises RuntimeError while busy
};

// A pool and the lock that gives it to one batch at a time (ThreadPool::run
// takes one job at a time; two Python threads may fill batches at once).
struct PyThreadPool {
  ThreadPool pool;
  std::mutex running;
  explicit PyThreadPool(size_t threads) : pool(threads) {}
};
// One thread per core, made on first use.
std::shared_ptr<PyThreadPool> default_pool();
// Runs job(i) for i in [0, count) on `pool`, one batch at a time (call it
// with the GIL released). As ThreadPool::run, the first exception of a job
// is rethrown once every job has finished.
void run_on_pool(PyThreadPool& pool, size_t count, const std::function<void(size_t)>& job);

// A writable array of 32-bit mask words (int32, as vLLM and SGLang use, or
// uint32) from a NumPy array or a CPU torch tensor (through .numpy(), which
// shares its memory). `ndim` is 1 or 2; the last axis must be contiguous.
// Raises TypeError or ValueError (with `what` in the message) otherwise.
py::array mask_array(const py::object& object, int ndim, const char* what);
// Refuses (ValueError) an array that cannot be written in place from
// several threads: another number of dimensions, read-only, unaligned, not
// contiguous along its last axis, or with rows that overlap.
void check_writable_layout(const py::array& array, int ndim, const char* what);
// Every row of a checked mask array, taken while the GIL is held (the
// array's flags can change once it is released).
std::vector<std::span<uint32_t>> mask_rows(py::array& words);

void bind_vocabulary(py::module_& m);
void bind_grammar(py::module_& m);
void bind_matcher(py::module_& m);
void bind_logits(py::module_& m);
void bind_tool_calls(py::module_& m);

}  // namespace cgram::python

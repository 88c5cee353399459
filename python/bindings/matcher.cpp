// cgram.Matcher, and cgram.fill_masks: a batch of masks filled on a thread
// pool with the GIL released.
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>

#include "batch.h"
#include "bindings.h"

namespace cgram::python {
namespace {

using CompiledPtr = std::shared_ptr<PyCompiledGrammar>;
constexpr size_t kMaxPoolThreads = 1024;

void check_width(const py::array& words, const Matcher& matcher, const char* what) {
  const size_t width = static_cast<size_t>(words.shape(words.ndim() - 1));
  if (width < matcher.mask_words())
    throw py::value_error(fmt::format("{} has {} words per row; the vocabulary needs {} (ceil({} / 32))", what, width,
                                      matcher.mask_words(), matcher.grammar().vocabulary().size()));
}

size_t checked_row(const py::array& words, py::ssize_t row, const char* what) {
  if (row < 0 || row >= words.shape(0))
    throw py::index_error(fmt::format("row {} is outside {} ({} rows)", row, what, words.shape(0)));
  return static_cast<size_t>(row);
}

py::tuple jump_forward(PyMatcher& self, size_t limit) {
  auto jump = self.use().jump_forward(limit);
  if (auto* error = jump.if_error()) raise(exceptions().vocabulary_error, error->message);
  const Matcher::JumpForward& j = *jump;
  return py::make_tuple(j.rollback, j.tokens);
}

void fill_mask(PyMatcher& self, const py::object& out, std::optional<py::ssize_t> row) {
  Matcher& matcher = self.use();
  py::array words = mask_array(out, row ? 2 : 1, row ? "the bitmask (with a row)" : "the mask");
  check_width(words, matcher, "the mask");
  matcher.fill_row(mask_rows(words)[row ? checked_row(words, *row, "the bitmask") : 0]);
}

py::array_t<int32_t> new_mask(PyMatcher& self) {
  Matcher& matcher = self.use();
  py::array_t<int32_t> out(static_cast<py::ssize_t>(matcher.mask_words()));
  matcher.fill_mask({reinterpret_cast<uint32_t*>(out.mutable_data()), matcher.mask_words()});
  return out;
}

void rollback(PyMatcher& self, size_t n) {
  Matcher& matcher = self.use();
  if (n > matcher.tokens_accepted())
    throw py::value_error(fmt::format("cannot roll back {} tokens: {} accepted", n, matcher.tokens_accepted()));
  if (!matcher.rollback(n))
    throw py::value_error(fmt::format("cannot roll back {} tokens: the matcher keeps the last {} "
                                      "(max_rollback_tokens={})",
                                      n, matcher.rollback_depth(), *matcher.max_rollback_tokens()));
}

// Token ids from Python: ints beyond uint32 stop a validation like any
// refused token (they are not in the vocabulary).
size_t validate_tokens(PyMatcher& self, const std::vector<int64_t>& tokens) {
  std::vector<uint32_t> ids;
  ids.reserve(tokens.size());
  for (int64_t t : tokens) {
    if (t < 0 || t > UINT32_MAX) break;
    ids.push_back(static_cast<uint32_t>(t));
  }
  return self.use().validate_tokens(ids);
}

// Marks the matchers busy for the time the GIL is released, and frees them
// whatever happens.
class BusyMarks {
 public:
  ~BusyMarks() {
    for (PyMatcher* m : marked_) m->busy = false;
  }
  void mark(PyMatcher& m) {
    m.use();
    m.busy = true;
    marked_.push_back(&m);
  }

 private:
  std::vector<PyMatcher*> marked_;
};

void fill_masks(const py::sequence& matchers, const py::object& out, std::optional<std::vector<py::ssize_t>> rows,
                std::shared_ptr<PyThreadPool> pool) {
  py::array words = mask_array(out, 2, "the bitmask");
  const size_t count = py::len(matchers);
  if (rows && rows->size() != count)
    throw py::value_error(fmt::format("{} rows given for {} matchers", rows->size(), count));
  if (!rows && count > static_cast<size_t>(words.shape(0)))
    throw py::value_error(fmt::format("the bitmask has {} rows, fewer than the {} matchers", words.shape(0), count));
  // References held until the end, GIL or not: the caller's sequence may change meanwhile.
  std::vector<py::object> keep;
  std::vector<PyMatcher*> targets;
  std::vector<size_t> target_rows;
  std::set<size_t> rows_seen;
  BusyMarks busy;
  for (size_t i = 0; i < count; ++i) {
    py::object item = matchers[i];
    if (!py::isinstance<PyMatcher>(item))
      throw py::type_error(fmt::format("matchers[{}] is a {}, not a cgram.Matcher", i,
                                       std::string(py::str(py::type::of(item).attr("__name__")))));
    PyMatcher& m = item.cast<PyMatcher&>();
    if (m.busy) throw py::value_error(fmt::format("matchers[{}] appears twice, or is in use by another thread", i));
    check_width(words, m.matcher, "the bitmask");
    const size_t row = rows ? checked_row(words, (*rows)[i], "the bitmask") : i;
    if (!rows_seen.insert(row).second) throw py::value_error(fmt::format("row {} is given twice", row));
    busy.mark(m);
    keep.push_back(std::move(item));
    targets.push_back(&m);
    target_rows.push_back(row);
  }
  if (!pool) pool = default_pool();
  const std::vector<std::span<uint32_t>> spans = mask_rows(words);
  py::gil_scoped_release released;
  run_on_pool(*pool, count, [&](size_t i) { targets[i]->matcher.fill_row(spans[target_rows[i]]); });
}

}  // namespace

std::shared_ptr<PyThreadPool> default_pool() {
  static std::shared_ptr<PyThreadPool> pool = std::make_shared<PyThreadPool>(std::thread::hardware_concurrency());
  return pool;
}

Matcher& PyMatcher::use() {
  if (busy) throw std::runtime_error("this matcher is being filled by fill_masks in another thread");
  return matcher;
}

void bind_matcher(py::module_& m) {
  py::enum_<AdvanceResult>(m, "AdvanceResult", "What advance() did with a token.")
      .value("ONGOING", AdvanceResult::Ongoing, "accepted; the text goes on")
      .value("FINISHED", AdvanceResult::Finished, "accepted end of sequence: the text is complete")
      .value("REJECTED", AdvanceResult::Rejected, "not allowed; the state is unchanged");

  py::class_<PyMatcher>(m, "Matcher", R"doc(
One matcher per sequence: the exact set of allowed next tokens at every
step. Masks are int32 words, ceil(vocab_size / 32) per row, bit t % 32 of
word t // 32 set when token t is allowed (the layout vLLM and SGLang use).
Not thread-safe: use each matcher from one thread at a time.)doc")
      .def(py::init([](const CompiledPtr& grammar, std::optional<int64_t> max_rollback_tokens,
                       std::optional<int64_t> max_work_per_byte) {
             if (!grammar) throw py::type_error("grammar must be a cgram.CompiledGrammar");
             MatcherOptions options;
             if (max_rollback_tokens) {
               if (*max_rollback_tokens < 0)
                 throw py::value_error(
                     fmt::format("max_rollback_tokens must not be negative, not {}", *max_rollback_tokens));
               options.max_rollback_tokens = static_cast<size_t>(*max_rollback_tokens);
             }
             if (max_work_per_byte) {
               if (*max_work_per_byte < 0)
                 throw py::value_error(fmt::format("max_work_per_byte must not be negative, not {}", *max_work_per_byte));
               options.limits.max_work_per_byte = static_cast<size_t>(*max_work_per_byte);
             }
             return std::make_unique<PyMatcher>(Matcher(grammar->compiled, options), grammar->compiled);
           }),
           py::arg("grammar"), py::kw_only(), py::arg("max_rollback_tokens") = py::none(),
           py::arg("max_work_per_byte") = py::none(),
           "max_rollback_tokens: the most tokens rollback() may undo; older history is dropped, so memory "
           "stays bounded over any length of text (None: every token can be undone). max_work_per_byte: the "
           "sequence's work budget, per byte of text accepted (None: the default, 32768; 0: no bound over the "
           "sequence); an ambiguous grammar then ends in bounded time with the matcher's error (has_error, error).")
      .def(
          "advance", [](PyMatcher& self, uint32_t token) { return self.use().advance(token); }, py::arg("token"),
          "Accepts `token` if it is allowed. REJECTED leaves the state as it was.")
      .def("fill_mask", &fill_mask, py::arg("out"), py::arg("row") = py::none(),
           "Writes the mask into `out`: a 1-D int32 array (NumPy, or a CPU torch tensor) of at least "
           "mask_words words, or row `row` of a 2-D (batch, words) bitmask. Words past mask_words are "
           "cleared (padding ids of a model are never allowed).")
      .def("mask", &new_mask, "The mask, as a new int32 array of mask_words words.")
      .def(
          "allowed_tokens", [](PyMatcher& self) { return self.use().current_possible_tokens(); },
          "The allowed token ids, ascending.")
      .def(
          "is_allowed", [](PyMatcher& self, uint32_t token) { return self.use().is_allowed(token); },
          py::arg("token"), "Whether one token is allowed, without building the mask.")
      .def(
          "forced_text", [](PyMatcher& self, size_t limit) { return py::bytes(self.use().forced_text(limit)); },
          py::arg("limit") = Matcher::kDefaultForcedTextLimit,
          "The bytes that must come next whatever the tokenization (the longest common prefix of every way the "
          "text can go on to a complete sentence).")
      .def("jump_forward", &jump_forward, py::arg("limit") = Matcher::kDefaultForcedTextLimit,
           "Jump-forward with token healing: (rollback, tokens). Take back `rollback` tokens, then accept `tokens`, "
           "the vocabulary's own encoding of their text and the forced text. (0, []) when nothing is gained.")
      .def("rollback", &rollback, py::arg("n") = 1,
           "Undoes the last n accepted tokens (ValueError when fewer were accepted, or n passes "
           "max_rollback_tokens; nothing is undone then).")
      .def("validate_tokens", &validate_tokens, py::arg("tokens"),
           "How many of `tokens`, in order, advance() would accept from here (an end of sequence counts, "
           "nothing after it does). Nothing changes: how a server checks a speculative draft.")
      .def_property_readonly(
          "rollback_depth", [](PyMatcher& self) { return self.use().rollback_depth(); },
          "How many tokens rollback() can undo now.")
      .def_property_readonly(
          "max_rollback_tokens", [](PyMatcher& self) { return self.use().max_rollback_tokens(); },
          "The bound given at construction, or None.")
      .def(
          "reset", [](PyMatcher& self) { self.use().reset(); }, "Back to the start of the text.")
      .def(
          "clone", [](PyMatcher& self) { return std::make_unique<PyMatcher>(self.use().clone(), self.grammar); },
          "A copy in the same state, sharing the compiled grammar.")
      .def("__copy__", [](PyMatcher& self) { return std::make_unique<PyMatcher>(self.use().clone(), self.grammar); })
      .def("__deepcopy__",
           [](PyMatcher& self, py::dict) { return std::make_unique<PyMatcher>(self.use().clone(), self.grammar); })
      .def(
          "can_end", [](PyMatcher& self) { return self.use().can_end(); },
          "Whether the text so far is a complete sentence (end of sequence is allowed).")
      .def(
          "is_finished", [](PyMatcher& self) { return self.use().is_finished(); },
          "Whether end of sequence was accepted.")
      .def_property_readonly(
          "grammar",
          [](const PyMatcher& self) {
            auto wrapper = std::make_shared<PyCompiledGrammar>();
            wrapper->compiled = self.grammar;
            return wrapper;
          },
          "The compiled grammar it matches.")
      .def_property_readonly("tokens_accepted", [](PyMatcher& self) { return self.use().tokens_accepted(); })
      .def_property_readonly("mask_words", [](PyMatcher& self) { return self.use().mask_words(); })
      .def_property_readonly("vocab_size", [](PyMatcher& self) { return self.use().grammar().vocabulary().size(); })
      .def_property_readonly(
          "error",
          [](PyMatcher& self) -> std::optional<std::string> {
            const Matcher& matcher = self.use();
            if (!matcher.has_error()) return std::nullopt;
            return matcher.error();
          },
          "Why the matcher stopped (a limit of the engine), or None. A matcher with an error allows nothing.")
      .def("__repr__", [](PyMatcher& self) {
        if (self.busy) return std::string("<cgram.Matcher (being filled)>");
        return fmt::format("<cgram.Matcher {} tokens accepted{}>", self.matcher.tokens_accepted(),
                           self.matcher.is_finished() ? ", finished" : "");
      });

  py::class_<PyThreadPool, std::shared_ptr<PyThreadPool>>(m, "ThreadPool",
                                                          "Threads for fill_masks (the default pool has one per core).")
      .def(py::init([](size_t threads) {
             if (threads == 0 || threads > kMaxPoolThreads)
               throw py::value_error(fmt::format("threads must be 1 to {}, not {}", kMaxPoolThreads, threads));
             return std::make_shared<PyThreadPool>(threads);
           }),
           py::arg("threads"))
      .def_property_readonly("threads", [](const PyThreadPool& p) { return p.pool.size(); });

  m.def("fill_masks", &fill_masks, py::arg("matchers"), py::arg("out"), py::arg("rows") = py::none(),
        py::arg("pool") = py::none(),
        "Fills row i of the (batch, words) int32 bitmask `out` with matchers[i]'s mask (or row rows[i]), "
        "on a thread pool, with the GIL released. Rows must be distinct and matchers too; words past "
        "a matcher's mask_words are cleared.");
}

}  // namespace cgram::python

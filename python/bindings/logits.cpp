// cgram._apply_token_bitmask: a batch of bitmasks applied to logits in place,
// on the CPU, with the GIL released (cgram.logits calls it for CPU tensors).
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "batch.h"
#include "bindings.h"
#include "logits_mask.h"

namespace cgram::python {
namespace {

py::array logits_array(const py::object& object, LogitsType type) {
  if (!py::isinstance<py::array>(object)) throw py::type_error("logits must be a NumPy array");
  py::array logits = py::reinterpret_borrow<py::array>(object);
  const auto bytes = static_cast<py::ssize_t>(logits_type_bytes(type));
  if (logits.itemsize() != bytes)
    throw py::type_error(fmt::format("logits hold {}-byte elements; the type named needs {}", logits.itemsize(), bytes));
  check_writable_layout(logits, 2, "the logits");
  return logits;
}

void apply_token_bitmask(const py::object& logits_object, const std::string& type_name, const py::object& bitmask_object,
                         std::optional<std::vector<py::ssize_t>> indices) {
  std::optional<LogitsType> type = parse_logits_type(type_name);
  if (!type) throw py::value_error(fmt::format("logits type must be float32, float16 or bfloat16, not '{}'", type_name));
  py::array logits = logits_array(logits_object, *type);
  py::array bitmask = mask_array(bitmask_object, 2, "the bitmask");
  if (logits.shape(0) != bitmask.shape(0))
    throw py::value_error(fmt::format("logits have {} rows and the bitmask {}", logits.shape(0), bitmask.shape(0)));
  std::vector<size_t> rows;
  if (indices) {
    for (py::ssize_t row : *indices) {
      if (row < 0 || row >= logits.shape(0))
        throw py::index_error(fmt::format("index {} is outside the batch ({} rows)", row, logits.shape(0)));
      rows.push_back(static_cast<size_t>(row));
    }
  } else {
    for (py::ssize_t row = 0; row < logits.shape(0); ++row) rows.push_back(static_cast<size_t>(row));
  }
  // A row given twice is masked once (to the same result), never by two threads at once.
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  const size_t vocab = static_cast<size_t>(logits.shape(1));
  auto* base = static_cast<char*>(logits.mutable_data());
  const size_t stride = static_cast<size_t>(logits.strides(0));
  const std::vector<std::span<uint32_t>> masks = mask_rows(bitmask);
  // Rows are independent: split over the default pool's threads, with the GIL released.
  std::shared_ptr<PyThreadPool> pool = default_pool();
  py::gil_scoped_release released;
  run_on_pool(*pool, rows.size(), [&](size_t i) {
    apply_mask_to_logits(base + rows[i] * stride, *type, vocab, masks[rows[i]]);
  });
}

}  // namespace

void bind_logits(py::module_& m) {
  m.def("_apply_token_bitmask", &apply_token_bitmask, py::arg("logits"), py::arg("type"), py::arg("bitmask"),
        py::arg("indices") = py::none(),
        "Internal (cgram.logits.apply_token_bitmask_inplace): -inf in the (rows, vocab) logits, a NumPy "
        "view of `type` ('float32', 'float16', 'bfloat16' as 2-byte integers), wherever the int32 "
        "bitmask's bit is clear, and past 32 * words.");
}

}  // namespace cgram::python

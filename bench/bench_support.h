#pragma once
// What the benchmark programs share: reading a file, loading the
// vocabulary, the compile request for a grammar or JSON Schema file, and
// timing and percentiles.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "compiler.h"
#include "vocabulary.h"

namespace cgram::bench {

inline double micros_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

// The value at fraction p (0..1) of `values` in order, by nearest rank
// (p 1: the largest); 0 for none.
inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())))];
}

inline std::optional<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The vocabulary, or null after its error is printed.
inline std::shared_ptr<const Vocabulary> load_vocabulary(const std::string& path) {
  VocabularyResult loaded = Vocabulary::load(path);
  if (auto* e = loaded.if_error()) {
    fmt::print(stderr, "{}\n", e->message);
    return nullptr;
  }
  return std::move(*loaded);
}

// The request for `text` read from `path` (its format from the name; a JSON
// Schema in this layout and property order). It keeps views of both.
inline CompileRequest request_for(const std::string& text, const std::string& path, const std::string& whitespace,
                                  const std::string& property_order) {
  CompileRequest request;
  request.text = text;
  request.filename = path;
  request.parse.format = grammar_format("auto", path).value_or(GrammarFormat::Cgram);
  request.parse.schema.whitespace = parse_json_whitespace(whitespace).value_or(JsonWhitespace::Compact);
  request.parse.schema.property_order = parse_json_property_order(property_order).value_or(JsonPropertyOrder::Any);
  return request;
}

}  // namespace cgram::bench

// The official JSON-Schema-Test-Suite (draft 2020-12, vendored under
// tests/data/json-schema-test-suite) against the JSON Schema translator.
// Every schema is translated with --strict, in each whitespace layout. For
// every schema it accepts, every instance marked invalid must be rejected,
// and every instance marked valid must be a complete sentence of the
// grammar, written as the grammar writes JSON (docs/JSON_SCHEMA.md):
// members in the schema's property order, numbers in fixed point, one
// spelling per string character, the layout's whitespace. The only valid
// instances allowed to fail are the documented narrowings listed below.
// The coverage table (per keyword file: converted, correct, refused) is
// printed, and recorded in docs/JSON_SCHEMA.md.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "grammar.h"
#include "helpers.h"
#include "json_text.h"

using namespace cgram;
using namespace cgram::test;
using Json = nlohmann::ordered_json;

namespace {

const std::filesystem::path kSuite = std::filesystem::path(CGRAM_SOURCE_DIR) / "tests/data/json-schema-test-suite/draft2020-12";

// Valid instances the grammar does not accept, by design (docs/JSON_SCHEMA.md,
// "Written one way"): "file: case / test" → the reason.
const std::map<std::string, std::string>& narrowings() {
  static const std::map<std::string, std::string> list = {
      {"optional/format/time.json: validation of time strings / valid leap second, positive time-offset",
       "leap seconds only as 23:59:60 in UTC"},
      {"optional/format/time.json: validation of time strings / valid leap second, large positive time-offset",
       "leap seconds only as 23:59:60 in UTC"},
      {"optional/format/time.json: validation of time strings / valid leap second, negative time-offset",
       "leap seconds only as 23:59:60 in UTC"},
      {"optional/format/time.json: validation of time strings / valid leap second, large negative time-offset",
       "leap seconds only as 23:59:60 in UTC"},
      {"optional/format/date-time.json: validation of date-time strings / a valid date-time with a leap second, with "
       "minus offset",
       "leap seconds only as 23:59:60 in UTC"},
  };
  return list;
}

void const_order(const Json& value, std::map<std::string, size_t>& rank) {
  if (value.is_object())
    for (const auto& [name, child] : value.items()) {
      rank.emplace(name, rank.size());
      const_order(child, rank);
    }
  else if (value.is_array())
    for (const Json& child : value) const_order(child, rank);
}

// The order the grammar writes members in: each property name at its first
// place in the schema text (where `properties`, `required` or a dependency
// names it), other names after them.
void property_order(const Json& schema, std::map<std::string, size_t>& rank) {
  if (schema.is_object()) {
    for (const auto& [key, value] : schema.items()) {
      if (key == "properties" && value.is_object())
        for (const auto& [name, unused] : value.items()) rank.emplace(name, rank.size());
      if (key == "required" && value.is_array())
        for (const Json& name : value)
          if (name.is_string()) rank.emplace(name.get<std::string>(), rank.size());
      if ((key == "dependentRequired" || key == "dependencies") && value.is_object())
        for (const auto& [name, needs] : value.items()) {
          rank.emplace(name, rank.size());
          if (needs.is_array())
            for (const Json& n : needs)
              if (n.is_string()) rank.emplace(n.get<std::string>(), rank.size());
        }
      // Objects inside const and enum are written in the schema's order too.
      if ((key == "const" || key == "enum") && (value.is_object() || value.is_array())) const_order(value, rank);
      property_order(value, rank);
    }
  } else if (schema.is_array()) {
    for (const Json& v : schema) property_order(v, rank);
  }
}

enum class Layout { Compact, Pretty, Flexible };

struct Writer {
  const std::map<std::string, size_t>& rank;
  Layout layout;
  std::mt19937_64 rng{7};

  std::string space() {
    static const char* kSpaces[] = {"", " ", "\n", "\t", "\r\n  "};
    return layout == Layout::Flexible ? kSpaces[rng() % 5] : "";
  }
  std::string indent(int depth) const { return "\n" + std::string(static_cast<size_t>(2 * depth), ' '); }

  std::string write(const Json& v, int depth = 0) {
    if (v.is_object() || v.is_array()) {
      const bool object = v.is_object();
      if (v.empty()) return object ? "{" + space() + "}" : "[" + space() + "]";
      std::vector<std::pair<std::string, const Json*>> items;
      for (const auto& [key, child] : v.items()) items.emplace_back(key, &child);
      if (object)
        std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
          auto ra = rank.find(a.first), rb = rank.find(b.first);
          return (ra == rank.end() ? SIZE_MAX : ra->second) < (rb == rank.end() ? SIZE_MAX : rb->second);
        });
      std::string out(1, object ? '{' : '[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += space() + ",";
        out += layout == Layout::Pretty ? indent(depth + 1) : space();
        if (object) out += json::json_string_text(items[i].first) + space() + ":" + (layout == Layout::Pretty ? " " : space());
        out += write(*items[i].second, depth + 1);
      }
      out += layout == Layout::Pretty ? indent(depth) : space();
      return out + (object ? '}' : ']');
    }
    if (v.is_string()) return json::json_string_text(v.get<std::string>());
    if (v.is_number()) {
      auto d = json::parse_decimal(v.dump());
      return d ? json::to_string(*d) : v.dump();
    }
    return v.dump();
  }
};

struct FileStats {
  int cases = 0, converted = 0, refused = 0;
  int valid = 0, valid_ok = 0, invalid = 0, invalid_ok = 0, narrowed = 0;
  std::map<std::string, int> refusals;  // first error → cases
};

std::string first_error(const Diagnostics& diags) {
  for (const Diagnostic& d : diags.all())
    if (d.severity == Severity::Error) {
      std::string m = d.message;
      const size_t quote = m.find(" (--strict)");
      if (quote != std::string::npos) m.resize(quote);
      return m;
    }
  return "?";
}

std::vector<std::string> suite_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kSuite))
    if (e.path().extension() == ".json") files.push_back(e.path().filename().string());
  for (const auto& e : std::filesystem::directory_iterator(kSuite / "optional/format"))
    files.push_back("optional/format/" + e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("JSON-Schema-Test-Suite draft 2020-12: no invalid instance is accepted, every valid one is",
          "[json-schema][schema-suite]") {
  std::map<std::string, FileStats> stats;
  std::vector<std::string> wrong;  // failures outside the documented narrowings
  for (const std::string& file : suite_files()) {
    std::ifstream in(kSuite / file);
    const Json cases = Json::parse(in);
    FileStats& fs = stats[file];
    for (const Json& c : cases) {
      ++fs.cases;
      const std::string schema_text = c["schema"].dump(2);
      std::map<std::string, size_t> rank;
      property_order(c["schema"], rank);
      bool refused = false;
      std::string refusal;
      // Per test: correct in every layout.
      std::vector<bool> correct(c["tests"].size(), true);
      for (Layout layout : {Layout::Compact, Layout::Pretty, Layout::Flexible}) {
        ParseOptions options;
        options.format = GrammarFormat::JsonSchema;
        options.schema.strict = true;
        options.schema.whitespace = layout == Layout::Compact  ? JsonWhitespace::Compact
                                    : layout == Layout::Pretty ? JsonWhitespace::Pretty
                                                               : JsonWhitespace::Flexible;
        Grammar::Outcome outcome = Grammar::parse(schema_text, "schema.json", options);
        if (!outcome.ok()) {
          refused = true;
          refusal = first_error(outcome.diagnostics);
          break;
        }
        auto oracle = oracle_grammar(*outcome.grammar);
        Writer writer{rank, layout};
        for (size_t i = 0; i < c["tests"].size(); ++i) {
          const Json& t = c["tests"][i];
          const std::string text = writer.write(t["data"]);
          const bool accepted = verdict(oracle, text) == oracle::Verdict::Complete;
          if (accepted != t["valid"].get<bool>()) correct[i] = false;
        }
      }
      if (refused) {
        ++fs.refused;
        ++fs.refusals[refusal];
        continue;
      }
      ++fs.converted;
      for (size_t i = 0; i < c["tests"].size(); ++i) {
        const Json& t = c["tests"][i];
        const bool valid = t["valid"].get<bool>();
        const std::string key = fmt::format("{}: {} / {}", file, c["description"].get<std::string>(),
                                            t["description"].get<std::string>());
        (valid ? fs.valid : fs.invalid) += 1;
        if (correct[i]) {
          (valid ? fs.valid_ok : fs.invalid_ok) += 1;
        } else if (valid && (narrowings().count(key) || (file == "format.json" && key.find("only an annotation") != std::string::npos))) {
          // Formats are asserted (the format-assertion vocabulary), not annotations.
          ++fs.narrowed;
        } else {
          wrong.push_back(fmt::format("{} (valid: {}; data {})", key, valid, t["data"].dump()));
        }
      }
    }
  }
  // The coverage table.
  std::string table =
      "| file | cases | converted | refused | valid accepted | invalid rejected | narrowed |\n|---|---|---|---|---|---|---|\n";
  FileStats total;
  for (const auto& [file, fs] : stats) {
    table += fmt::format("| {} | {} | {} | {} | {}/{} | {}/{} | {} |\n", file, fs.cases, fs.converted, fs.refused,
                         fs.valid_ok, fs.valid, fs.invalid_ok, fs.invalid, fs.narrowed);
    total.cases += fs.cases;
    total.converted += fs.converted;
    total.refused += fs.refused;
    total.valid += fs.valid;
    total.valid_ok += fs.valid_ok;
    total.invalid += fs.invalid;
    total.invalid_ok += fs.invalid_ok;
    total.narrowed += fs.narrowed;
  }
  table += fmt::format("| **all** | {} | {} | {} | {}/{} | {}/{} | {} |\n", total.cases, total.converted, total.refused,
                       total.valid_ok, total.valid, total.invalid_ok, total.invalid, total.narrowed);
  std::map<std::string, int> reasons;
  for (const auto& [file, fs] : stats)
    for (const auto& [reason, n] : fs.refusals) reasons[reason] += n;
  std::string why = "\nWhy schemas were refused (cases):\n";
  for (const auto& [reason, n] : reasons) why += fmt::format("- {} ({})\n", reason, n);
  std::cout << table << why;
  for (const std::string& w : wrong) UNSCOPED_INFO(w);
  CHECK(wrong.empty());
  // The suite is really exercised (a floor, against regressions).
  CHECK(total.converted >= 150);
}

#include "helpers.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace cgram::test {

Grammar::Outcome parse_json_schema(std::string_view schema, JsonWhitespace layout, JsonPropertyOrder order,
                                   bool strict) {
  ParseOptions options;
  options.format = GrammarFormat::JsonSchema;
  options.schema.whitespace = layout;
  options.schema.property_order = order;
  options.schema.strict = strict;
  return Grammar::parse(schema, "schema.json", options);
}

Grammar::Outcome parse(std::string_view source, std::string start) {
  ParseOptions options;
  options.start = std::move(start);
  return Grammar::parse(source, "test.cgram", options);
}

std::shared_ptr<const Grammar> grammar(std::string_view source, std::string start) {
  Grammar::Outcome outcome = parse(source, std::move(start));
  INFO(outcome.diagnostics.render());
  REQUIRE(outcome.ok());
  return outcome.grammar;
}

std::shared_ptr<const oracle::OracleGrammar> oracle_grammar(const Grammar& g) {
  return std::make_shared<const oracle::OracleGrammar>(oracle::OracleGrammar::from_ir(g.ir()));
}

oracle::Verdict verdict(const std::shared_ptr<const oracle::OracleGrammar>& g, std::string_view text) {
  return oracle::match_text(g, text).verdict;
}

oracle::Verdict verdict_of(std::string_view grammar_source, std::string_view text) {
  return verdict(oracle_grammar(*grammar(grammar_source)), text);
}

oracle::Verdict verdict_tokens(std::string_view grammar_source, const std::vector<std::string>& tokens) {
  return oracle::match_tokens(oracle_grammar(*grammar(grammar_source)), tokens).verdict;
}

std::string read_example(std::string_view name) {
  std::ifstream in(std::string(CGRAM_SOURCE_DIR) + "/examples/" + std::string(name), std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shared_dir() {
  if (const char* dir = std::getenv("CGRAM_SHARED_DIR"); dir && *dir) return dir;
  return std::string(CGRAM_SOURCE_DIR) + "/../shared";
}

std::optional<std::string> shared_vocab(std::string_view name) {
  std::string path = shared_dir() + "/vocab/" + std::string(name);
  if (!std::filesystem::exists(path)) return std::nullopt;
  return path;
}

void skip_without_shared(std::string_view name) {
  // One unwrapped line for CTest and scripts/test.sh (Catch wraps its own).
  std::cout << "cgram-skip: " << shared_dir() << "/vocab/" << name
            << " is absent (a clone has no ../shared; set CGRAM_SHARED_DIR to its folder)" << std::endl;
  WARN("skipped: " << name << " is not in " << shared_dir() << "/vocab");
}

std::shared_ptr<const Vocabulary> bundled_vocabulary() {
  static const auto vocab = (*(Vocabulary::bundled()));
  return vocab;
}

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(CGRAM_SOURCE_DIR) + "/examples"))
    if (entry.path().extension() == ".cgram") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<SuiteGrammar> suite_grammars() {
  namespace fs = std::filesystem;
  std::vector<SuiteGrammar> out;
  const fs::path root = fs::path(CGRAM_SOURCE_DIR) / "bench" / "suite";
  std::vector<fs::path> formats;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) formats.push_back(e.path());
  std::sort(formats.begin(), formats.end());
  for (const fs::path& format : formats) {
    std::vector<fs::path> grammars, docs;
    for (const auto& e : fs::directory_iterator(format))
      if (e.path().extension() == ".cgram") grammars.push_back(e.path());
    for (const auto& e : fs::directory_iterator(format / "docs")) docs.push_back(e.path());
    std::sort(grammars.begin(), grammars.end());
    std::sort(docs.begin(), docs.end());
    for (const fs::path& g : grammars) {
      SuiteGrammar sg{format.filename().string() + "/" + g.stem().string(), read_file(g.string()), {}};
      for (const fs::path& d : docs) sg.documents.push_back(read_file(d.string()));
      out.push_back(std::move(sg));
    }
  }
  return out;
}

std::set<uint32_t> set_bits(std::span<const uint32_t> words) {
  std::set<uint32_t> out;
  for (uint32_t w = 0; w < words.size(); ++w)
    for (uint32_t b = 0; b < 32; ++b)
      if (words[w] >> b & 1) out.insert(w * 32 + b);
  return out;
}

void require_no_error(const std::optional<Error>& error) {
  INFO((error ? error->message : ""));
  REQUIRE(!error);
}

}  // namespace cgram::test

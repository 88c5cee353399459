#include "helpers.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cgram::test {

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

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(CGRAM_SOURCE_DIR) + "/examples"))
    if (entry.path().extension() == ".cgram") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace cgram::test

#pragma once
// Shared helpers for the tests: parse a grammar, ask the oracle.
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "error.h"
#include "grammar.h"
#include "oracle.h"
#include "vocabulary.h"

namespace cgram::test {

Grammar::Outcome parse(std::string_view source, std::string start = "start");
// Parses and requires success (the test fails with the rendered diagnostics).
std::shared_ptr<const Grammar> grammar(std::string_view source, std::string start = "start");
std::shared_ptr<const oracle::OracleGrammar> oracle_grammar(const Grammar& g);
// A JSON Schema read as "schema.json" with these options.
Grammar::Outcome parse_json_schema(std::string_view schema, JsonWhitespace layout = JsonWhitespace::Compact,
                                   JsonPropertyOrder order = JsonPropertyOrder::Schema, bool strict = false);
// The oracle's verdict for `text` (unsegmented).
oracle::Verdict verdict(const std::shared_ptr<const oracle::OracleGrammar>& g, std::string_view text);
oracle::Verdict verdict_of(std::string_view grammar_source, std::string_view text);
// The verdict when the text is the given token segmentation.
oracle::Verdict verdict_tokens(std::string_view grammar_source, const std::vector<std::string>& tokens);

// The shared data beside the checkout (../shared), or $CGRAM_SHARED_DIR:
// CI runs the suite a second time with it pointing nowhere, as a user's
// clone would have it. A file of its vocab/ folder, when it is there.
std::string shared_dir();
std::optional<std::string> shared_vocab(std::string_view name);
// Says that the current test case is skipped for want of ../shared/vocab/NAME;
// CTest reads the marker (SKIP_REGULAR_EXPRESSION "cgram-skip:") and lists
// the test as not run. Use it only right before returning.
void skip_without_shared(std::string_view name);

// The vocabulary compiled into cgram, loaded once.
std::shared_ptr<const Vocabulary> bundled_vocabulary();

std::string read_example(std::string_view name);
std::vector<std::string> example_names();

// The benchmark suite (bench/suite/FORMAT/*.cgram, FORMAT/docs/): every
// spelling of every format, sorted, with that format's documents.
struct SuiteGrammar {
  std::string label;  // format/spelling
  std::string source;
  std::vector<std::string> documents;
};
std::vector<SuiteGrammar> suite_grammars();
std::string read_file(const std::string& path);

// The token ids whose bits are set in mask words.
std::set<uint32_t> set_bits(std::span<const uint32_t> words);

// REQUIRE that an operation returning an optional Error gave none (its
// message shown when it did).
void require_no_error(const std::optional<Error>& error);

}  // namespace cgram::test

// The Lark test cases of llguidance and XGrammar (extracted as data by
// bench/lark/peer_cases.py) against cgram: for each grammar, whether cgram
// reads it (or refuses it, as the peer does for its error cases); for each
// string, the oracle's verdict against the peer's; along every string, the
// matcher's masks (the bundled vocabulary) against the oracle's, bit for bit.
//
//   lark_peers CASES.json [--verbose] [--no-masks]
//
// Prints one table per peer and each disagreement; exits 1 when a mask
// differs from the oracle's (a bug of cgram's), 0 otherwise: a verdict that
// differs from a peer's is a difference of dialect, listed for the docs.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "compiled_grammar.h"
#include "differential.h"
#include "oracle.h"
#include "oracle_mask.h"
#include "tokenizer/encoder.h"

using namespace cgram;
using namespace cgram::test;

namespace {

struct Tally {
  size_t grammars = 0, read = 0, refused = 0;  // language cases
  size_t error_cases = 0, errors_refused = 0;  // the peer refuses the grammar
  size_t strings = 0, agree = 0;
  size_t walks = 0, pairs = 0, mask_mismatches = 0;
  std::map<std::string, size_t> refusals;  // cgram's first error, by message
};

std::shared_ptr<const oracle::OracleGrammar> oracle_grammar(const Grammar& g) {
  return std::make_shared<const oracle::OracleGrammar>(oracle::OracleGrammar::from_ir(g.ir()));
}

const char* peer_verdict_name(oracle::Verdict v) {
  switch (v) {
    case oracle::Verdict::Complete: return "complete";
    case oracle::Verdict::Prefix: return "prefix";
    case oracle::Verdict::Rejected: return "rejected";
  }
  return "?";
}

// The first error of a failed parse, without its position.
std::string first_error(const Grammar::Outcome& outcome) {
  for (const Diagnostic& d : outcome.diagnostics.all())
    if (d.severity == Severity::Error) return d.message;
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: lark_peers CASES.json [--verbose] [--no-masks]\n";
    return 2;
  }
  bool verbose = false, masks = true;
  for (int i = 2; i < argc; ++i) {
    verbose |= std::string(argv[i]) == "--verbose";
    masks &= std::string(argv[i]) != "--no-masks";
  }
  std::ifstream in(argv[1]);
  const nlohmann::json cases = nlohmann::json::parse(in);
  std::shared_ptr<const Vocabulary> vocab = *Vocabulary::bundled();
  auto encoder = Encoder::create(vocab);
  if (!encoder.ok()) return 2;
  std::map<std::string, Tally> tallies;
  for (const auto& c : cases) {
    Tally& t = tallies[c["peer"]];
    const std::string where = c["where"];
    ParseOptions options;
    options.format = GrammarFormat::Lark;
    const Grammar::Outcome outcome = Grammar::parse(c["grammar"].get<std::string>(), "peer.lark", options);
    if (c.contains("error")) {
      ++t.error_cases;
      if (!outcome.ok()) ++t.errors_refused;
      else std::cout << fmt::format("{}: the peer refuses it ({}), cgram reads it\n", where, c["error"].get<std::string>());
      continue;
    }
    ++t.grammars;
    if (!outcome.ok()) {
      ++t.refused;
      ++t.refusals[first_error(outcome)];
      if (verbose) std::cout << fmt::format("{}: refused: {}\n", where, outcome.diagnostics.render());
      continue;
    }
    ++t.read;
    auto oracle = oracle_grammar(*outcome.grammar);
    std::shared_ptr<const CompiledGrammar> compiled;
    std::optional<OracleMasker> masker;
    if (masks) {
      auto result = CompiledGrammar::compile(outcome.grammar, vocab);
      if (result.ok()) {
        compiled = *result;
        masker.emplace(oracle, vocab);
      } else {
        std::cout << fmt::format("{}: does not compile: {}\n", where, result.error().message);
      }
    }
    auto check = [&](const std::string& text, const char* expected_kind) {
      ++t.strings;
      const oracle::Verdict v = oracle::match_text(oracle, text).verdict;
      const std::string kind = expected_kind;
      const bool ok = kind == "accepted" ? v == oracle::Verdict::Complete
                      : kind == "prefix" ? v == oracle::Verdict::Prefix
                                         : v != oracle::Verdict::Complete;
      if (ok) ++t.agree;
      else std::cout << fmt::format("{}: {} by the peer, {} by cgram: {}\n", where, expected_kind, peer_verdict_name(v),
                                    nlohmann::json(text).dump());
      if (compiled && masker) {
        const WalkStats walk = walk_document(compiled, *masker, (*encoder)->encode_continuation(text));
        ++t.walks;
        t.pairs += walk.pairs;
        if (walk.mismatches) {
          ++t.mask_mismatches;
          std::cout << fmt::format("{}: MASK MISMATCH on {}: {}\n", where, nlohmann::json(text).dump(),
                                   walk.first_mismatch);
        }
      }
    };
    for (const auto& s : c["accepted"]) check(s, "accepted");
    for (const auto& s : c.value("prefixes", nlohmann::json::array())) check(s, "prefix");
    for (const auto& s : c["rejected"]) check(s, "rejected");
  }
  bool mismatch = false;
  for (const auto& [peer, t] : tallies) {
    std::cout << fmt::format(
        "\n{}: {} grammars with strings: {} read, {} refused; {} strings, {} verdicts agree ({:.1f} %); "
        "{} grammars the peer refuses: {} refused by cgram too\n",
        peer, t.grammars, t.read, t.refused, t.strings, t.agree, t.strings ? 100.0 * t.agree / t.strings : 0.0,
        t.error_cases, t.errors_refused);
    if (masks)
      std::cout << fmt::format("  masks: {} walks, {} (step, token) pairs against the oracle, {} walks differ\n",
                               t.walks, t.pairs, t.mask_mismatches);
    for (const auto& [message, n] : t.refusals) std::cout << fmt::format("  refused {}x: {}\n", n, message);
    mismatch |= t.mask_mismatches > 0;
  }
  return mismatch ? 1 : 0;
}

#pragma once
// Differential walks: the matcher's mask against the oracle's, bit for bit,
// at every step of a token sequence.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiled_grammar.h"
#include "oracle_mask.h"

namespace cgram::test {

struct WalkStats {
  size_t steps = 0;
  size_t pairs = 0;        // (step, token) pairs compared
  size_t mismatches = 0;
  std::string first_mismatch;  // a readable description, empty when none
  std::string text;            // the bytes accepted
  bool finished = false;       // the walk ended with end of sequence
};

// Follows `tokens` (a document's canonical tokenization); at each step
// compares the masks, and stops early if the document leaves the language.
WalkStats walk_document(const std::shared_ptr<const CompiledGrammar>& grammar, OracleMasker& oracle,
                        const std::vector<uint32_t>& tokens);
// Picks a random allowed token (end of sequence included) at each step.
// With `favour_partial_characters`, half of the picks go to allowed tokens
// that hold part of a character (byte-level and byte-fallback tokens), so
// that walks stop inside characters often.
WalkStats walk_random(const std::shared_ptr<const CompiledGrammar>& grammar, OracleMasker& oracle, uint64_t seed,
                      size_t max_steps, bool favour_partial_characters = false);

}  // namespace cgram::test

#pragma once
// Lexer states whose token index entries are equal, found before any walk.
//
// An entry (index/token_index.h) is what one walk of the vocabulary trie
// from a state records: which paths of at most `depth` bytes stay alive,
// and, where the state after a path accepts, that state (a crossing). Two
// states with the same answers on every path of at most `depth` bytes have
// the same entry, byte for byte, so it is built once.
//
// That is a bounded bisimulation: Moore's refinement run `depth` rounds (or
// until it is stable), starting from "dead", "alive and not accepting", and
// one class per accepting state (a crossing records the state itself). A
// counted repetition is where it pays: the states of `[^"]{0,256}` that still
// allow more characters than the longest token are all alike, which halves
// the walks of a JSON string of at most 256 characters.
#include <cstdint>
#include <vector>

#include "automata.h"

namespace cgram {

// For each state: the smallest state whose entry is the same.
std::vector<uint32_t> walk_classes(const ir::Dfa& dfa, uint32_t depth);

}  // namespace cgram

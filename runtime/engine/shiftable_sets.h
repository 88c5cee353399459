#pragma once
// The shiftable sets an engine has worked out (the terminals a stack node
// can really shift after its reductions), each kept once, and their
// readings: a set together with how deep, per terminal, the reductions
// that made it read the stack. Stack nodes and the stack memo's answers
// hold reading ids; the engine (reductions.cpp) works the sets out and
// notes their reads. One of the engine's parts (engine.h).
//
// Why depths per terminal: a set reads as deep as its deepest terminal
// (after a C operand, a closing bracket reduces through the whole
// statement), but a mask recording that only asks whether "-" may follow
// should be kept under the levels "-" read, not the bracket's. So a reading
// keeps, per terminal with an action in the node's state (in
// terminals_with_actions order), the levels its closure read. Depths are
// interned with their state (the same bytes of another state are of other
// terminals); past kMaxDepths distinct ones, new readings are kept without
// (kUnknownDepths), and the engine notes their reads as they are made.
#include <bitset>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace cgram {

class ShiftableSets {
 public:
  static constexpr int32_t kUnknownDepths = -1;
  static constexpr size_t kMaxDepths = size_t{1} << 14;  // distinct depths kept
  struct Reading {
    uint32_t set;
    int32_t depths;  // a depths id, or kUnknownDepths
  };

  // The set's id, the same for equal sets. `first_bytes`: per terminal, the
  // bytes that can start it (each set keeps the union of its terminals').
  uint32_t intern_set(const std::vector<uint32_t>& set, std::span<const std::bitset<256>> first_bytes);
  // A reading of set `set` made in LR state `state`, with per-terminal
  // depths (null: unknown); the same id for the same three.
  uint32_t intern_reading(uint32_t set, uint32_t state, const std::vector<uint8_t>* depths);
  // Whether these depths may be kept: kMaxDepths distinct ones are, and any
  // already kept.
  bool depths_fit(uint32_t state, const std::vector<uint8_t>& depths);

  const Reading& reading(int32_t id) const { return readings_[static_cast<size_t>(id)]; }
  // The terminals of a reading's set, sorted; stable references.
  const std::vector<uint32_t>& set_of(int32_t reading_id) const { return sets_[reading(reading_id).set]; }
  const std::bitset<256>& first_bytes(uint32_t set) const { return set_first_bytes_[set]; }
  const std::vector<uint8_t>& depths(int32_t depths_id) const { return depths_[static_cast<size_t>(depths_id)]; }
  uint8_t deepest(int32_t depths_id) const { return deepest_[static_cast<size_t>(depths_id)]; }
  // The deepest depth among the terminals of `active` (the state's, in the
  // depths' order) that `byte` can start; kept per depths id and byte.
  uint8_t deepest_for_byte(int32_t depths_id, uint8_t byte, std::span<const uint32_t> active,
                           std::span<const std::bitset<256>> first_bytes);

  size_t set_count() const { return sets_.size(); }
  size_t reading_count() const { return readings_.size(); }

 private:
  void make_depth_key(uint32_t state, const std::vector<uint8_t>& depths);

  std::deque<std::vector<uint32_t>> sets_;       // stable references
  std::deque<std::bitset<256>> set_first_bytes_;  // per set
  std::map<std::vector<uint32_t>, uint32_t> set_ids_;
  std::vector<Reading> readings_;
  std::unordered_map<uint64_t, uint32_t> reading_ids_;  // (set, depths + 1) → reading
  std::deque<std::vector<uint8_t>> depths_;
  std::vector<uint8_t> deepest_;                           // per depths id: its largest
  std::unordered_map<std::string, int32_t> depth_ids_;     // the state's and the depths' bytes → id
  std::string depth_key_;                                  // scratch for those keys
  std::deque<std::vector<uint8_t>> byte_depths_;           // per depths id: deepest_for_byte's answers
};

}  // namespace cgram

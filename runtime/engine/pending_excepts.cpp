#include "pending_excepts.h"

#include <algorithm>

#include "except_automaton.h"

namespace cgram {

PendingExcepts::PendingExcepts(size_t max_sets) : max_sets_(max_sets) {
  sets_.emplace_back();  // kNothing
  ids_[{}] = kNothing;
}

uint32_t PendingExcepts::intern(Set set) {
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  if (auto it = ids_.find(set); it != ids_.end()) return it->second;
  if (sets_.size() >= max_sets_) return kFull;
  const uint32_t id = static_cast<uint32_t>(sets_.size());
  ids_.emplace(set, id);
  sets_.push_back(std::move(set));
  return id;
}

uint32_t PendingExcepts::step(uint32_t pending, uint8_t byte) {
  if (pending == kNothing) return kNothing;
  const uint64_t key = (uint64_t(pending) << 8) | byte;
  if (auto it = steps_.find(key); it != steps_.end()) return it->second;
  Set next;
  bool violated = false;
  for (const auto& [except, rest] : sets_[pending]) {
    if (static_cast<uint8_t>(rest[0]) != byte) continue;
    if (rest.size() == 1) violated = true;
    else next.emplace_back(except, rest.substr(1));
  }
  const uint32_t result = violated ? kViolated : intern(std::move(next));
  if (result != kFull) steps_.emplace(key, result);
  return result;
}

uint32_t PendingExcepts::step(uint32_t pending, std::string_view bytes) {
  for (char c : bytes) {
    if (pending == kNothing) return kNothing;
    pending = step(pending, static_cast<uint8_t>(c));
    if (pending == kViolated || pending == kFull) return pending;
  }
  return pending;
}

uint32_t PendingExcepts::add(uint32_t pending, uint32_t except_index, uint32_t ac_state,
                             const ir::ExceptAutomaton& automaton) {
  // The lexeme's own start (split off, see lower_except) is never where a
  // text ends; a loaded table is not trusted to agree.
  if (ac_state >= automaton.dfa().size() || !automaton.has_pending(ac_state)) return pending;
  const uint64_t key = (uint64_t(pending) << 40) ^ (uint64_t(except_index) << 24) ^ ac_state;
  if (auto it = except_steps_.find(key); it != except_steps_.end()) return it->second;
  Set set = sets_[pending];
  for (const std::string& s : automaton.pending(ac_state)) set.emplace_back(except_index, s);
  const uint32_t id = intern(std::move(set));
  if (id != kFull) except_steps_.emplace(key, id);
  return id;
}

}  // namespace cgram

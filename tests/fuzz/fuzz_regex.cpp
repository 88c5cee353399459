// Target "regex": the regex parser (ir/regex.h) alone, then regex → NFA →
// DFA → minimal DFA (automata/automata.h) under the default limits, checked
// against a direct simulation of the NFA.
//
// Input: the regex body, then optionally a NUL byte and probe texts
// separated by NUL bytes. Every probe and every prefix of it must get the
// same verdict from the NFA, the subset-construction DFA, its minimisation
// and compile_regex (which builds large DFAs part by part).
#include <algorithm>
#include <variant>

#include "automata.h"
#include "fuzz_common.h"
#include "regex.h"

using namespace cgram;

namespace {

// Whether the NFA accepts each prefix of `text` (by length), simulated
// directly: sets of states and epsilon closures.
std::vector<bool> nfa_verdicts(const ir::Nfa& nfa, std::string_view text) {
  const auto& states = nfa.states();
  std::vector<bool> verdicts(text.size() + 1, false);
  std::vector<uint32_t> seen(states.size(), UINT32_MAX);  // the step that added each state
  std::vector<uint32_t> current, next, stack;
  auto close = [&](std::vector<uint32_t>& set, uint32_t step) {
    stack = set;
    while (!stack.empty()) {
      uint32_t s = stack.back();
      stack.pop_back();
      for (uint32_t t : states[s].epsilon)
        if (seen[t] != step) {
          seen[t] = step;
          set.push_back(t);
          stack.push_back(t);
        }
    }
  };
  auto accepting = [&](const std::vector<uint32_t>& set) {
    return std::find(set.begin(), set.end(), nfa.accept) != set.end();
  };
  current = {nfa.start};
  seen[nfa.start] = 0;
  close(current, 0);
  verdicts[0] = accepting(current);
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const uint32_t step = uint32_t(i + 1);
    next.clear();
    for (uint32_t s : current)
      for (const auto& e : states[s].edges)
        if (e.lo <= c && c <= e.hi && seen[e.target] != step) {
          seen[e.target] = step;
          next.push_back(e.target);
        }
    current.swap(next);
    if (current.empty()) break;
    close(current, step);
    verdicts[i + 1] = accepting(current);
  }
  return verdicts;
}

// The same verdicts from a DFA, which must also agree on deadness: a state
// is kDead exactly when no continuation is accepted.
std::vector<bool> dfa_verdicts(const ir::Dfa& dfa, std::string_view text) {
  std::vector<bool> verdicts(text.size() + 1, false);
  uint32_t state = dfa.start();
  verdicts[0] = dfa.accepting(state);
  for (size_t i = 0; i < text.size() && state != ir::Dfa::kDead; ++i) {
    state = dfa.next(state, static_cast<uint8_t>(text[i]));
    verdicts[i + 1] = dfa.accepting(state);
  }
  return verdicts;
}

}  // namespace

CGRAM_FUZZ_TARGET(regex) {
  if (size > 4096) return 0;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  size_t nul = all.find('\0');
  std::string_view pattern = all.substr(0, nul);
  std::vector<std::string_view> probes;
  if (nul != std::string_view::npos) {
    std::string_view rest = all.substr(nul + 1);
    while (probes.size() < 8) {
      size_t end = rest.find('\0');
      probes.push_back(rest.substr(0, end));
      if (end == std::string_view::npos) break;
      rest = rest.substr(end + 1);
    }
  }

  ir::RegexParseResult parsed = ir::parse_regex(pattern);
  if (auto* error = std::get_if<ir::RegexError>(&parsed)) {
    FUZZ_CHECK(!error->message.empty());
    FUZZ_CHECK(error->offset <= pattern.size());
    return 0;
  }
  const ir::RegexNode& regex = std::get<ir::RegexNode>(parsed);

  // Smaller limits than the defaults keep each run fast; the limits' own
  // edges are the same code.
  ir::AutomatonLimits limits;
  limits.max_nfa_states = 1u << 16;
  limits.max_dfa_states = 1u << 12;
  limits.max_intermediate_dfa_states = 1u << 13;
  ir::DfaResult compiled = ir::compile_regex(regex, limits);
  ir::NfaResult nfa = ir::regex_to_nfa(regex, limits);
  if (!nfa.ok()) {
    return 0;
  }
  const ir::Nfa& n = *nfa;
  ir::DfaResult dfa = ir::nfa_to_dfa(n, limits);
  const ir::Dfa* direct = dfa.if_value();
  ir::Dfa minimal;
  if (direct) minimal = ir::minimize(*direct);
  const ir::Dfa* whole = compiled.if_value();
  if (whole) {
    FUZZ_CHECK(whole->size() <= limits.max_dfa_states);
    FUZZ_CHECK(whole->accepts_empty() == nfa_verdicts(n, "")[0]);
    // Every live state's transitions stay in range.
    for (uint32_t s = 0; s < whole->size(); ++s)
      for (uint32_t t : whole->row(s)) FUZZ_CHECK(t == ir::Dfa::kDead || t < whole->size());
    // first_bytes: exactly the bytes that lead somewhere alive from the start.
    if (!whole->empty_language()) {
      std::vector<bool> first = whole->first_bytes();
      for (int b = 0; b < 256; ++b)
        FUZZ_CHECK(first[b] == (whole->next(whole->start(), uint8_t(b)) != ir::Dfa::kDead));
    }
  }
  if (direct && whole) FUZZ_CHECK(minimal.size() == whole->size());
  for (std::string_view probe : probes) {
    probe = probe.substr(0, 256);
    std::vector<bool> expected = nfa_verdicts(n, probe);
    if (direct) {
      FUZZ_CHECK(dfa_verdicts(*direct, probe) == expected);
      FUZZ_CHECK(dfa_verdicts(minimal, probe) == expected);
    }
    if (whole) FUZZ_CHECK(dfa_verdicts(*whole, probe) == expected);
  }
  return 0;
}

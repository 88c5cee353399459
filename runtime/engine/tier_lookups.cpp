#include "tier_lookups.h"

namespace cgram {

TierLookups::TierLookups(const CompiledGrammar& grammar) : g_(grammar) {
  for (const ir::LexTerminal& t : grammar.lexical().terminals) has_counted_ = has_counted_ || t.counted;
}

}  // namespace cgram

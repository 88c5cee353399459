#include "oracle_mask.h"

namespace cgram::test {

OracleMasker::OracleMasker(std::shared_ptr<const oracle::OracleGrammar> grammar,
                           std::shared_ptr<const Vocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), trie_(vocab_->trie()) {
  token_sensitive_ = false;
  for (const auto& p : grammar_->productions)
    for (const auto& s : p.rhs) token_sensitive_ = token_sensitive_ || s.kind == oracle::Symbol::Kind::AnyToken;
  for (const auto& e : grammar_->excepts) token_sensitive_ = token_sensitive_ || e.max_tokens.has_value();
}

std::vector<uint32_t> OracleMasker::mask(const std::vector<uint32_t>& history) {
  std::vector<uint32_t> words((vocab_->size() + 31) / 32, 0);
  auto set = [&](uint32_t id) { words[id / 32] |= 1u << (id % 32); };
  oracle::Recognizer r(grammar_, /*segmented=*/true);
  for (uint32_t id : history) r.push_token(vocab_->bytes(id));
  if (r.complete())
    for (uint32_t id : vocab_->eos_ids()) set(id);
  if (!r.viable()) return words;
  const size_t base = r.size();
  for (uint32_t node = 1; node < trie_.size();) {
    const uint32_t depth = trie_.depth(node);
    r.pop_bytes(r.size() - (base + depth - 1));
    char byte = static_cast<char>(trie_.byte(node));
    bool has_tokens = !trie_.tokens(node).empty();
    if (token_sensitive_ && has_tokens) {
      // As the last byte of a token: push_token marks a boundary after it.
      r.push_token(std::string_view(&byte, 1));
      bool ok = r.viable();
      if (ok)
        for (uint32_t id : trie_.tokens(node)) set(id);
      r.pop_bytes(1);
    }
    r.push_bytes(std::string_view(&byte, 1));
    // An any! that began at the token's start has no item until the token
    // ends: a dead column does not end the subtree then.
    if (r.dead() && !(token_sensitive_ && r.span_may_start_at(base))) {
      node = trie_.subtree_end(node);
      continue;
    }
    if (!token_sensitive_ && has_tokens && r.viable())
      for (uint32_t id : trie_.tokens(node)) set(id);
    ++node;
  }
  return words;
}

}  // namespace cgram::test

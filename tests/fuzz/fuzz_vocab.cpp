// Target "vocab": every vocabulary loader through Vocabulary::from_memory,
// which picks the format from the content (GGUF magic, a JSON object for a
// Hugging Face tokenizer.json, a JSON array for a token list, else
// tiktoken). Text after the marker "#CGRAM-CONFIG#" is passed as the
// tokenizer_config.json. A vocabulary that loads is checked (bytes, ids,
// lookups, the trie), then its encoder (when it has one) encodes a fixed
// text and a piece of the input, and a small grammar with regex, except!
// and any! terminals is compiled for it and walked a few steps.
#include <algorithm>
#include <variant>

#include "encoder.h"
#include "fuzz_common.h"
#include "matcher.h"
#include "vocab_trie.h"

using namespace cgram;

namespace {

constexpr std::string_view kConfigMarker = "#CGRAM-CONFIG#";

const std::shared_ptr<const Grammar>& small_grammar() {
  static const std::shared_ptr<const Grammar> grammar = [] {
    Grammar::Outcome outcome = Grammar::parse(
        "start ::= (item ', ')* item '\\n' except!('</s>', 8) any!{0,2} ;\n"
        "item  ::= #'[a-z]+' | #'[0-9]{1,3}' | '\"' #'[^\"\\\\]*' '\"' | '\\u00e9t\\u00e9' ;\n",
        "vocab_fuzz.cgram");
    if (!outcome.ok()) std::fprintf(stderr, "%s", outcome.diagnostics.render().c_str());
    FUZZ_CHECK(outcome.ok());
    return outcome.grammar;
  }();
  return grammar;
}

}  // namespace

CGRAM_FUZZ_TARGET(vocab) {
  if (size > (1u << 20)) return 0;
  std::string_view content(reinterpret_cast<const char*>(data), size);
  std::optional<std::string> config;
  if (size_t cut = content.find(kConfigMarker); cut != std::string_view::npos) {
    config = std::string(content.substr(cut + kConfigMarker.size()));
    content = content.substr(0, cut);
  }
  VocabularyOptions options;
  options.max_tokens = 1u << 16;
  VocabularyResult loaded = Vocabulary::from_memory(content, "fuzz", options, config);
  if (auto* error = loaded.if_error()) {
    FUZZ_CHECK(!error->message.empty());
    return 0;
  }
  std::shared_ptr<const Vocabulary> vocab = *loaded;
  const size_t n = vocab->size();
  FUZZ_CHECK(n <= options.max_tokens);
  for (uint32_t id : vocab->eos_ids()) FUZZ_CHECK(id < n);
  for (uint32_t id = 0; id < n; ++id) {
    std::string_view bytes = vocab->bytes(id);
    if (id < 4096) (void)vocab->display(id);
    if (vocab->is_special(id)) continue;
    std::optional<uint32_t> found = vocab->find(bytes);
    FUZZ_CHECK(found && *found < n && vocab->bytes(*found) == bytes);
  }
  (void)vocab->fingerprint();
  (void)vocab->trie();

  auto created = Encoder::create(vocab);
  if (auto* encoder = created.if_value()) {
    for (std::string_view text : {std::string_view("Hello, world! 12 {\"a\": [1, 2]}\n\u00e9t\u00e9 \u4e2d\u6587  x"),
                                  content.substr(0, 64)}) {
      for (uint32_t id : (*encoder)->encode(text)) FUZZ_CHECK(id < n);
      for (uint32_t id : (*encoder)->encode_continuation(text)) FUZZ_CHECK(id < n);
    }
  } else {
    FUZZ_CHECK(!created.error().message.empty());
  }

  // A grammar compiled for this vocabulary, walked along its allowed tokens.
  auto compiled = CompiledGrammar::compile(small_grammar(), vocab);
  if (auto* error = compiled.if_error()) {
    FUZZ_CHECK(!error->message.empty());
    return 0;
  }
  Matcher matcher(*compiled);
  std::vector<uint32_t> mask(matcher.mask_words());
  for (int step = 0; step < 6; ++step) {
    matcher.fill_mask(mask);
    if (fuzz::check_mask(mask, n) == 0) break;
    std::vector<uint32_t> allowed = matcher.current_possible_tokens();
    uint32_t pick = allowed[size_t(step) * 7919 % allowed.size()];
    FUZZ_CHECK(matcher.is_allowed(pick));
    if (matcher.advance(pick) != AdvanceResult::Ongoing) break;
  }
  return 0;
}

// Target "server": cgram-server's request lines (examples/server), each
// line of the input one request to a fresh server on the bundled
// vocabulary: grammars, opens, batches with any ids, closes, stats. Every
// answer must be one JSON object with "ok", whatever the line held (bad
// JSON, a NUL, ids that are no token, a sequence twice). Seeds:
// corpus/server.
#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "request_server.h"

using namespace cgram;

CGRAM_FUZZ_TARGET(server) {
  if (size > (64u << 10)) return 0;
  static const auto vocab = *Vocabulary::bundled();
  server::ServerLimits limits;
  limits.max_line_bytes = 16u << 10;
  limits.max_sequences = 16;
  limits.max_grammar_ids = 16;
  server::RequestServer s(std::make_unique<Compiler>(CompilerOptions{}), vocab, 1, limits);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const std::string answer = line.size() > limits.max_line_bytes ? s.too_long_answer() : s.handle_line(line);
    const auto parsed = nlohmann::json::parse(answer, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("ok")) __builtin_trap();
  }
  return 0;
}

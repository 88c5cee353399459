// An outside C++ program built with find_package(cgram) and cgram::cgram,
// through the installed C++ API (<cgram.hpp>, C++17).
#include <cgram.hpp>

#include <bitset>
#include <cstdio>
#include <string>

int main() {
  std::printf("cgram %s (ABI %u) from C++\n", std::string(cgram::version()).c_str(),
              static_cast<unsigned>(cgram::abi_version()));
  if (!cgram::abi_matches()) return 1;
  auto vocab = cgram::Vocabulary::bundled();
  if (!vocab) {
    std::fprintf(stderr, "error: %s\n", vocab.error().to_string().c_str());
    return 1;
  }
  std::printf("bundled vocabulary: %zu tokens\n", vocab->size());
  // A grammar, a matcher, and an allowed token from its mask.
  auto grammar = cgram::Grammar::compile(*vocab, "start ::= 'yes' | 'no' ;");
  if (!grammar) {
    std::fprintf(stderr, "error: %s\n", grammar.error().to_string().c_str());
    return 1;
  }
  auto matcher = cgram::Matcher::create(*grammar);
  auto mask = matcher ? matcher->mask() : cgram::Result<std::vector<uint32_t>>(matcher.error());
  if (!mask) {
    std::fprintf(stderr, "error: %s\n", mask.error().to_string().c_str());
    return 1;
  }
  size_t allowed = 0;
  for (uint32_t word : *mask) allowed += std::bitset<32>(word).count();
  std::printf("tokens allowed at the start of 'yes' | 'no': %zu\n", allowed);
  // A grammar error is a value.
  auto broken = cgram::Grammar::compile(*vocab, "start ::= ;;");
  std::printf("broken grammar: %s\n", broken ? "compiled" : std::string(broken.error().name()).c_str());
  return allowed > 0 && !broken ? 0 : 1;
}

// An outside C++ program built with find_package(cgram) and cgram::cgram.
#include <cgram.h>

#include <cstdio>
#include <memory>

int main() {
  std::printf("cgram %s (ABI %u) from C++\n", cgram_version(), static_cast<unsigned>(cgram_abi_version()));
  cgram_vocab* raw = nullptr;
  if (cgram_vocab_bundled(nullptr, 0, &raw) != CGRAM_OK) {
    std::fprintf(stderr, "error: %s\n", cgram_last_error());
    return 1;
  }
  std::unique_ptr<cgram_vocab, void (*)(cgram_vocab*)> vocab(raw, cgram_vocab_free);
  std::printf("bundled vocabulary: %zu tokens\n", cgram_vocab_size(vocab.get()));
  return cgram_abi_version() == CGRAM_ABI_VERSION ? 0 : 1;
}

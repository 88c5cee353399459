// Target "aot": load_shared_object (jit/shared_object.h) on the input
// written to a file: the size, trailer, versions, vocabulary fingerprint and
// checksums are checked before the file is mapped, so fuzzed files are
// refused with a message; the seeds (real objects, made for the tiny
// vocabulary) load and are run a few steps.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>

#include "fuzz_common.h"
#include "shared_object.h"

using namespace cgram;

namespace {

// One file per process, rewritten for each input.
const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string p = std::string(dir && *dir ? dir : "/tmp") + "/cgram-fuzz-aot-" + std::to_string(getpid()) + ".so";
    std::atexit([] { std::remove(scratch_path().c_str()); });
    return p;
  }();
  return path;
}

}  // namespace

CGRAM_FUZZ_TARGET(aot) {
  const std::string& path = scratch_path();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr);
  FUZZ_CHECK(std::fwrite(data, 1, size, f) == size);
  FUZZ_CHECK(std::fclose(f) == 0);
  SharedObjectLimits limits;
  limits.max_file_bytes = 4u << 20;
  CompileResult loaded = load_shared_object(path, fuzz::tiny_vocabulary(), limits);
  if (auto* error = loaded.if_error()) {
    FUZZ_CHECK(!error->message.empty());
    return 0;
  }
  fuzz::exercise_loaded(*loaded, uint32_t(size));
  return 0;
}

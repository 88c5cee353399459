// fuzz_replay: the fuzz targets without libFuzzer, for CI (every build).
//
//   fuzz_replay TARGET PATH...     runs TARGET on every file under each PATH
//                                  (directories recursively; missing paths
//                                  are skipped)
//   fuzz_replay --make-seeds DIR   writes seeds that need the library:
//                                  DIR/tables (saved tables) and DIR/aot
//                                  (shared objects), for the tiny vocabulary
//
// A failed check traps, as under libFuzzer; the file being run is printed
// first. Reproducers of findings not fixed yet are named open-* and are
// skipped unless CGRAM_FUZZ_REPLAY_OPEN=1 (docs/FUZZING.md lists them).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "fuzz_common.h"
#include "shared_object.h"

extern "C" {
int cgram_fuzz_grammar(const uint8_t* data, size_t size);
int cgram_fuzz_regex(const uint8_t* data, size_t size);
int cgram_fuzz_vocab(const uint8_t* data, size_t size);
int cgram_fuzz_matcher(const uint8_t* data, size_t size);
int cgram_fuzz_tables(const uint8_t* data, size_t size);
int cgram_fuzz_aot(const uint8_t* data, size_t size);
int cgram_fuzz_json_schema(const uint8_t* data, size_t size);
int cgram_fuzz_gbnf(const uint8_t* data, size_t size);
int cgram_fuzz_server(const uint8_t* data, size_t size);
}

namespace fs = std::filesystem;
using namespace cgram;

namespace {

using Target = int (*)(const uint8_t*, size_t);

const std::map<std::string, Target> kTargets = {
    {"grammar", cgram_fuzz_grammar}, {"regex", cgram_fuzz_regex}, {"vocab", cgram_fuzz_vocab},
    {"matcher", cgram_fuzz_matcher}, {"tables", cgram_fuzz_tables}, {"aot", cgram_fuzz_aot},
    {"json_schema", cgram_fuzz_json_schema}, {"gbnf", cgram_fuzz_gbnf}, {"server", cgram_fuzz_server},
};

// Grammars for the tables and aot seeds (small with the tiny vocabulary).
const char* const kSeedGrammars[] = {"json.cgram", "arithmetic.cgram", "csv.cgram", "delimited.cgram",
                                     "reply.cgram", "record.cgram", "chess.cgram"};

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

int make_seeds(const fs::path& dir) {
  fs::create_directories(dir / "tables");
  fs::create_directories(dir / "aot");
  size_t count = 0;
  for (const char* name : kSeedGrammars) {
    auto compiled = fuzz::compile_or_die(fuzz::read_example(name), name, fuzz::tiny_vocabulary(), true);
    std::string stem = fs::path(name).stem();
    // The payload: the target seals its input with the checksum itself.
    const std::string tables = compiled->save_tables();
    write(dir / "tables" / (stem + ".tables"), tables.substr(0, tables.size() - sizeof(uint64_t)));
    ++count;
    // Two shared objects are enough: loading them is the same code.
    if (stem == "json" || stem == "reply") {
      auto saved = save_shared_object(*compiled, (dir / "aot" / (stem + ".so")).string());
      if (auto* error = saved.if_error()) {
        std::fprintf(stderr, "%s: %s\n", name, error->message.c_str());
        return 1;
      }
      ++count;
    }
  }
  std::printf("wrote %zu seeds under %s\n", count, dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--make-seeds") == 0) return make_seeds(argv[2]);
  if (argc < 2 || !kTargets.count(argv[1])) {
    std::fprintf(stderr, "usage: fuzz_replay TARGET PATH... | fuzz_replay --make-seeds DIR\ntargets:");
    for (const auto& [name, _] : kTargets) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 64;
  }
  Target target = kTargets.at(argv[1]);
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    fs::path p = argv[i];
    if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else if (fs::is_directory(p)) {
      for (const auto& entry : fs::recursive_directory_iterator(p))
        if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  const char* open_env = std::getenv("CGRAM_FUZZ_REPLAY_OPEN");
  const bool run_open = open_env && std::strcmp(open_env, "1") == 0;
  size_t skipped = 0;
  for (const fs::path& file : files) {
    if (!run_open && file.filename().string().rfind("open-", 0) == 0) {
      std::printf("skipped (open finding): %s\n", file.c_str());
      ++skipped;
      continue;
    }
    std::string bytes = read(file);
    std::fprintf(stderr, "%s\n", file.c_str());
    target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: %zu inputs replayed, no failure; %zu open findings skipped\n", argv[1], files.size() - skipped,
              skipped);
  return 0;
}

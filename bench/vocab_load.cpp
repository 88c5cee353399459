// Vocabulary load time: median of N loads of each file given.
//   bench_vocab_load [--runs N] FILE...
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "vocabulary.h"

int main(int argc, char** argv) {
  int runs = 5;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else files.emplace_back(argv[i]);
  }
  if (files.empty()) {
    fmt::print(stderr, "usage: bench_vocab_load [--runs N] FILE...\n");
    return 64;
  }
  fmt::print("| vocabulary | ids | median load (ms) | min (ms) | runs |\n|---|---|---|---|---|\n");
  for (const std::string& file : files) {
    std::vector<double> ms;
    size_t ids = 0;
    for (int r = 0; r < runs; ++r) {
      auto start = std::chrono::steady_clock::now();
      cgram::VocabularyResult result = cgram::Vocabulary::load(file);
      auto stop = std::chrono::steady_clock::now();
      if (auto* e = result.if_error()) {
        fmt::print(stderr, "{}\n", e->message);
        return 1;
      }
      ids = (*result)->size();
      ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
    std::sort(ms.begin(), ms.end());
    fmt::print("| {} | {} | {:.1f} | {:.1f} | {} |\n", file.substr(file.find_last_of('/') + 1), ids,
               ms[ms.size() / 2], ms.front(), runs);
  }
}

#pragma once
// The `cgram` subcommands. Each returns the process exit code.
#include <optional>
#include <string>

namespace cgram::cli {

inline constexpr int kExitUsage = 64;

struct CheckArgs {
  std::string file;
  std::string start = "start";
  bool json = false;
  bool dump_ir = false;
};
int run_check(const CheckArgs& args);

struct MatchArgs {
  std::string file;
  std::optional<std::string> text;
  std::optional<std::string> text_file;
  std::string start = "start";
  bool json = false;
};
// Exit codes: 0 complete, 1 prefix, 2 rejected, 3 the grammar has errors.
int run_match(const MatchArgs& args);

// The main job on the embedded default: check the bundled JSON grammar and
// match a few texts against it. Exit 0 when every verdict is the expected one.
int run_demo();

}  // namespace cgram::cli

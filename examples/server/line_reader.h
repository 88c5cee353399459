#pragma once
// Request lines read from a file descriptor, never more than a bound: a
// line longer than the bound is skipped to its end and reported, so that a
// client cannot make the server hold an unbounded line in memory.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cgram::server {

class LineReader {
 public:
  enum class Status {
    Line,      // `line` holds the next line, without its '\n'
    TooLong,   // the next line was longer than max_line_bytes; it was skipped
    End,       // the other end closed (a last line without '\n' is returned first)
    TimedOut,  // nothing came for idle_timeout_ms
    Failed,    // read(2) failed
  };

  // idle_timeout_ms: how long next() waits for more bytes; nullopt: for ever.
  LineReader(int fd, size_t max_line_bytes, std::optional<int> idle_timeout_ms = std::nullopt);

  Status next(std::string& line);

 private:
  // Reads what is there into buffer_; false at the end, a time-out or an error.
  bool fill();

  int fd_;
  size_t max_line_bytes_;
  std::optional<int> idle_timeout_ms_;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;
  Status stopped_ = Status::Line;  // why fill() last returned false
};

}  // namespace cgram::server

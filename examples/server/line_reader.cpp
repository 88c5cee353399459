#include "line_reader.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cgram::server {

namespace {
constexpr size_t kChunkBytes = 64 * 1024;
}

LineReader::LineReader(int fd, size_t max_line_bytes, std::optional<int> idle_timeout_ms)
    : fd_(fd), max_line_bytes_(max_line_bytes), idle_timeout_ms_(idle_timeout_ms), buffer_(kChunkBytes) {}

bool LineReader::fill() {
  begin_ = end_ = 0;
  while (true) {
    if (idle_timeout_ms_) {
      pollfd waiting{fd_, POLLIN, 0};
      const int ready = poll(&waiting, 1, *idle_timeout_ms_);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        stopped_ = Status::TimedOut;
        return false;
      }
      if (ready < 0) {
        stopped_ = Status::Failed;
        return false;
      }
    }
    const ssize_t got = read(fd_, buffer_.data(), buffer_.size());
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      stopped_ = got == 0 ? Status::End : Status::Failed;
      return false;
    }
    end_ = static_cast<size_t>(got);
    return true;
  }
}

LineReader::Status LineReader::next(std::string& line) {
  line.clear();
  bool too_long = false;
  while (true) {
    if (begin_ == end_ && !fill()) {
      // A last line without its newline still counts, unless cut off by an error.
      if (stopped_ == Status::End && (too_long || !line.empty())) return too_long ? Status::TooLong : Status::Line;
      return stopped_;
    }
    const char* from = buffer_.data() + begin_;
    const void* newline = std::memchr(from, '\n', end_ - begin_);
    const size_t taken = newline ? static_cast<const char*>(newline) - from : end_ - begin_;
    if (!too_long && line.size() + taken > max_line_bytes_) {
      too_long = true;
      line.clear();
      line.shrink_to_fit();  // what was held of it is given back at once
    }
    if (!too_long) line.append(from, taken);
    begin_ += taken;
    if (newline) {
      ++begin_;
      return too_long ? Status::TooLong : Status::Line;
    }
  }
}

}  // namespace cgram::server

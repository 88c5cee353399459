#pragma once
// Reading input files (grammars, documents, vocabularies, shared objects)
// without trusting them: only regular files, and never more than a limit.
#include <cstddef>
#include <string>
#include <string_view>

#include "error.h"

namespace cgram {

// An open file descriptor, closed when it goes.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// Opens `path` for reading without blocking (a FIFO does not wait for a
// writer) and refuses anything that is not a regular file: "is a directory",
// "is not a regular file (a FIFO)". `what` names the file in messages
// ("grammar", "vocabulary").
Result<FileDescriptor> open_regular_file(const std::string& path, std::string_view what);

// Reads at most `limit` bytes from an open regular file; a file that holds
// more (whatever its size claims: /proc files say 0) is refused after
// reading limit + 1 bytes, never more.
Result<std::string> read_bounded(int fd, const std::string& path, std::string_view what, size_t limit);

// A regular file mapped read-only into memory (large saved tables: no copy,
// the pages come from the page cache); unmapped when it goes. The bytes are
// the file's as they were mapped: a file changed under the mapping changes
// them, so readers check what they read as for any input.
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  ~MappedFile();
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  friend Result<MappedFile> map_regular_file(const std::string& path, std::string_view what, size_t limit);
  void* data_ = nullptr;
  size_t size_ = 0;
};
Result<MappedFile> map_regular_file(const std::string& path, std::string_view what, size_t limit);

// open_regular_file then read_bounded.
Result<std::string> read_regular_file(const std::string& path, std::string_view what, size_t limit);

}  // namespace cgram

#include "file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace cgram {

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Result<FileDescriptor> open_regular_file(const std::string& path, std::string_view what) {
  auto failed = [&](std::string message) { return Error{ErrorCode::Io, std::move(message)}; };
  FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) return failed(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)));
  struct stat st;
  if (fstat(fd.get(), &st) != 0)
    return failed(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) {
    const char* kind = kind_of(st.st_mode);
    return failed(fmt::format("cannot read {} '{}': it is {}{}", what, path, kind,
                              S_ISDIR(st.st_mode) ? "" : ", not a regular file"));
  }
  // Regular files never block; reads go back to blocking mode.
  int flags = fcntl(fd.get(), F_GETFL);
  if (flags >= 0) fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

Result<std::string> read_bounded(int fd, const std::string& path, std::string_view what, size_t limit) {
  struct stat st;
  const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (regular && static_cast<uint64_t>(st.st_size) > limit)
    return Error{ErrorCode::Limit, fmt::format("{} '{}' is {} bytes; the limit is {} bytes", what, path,
                                               static_cast<uint64_t>(st.st_size), limit)};
  std::string out;
  // Read in chunks up to limit + 1 bytes: the size a file claims is not
  // trusted (it may grow, or be a /proc file that says 0).
  const size_t cap = limit == SIZE_MAX ? limit : limit + 1;
  size_t chunk = 1 << 16;
  // The size it claims sets the first read only (a saved context of 50 MB
  // is then read in one call, without copies as the string grows); reads
  // after it are small, to find the end.
  size_t first = 0;
  if (regular && st.st_size > 0) {
    first = std::min<size_t>(static_cast<size_t>(st.st_size) + 1, cap);
    out.reserve(first);
  }
  for (;;) {
    size_t want = std::min(std::exchange(first, 0) ? out.capacity() - out.size() : chunk, cap - out.size());
    if (want == 0) break;
    size_t old = out.size();
    out.resize(old + want);
    ssize_t got = read(fd, out.data() + old, want);
    if (got < 0) {
      if (errno == EINTR) {
        out.resize(old);
        continue;
      }
      return Error{ErrorCode::Io, fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno))};
    }
    out.resize(old + static_cast<size_t>(got));
    if (got == 0) break;
    if (chunk < (1u << 24)) chunk *= 2;
  }
  if (out.size() > limit)
    return Error{ErrorCode::Limit, fmt::format("{} '{}' is larger than the limit of {} bytes", what, path, limit)};
  return out;
}

Result<std::string> read_regular_file(const std::string& path, std::string_view what, size_t limit) {
  auto fd = open_regular_file(path, what);
  if (!fd) return fd.error();
  return read_bounded(fd->get(), path, what, limit);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) munmap(data_, size_);
}

Result<MappedFile> map_regular_file(const std::string& path, std::string_view what, size_t limit) {
  auto fd = open_regular_file(path, what);
  if (!fd) return fd.error();
  struct stat st;
  if (fstat(fd->get(), &st) != 0)
    return Error{ErrorCode::Io, fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno))};
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > limit)
    return Error{ErrorCode::Limit, fmt::format("{} '{}' is {} bytes; the limit is {} bytes", what, path, size, limit)};
  MappedFile mapped;
  if (size == 0) return mapped;
  void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd->get(), 0);
  if (data == MAP_FAILED)
    return Error{ErrorCode::Io, fmt::format("cannot map {} '{}': {}", what, path, std::strerror(errno))};
  mapped.data_ = data;
  mapped.size_ = size;
  return mapped;
}

}  // namespace cgram

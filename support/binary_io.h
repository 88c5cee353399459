#pragma once
// A flat little-endian byte format for saving compiled tables (AOT shared
// objects), and a reader that trusts nothing: every count is checked against
// the bytes that remain before anything is allocated, and the first failure
// is kept as a message.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cgram::ir {

// A 64-bit hash of bytes (eight at a time, four lanes, a strong final mix):
// fingerprints of vocabularies, grammars and whole files. Not cryptographic:
// it detects accidents and edits, not a forger (who could run code through
// a shared object anyway).
inline uint64_t hash_bytes(std::string_view bytes, uint64_t seed = 0) {
  constexpr uint64_t k1 = 0x9E3779B97F4A7C15ull, k2 = 0xC2B2AE3D27D4EB4Full, k3 = 0x165667B19E3779F9ull;
  auto mix = [](uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    return x ^ (x >> 33);
  };
  uint64_t lane[4] = {seed ^ k1, seed ^ k2, seed ^ k3, seed + bytes.size()};
  const char* p = bytes.data();
  size_t n = bytes.size();
  while (n >= 32) {
    for (int i = 0; i < 4; ++i) {
      uint64_t w;
      std::memcpy(&w, p + 8 * i, 8);
      lane[i] = (lane[i] ^ w) * k1;
      lane[i] = (lane[i] << 29 | lane[i] >> 35) * k2;
    }
    p += 32;
    n -= 32;
  }
  uint64_t tail[4] = {0, 0, 0, 0};
  if (n != 0) std::memcpy(tail, p, n);  // p may be null for an empty input
  for (int i = 0; i < 4; ++i) lane[i] = mix(lane[i] ^ tail[i] ^ (uint64_t(n) << 56));
  return mix(lane[0] ^ mix(lane[1] + k1) ^ mix(lane[2] + k2) ^ mix(lane[3] + k3));
}

class BinaryWriter {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &value, sizeof(T));
  }
  void put_bytes(std::string_view bytes) {
    put<uint64_t>(bytes.size());
    out_.append(bytes);
  }
  template <typename T>
  void put_vector(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(values.size());
    out_.append(reinterpret_cast<const char*>(values.data()), values.size_bytes());
  }
  template <typename T>
  void put_vector(const std::vector<T>& values) {
    put_vector(std::span<const T>(values));
  }
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class BinaryReader {
 public:
  explicit BinaryReader(std::string_view bytes) : in_(bytes) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool at_end() const { return at_ == in_.size(); }
  // Records the first failure; returns false so callers can `return r.fail(...)`.
  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    at_ = in_.size();
    return false;
  }

  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value{};
    if (in_.size() - at_ < sizeof(T)) {
      fail("truncated data");
      return value;
    }
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  // A count of items of `item_size` bytes each: refused when the rest of the
  // data cannot hold them (so a hostile count never drives an allocation).
  uint64_t get_count(size_t item_size) {
    const uint64_t n = get<uint64_t>();
    if (!ok()) return 0;
    if (item_size != 0 && n > (in_.size() - at_) / item_size) {
      fail("a count larger than the data");
      return 0;
    }
    return n;
  }
  std::string_view get_bytes() {
    const uint64_t n = get_count(1);
    std::string_view view = in_.substr(at_, n);
    at_ += n;
    return view;
  }
  template <typename T>
  std::vector<T> get_vector() {
    static_assert(std::is_trivially_copyable_v<T>);
    const uint64_t n = get_count(sizeof(T));
    std::vector<T> values(n);
    if (n) std::memcpy(values.data(), in_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return values;
  }

 private:
  std::string_view in_;
  size_t at_ = 0;
  std::string error_;
};

}  // namespace cgram::ir

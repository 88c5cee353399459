#pragma once
// One error type for every stage. A stage that can fail returns Result<T>:
// the value, or an Error that says what kind of failure it was (the code)
// and what exactly went wrong (the message, ready for a person to read).
// Nothing throws across a stage boundary for input it was given; the C API
// and Python turn the code into their own status once, at their boundary.
#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace cgram {

enum class ErrorCode : uint8_t {
  InvalidInput,  // malformed input: a vocabulary file, saved tables, a pattern, a shared object
  Unsupported,   // well-formed input cgram does not handle (a tokenizer model, a regex feature)
  Limit,         // a documented limit on size or work was reached
  OutOfMemory,   // the memory budget, or the allocator, refused
  Io,            // a file could not be opened, read or written
  Backend,       // LLVM or the CUDA driver failed: JIT, object emission, PTX, the device
  Internal,      // a bug in cgram; the message says what
};

constexpr std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidInput: return "invalid input";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Limit: return "limit";
    case ErrorCode::OutOfMemory: return "out of memory";
    case ErrorCode::Io: return "i/o";
    case ErrorCode::Backend: return "backend";
    case ErrorCode::Internal: return "internal";
  }
  return "unknown";
}

struct Error {
  ErrorCode code = ErrorCode::InvalidInput;
  std::string message;

  // The same error, its message prefixed with where it happened
  // ("'g.so': …", "canonical mode needs the encoder: …").
  Error in(std::string_view context) const {
    return Error{code, std::string(context) + ": " + message};
  }
};

// A value or an Error. Test it before reading the value:
//   auto dfa = build(...);
//   if (!dfa) return dfa.error();
//   use(*dfa);
template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Error>, "Result<Error> is ambiguous");

 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT
  // Any value convertible to T (a unique_ptr<Derived>, a string literal).
  template <class U, class = std::enable_if_t<std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
                                              !std::is_same_v<std::decay_t<U>, Error> &&
                                              !std::is_same_v<std::decay_t<U>, Result>>>
  Result(U&& value) : state_(std::in_place_index<0>, T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return check(), std::get<0>(state_); }
  const T& value() const& { return check(), std::get<0>(state_); }
  T&& value() && { return check(), std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { return check_error(), std::get<1>(state_); }
  Error&& error() && { return check_error(), std::get<1>(std::move(state_)); }
  // The error, or nullptr: `if (auto* e = r.if_error()) return *e;`
  const Error* if_error() const { return std::get_if<1>(&state_); }
  // The value, or nullptr.
  T* if_value() { return std::get_if<0>(&state_); }
  const T* if_value() const { return std::get_if<0>(&state_); }

 private:
  void check() const { assert(ok() && "Result: value() of an error"); }
  void check_error() const { assert(!ok() && "Result: error() of a value"); }
  std::variant<T, Error> state_;
};

// Success with nothing to return, or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const& {
    assert(failed_ && "Result: error() of a success");
    return error_;
  }
  Error&& error() && {
    assert(failed_ && "Result: error() of a success");
    return std::move(error_);
  }
  const Error* if_error() const { return failed_ ? &error_ : nullptr; }

 private:
  Error error_;
  bool failed_ = false;
};


}  // namespace cgram

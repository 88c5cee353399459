// support/error.h: one Error{code, message} and Result<T> for every stage.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "error.h"

using namespace cgram;

namespace {

Result<int> half(int n) {
  if (n % 2) return Error{ErrorCode::InvalidInput, std::to_string(n) + " is odd"};
  return n / 2;
}

Result<void> check_positive(int n) {
  if (n <= 0) return Error{ErrorCode::Limit, "not positive"};
  return {};
}

}  // namespace

TEST_CASE("Result: a value or an error, never both", "[error]") {
  Result<int> ok = half(8);
  REQUIRE(ok.ok());
  CHECK(static_cast<bool>(ok));
  CHECK(*ok == 4);
  CHECK(ok.value() == 4);
  CHECK(ok.if_error() == nullptr);
  REQUIRE(ok.if_value() != nullptr);
  CHECK(*ok.if_value() == 4);

  Result<int> odd = half(7);
  REQUIRE_FALSE(odd.ok());
  CHECK_FALSE(static_cast<bool>(odd));
  CHECK(odd.error().code == ErrorCode::InvalidInput);
  CHECK(odd.error().message == "7 is odd");
  CHECK(odd.if_value() == nullptr);
  REQUIRE(odd.if_error() != nullptr);
  CHECK(odd.if_error()->message == "7 is odd");
}

TEST_CASE("Result: move-only values, conversions, and errors passed up", "[error]") {
  // A unique_ptr<Derived> converts to Result<unique_ptr<Base>>.
  struct Base {
    virtual ~Base() = default;
    virtual int f() const { return 1; }
  };
  struct Derived : Base {
    int f() const override { return 2; }
  };
  auto make = [](bool good) -> Result<std::unique_ptr<Base>> {
    if (!good) return Error{ErrorCode::Unsupported, "no"};
    return std::make_unique<Derived>();
  };
  Result<std::unique_ptr<Base>> made = make(true);
  REQUIRE(made.ok());
  std::unique_ptr<Base> taken = std::move(*made);
  CHECK(taken->f() == 2);

  // An error goes up unchanged, or with where it happened.
  auto outer = [&](bool good) -> Result<std::string> {
    auto inner = make(good);
    if (!inner) return inner.error().in("loading 'x'");
    return std::string("fine");
  };
  CHECK(*outer(true) == "fine");
  const Error up = outer(false).error();
  CHECK(up.code == ErrorCode::Unsupported);
  CHECK(up.message == "loading 'x': no");

  // A string literal converts to Result<std::string>.
  Result<std::string> text = "abc";
  CHECK(*text == "abc");
}

TEST_CASE("Result<void>: success or an error", "[error]") {
  CHECK(check_positive(3).ok());
  CHECK(check_positive(3).if_error() == nullptr);
  Result<void> refused = check_positive(0);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::Limit);
  CHECK(refused.error().message == "not positive");
}

TEST_CASE("error codes have names", "[error]") {
  for (ErrorCode code : {ErrorCode::InvalidInput, ErrorCode::Unsupported, ErrorCode::Limit, ErrorCode::OutOfMemory,
                         ErrorCode::Io, ErrorCode::Backend, ErrorCode::Internal})
    CHECK(error_code_name(code) != "unknown");
  CHECK(error_code_name(ErrorCode::OutOfMemory) == "out of memory");
}

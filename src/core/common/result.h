// Result<T>: a value or an error message, for errors a caller can recover from.
//
// Core APIs return Result instead of throwing; exceptions never cross a module
// boundary (DESIGN.md, "Errors").
//
//   Result<Config> r = ParseConfig(text);
//   if (!r) return Error(r.error());
//   Use(*r);
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace kvgate {

// An error message, meant for a human (it names the file, field or value at fault).
struct Error {
  std::string message;
  explicit Error(std::string m) : message(std::move(m)) {}
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok()
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // REQUIRES: !ok()
  const std::string& error() const { return std::get<1>(v_).message; }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error.message)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
  bool ok_ = true;
};

}  // namespace kvgate

// Returns the error of a failed Status from the enclosing function (which returns a
// Result or a Status):  KVGATE_TRY(reader.expect_map(node, path, {"a", "b"}));
#define KVGATE_TRY(expr)                         \
  do {                                           \
    ::kvgate::Status s_ = (expr);                \
    if (!s_) return ::kvgate::Error(s_.error()); \
  } while (0)

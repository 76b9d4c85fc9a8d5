// Error, Result<T> and Status: kvgate's one error type, for errors a caller can recover
// from. An Error is a code (which kind of failure: what a caller branches on, and what
// picks an HTTP or gRPC status), a message for a human, and optionally the input field at
// fault.
//
// Core APIs return Result instead of throwing; exceptions never cross a module
// boundary (DESIGN.md, "Errors"; docs/architecture.md, "Errors").
//
//   Result<Config> r = ParseConfig(text);
//   if (!r) return Error(r.error());
//   Use(*r);
//
//   return Error(ErrorCode::kNotFound, "no model 'x'", "model");
//   ... if (r.code() == ErrorCode::kNotFound) answer(http_status(r.code()), ...);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kvgate {

// The codes kvgate uses out of the canonical set of absl::StatusCode and gRPC (the same
// numbers, so grpc_code() is the number itself). What each means here:
enum class ErrorCode : uint8_t {
  kOk = 0,                  // not an error (Status::code() of a success)
  kCancelled = 1,           // the caller gave up (a client went away, UpstreamCancel)
  kUnknown = 2,             // no code given: Error(message)
  kInvalidArgument = 3,     // a request, file or value at fault (names it)
  kDeadlineExceeded = 4,    // a timeout
  kNotFound = 5,            // no such model, file, endpoint
  kPermissionDenied = 7,    // known caller, not allowed
  kResourceExhausted = 8,   // a limit or quota reached
  kFailedPrecondition = 9,  // the system is not in the state the operation needs
  kAborted = 10,            // failed mid-way (a connection closed mid-exchange)
  kUnimplemented = 12,      // not supported
  kInternal = 13,           // a broken invariant or a malformed peer answer
  kUnavailable = 14,        // transient: try again (elsewhere)
  kUnauthenticated = 16,    // no or a wrong credential
};

// "INVALID_ARGUMENT", as absl and gRPC spell the code.
constexpr std::string_view code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "OK";
    case ErrorCode::kCancelled:
      return "CANCELLED";
    case ErrorCode::kUnknown:
      return "UNKNOWN";
    case ErrorCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case ErrorCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case ErrorCode::kNotFound:
      return "NOT_FOUND";
    case ErrorCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case ErrorCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case ErrorCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case ErrorCode::kAborted:
      return "ABORTED";
    case ErrorCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case ErrorCode::kInternal:
      return "INTERNAL";
    case ErrorCode::kUnavailable:
      return "UNAVAILABLE";
    case ErrorCode::kUnauthenticated:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

// The HTTP status for an error of `code`: google.rpc.Code's documented mapping (the one
// place kvgate turns a code into a status). An answer that is about a failed upstream
// (502) is not an Error's status and is written where it is answered.
constexpr int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return 200;
    case ErrorCode::kCancelled:
      return 499;  // client closed request
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition:
      return 400;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAborted:
      return 409;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kUnimplemented:
      return 501;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kDeadlineExceeded:
      return 504;
    case ErrorCode::kUnknown:
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

// The gRPC status code (grpc::StatusCode's number) for an error of `code`.
constexpr int grpc_code(ErrorCode code) { return static_cast<int>(code); }

// An error: its code, a message meant for a human (it names the file, field or value at
// fault), and the input field at fault when there is one (a request's JSON parameter,
// "messages[0]"; a config key), for answers that report it apart (OpenAI's `param`).
struct Error {
  ErrorCode code = ErrorCode::kUnknown;
  std::string message;
  std::string field;

  explicit Error(std::string m) : message(std::move(m)) {}
  // REQUIRES: c != ErrorCode::kOk (a Status made from one is kUnknown)
  Error(ErrorCode c, std::string m, std::string f = {})
      : code(c), message(std::move(m)), field(std::move(f)) {}
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

  // kOk when ok().
  ErrorCode code() const { return ok() ? ErrorCode::kOk : std::get<1>(v_).code; }
  // REQUIRES: !ok(). The message.
  const std::string& error() const { return std::get<1>(v_).message; }
  // REQUIRES: !ok(). The whole error: code, message, field.
  const Error& failure() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {  // NOLINT
    if (error_.code == ErrorCode::kOk) error_.code = ErrorCode::kUnknown;
  }
  bool ok() const { return error_.code == ErrorCode::kOk; }
  explicit operator bool() const { return ok(); }
  // kOk when ok().
  ErrorCode code() const { return error_.code; }
  // The message ("" when ok()).
  const std::string& error() const { return error_.message; }
  // REQUIRES: !ok(). The whole error: code, message, field.
  const Error& failure() const { return error_; }

 private:
  Error error_{ErrorCode::kOk, std::string()};
};

}  // namespace kvgate

// Returns the error of a failed Status from the enclosing function (which returns a
// Result or a Status), code and all:  KVGATE_TRY(reader.expect_map(node, path, {"a", "b"}));
#define KVGATE_TRY(expr)                           \
  do {                                             \
    ::kvgate::Status s_ = (expr);                  \
    if (!s_) return ::kvgate::Error(s_.failure()); \
  } while (0)

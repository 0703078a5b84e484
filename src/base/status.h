// Status and Result<T>: the one way gpuop reports an expected failure.
//
// A Status is a code plus a message written for the person who has to fix the
// problem: it names the object (GPU 2, node worker-1, file /etc/...) and, where
// there is one, the fix. Result<T> holds either a value or a non-OK Status.
// Both are plain values: copyable, movable, safe to pass between threads.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gpuop {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller's input is wrong (flag, config, manifest)
  kNotFound,           // a named thing does not exist
  kAlreadyExists,      // a thing to be created exists already
  kFailedPrecondition, // the system is not in a state where this can work
  kNotSupported,       // the hardware or driver cannot do this
  kPermissionDenied,
  kUnavailable,        // transient: retrying later may work
  kDeadlineExceeded,
  kAborted,            // a concurrent change won (optimistic-concurrency conflict): re-read, retry
  kInternal,           // a broken invariant or an unexpected environment error
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "NotFound: GPU 3 ..." for logs and CLI output.
  std::string ToString() const;

  // Prefixes context, keeping the code: "reading /x: <message>".
  Status Annotate(std::string_view context) const;

  // The HTTP status of the failed request behind this Status (an API server
  // answer), 0 when there was none. Callers branch on it where the code is
  // too coarse: 410 Gone means "re-list", 429 "slow down".
  int http_status() const { return http_status_; }
  Status WithHttpStatus(int http_status) const {
    Status s = *this;
    s.http_status_ = http_status;
    return s;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int http_status_ = 0;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status NotSupported(std::string m) { return {StatusCode::kNotSupported, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// strerror(err), for messages: "opening /x: No such file or directory".
std::string ErrnoText(int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result needs a value or a non-OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  T value_or(T fallback) const { return ok() ? std::get<T>(v_) : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gpuop

// Returns early from a function returning Status or Result<T>.
#define GPUOP_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::gpuop::Status gpuop_status_ = (expr);    \
    if (!gpuop_status_.ok()) return gpuop_status_; \
  } while (0)

#define GPUOP_CONCAT_INNER(a, b) a##b
#define GPUOP_CONCAT(a, b) GPUOP_CONCAT_INNER(a, b)
#define GPUOP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
// GPUOP_ASSIGN_OR_RETURN(auto x, Compute()); assigns the value or returns the error.
#define GPUOP_ASSIGN_OR_RETURN(lhs, expr) \
  GPUOP_ASSIGN_OR_RETURN_IMPL(GPUOP_CONCAT(gpuop_result_, __LINE__), lhs, expr)

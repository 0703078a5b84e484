// ApiError: a Kubernetes API failure as the real kube-apiserver reports it, an
// HTTP code plus a metav1 Status body:
//
//   {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
//    "message":"nodes \"n1\" not found","reason":"NotFound",
//    "details":{"name":"n1","kind":"nodes"},"code":404}
//
// The constructors below (NotFoundError, ConflictError, InvalidError, ...)
// produce the same message, reason and details as the corresponding
// k8s.io/apimachinery/pkg/api/errors constructors, so kubectl prints what it
// prints against a real cluster. ApiResult<T> / ApiStatus carry either a value
// or an ApiError, like gpuop::Result / gpuop::Status.
//
// All types here are plain values: copyable, movable, safe to pass between threads.
#pragma once

#include <cassert>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "sim/kube/resource.h"

namespace gpuop::simkube {

// One field-level cause of an Invalid (422) error (metav1.StatusCause).
struct StatusCause {
  std::string type;     // "FieldValueRequired", "FieldValueInvalid", ... (JSON "reason")
  std::string message;  // "Required value: name or generateName is required"
  std::string field;    // "metadata.name"

  nlohmann::json ToJson() const;
};

// A field validation error (k8s.io/apimachinery/pkg/util/validation/field.Error).
struct FieldError {
  enum class Type {
    kRequired,      // "Required value"
    kInvalid,       // "Invalid value"
    kNotSupported,  // "Unsupported value"
    kDuplicate,     // "Duplicate value"
    kForbidden,     // "Forbidden"
    kTooLong,       // "Too long"
    kTooMany,       // "Too many"
    kTypeInvalid,   // "Invalid value" (wrong JSON type)
  };
  Type type = Type::kInvalid;
  std::string field;  // "spec.replicas"
  // The offending value, printed like Go's %#v would for JSON values
  // ("\"abc\"", 3, true); absent for Required/Forbidden.
  std::optional<nlohmann::json> bad_value;
  std::string detail;

  static FieldError Required(std::string field, std::string detail = "");
  static FieldError Invalid(std::string field, nlohmann::json value, std::string detail);
  static FieldError NotSupported(std::string field, nlohmann::json value,
                                 const std::vector<std::string>& valid);
  static FieldError Forbidden(std::string field, std::string detail);
  static FieldError Duplicate(std::string field, nlohmann::json value);
  static FieldError TypeInvalid(std::string field, nlohmann::json value, std::string detail);
  static FieldError TooLong(std::string field, nlohmann::json value, size_t max_len);

  // "Invalid value" / "Required value" / ...
  static std::string_view TypeString(Type t);
  // "FieldValueInvalid" / "FieldValueRequired" / ... (StatusCause.reason)
  static std::string_view CauseType(Type t);
  // `spec.replicas: Invalid value: "x": must be an integer`
  std::string ToString() const;
  // The message part without the field: `Invalid value: "x": must be an integer`.
  std::string Message() const;
};

struct ApiError {
  int code = 500;
  std::string reason;   // "NotFound", "AlreadyExists", "Conflict", "Invalid", ...
  std::string message;  // human message, exactly the real server's wording
  struct Details {
    std::string name;
    std::string group;
    std::string kind;  // the resource plural for most errors, the Kind for Invalid
    std::string uid;
    std::vector<StatusCause> causes;
    int retry_after_seconds = 0;
  };
  std::optional<Details> details;

  // The metav1.Status JSON body (kind Status, status Failure).
  nlohmann::json ToStatusJson() const;
  // Parses a Status body (best effort; a non-Status becomes a 500).
  static ApiError FromStatusJson(const nlohmann::json& status);
  // "NotFound (404): nodes \"n1\" not found" for logs and test output.
  std::string ToString() const;
  // The closest gpuop::Status (NotFound → kNotFound, Conflict → kFailedPrecondition, ...).
  Status ToStatus() const;
};

// --- Constructors: same code, reason, message and details as the real server ---

// 404 NotFound: `nodes "n1" not found` / `daemonsets.apps "x" not found`.
ApiError NotFoundError(const GroupResource& gr, std::string_view name);
// 409 AlreadyExists: `nodes "n1" already exists`.
ApiError AlreadyExistsError(const GroupResource& gr, std::string_view name);
// 409 Conflict: `Operation cannot be fulfilled on nodes "n1": <why>`.
ApiError ConflictError(const GroupResource& gr, std::string_view name, std::string_view why);
// The "why" of a stale resourceVersion on update.
inline constexpr std::string_view kOptimisticLockErrorMsg =
    "the object has been modified; please apply your changes to the latest version and try again";
// 422 Invalid: `Node "n1" is invalid: <field errors>`; details carry the Kind
// (not the plural) and one cause per field error.
ApiError InvalidError(std::string_view group, std::string_view kind, std::string_view name,
                      const std::vector<FieldError>& errors);
// 400 BadRequest with the message as given.
ApiError BadRequestError(std::string message);
// 410 Expired (reason "Expired"): too old resource version, expired continue token.
ApiError ResourceExpiredError(std::string message);
// 410 Gone (reason "Gone").
ApiError GoneError(std::string message);
// 405 MethodNotAllowed: `the server does not allow this method on the requested resource`.
ApiError MethodNotAllowedError(const GroupResource& gr, std::string_view name);
// 403 Forbidden: `nodes "n1" is forbidden: <why>`.
ApiError ForbiddenError(const GroupResource& gr, std::string_view name, std::string_view why);
// 401 Unauthorized.
ApiError UnauthorizedError(std::string message = "Unauthorized");
// 429 TooManyRequests with details.retryAfterSeconds (the HTTP layer adds Retry-After).
ApiError TooManyRequestsError(std::string message, int retry_after_seconds);
// 500 InternalError: `Internal error occurred: <why>`.
ApiError InternalServerError(std::string_view why);
// 503 ServiceUnavailable.
ApiError ServiceUnavailableError(std::string message);
// 504 Timeout (reason "Timeout").
ApiError TimeoutError(std::string message, int retry_after_seconds = 0);
// 406 NotAcceptable, 415 UnsupportedMediaType, 413 RequestEntityTooLarge.
ApiError NotAcceptableError(std::string message);
ApiError UnsupportedMediaTypeError(std::string message);
ApiError RequestEntityTooLargeError(std::string message);
// Maps a gpuop::Status (e.g. from a parser) onto the closest ApiError.
ApiError FromStatus(const Status& status);

// Either a T or an ApiError.
template <typename T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  ApiResult(ApiError error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  // REQUIRES: !ok().
  const ApiError& error() const& { return std::get<ApiError>(v_); }
  ApiError&& error() && { return std::get<ApiError>(std::move(v_)); }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, ApiError> v_;
};

// OK or an ApiError.
class [[nodiscard]] ApiStatus {
 public:
  ApiStatus() = default;
  ApiStatus(ApiError error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  static ApiStatus Ok() { return {}; }

  bool ok() const { return !error_.has_value(); }
  // REQUIRES: !ok().
  const ApiError& error() const& { return *error_; }
  ApiError&& error() && { return std::move(*error_); }

 private:
  std::optional<ApiError> error_;
};

}  // namespace gpuop::simkube

// Returns the ApiError of an ApiStatus/ApiResult expression from a function
// returning ApiStatus or ApiResult<T>.
#define GPUOP_API_RETURN_IF_ERROR(expr)                                       \
  do {                                                                        \
    auto gpuop_api_status_ = (expr);                                          \
    if (!gpuop_api_status_.ok()) return std::move(gpuop_api_status_).error(); \
  } while (0)

#define GPUOP_API_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return std::move(tmp).error();         \
  lhs = std::move(tmp).value()
// GPUOP_API_ASSIGN_OR_RETURN(auto x, store.Get(...)); assigns or returns the ApiError.
#define GPUOP_API_ASSIGN_OR_RETURN(lhs, expr) \
  GPUOP_API_ASSIGN_OR_RETURN_IMPL(GPUOP_CONCAT(gpuop_api_result_, __LINE__), lhs, expr)

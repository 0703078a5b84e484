#include "sim/kube/api_error.h"

#include <set>

#include "base/strings.h"

namespace gpuop::simkube {

using nlohmann::json;

json StatusCause::ToJson() const {
  json j = json::object();
  if (!type.empty()) j["reason"] = type;
  if (!message.empty()) j["message"] = message;
  if (!field.empty()) j["field"] = field;
  return j;
}

// --- FieldError ---

FieldError FieldError::Required(std::string field, std::string detail) {
  return {Type::kRequired, std::move(field), std::nullopt, std::move(detail)};
}
FieldError FieldError::Invalid(std::string field, json value, std::string detail) {
  return {Type::kInvalid, std::move(field), std::move(value), std::move(detail)};
}
FieldError FieldError::NotSupported(std::string field, json value,
                                    const std::vector<std::string>& valid) {
  std::string detail;
  if (!valid.empty()) {
    detail = "supported values: ";
    for (size_t i = 0; i < valid.size(); ++i) {
      if (i > 0) detail += ", ";
      detail += json(valid[i]).dump();
    }
  }
  return {Type::kNotSupported, std::move(field), std::move(value), std::move(detail)};
}
FieldError FieldError::Forbidden(std::string field, std::string detail) {
  return {Type::kForbidden, std::move(field), std::nullopt, std::move(detail)};
}
FieldError FieldError::Duplicate(std::string field, json value) {
  return {Type::kDuplicate, std::move(field), std::move(value), ""};
}
FieldError FieldError::TypeInvalid(std::string field, json value, std::string detail) {
  return {Type::kTypeInvalid, std::move(field), std::move(value), std::move(detail)};
}
FieldError FieldError::TooLong(std::string field, json value, size_t max_len) {
  return {Type::kTooLong, std::move(field), std::move(value),
          "may not be more than " + std::to_string(max_len) + " bytes"};
}

std::string_view FieldError::TypeString(Type t) {
  switch (t) {
    case Type::kRequired:
      return "Required value";
    case Type::kInvalid:
      return "Invalid value";
    case Type::kNotSupported:
      return "Unsupported value";
    case Type::kDuplicate:
      return "Duplicate value";
    case Type::kForbidden:
      return "Forbidden";
    case Type::kTooLong:
      return "Too long";
    case Type::kTooMany:
      return "Too many";
    case Type::kTypeInvalid:
      return "Invalid value";
  }
  return "Invalid value";
}

std::string_view FieldError::CauseType(Type t) {
  switch (t) {
    case Type::kRequired:
      return "FieldValueRequired";
    case Type::kInvalid:
      return "FieldValueInvalid";
    case Type::kNotSupported:
      return "FieldValueNotSupported";
    case Type::kDuplicate:
      return "FieldValueDuplicate";
    case Type::kForbidden:
      return "FieldValueForbidden";
    case Type::kTooLong:
      return "FieldValueTooLong";
    case Type::kTooMany:
      return "FieldValueTooMany";
    case Type::kTypeInvalid:
      return "FieldValueTypeInvalid";
  }
  return "FieldValueInvalid";
}

std::string FieldError::Message() const {
  std::string s(TypeString(type));
  const bool show_value = bad_value.has_value() && type != Type::kRequired &&
                          type != Type::kForbidden && type != Type::kTooLong;
  if (show_value) {
    s += ": ";
    // Strings print quoted (Go %q), everything else as its JSON text.
    s += bad_value->dump();
  }
  if (!detail.empty()) s += ": " + detail;
  return s;
}

std::string FieldError::ToString() const { return field + ": " + Message(); }

// --- ApiError ---

json ApiError::ToStatusJson() const {
  json j = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"code", code}};
  if (!reason.empty()) j["reason"] = reason;
  if (details) {
    json d = json::object();
    if (!details->name.empty()) d["name"] = details->name;
    if (!details->group.empty()) d["group"] = details->group;
    if (!details->kind.empty()) d["kind"] = details->kind;
    if (!details->uid.empty()) d["uid"] = details->uid;
    if (!details->causes.empty()) {
      d["causes"] = json::array();
      for (const auto& c : details->causes) d["causes"].push_back(c.ToJson());
    }
    if (details->retry_after_seconds > 0) d["retryAfterSeconds"] = details->retry_after_seconds;
    j["details"] = std::move(d);
  }
  return j;
}

ApiError ApiError::FromStatusJson(const json& status) {
  ApiError e;
  if (!status.is_object() || status.value("kind", "") != "Status") {
    e.code = 500;
    e.message = "unexpected response: " + status.dump();
    return e;
  }
  e.code = status.value("code", 500);
  e.reason = status.value("reason", "");
  e.message = status.value("message", "");
  if (auto it = status.find("details"); it != status.end() && it->is_object()) {
    Details d;
    d.name = it->value("name", "");
    d.group = it->value("group", "");
    d.kind = it->value("kind", "");
    d.uid = it->value("uid", "");
    d.retry_after_seconds = it->value("retryAfterSeconds", 0);
    if (auto c = it->find("causes"); c != it->end() && c->is_array()) {
      for (const auto& cj : *c) {
        if (!cj.is_object()) continue;
        d.causes.push_back(
            {cj.value("reason", ""), cj.value("message", ""), cj.value("field", "")});
      }
    }
    e.details = std::move(d);
  }
  return e;
}

std::string ApiError::ToString() const {
  return (reason.empty() ? std::string("Unknown") : reason) + " (" + std::to_string(code) +
         "): " + message;
}

Status ApiError::ToStatus() const {
  StatusCode c = StatusCode::kInternal;
  switch (code) {
    case 400:
    case 422:
      c = StatusCode::kInvalidArgument;
      break;
    case 401:
    case 403:
      c = StatusCode::kPermissionDenied;
      break;
    case 404:
      c = StatusCode::kNotFound;
      break;
    case 405:
    case 406:
    case 415:
      c = StatusCode::kNotSupported;
      break;
    case 409:
      c = reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kFailedPrecondition;
      break;
    case 410:
      c = StatusCode::kFailedPrecondition;
      break;
    case 429:
    case 503:
      c = StatusCode::kUnavailable;
      break;
    case 504:
      c = StatusCode::kDeadlineExceeded;
      break;
    default:
      break;
  }
  return Status(c, message);
}

namespace {

ApiError Make(int code, std::string reason, std::string message) {
  ApiError e;
  e.code = code;
  e.reason = std::move(reason);
  e.message = std::move(message);
  return e;
}

ApiError::Details NamedDetails(const GroupResource& gr, std::string_view name) {
  ApiError::Details d;
  d.name = std::string(name);
  d.group = gr.group;
  d.kind = gr.resource;
  return d;
}

}  // namespace

ApiError NotFoundError(const GroupResource& gr, std::string_view name) {
  ApiError e = Make(404, "NotFound", gr.String() + " " + JsonQuote(name) + " not found");
  e.details = NamedDetails(gr, name);
  return e;
}

ApiError AlreadyExistsError(const GroupResource& gr, std::string_view name) {
  ApiError e = Make(409, "AlreadyExists", gr.String() + " " + JsonQuote(name) + " already exists");
  e.details = NamedDetails(gr, name);
  return e;
}

ApiError ConflictError(const GroupResource& gr, std::string_view name, std::string_view why) {
  ApiError e = Make(409, "Conflict",
                    "Operation cannot be fulfilled on " + gr.String() + " " + JsonQuote(name) +
                        ": " + std::string(why));
  e.details = NamedDetails(gr, name);
  return e;
}

ApiError InvalidError(std::string_view group, std::string_view kind, std::string_view name,
                      const std::vector<FieldError>& errors) {
  std::string qualified_kind(kind);
  if (!group.empty()) qualified_kind += "." + std::string(group);
  // errs.ToAggregate(): duplicates dropped, one error bare, several in [a, b].
  std::vector<std::string> msgs;
  std::set<std::string> seen;
  for (const auto& fe : errors) {
    std::string m = fe.ToString();
    if (seen.insert(m).second) msgs.push_back(std::move(m));
  }
  std::string agg;
  if (msgs.size() == 1) {
    agg = msgs[0];
  } else {
    agg = "[";
    for (size_t i = 0; i < msgs.size(); ++i) agg += (i ? ", " : "") + msgs[i];
    agg += "]";
  }
  ApiError e = Make(422, "Invalid", qualified_kind + " " + JsonQuote(name) + " is invalid: " + agg);
  ApiError::Details d;
  d.name = std::string(name);
  d.group = std::string(group);
  d.kind = std::string(kind);
  for (const auto& fe : errors) {
    d.causes.push_back({std::string(FieldError::CauseType(fe.type)), fe.Message(), fe.field});
  }
  e.details = std::move(d);
  return e;
}

ApiError BadRequestError(std::string message) {
  return Make(400, "BadRequest", std::move(message));
}

ApiError ResourceExpiredError(std::string message) {
  return Make(410, "Expired", std::move(message));
}

ApiError GoneError(std::string message) { return Make(410, "Gone", std::move(message)); }

ApiError MethodNotAllowedError(const GroupResource& gr, std::string_view name) {
  ApiError e = Make(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource");
  e.details = NamedDetails(gr, name);
  return e;
}

ApiError ForbiddenError(const GroupResource& gr, std::string_view name, std::string_view why) {
  std::string msg =
      name.empty() ? gr.String() + " is forbidden: " + std::string(why)
                   : gr.String() + " " + JsonQuote(name) + " is forbidden: " + std::string(why);
  ApiError e = Make(403, "Forbidden", std::move(msg));
  e.details = NamedDetails(gr, name);
  return e;
}

ApiError UnauthorizedError(std::string message) {
  return Make(401, "Unauthorized", std::move(message));
}

ApiError TooManyRequestsError(std::string message, int retry_after_seconds) {
  ApiError e = Make(429, "TooManyRequests", std::move(message));
  ApiError::Details d;
  d.retry_after_seconds = retry_after_seconds;
  e.details = std::move(d);
  return e;
}

ApiError InternalServerError(std::string_view why) {
  ApiError e = Make(500, "InternalError", "Internal error occurred: " + std::string(why));
  ApiError::Details d;
  d.causes.push_back({"", std::string(why), ""});
  e.details = std::move(d);
  return e;
}

ApiError ServiceUnavailableError(std::string message) {
  return Make(503, "ServiceUnavailable", std::move(message));
}

ApiError TimeoutError(std::string message, int retry_after_seconds) {
  ApiError e = Make(504, "Timeout", std::move(message));
  if (retry_after_seconds > 0) {
    ApiError::Details d;
    d.retry_after_seconds = retry_after_seconds;
    e.details = std::move(d);
  }
  return e;
}

ApiError NotAcceptableError(std::string message) {
  return Make(406, "NotAcceptable", std::move(message));
}
ApiError UnsupportedMediaTypeError(std::string message) {
  return Make(415, "UnsupportedMediaType", std::move(message));
}
ApiError RequestEntityTooLargeError(std::string message) {
  return Make(413, "RequestEntityTooLarge", std::move(message));
}

ApiError FromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return BadRequestError(status.message());
    case StatusCode::kNotFound:
      return Make(404, "NotFound", status.message());
    case StatusCode::kAlreadyExists:
      return Make(409, "AlreadyExists", status.message());
    case StatusCode::kFailedPrecondition:
      return Make(409, "Conflict", status.message());
    case StatusCode::kPermissionDenied:
      return Make(403, "Forbidden", status.message());
    case StatusCode::kUnavailable:
      return ServiceUnavailableError(status.message());
    case StatusCode::kDeadlineExceeded:
      return TimeoutError(status.message());
    case StatusCode::kNotSupported:
      return Make(405, "MethodNotAllowed", status.message());
    default:
      return InternalServerError(status.message());
  }
}

}  // namespace gpuop::simkube

#include "kube/client.h"

#include <sys/stat.h>

#include <cctype>
#include <mutex>
#include <thread>
#include <utility>

#include "base/backoff.h"
#include "base/clock.h"
#include "base/files.h"
#include "base/log.h"
#include "base/mutex.h"
#include "base/strings.h"
#include "kube/http_transport.h"
#include "kube/rate_limiter.h"

namespace gpuop::kube {
namespace {

// A Retry-After longer than this is not waited out in a call; the caller
// gets the 429/503 and decides.
constexpr std::chrono::seconds kMaxRetryAfter{60};
// How long past its timeoutSeconds a watch may stay silent before the client
// gives up on it (a partitioned server never ends the stream itself).
constexpr std::chrono::seconds kWatchGrace{30};

// The bearer token, re-read from its file when the file changes (projected
// service-account tokens are rotated by the kubelet, which swaps the file).
class TokenSource {
 public:
  TokenSource(std::string token, std::string file)
      : token_(std::move(token)), file_(std::move(file)) {}

  std::string Get() {
    MutexLock lock(mu_);
    if (!file_.empty()) ReloadLocked(/*force=*/false);
    return token_;
  }

  // Re-reads the file whatever its stamp says; true when the token changed.
  bool Refresh() {
    MutexLock lock(mu_);
    if (file_.empty()) return false;
    std::string before = token_;
    ReloadLocked(/*force=*/true);
    return token_ != before;
  }

  const std::string& file() const { return file_; }

 private:
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    int64_t mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };

  void ReloadLocked(bool force) GPUOP_REQUIRES(mu_) {
    struct stat st {};
    if (::stat(file_.c_str(), &st) != 0) {
      WarnOnce("the token file cannot be read; keeping the last token");
      return;
    }
    Stamp now{st.st_dev, st.st_ino, st.st_size,
              static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    if (!force && now == stamp_) return;
    auto content = ReadFile(file_);
    if (!content.ok()) {
      WarnOnce(content.status().message());
      return;
    }
    std::string token(Trim(*content));
    if (token.empty()) {
      WarnOnce("the token file is empty; keeping the last token");
      return;
    }
    if (token != token_ && !token_.empty()) LogDebug("bearer token reloaded", {{"file", file_}});
    token_ = std::move(token);
    stamp_ = now;
    warned_ = false;
  }

  void WarnOnce(const std::string& why) GPUOP_REQUIRES(mu_) {
    if (warned_) return;
    warned_ = true;
    LogWarn("bearer token file unreadable", {{"file", file_}, {"error", why}});
  }

  Mutex mu_;
  std::string token_ GPUOP_GUARDED_BY(mu_);
  const std::string file_;
  Stamp stamp_ GPUOP_GUARDED_BY(mu_);
  bool warned_ GPUOP_GUARDED_BY(mu_) = false;
};

// One API call, for messages and the retry policy.
struct Call {
  std::string verb;  // get list create update patch delete watch evict ...
  std::string what;  // "pods/web-1 in namespace default"
  // Safe to repeat after it may have reached the server.
  bool idempotent = true;
  // A 429 without Retry-After is an answer, not throttling (an eviction
  // blocked by a PodDisruptionBudget): it is not retried.
  bool throttle_needs_retry_after = false;
};

std::string Describe(const Resource& r, std::string_view ns, std::string_view name) {
  std::string out = r.QualifiedName();
  if (!name.empty()) {
    out += "/";
    out += name;
  }
  if (r.namespaced && !ns.empty()) {
    out += " in namespace ";
    out += ns;
  }
  return out;
}

struct Query {
  std::string text;
  void Add(std::string_view key, std::string_view value) {
    text += text.empty() ? "?" : "&";
    text += key;
    text += "=";
    text += UrlEncode(value);
  }
};

// The message and reason of a Status body, or the body's start.
std::pair<std::string, std::string> ServerMessage(const std::string& body) {
  try {
    Json j = Json::parse(body);
    if (j.is_object() && j.value("kind", "") == "Status") {
      return {j.value("message", ""), j.value("reason", "")};
    }
  } catch (const std::exception&) {
    // not JSON: quote the text
  }
  std::string text(Trim(body));
  if (text.size() > 300) text = text.substr(0, 300) + "...";
  return {text, ""};
}

StatusCode CodeForHttp(int status, std::string_view reason) {
  switch (status) {
    case 400:
    case 405:
    case 406:
    case 413:
    case 415:
    case 422:
      return StatusCode::kInvalidArgument;
    case 401:
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kAborted;
    case 410:
    case 412:
      return StatusCode::kFailedPrecondition;
    case 429:
      return StatusCode::kUnavailable;
    default:
      if (status >= 500) return StatusCode::kUnavailable;
      if (status >= 400) return StatusCode::kInvalidArgument;
      return StatusCode::kInternal;
  }
}

Result<Json> ParseJson(const Call& call, const std::string& body) {
  try {
    return Json::parse(body);
  } catch (const std::exception& e) {
    return Internal(call.verb + " " + call.what + ": the server's answer is not JSON: " + e.what());
  }
}

// Lists come without apiVersion and kind on their items; put them back so
// an item can be written as it is.
void SetTypeMeta(const Resource& r, Json& obj) {
  if (!obj.is_object()) return;
  if (!obj.contains("apiVersion") || obj["apiVersion"].is_null())
    obj["apiVersion"] = r.ApiVersion();
  if ((!obj.contains("kind") || obj["kind"].is_null()) && !r.kind.empty()) obj["kind"] = r.kind;
}

std::string MetaString(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return "";
  auto v = m->find(key);
  return v != m->end() && v->is_string() ? v->get<std::string>() : "";
}

Json DeleteOptionsBody(const DeleteOptions& o, bool with_type_meta) {
  Json body = Json::object();
  if (with_type_meta) {
    body["apiVersion"] = "v1";
    body["kind"] = "DeleteOptions";
  }
  if (!o.propagation_policy.empty()) body["propagationPolicy"] = o.propagation_policy;
  if (o.grace_period_seconds) body["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (o.precondition_uid || o.precondition_resource_version) {
    Json pre = Json::object();
    if (o.precondition_uid) pre["uid"] = *o.precondition_uid;
    if (o.precondition_resource_version) pre["resourceVersion"] = *o.precondition_resource_version;
    body["preconditions"] = std::move(pre);
  }
  return body;
}

bool HasDeleteOptions(const DeleteOptions& o) {
  return !o.propagation_policy.empty() || o.grace_period_seconds || o.precondition_uid ||
         o.precondition_resource_version;
}

Status CheckPem(std::string_view pem, std::string_view label, std::string_view field,
                const std::string& source) {
  bool framed = false;
  if (label == "PRIVATE KEY") {
    // PKCS#8 ("PRIVATE KEY"), PKCS#1 ("RSA PRIVATE KEY"), SEC1 ("EC PRIVATE KEY").
    size_t begin = pem.find("-----BEGIN ");
    framed = begin != std::string_view::npos &&
             pem.find("PRIVATE KEY-----", begin) != std::string_view::npos &&
             pem.find("-----END ", begin) != std::string_view::npos;
  } else {
    std::string begin = "-----BEGIN " + std::string(label) + "-----";
    std::string end = "-----END " + std::string(label) + "-----";
    size_t b = pem.find(begin);
    framed = b != std::string_view::npos && pem.find(end, b) != std::string_view::npos;
  }
  if (framed) return Status::Ok();
  return InvalidArgument(std::string(field) + " from " +
                         (source.empty() ? std::string("the client configuration") : source) +
                         " is not a PEM " + ToLower(label) + " (no -----BEGIN " +
                         std::string(label) + "----- block); fix the kubeconfig entry");
}

}  // namespace

std::string_view WatchEventTypeName(WatchEvent::Type type) {
  switch (type) {
    case WatchEvent::Type::kAdded:
      return "ADDED";
    case WatchEvent::Type::kModified:
      return "MODIFIED";
    case WatchEvent::Type::kDeleted:
      return "DELETED";
    case WatchEvent::Type::kBookmark:
      return "BOOKMARK";
    case WatchEvent::Type::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

struct Client::Impl {
  RestConfig config;
  RetryPolicy retry;
  std::unique_ptr<HttpTransport> transport;
  TokenBucket limiter;
  Backoff backoff;
  TokenSource token;

  Impl(RestConfig c, RetryPolicy r, std::unique_ptr<HttpTransport> t)
      : config(std::move(c)),
        retry(r),
        transport(std::move(t)),
        limiter(config.qps, config.burst),
        backoff(retry.initial_backoff, retry.max_backoff),
        token(config.token, config.token_file) {}

  std::string Source() const {
    return config.source.empty() ? "the client configuration" : config.source;
  }

  Status ErrorFor(const Call& call, const HttpResponse& resp) const {
    const std::string prefix = call.verb + " " + call.what + ": ";
    switch (resp.error) {
      case TransportError::kNone:
        break;
      case TransportError::kConnect:
        return Unavailable(prefix + "cannot connect to " + config.server + ": " +
                           resp.error_message + "; check that the API server is up and that " +
                           Source() + " names the right server");
      case TransportError::kTlsVerify:
        return Unavailable(prefix + "TLS verification of " + config.server +
                           " failed: " + resp.error_message +
                           "; check certificate-authority(-data) in " + Source() +
                           " (it must hold the CA that signed the server's certificate)");
      case TransportError::kTlsHandshake:
        return Unavailable(
            prefix + "TLS handshake with " + config.server + " failed: " + resp.error_message +
            "; check certificate-authority(-data) and the client certificate in " + Source());
      case TransportError::kClientCertificate:
        return InvalidArgument(prefix + "the client certificate or key from " + Source() +
                               " cannot be used: " + resp.error_message +
                               "; check client-certificate(-data) and client-key(-data) (the "
                               "key must match the certificate)");
      case TransportError::kTimeout:
        return DeadlineExceeded(prefix + "no complete answer from " + config.server +
                                " in time: " + resp.error_message);
      case TransportError::kConnectionLost:
      case TransportError::kOther:
      case TransportError::kCancelled:
      case TransportError::kStoppedByCaller:
        return Unavailable(prefix + "the connection to " + config.server +
                           " failed: " + resp.error_message);
    }
    auto [message, reason] = ServerMessage(resp.body);
    std::string text = prefix + "HTTP " + std::to_string(resp.status);
    if (std::string_view phrase = HttpReasonPhrase(resp.status); !phrase.empty()) {
      text += " ";
      text += phrase;
    }
    if (!message.empty()) text += ": " + message;
    if (resp.status == 401) {
      text += "; check the token or client certificate in " + Source();
    }
    return Status(CodeForHttp(resp.status, reason), std::move(text)).WithHttpStatus(resp.status);
  }

  // How long to wait before another attempt, or nullopt: do not retry.
  std::optional<std::chrono::milliseconds> RetryDelay(const Call& call, const HttpResponse& resp,
                                                      int attempt) {
    if (attempt >= retry.max_attempts) return std::nullopt;
    auto backoff_delay = [&] { return backoff.Delay(attempt); };
    if (resp.error != TransportError::kNone) {
      if (resp.error == TransportError::kTlsVerify ||
          resp.error == TransportError::kClientCertificate ||
          resp.error == TransportError::kCancelled ||
          resp.error == TransportError::kStoppedByCaller) {
        return std::nullopt;  // repeating cannot help
      }
      // Nothing reached the server: any verb may go again.
      if (!resp.request_sent || call.idempotent) return backoff_delay();
      return std::nullopt;
    }
    if (resp.status == 429 || resp.status == 503) {
      // The server did not act on the request; it says when to come back.
      if (resp.retry_after_seconds) {
        auto wait = std::chrono::seconds(*resp.retry_after_seconds);
        if (wait > kMaxRetryAfter) return std::nullopt;
        return std::chrono::duration_cast<std::chrono::milliseconds>(wait);
      }
      if (resp.status == 429 && call.throttle_needs_retry_after) return std::nullopt;
      return backoff_delay();
    }
    if (resp.status >= 500 && call.idempotent) return backoff_delay();
    return std::nullopt;
  }

  static std::string RetryReason(const HttpResponse& resp) {
    if (resp.error != TransportError::kNone) return resp.error_message;
    return "HTTP " + std::to_string(resp.status);
  }

  // Sends a request with the rate limit, the token and the retry policy.
  // Returns the body of a 2xx answer.
  Result<std::string> Do(const Call& call, HttpRequest req) {
    req.url = config.server + req.url;
    if (req.timeout.count() == 0) req.timeout = config.timeout;
    bool token_refreshed = false;
    for (int attempt = 1;; ++attempt) {
      limiter.Wait();
      req.bearer_token = token.Get();
      HttpResponse resp = transport->Perform(req);
      if (resp.ok()) return std::move(resp.body);
      // A rejected token may have been rotated since the file was last
      // looked at: look again, once, before giving up.
      if (resp.error == TransportError::kNone && resp.status == 401 && !token_refreshed) {
        token_refreshed = true;
        if (token.Refresh()) {
          --attempt;
          continue;
        }
      }
      auto delay = RetryDelay(call, resp, attempt);
      if (!delay) {
        Status err = ErrorFor(call, resp);
        if (attempt > 1) {
          err = Status(err.code(),
                       err.message() + " (after " + std::to_string(attempt) + " attempts)")
                    .WithHttpStatus(err.http_status());
        }
        return err;
      }
      LogDebug("retrying API request", {{"verb", call.verb},
                                        {"what", call.what},
                                        {"attempt", attempt},
                                        {"reason", RetryReason(resp)},
                                        {"delay_ms", static_cast<int64_t>(delay->count())}});
      std::this_thread::sleep_for(*delay);
    }
  }

  Result<Json> DoJson(const Call& call, HttpRequest req) {
    GPUOP_ASSIGN_OR_RETURN(std::string body, Do(call, std::move(req)));
    return ParseJson(call, body);
  }

  // Where an object goes: its namespace (for namespaced resources) and name.
  Result<std::pair<std::string, std::string>> Target(const std::string& verb, const Resource& r,
                                                     const Json& object) const {
    std::string name = MetaString(object, "name");
    std::string ns = r.namespaced ? MetaString(object, "namespace") : "";
    if (name.empty()) {
      return InvalidArgument(verb + " " + r.QualifiedName() + ": the object has no metadata.name");
    }
    if (r.namespaced && ns.empty()) {
      return InvalidArgument(verb + " " + Describe(r, "", name) +
                             ": the object has no metadata.namespace, and " + r.QualifiedName() +
                             " are namespaced");
    }
    return std::make_pair(ns, name);
  }

  Status RequireNamespace(const std::string& verb, const Resource& r, std::string_view ns,
                          std::string_view name) const {
    if (name.empty()) {
      return InvalidArgument(verb + " " + r.QualifiedName() + ": no object name given");
    }
    if (r.namespaced && ns.empty()) {
      return InvalidArgument(verb + " " + Describe(r, ns, name) + ": " + r.QualifiedName() +
                             " are namespaced; give a namespace");
    }
    return Status::Ok();
  }

  Status Watch(const Resource& r, std::string_view ns, const WatchOptions& options,
               const std::function<bool(WatchEvent&&)>& on_event, std::stop_token stop);
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::New(RestConfig config, RetryPolicy retry) {
  const std::string source = config.source.empty() ? "the client configuration" : config.source;
  size_t scheme_end = config.server.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : config.server.substr(0, scheme_end);
  if (scheme != "https" && scheme != "http") {
    return InvalidArgument("the API server URL " + JsonQuote(config.server) + " from " + source +
                           " is not an http:// or https:// URL");
  }
  std::string authority = config.server.substr(scheme_end + 3);
  authority = authority.substr(0, authority.find('/'));
  std::string host = !authority.empty() && authority[0] == '['
                         ? authority.substr(0, authority.find(']') + 1)
                         : authority.substr(0, authority.find(':'));
  if (host.empty() || host == "[]") {
    return InvalidArgument("the API server URL " + JsonQuote(config.server) + " from " + source +
                           " has no host");
  }
  while (config.server.back() == '/') config.server.pop_back();
  if (!config.ca_pem.empty()) {
    GPUOP_RETURN_IF_ERROR(
        CheckPem(config.ca_pem, "CERTIFICATE", "certificate-authority", config.source));
  }
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return InvalidArgument("the client certificate from " + source + " comes without its " +
                           (config.client_cert_pem.empty() ? "certificate" : "key") +
                           "; give both client-certificate(-data) and client-key(-data)");
  }
  if (!config.client_cert_pem.empty()) {
    GPUOP_RETURN_IF_ERROR(
        CheckPem(config.client_cert_pem, "CERTIFICATE", "client-certificate", config.source));
    GPUOP_RETURN_IF_ERROR(
        CheckPem(config.client_key_pem, "PRIVATE KEY", "client-key", config.source));
  }
  if (retry.max_attempts < 1) retry.max_attempts = 1;
  if (config.user_agent.empty()) config.user_agent = "gpuop";

  TransportOptions t;
  t.ca_pem = config.ca_pem;
  t.insecure_skip_tls_verify = config.insecure_skip_tls_verify;
  t.client_cert_pem = config.client_cert_pem;
  t.client_key_pem = config.client_key_pem;
  t.user_agent = config.user_agent;
  GPUOP_ASSIGN_OR_RETURN(auto transport, HttpTransport::New(std::move(t)));
  auto impl = std::make_unique<Impl>(std::move(config), retry, std::move(transport));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const RestConfig& Client::config() const { return impl_->config; }

Result<Json> Client::Get(const Resource& r, std::string_view ns, std::string_view name) {
  GPUOP_RETURN_IF_ERROR(impl_->RequireNamespace("get", r, ns, name));
  Call call{"get", Describe(r, ns, name)};
  HttpRequest req;
  req.url = r.Path(ns, name);
  GPUOP_ASSIGN_OR_RETURN(Json obj, impl_->DoJson(call, std::move(req)));
  SetTypeMeta(r, obj);
  return obj;
}

Result<ObjectList> Client::List(const Resource& r, std::string_view ns,
                                const ListOptions& options) {
  Call call{"list", Describe(r, ns, "")};
  Query q;
  if (!options.label_selector.empty()) q.Add("labelSelector", options.label_selector);
  if (!options.field_selector.empty()) q.Add("fieldSelector", options.field_selector);
  if (options.limit > 0) q.Add("limit", std::to_string(options.limit));
  if (!options.continue_token.empty()) q.Add("continue", options.continue_token);
  if (!options.resource_version.empty()) q.Add("resourceVersion", options.resource_version);
  HttpRequest req;
  req.url = r.Path(ns) + q.text;
  GPUOP_ASSIGN_OR_RETURN(Json body, impl_->DoJson(call, std::move(req)));
  ObjectList out;
  if (!body.is_object()) {
    return Internal("list " + call.what + ": the server's answer is not a list object");
  }
  if (auto items = body.find("items"); items != body.end() && items->is_array()) {
    out.items.reserve(items->size());
    for (auto& item : *items) {
      SetTypeMeta(r, item);
      out.items.push_back(std::move(item));
    }
  }
  if (auto meta = body.find("metadata"); meta != body.end() && meta->is_object()) {
    out.resource_version = meta->value("resourceVersion", "");
    out.continue_token = meta->value("continue", "");
  }
  return out;
}

Result<ObjectList> Client::ListAll(const Resource& r, std::string_view ns, ListOptions options) {
  const ListOptions first = options;
  bool restarted = false;
  ObjectList all;
  for (;;) {
    auto page = List(r, ns, options);
    if (!page.ok()) {
      if (IsGone(page.status()) && !options.continue_token.empty() && !restarted) {
        // The snapshot behind the continue token was compacted away.
        LogDebug("list snapshot expired; listing again from the start",
                 {{"what", Describe(r, ns, "")}});
        restarted = true;
        all = ObjectList{};
        options = first;
        options.continue_token.clear();
        continue;
      }
      return page.status();
    }
    for (auto& item : page->items) all.items.push_back(std::move(item));
    all.resource_version = page->resource_version;
    if (page->continue_token.empty()) break;
    options.continue_token = page->continue_token;
    // The continue token pins the snapshot; the server refuses both at once.
    options.resource_version.clear();
  }
  return all;
}

Result<Json> Client::Create(const Resource& r, std::string_view ns, const Json& object) {
  std::string target_ns = r.namespaced ? std::string(ns) : "";
  if (r.namespaced && target_ns.empty()) target_ns = MetaString(object, "namespace");
  std::string name = MetaString(object, "name");
  if (name.empty()) name = MetaString(object, "generateName") + "*";
  if (r.namespaced && target_ns.empty()) {
    return InvalidArgument("create " + Describe(r, "", name) + ": " + r.QualifiedName() +
                           " are namespaced; give a namespace");
  }
  Call call{"create", Describe(r, target_ns, name), /*idempotent=*/false};
  Json body = object;
  SetTypeMeta(r, body);
  HttpRequest req;
  req.method = "POST";
  req.url = r.Path(target_ns);
  req.body = body.dump();
  req.content_type = "application/json";
  GPUOP_ASSIGN_OR_RETURN(Json obj, impl_->DoJson(call, std::move(req)));
  SetTypeMeta(r, obj);
  return obj;
}

namespace {

Result<Json> PutObject(Client::Impl& impl, const Resource& r, const Json& object,
                       std::string_view subresource) {
  const std::string verb = subresource.empty() ? "update" : "update-status";
  GPUOP_ASSIGN_OR_RETURN(auto target, impl.Target(verb, r, object));
  Call call{verb, Describe(r, target.first, target.second)};
  Json body = object;
  SetTypeMeta(r, body);
  HttpRequest req;
  req.method = "PUT";
  req.url = r.Path(target.first, target.second, subresource);
  req.body = body.dump();
  req.content_type = "application/json";
  GPUOP_ASSIGN_OR_RETURN(Json obj, impl.DoJson(call, std::move(req)));
  SetTypeMeta(r, obj);
  return obj;
}

}  // namespace

Result<Json> Client::Update(const Resource& r, const Json& object) {
  return PutObject(*impl_, r, object, "");
}

Result<Json> Client::UpdateStatus(const Resource& r, const Json& object) {
  return PutObject(*impl_, r, object, "status");
}

Status Client::Delete(const Resource& r, std::string_view ns, std::string_view name,
                      const DeleteOptions& options) {
  GPUOP_RETURN_IF_ERROR(impl_->RequireNamespace("delete", r, ns, name));
  Call call{"delete", Describe(r, ns, name)};
  HttpRequest req;
  req.method = "DELETE";
  req.url = r.Path(ns, name);
  if (HasDeleteOptions(options)) {
    req.body = DeleteOptionsBody(options, /*with_type_meta=*/true).dump();
    req.content_type = "application/json";
  }
  return impl_->Do(call, std::move(req)).status();
}

Result<Json> Client::Patch(const Resource& r, std::string_view ns, std::string_view name,
                           PatchType type, const Json& patch, const PatchOptions& options) {
  GPUOP_RETURN_IF_ERROR(impl_->RequireNamespace("patch", r, ns, name));
  std::string what = Describe(r, ns, name);
  if (!options.subresource.empty()) what += " (" + options.subresource + ")";
  // A JSON patch ("add to this list") may apply twice if repeated; the others
  // describe the end state and are safe to repeat.
  Call call{type == PatchType::kApply ? "apply" : "patch", what, type != PatchType::kJson};
  HttpRequest req;
  req.method = "PATCH";
  req.url = r.Path(ns, name, options.subresource);
  Json body = patch;
  switch (type) {
    case PatchType::kMerge:
      req.content_type = "application/merge-patch+json";
      break;
    case PatchType::kJson:
      req.content_type = "application/json-patch+json";
      break;
    case PatchType::kStrategic:
      req.content_type = "application/strategic-merge-patch+json";
      break;
    case PatchType::kApply:
      // JSON is YAML, so the object goes as it is.
      req.content_type = "application/apply-patch+yaml";
      if (options.field_manager.empty()) {
        return InvalidArgument("apply " + what +
                               ": server-side apply needs a field manager (PatchOptions)");
      }
      SetTypeMeta(r, body);
      break;
  }
  Query q;
  if (!options.field_manager.empty()) q.Add("fieldManager", options.field_manager);
  if (type == PatchType::kApply && options.force) q.Add("force", "true");
  req.url += q.text;
  req.body = body.dump();
  GPUOP_ASSIGN_OR_RETURN(Json obj, impl_->DoJson(call, std::move(req)));
  SetTypeMeta(r, obj);
  return obj;
}

Result<Json> Client::Apply(const Resource& r, const Json& object, std::string_view field_manager,
                           bool force) {
  GPUOP_ASSIGN_OR_RETURN(auto target, impl_->Target("apply", r, object));
  PatchOptions options;
  options.field_manager = std::string(field_manager);
  options.force = force;
  return Patch(r, target.first, target.second, PatchType::kApply, object, options);
}

Status Client::Evict(std::string_view ns, std::string_view pod, const DeleteOptions& options) {
  const Resource& r = resources::kPods;
  GPUOP_RETURN_IF_ERROR(impl_->RequireNamespace("evict", r, ns, pod));
  Call call{"evict", Describe(r, ns, pod), /*idempotent=*/false,
            /*throttle_needs_retry_after=*/true};
  Json body{{"apiVersion", "policy/v1"},
            {"kind", "Eviction"},
            {"metadata", {{"name", pod}, {"namespace", ns}}}};
  if (HasDeleteOptions(options)) {
    body["deleteOptions"] = DeleteOptionsBody(options, /*with_type_meta=*/false);
  }
  HttpRequest req;
  req.method = "POST";
  req.url = r.Path(ns, pod, "eviction");
  req.body = body.dump();
  req.content_type = "application/json";
  return impl_->Do(call, std::move(req)).status();
}

Status Client::Impl::Watch(const Resource& r, std::string_view ns, const WatchOptions& options,
                           const std::function<bool(WatchEvent&&)>& on_event,
                           std::stop_token stop) {
  Call call{"watch", Describe(r, ns, "")};
  Query q;
  q.Add("watch", "true");
  if (options.allow_bookmarks) q.Add("allowWatchBookmarks", "true");
  if (!options.resource_version.empty()) q.Add("resourceVersion", options.resource_version);
  if (!options.label_selector.empty()) q.Add("labelSelector", options.label_selector);
  if (!options.field_selector.empty()) q.Add("fieldSelector", options.field_selector);
  std::chrono::seconds server_timeout{0};
  if (options.timeout.count() > 0) {
    // Spread the re-watches of many clients: [timeout, 2*timeout), like client-go.
    server_timeout =
        options.timeout +
        std::chrono::seconds(static_cast<int64_t>(backoff.Uniform() * options.timeout.count()));
    q.Add("timeoutSeconds", std::to_string(server_timeout.count()));
  }
  HttpRequest req;
  req.url = config.server + r.Path(ns) + q.text;
  if (server_timeout.count() > 0) req.timeout = server_timeout + kWatchGrace;

  for (int attempt = 1;; ++attempt) {
    if (!limiter.Wait(stop)) return Status::Ok();
    req.bearer_token = token.Get();

    std::string pending;  // the start of an event whose line has not ended yet
    bool caller_done = false;
    Status stream_error;
    auto deliver = [&](std::string_view line) {
      if (Trim(line).empty()) return true;
      WatchEvent ev;
      try {
        Json j = Json::parse(line);
        std::string type = j.value("type", "");
        if (type == "ADDED") {
          ev.type = WatchEvent::Type::kAdded;
        } else if (type == "MODIFIED") {
          ev.type = WatchEvent::Type::kModified;
        } else if (type == "DELETED") {
          ev.type = WatchEvent::Type::kDeleted;
        } else if (type == "BOOKMARK") {
          ev.type = WatchEvent::Type::kBookmark;
        } else if (type == "ERROR") {
          ev.type = WatchEvent::Type::kError;
        } else {
          LogDebug("unknown watch event type skipped", {{"what", call.what}, {"type", type}});
          return true;
        }
        if (auto obj = j.find("object"); obj != j.end()) ev.object = std::move(*obj);
      } catch (const std::exception& e) {
        stream_error = Unavailable("watch " + call.what + ": the server sent an event that is " +
                                   "not JSON (" + e.what() + "); re-watch");
        return false;
      }
      if (ev.type != WatchEvent::Type::kError && ev.type != WatchEvent::Type::kBookmark) {
        SetTypeMeta(r, ev.object);
      }
      if (!on_event(std::move(ev))) {
        caller_done = true;
        return false;
      }
      return true;
    };
    auto on_data = [&](std::string_view chunk) {
      pending.append(chunk);
      size_t start = 0;
      for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        if (!deliver(std::string_view(pending).substr(start, nl - start))) return false;
      }
      pending.erase(0, start);
      return true;
    };

    HttpResponse resp = transport->Stream(req, on_data, stop);
    if (resp.error == TransportError::kCancelled || caller_done) return Status::Ok();
    if (!stream_error.ok()) return stream_error;
    if (resp.status >= 200 && resp.status < 300) {
      if (resp.error == TransportError::kNone) {
        // The server ended the stream; a last event may lack its newline.
        if (!deliver(pending) && !stream_error.ok()) return stream_error;
        return Status::Ok();
      }
      return Unavailable("watch " + call.what + ": the stream from " + config.server + " broke: " +
                         resp.error_message + "; re-watch from the last resourceVersion seen");
    }
    // Not established: retried like a get.
    auto delay = RetryDelay(call, resp, attempt);
    if (!delay) return ErrorFor(call, resp);
    LogDebug("retrying API request", {{"verb", call.verb},
                                      {"what", call.what},
                                      {"attempt", attempt},
                                      {"reason", RetryReason(resp)},
                                      {"delay_ms", static_cast<int64_t>(delay->count())}});
    if (!RealClock().SleepFor(*delay, stop)) return Status::Ok();
  }
}

Status Client::Watch(const Resource& r, std::string_view ns, const WatchOptions& options,
                     const std::function<bool(WatchEvent&&)>& on_event, std::stop_token stop) {
  return impl_->Watch(r, ns, options, on_event, std::move(stop));
}

Result<std::string> Client::Raw(std::string_view method, std::string_view path,
                                std::string_view body, std::string_view content_type) {
  std::string m(method);
  for (auto& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  bool idempotent = m == "GET" || m == "HEAD" || m == "PUT" || m == "DELETE" || m == "OPTIONS";
  Call call{ToLower(m), std::string(path), idempotent};
  if (path.empty() || path[0] != '/') {
    return InvalidArgument(call.verb + " " + call.what + ": the path must start with '/'");
  }
  HttpRequest req;
  req.method = m;
  req.url = std::string(path);
  req.body = std::string(body);
  req.content_type =
      content_type.empty() && !body.empty() ? "application/json" : std::string(content_type);
  return impl_->Do(call, std::move(req));
}

bool IsConflict(const Status& s) {
  return s.code() == StatusCode::kAborted && (s.http_status() == 409 || s.http_status() == 0);
}
bool IsGone(const Status& s) { return s.http_status() == 410; }
bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }
bool IsAlreadyExists(const Status& s) { return s.code() == StatusCode::kAlreadyExists; }

Result<Json> UpdateWithRetry(Client& client, const Resource& r, std::string_view ns,
                             std::string_view name, const std::function<bool(Json&)>& mutate,
                             bool status_subresource, int attempts) {
  Status last;
  for (int i = 0; i < std::max(1, attempts); ++i) {
    GPUOP_ASSIGN_OR_RETURN(Json obj, client.Get(r, ns, name));
    const std::string read_version = MetaString(obj, "resourceVersion");
    if (!mutate(obj)) return obj;
    // The write is conditional on the version read, whatever `mutate` did:
    // that is what keeps a newer object from being overwritten.
    if (!obj.is_object()) {
      return InvalidArgument("update " + Describe(r, ns, name) + ": the mutated object is not " +
                             "a JSON object");
    }
    obj["metadata"]["resourceVersion"] = read_version;
    auto res = status_subresource ? client.UpdateStatus(r, obj) : client.Update(r, obj);
    if (res.ok() || !IsConflict(res.status())) return res;
    last = res.status();
  }
  return Status(last.code(), last.message() + " (gave up after " + std::to_string(attempts) +
                                 " conflicting updates)")
      .WithHttpStatus(last.http_status());
}

}  // namespace gpuop::kube

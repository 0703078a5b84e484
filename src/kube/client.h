// Client: the Kubernetes REST API over HTTP(S) (http_transport), with JSON bodies.
//
// Every verb gpuop uses: get, list (selectors, pagination), create, update,
// update-status, delete (propagation, preconditions), patch (merge, JSON,
// strategic merge, server-side apply), evict, and watch as a stream of events.
//
// Resilience, like client-go:
//   - a token-bucket rate limit (RestConfig qps/burst) in front of every request;
//   - retries with exponential backoff and full jitter on 429 and 503
//     (honouring Retry-After up to 60 s; the server did not act on the
//     request), and on other 5xx, timeouts and connection errors only for
//     verbs that are safe to repeat (get, list, watch, update, delete, apply,
//     merge and strategic patches). A create, an eviction or a JSON patch that
//     may have reached the server is never repeated; one that never left (no
//     connection, TLS handshake failed) is. An eviction's 429 without
//     Retry-After is a PodDisruptionBudget's answer and is not retried;
//   - a 401 with a token file re-reads the file once (a rotation the file's
//     stamp did not show yet) before giving up;
//   - errors carry the HTTP status (Status::http_status()) and the server's
//     Status message: "update nodes/worker-1: HTTP 409 Conflict: the object
//     has been modified; please apply your changes to the latest version".
//
// Status codes by HTTP status: 400/422 InvalidArgument, 401/403
// PermissionDenied, 404 NotFound, 409 AlreadyExists (reason AlreadyExists) or
// Aborted (a conflict), 410 FailedPrecondition (expired resourceVersion: re-list),
// 429/5xx/connection Unavailable (TLS failures too, with a hint at
// certificate-authority), timeouts DeadlineExceeded, an unusable client
// certificate or key InvalidArgument. Every HTTP error carries
// Status::http_status(); a 401 message says where the credentials came from.
//
// Connections are pooled and reused across requests and threads; HTTP/2 is
// used where the server offers it (ALPN), HTTP/1.1 otherwise. The bearer
// token is re-read from RestConfig::token_file whenever the file changes.
//
// Thread-safety: every method may be called from any thread at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kube/config.h"
#include "kube/resource.h"

namespace gpuop::kube {

using Json = nlohmann::json;

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;           // page size; 0: the server's default (all)
  std::string continue_token;  // from the previous page
  std::string resource_version;
};

struct ObjectList {
  std::vector<Json> items;
  std::string resource_version;  // of the list: start a watch from here
  std::string continue_token;    // non-empty: more pages
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // start after this version
  bool allow_bookmarks = true;
  // The server ends the stream after a time drawn from [timeout, 2*timeout)
  // (client-go's 5-10 minutes for the default); the caller re-watches from
  // the last version it saw. Zero: no timeoutSeconds (the server's maximum).
  // The client gives up on a stream silent 30 s past that time.
  std::chrono::seconds timeout{300};
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  // The object; for kError, the Status (code 410: the version is too old).
  Json object;
};
std::string_view WatchEventTypeName(WatchEvent::Type type);

enum class PatchType { kMerge, kJson, kStrategic, kApply };

struct PatchOptions {
  std::string field_manager;  // required for kApply
  bool force = false;         // apply: take ownership of conflicting fields
  std::string subresource;    // "" or "status"
};

struct DeleteOptions {
  // "" (server default), "Orphan", "Background" or "Foreground".
  std::string propagation_policy;
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
  std::optional<int64_t> grace_period_seconds;
};

struct RetryPolicy {
  int max_attempts = 5;  // 1: never retry
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{10000};
};

class Client {
 public:
  // Validates the configuration (server URL, PEM material) and sets up the
  // connection pool. Makes no request.
  static Result<std::unique_ptr<Client>> New(RestConfig config, RetryPolicy retry = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const RestConfig& config() const;

  // `ns` is ignored for cluster-scoped resources and required for namespaced
  // ones (except List and Watch, where "" means all namespaces).
  Result<Json> Get(const Resource& r, std::string_view ns, std::string_view name);
  // One page (options.limit) or everything.
  Result<ObjectList> List(const Resource& r, std::string_view ns, const ListOptions& options = {});
  // Every page, following continue tokens. A 410 on a continue token (the
  // snapshot expired) restarts the list from the beginning, once.
  Result<ObjectList> ListAll(const Resource& r, std::string_view ns, ListOptions options = {});
  Result<Json> Create(const Resource& r, std::string_view ns, const Json& object);
  // PUT of the whole object; its metadata.resourceVersion makes it
  // conditional (409 Aborted when someone else changed it).
  Result<Json> Update(const Resource& r, const Json& object);
  Result<Json> UpdateStatus(const Resource& r, const Json& object);
  Status Delete(const Resource& r, std::string_view ns, std::string_view name,
                const DeleteOptions& options = {});
  Result<Json> Patch(const Resource& r, std::string_view ns, std::string_view name, PatchType type,
                     const Json& patch, const PatchOptions& options = {});
  // Server-side apply of a whole (partial) object as `field_manager`.
  Result<Json> Apply(const Resource& r, const Json& object, std::string_view field_manager,
                     bool force = true);
  // policy/v1 Eviction of a pod (429 when a PodDisruptionBudget forbids it).
  Status Evict(std::string_view ns, std::string_view pod, const DeleteOptions& options = {});

  // Streams events to `on_event` until the server ends the stream (OK), the
  // stream breaks (Unavailable: e.g. the connection closed mid-stream, as the
  // emulator's drop-watch fault does), `on_event` returns false (OK), or
  // `stop` is requested (OK, noticed within ~100 ms even on a quiet stream).
  // Establishing the stream is retried like a get; a broken stream is not:
  // the caller re-watches from the last version it saw. An ERROR event is
  // delivered as kError; the caller decides (410: re-list). Events split
  // across network reads are reassembled; objects get apiVersion and kind.
  Status Watch(const Resource& r, std::string_view ns, const WatchOptions& options,
               const std::function<bool(WatchEvent&&)>& on_event, std::stop_token stop = {});

  // Raw request, for what the verbs above do not cover (discovery, /healthz).
  // `path` starts with '/'. Returns the body; non-2xx answers are errors.
  Result<std::string> Raw(std::string_view method, std::string_view path,
                          std::string_view body = "", std::string_view content_type = "");

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True for an optimistic-concurrency conflict (HTTP 409, reason Conflict,
// including failed delete preconditions and server-side apply conflicts).
bool IsConflict(const Status& s);
// True for HTTP 410 Gone / Expired: the resourceVersion is too old; re-list.
bool IsGone(const Status& s);
bool IsNotFound(const Status& s);
bool IsAlreadyExists(const Status& s);

// Read-modify-write with optimistic concurrency: reads the object, calls
// `mutate` (return false: nothing to change), updates, and on a conflict
// starts again from a fresh read, up to `attempts` times. Never overwrites a
// newer object: the write is conditional on the version read, even if
// `mutate` drops metadata.resourceVersion. Returns the object as stored.
Result<Json> UpdateWithRetry(Client& client, const Resource& r, std::string_view ns,
                             std::string_view name, const std::function<bool(Json&)>& mutate,
                             bool status_subresource = false, int attempts = 10);

}  // namespace gpuop::kube

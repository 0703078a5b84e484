// ApiServer: the Kubernetes API emulator's HTTP(S) front end (`gpuop sim
// apiserver`, and in-process for tests). NOT FOR PRODUCTION: it stands in for
// kube-apiserver in tests and in `gpuop sim`, with a faithful subset of its
// REST semantics, checked with the real kubectl.
//
// It serves, on one port:
//   - resources: /api/v1/... and /apis/<group>/<version>/[namespaces/<ns>/]
//     <resource>[/<name>[/status|/eviction|/binding]] with the verbs get, list, watch
//     (?watch=true: a chunked stream of {"type","object"} JSON lines), create,
//     update, patch (merge, JSON, strategic merge, apply), delete and
//     deletecollection; Table output for `kubectl get`; custom resources of
//     every CustomResourceDefinition created (the CRD gets Established at once);
//     lists over 128 KiB gzip-compressed when the client accepts gzip (never
//     brotli), like kube-apiserver;
//   - discovery (/version, /api, /apis, ..., and aggregated discovery) and
//     /openapi/v3 (openapi.h); /healthz, /livez, /readyz;
//   - control endpoints for tests, outside the Kubernetes API:
//       GET|PUT|DELETE /gpuop-sim/faults   the fault rules (faults.h; PUT body: a spec)
//       GET|DELETE     /gpuop-sim/audit    request counters (audit.h) and store counters
//       POST           /gpuop-sim/compact  forget watch history: older versions get 410
//       POST           /gpuop-sim/bookmarks  send a bookmark to every watcher that wants one
//       POST           /gpuop-sim/nodes/<node>/<action>  a node action (SetNodeAction)
//
// With a token, every request but the health checks needs
// `Authorization: Bearer <token>` (401 with a Status otherwise): the admin
// token (user gpuop-sim:admin, group system:masters) or a ServiceAccount
// token from the TokenRequest API (POST .../serviceaccounts/NAME/token),
// valid while that ServiceAccount (same uid) exists. With TLS, a CA and
// serving certificate are made at start (tls.h); ca_cert_pem() is what
// clients trust.
//
// With `rbac` on, requests are authorised as kube-apiserver's RBAC
// authorizer does (rbac.h) against the Roles and bindings in the store, with
// the bootstrap ClusterRoles created at start; 403 bodies carry the real
// message; creating a role or binding that grants more than its creator
// holds is refused unless it has `escalate` / `bind`. Impersonation
// (Impersonate-User / -Group) and SelfSubjectAccessReview work in both modes
// (without rbac every authenticated user may do everything).
//
// What it does not do: admission webhooks, a disruption controller (an eviction checks
// PodDisruptionBudgets against a status computed on the spot, disruption.h), the
// scale subresource, protobuf, HTTP/2, field selectors beyond the store's.
//
// Thread-safety: Start, Stop and Wait may be called from any thread; the
// accessors return objects that are themselves thread-safe. Requests are
// served by a pool of `threads` threads; each open watch holds one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "sim/kube/audit.h"
#include "sim/kube/faults.h"
#include "sim/kube/kubeconfig.h"
#include "sim/kube/registry.h"
#include "sim/kube/store.h"

namespace gpuop::simkube {

struct ServerOptions {
  // host:port; port 0 picks a free one ("[::1]:0" for IPv6).
  std::string listen = "127.0.0.1:0";
  bool tls = false;
  std::string token;        // empty: no authentication
  bool rbac = false;        // authorise with RBAC (else AlwaysAllow)
  std::string openapi_dir;  // empty: DefaultOpenApiDir()
  std::string faults;       // initial fault spec (faults.h)
  uint64_t fault_seed = 1;
  std::string audit_log;  // JSON lines file; empty: counters only
  size_t threads = 128;   // request threads (each open watch holds one)
  // The longest a watch stays open (the client's timeoutSeconds may be shorter).
  std::chrono::seconds max_watch_duration{1800};
  StoreOptions store;  // hooks are the server's own
};

class ApiServer {
 public:
  // Builds the store, loads the OpenAPI documents, makes TLS material and
  // starts serving. Errors: a bad listen address or busy port, a bad fault
  // spec, an unreadable OpenAPI directory or audit log.
  static Result<std::unique_ptr<ApiServer>> Start(ServerOptions options);
  ~ApiServer();  // Stop()
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Stops serving: closes the listener, ends watches and waits for the
  // request threads. Idempotent.
  void Stop();
  // Blocks until Stop() has been called (from another thread).
  void Wait();

  // "https://127.0.0.1:34567" (or http://).
  std::string url() const;
  std::string host() const;
  int port() const;
  // PEM of the CA that signed the serving certificate; "" without TLS.
  const std::string& ca_cert_pem() const;
  // What a kubeconfig for this server holds.
  KubeconfigParams kubeconfig() const;

  // Answers GET pods/<name>/log (kubectl logs): ns, pod, the pod's node,
  // container ("" : the pod's only container), previous. Without one the
  // subresource is not served. Set it before clients ask for logs.
  using LogProvider = std::function<Result<std::string>(
      const std::string& ns, const std::string& pod, const std::string& node,
      const std::string& container, bool previous)>;
  void SetLogProvider(LogProvider provider);

  // Serves POST /gpuop-sim/nodes/<node>/<action> (a control path: admin
  // only): the cluster simulator's node actions, e.g. restart-kubelet. The
  // request body (JSON, may be empty) holds the action's parameters; an error
  // Status becomes the kube Status of its code. Without one, not served.
  using NodeAction = std::function<Status(const std::string& node, const std::string& action,
                                          const nlohmann::json& params)>;
  void SetNodeAction(NodeAction action);

  Store& store();
  Registry& registry();
  FaultInjector& faults();
  AuditLog& audit();

  struct Impl;

 private:
  explicit ApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `text` gzip-compressed at level 1, kube-apiserver's level (a 13 MB list:
// ~30 ms, where zlib's default level 6 takes twice that for 15% less);
// nullopt if zlib fails.
std::optional<std::string> GzipLevel1(const std::string& text);

}  // namespace gpuop::simkube

#include "sim/kube/server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/socket.h>
#include <yaml-cpp/yaml.h>
#include <zlib.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/strings.h"
#include "base/yaml_json.h"
#include "http/server.h"
#include "sim/kube/api_error.h"
#include "sim/kube/apply.h"
#include "sim/kube/connection.h"
#include "sim/kube/crd.h"
#include "sim/kube/discovery.h"
#include "sim/kube/disruption.h"
#include "sim/kube/json_patch.h"
#include "sim/kube/openapi.h"
#include "sim/kube/protobuf.h"
#include "sim/kube/rbac.h"
#include "sim/kube/scale.h"
#include "sim/kube/schema.h"
#include "sim/kube/strategic_merge.h"
#include "sim/kube/table.h"
#include "sim/kube/tls.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kJson = "application/json";
// Watch streams: a media type httplib does not gzip (it compresses exactly
// "application/json"), so every event reaches the client as it happens.
constexpr const char* kWatchJson = "application/json;stream=watch";
constexpr const char* kCrdGroup = "apiextensions.k8s.io";
constexpr const char* kRbacGroup = "rbac.authorization.k8s.io";
// kube-apiserver gzips a response only above this size (responsewriters'
// defaultGzipThresholdBytes).
constexpr size_t kGzipThresholdBytes = 128 * 1024;

// The write a request thread is making, for the store's admit hook (which
// runs on the calling thread): who manages the fields it writes.
struct WriteContext {
  std::string field_manager;
  std::string subresource;
  bool apply = false;
  const UserInfo* user = nullptr;  // null: the server's own write (no escalation check)
  std::string ns;
};
thread_local WriteContext* tls_write = nullptr;

// Sets tls_write for the scope of one store call.
class ScopedWrite {
 public:
  explicit ScopedWrite(WriteContext* ctx) : prev_(tls_write) { tls_write = ctx; }
  ~ScopedWrite() { tls_write = prev_; }
  ScopedWrite(const ScopedWrite&) = delete;
  ScopedWrite& operator=(const ScopedWrite&) = delete;

 private:
  WriteContext* prev_;
};

// What a request path names.
struct RequestTarget {
  std::string group, version, ns, resource, name, subresource;
  std::string verb;  // Kubernetes verb
  UserInfo user;     // who asks (after impersonation)
};

UserInfo AdminUser() { return {"gpuop-sim:admin", {kSystemMasters, "system:authenticated"}}; }
UserInfo AnonymousUser() { return {"system:anonymous", {"system:unauthenticated"}}; }

std::string Lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// An opaque bearer token: 32 random bytes, hex.
std::string NewToken() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof(raw)) != 1) return "";
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// The name a list or watch selects with metadata.name=X: kube's request
// info takes it as the request's name, so resourceNames rules apply.
std::string SelectedName(const std::string& field_selector) {
  for (const auto& term : Split(field_selector, ',')) {
    std::string t(Trim(term));
    for (const char* prefix : {"metadata.name==", "metadata.name="}) {
      if (StartsWith(t, prefix)) return t.substr(std::string(prefix).size());
    }
  }
  return "";
}

std::string QueryParam(const httplib::Request& req, const char* key) {
  return req.has_param(key) ? req.get_param_value(key) : std::string();
}

bool TrueParam(const httplib::Request& req, const char* key) {
  std::string v = QueryParam(req, key);
  return v == "1" || v == "true" || v == "True";
}

// Accept-Encoding lists gzip: kube-apiserver's test (one comma-separated
// token equal to "gzip"; it offers no other encoding).
bool AcceptsGzip(const httplib::Request& req) {
  for (const auto& token : Split(req.get_header_value("Accept-Encoding"), ',')) {
    if (Trim(token) == "gzip") return true;
  }
  return false;
}


// Splits the path after /api/v1 or /apis/<g>/<v> into namespace, resource,
// name and subresource. False when the path has too many segments.
bool ParseResourcePath(const std::vector<std::string>& rest, RequestTarget& t) {
  if (rest.empty()) return false;
  if (rest[0] == "namespaces" && rest.size() >= 3 &&
      !(rest.size() == 3 && (rest[2] == "status" || rest[2] == "finalize"))) {
    t.ns = rest[1];
    t.resource = rest[2];
    if (rest.size() > 3) t.name = rest[3];
    if (rest.size() > 4) t.subresource = rest[4];
    return rest.size() <= 5;
  }
  t.resource = rest[0];
  if (rest.size() > 1) t.name = rest[1];
  if (rest.size() > 2) t.subresource = rest[2];
  return rest.size() <= 3;
}

std::string VerbFor(const std::string& method, const RequestTarget& t,
                    const httplib::Request& req) {
  if (method == "GET") {
    if (TrueParam(req, "watch")) return "watch";
    return t.name.empty() ? "list" : "get";
  }
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return t.name.empty() ? "deletecollection" : "delete";
  return "";
}

// A request body: JSON, or YAML when `allow_yaml` (apply patches).
ApiResult<Json> ParseBody(const std::string& body, bool allow_yaml) {
  if (body.empty()) return BadRequestError("the request body is empty");
  try {
    return Json::parse(body);
  } catch (const std::exception& e) {
    if (!allow_yaml) {
      return BadRequestError(std::string("the body of the request is not valid JSON: ") + e.what());
    }
  }
  try {
    return YamlToJson(YAML::Load(body));
  } catch (const std::exception& e) {
    return BadRequestError(std::string("error decoding YAML: ") + e.what());
  }
}

ApiError InjectedError(int code, int retry_after_s) {
  switch (code) {
    case 429:
      return TooManyRequestsError(
          "the server has received too many requests and has asked us "
          "to try again later (injected fault)",
          retry_after_s);
    case 500:
      return InternalServerError("injected fault");
    case 503: {
      ApiError e = ServiceUnavailableError(
          "the server is currently unable to handle the request "
          "(injected fault)");
      ApiError::Details d;
      d.retry_after_seconds = retry_after_s;
      e.details = std::move(d);
      return e;
    }
    case 504:
      return TimeoutError(
          "the server was unable to return a response in the time allotted "
          "(injected fault)",
          retry_after_s);
    default: {
      ApiError e;
      e.code = code;
      e.reason = code == 409 ? "Conflict" : code == 404 ? "NotFound" : "InternalError";
      e.message = "injected fault (HTTP " + std::to_string(code) + ")";
      return e;
    }
  }
}

ApiError NotServedError() {
  ApiError e;
  e.code = 404;
  e.reason = "NotFound";
  e.message = "the server could not find the requested resource";
  e.details = ApiError::Details{};
  return e;
}

// The body of a write that answers a Status instead of an object (a
// deletion, a binding, an eviction); callers add code or details.
Json SuccessStatus() {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", Json::object()},
          {"status", "Success"}};
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Result<PatchType> PatchTypeFor(std::string_view content_type) {
  std::string ct(Trim(content_type.substr(0, content_type.find(';'))));
  if (ct == "application/merge-patch+json") return PatchType::kMerge;
  if (ct == "application/json-patch+json") return PatchType::kJson;
  if (ct == "application/strategic-merge-patch+json") return PatchType::kStrategicMerge;
  if (ct == "application/apply-patch+yaml" || ct == "application/apply-patch+json") {
    return PatchType::kApply;
  }
  return InvalidArgument(
      "the body of the request was in an unknown format - accepted media types "
      "include: application/json-patch+json, application/merge-patch+json, "
      "application/apply-patch+yaml, application/strategic-merge-patch+json");
}

}  // namespace

std::optional<std::string> GzipLevel1(const std::string& text) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return std::nullopt;
  }
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

// ---------------------------------------------------------------------------

struct ApiServer::Impl {
  ServerOptions opts;
  Registry registry;
  std::shared_ptr<const SchemaSet> schemas;
  std::shared_ptr<const OpenApiDocs> openapi;
  std::unique_ptr<Store> store;
  FaultInjector faults;
  AuditLog audit;
  TlsMaterial tls;
  std::unique_ptr<httplib::Server> http;
  std::string host;
  int port = 0;
  std::thread listener;

  std::mutex hooks_mu;
  ApiServer::LogProvider log_provider;  // GUARDED_BY(hooks_mu)
  ApiServer::NodeAction node_action;    // GUARDED_BY(hooks_mu)

  std::atomic<bool> stopping{false};
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopped = false;  // GUARDED_BY(stop_mu)

  std::mutex eviction_mu;  // one eviction at a time: check and delete

  std::mutex crd_mu;
  // Compiled CRDs by name ("widgets.example.com").
  std::map<std::string, std::shared_ptr<const CompiledCrd>> crds;  // GUARDED_BY(crd_mu)

  explicit Impl(ServerOptions o) : opts(std::move(o)), faults(opts.fault_seed) {}

  std::string Url() const {
    std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    if (h == "0.0.0.0") h = "127.0.0.1";
    if (h == "[::]") h = "[::1]";
    return std::string(opts.tls ? "https://" : "http://") + h + ":" + std::to_string(port);
  }

  std::shared_ptr<const CompiledCrd> CompiledFor(const std::string& crd_name) {
    std::lock_guard lock(crd_mu);
    auto it = crds.find(crd_name);
    return it == crds.end() ? nullptr : it->second;
  }

  // ---- store hooks ----

  ApiResult<Json> StrategicMerge(const Json& current, const Json& patch, const ResourceInfo& r) {
    if (r.custom) {
      return UnsupportedMediaTypeError(UnsupportedMediaTypeMessage(CustomResourcePatchTypes()));
    }
    const Schema* schema = schemas ? schemas->ForKind({r.group, r.version, r.kind}) : nullptr;
    auto out = StrategicMergePatch(current, patch, schema);
    if (!out.ok()) return BadRequestError(out.status().message());
    return std::move(out).value();
  }

  ApiResult<Json> Apply(const Json& current, const Json& patch, const ResourceInfo& r,
                        const PatchOptions& o);
  // The schema of `r`'s objects; it keeps alive what it points into (a CRD
  // replaced meanwhile frees its compiled form when the last holder goes).
  std::shared_ptr<const Schema> SchemaFor(const ResourceInfo& r);
  // Moves the fields a non-apply write changed to its field manager.
  void TrackFields(const ResourceInfo& r, Json& obj, const Json* old) {
    if (tls_write == nullptr || tls_write->apply || tls_write->field_manager.empty()) return;
    if (old != nullptr && obj.is_object() && obj["metadata"].is_object() &&
        !obj["metadata"].contains("managedFields") && old->contains("metadata") &&
        (*old)["metadata"].contains("managedFields")) {
      obj["metadata"]["managedFields"] = (*old)["metadata"]["managedFields"];
    }
    std::shared_ptr<const Schema> schema = SchemaFor(r);
    TrackUpdate(old, obj, schema.get(), tls_write->field_manager, tls_write->subresource,
                FormatTimestamp(std::chrono::system_clock::now()));
  }

  ApiStatus Admit(const ResourceInfo& r, Json& obj, const Json* old) {
    GPUOP_API_RETURN_IF_ERROR(Validate(r, obj));
    GPUOP_API_RETURN_IF_ERROR(CheckEscalation(r, obj, old));
    TrackFields(r, obj, old);
    return ApiStatus::Ok();
  }

  ApiStatus Validate(const ResourceInfo& r, Json& obj) {
    if (r.custom) {
      auto served = registry.Find(r.group, r.version, r.plural);
      if (!served) return NotServedError();
      auto crd = CompiledFor(served->crd_name);
      if (!crd) return ApiStatus::Ok();
      return PrepareCustomResource(*crd, r.version, obj, FieldValidation::kIgnore, nullptr);
    }
    if (r.group == kCrdGroup && r.plural == "customresourcedefinitions") {
      DefaultCrd(obj);
      return ValidateCrdObject(obj);
    }
    if (schemas) {
      GPUOP_API_RETURN_IF_ERROR(
          DecodeBuiltinBody(*schemas, r, obj, FieldValidation::kIgnore, nullptr));
    }
    return ValidateBuiltinObject(r, obj);
  }

  // ---- CRDs: serve what a CRD defines, clean up when it goes ----

  void SyncCrd(const std::string& name) {
    ServedPtr crd_res = registry.Find(kCrdGroup, "v1", "customresourcedefinitions");
    auto got = store->Get(crd_res->info, "", name);
    if (!got.ok() ||
        !(*got)->value("metadata", Json::object()).value("deletionTimestamp", "").empty()) {
      RemoveCrd(name);
      return;
    }
    const Json& obj = **got;
    auto compiled = CompiledCrd::Compile(obj);
    if (!compiled.ok()) {
      LogWarn("CRD not served", {{"crd", name}, {"error", compiled.status()}});
      return;
    }
    auto snapshot = std::make_shared<const Json>(obj);
    Status s = registry.SetCustom(name, ServedResources(**compiled, snapshot));
    {
      std::lock_guard lock(crd_mu);
      if (s.ok()) crds[name] = *compiled;
    }
    Json updated = obj;
    if (s.ok()) {
      AcceptCrd(updated, FormatTimestamp(std::chrono::system_clock::now()));
    } else {
      Json cond{{"type", "NamesAccepted"},
                {"status", "False"},
                {"reason", "NameConflict"},
                {"message", s.message()},
                {"lastTransitionTime", FormatTimestamp(std::chrono::system_clock::now())}};
      updated["status"]["conditions"] = Json::array({cond});
    }
    // Write the status only when it changes (conditions' times aside), so
    // re-syncs do not bump the resourceVersion.
    auto strip_times = [](Json st) {
      if (st.contains("conditions") && st["conditions"].is_array()) {
        for (auto& c : st["conditions"]) c.erase("lastTransitionTime");
      }
      return st;
    };
    if (strip_times(updated.value("status", Json::object())) ==
        strip_times(obj.value("status", Json::object()))) {
      return;
    }
    UpdateOptions uo;
    uo.subresource = "status";
    WriteContext ctx{"kube-apiserver", "status", false};
    ScopedWrite scoped(&ctx);
    auto res = store->Update(crd_res->info, "", name, updated, uo);
    if (!res.ok())
      LogWarn("CRD status update failed", {{"crd", name}, {"error", res.error().ToString()}});
  }

  void RemoveCrd(const std::string& name) {
    std::vector<ServedPtr> served;
    for (const auto& r : registry.All()) {
      if (r->crd_name == name) served.push_back(r);
    }
    // The custom resources go with their CRD (the real server's
    // customresourcecleanup finalizer does this before the CRD goes).
    if (!served.empty()) {
      DeleteOptions d;
      d.propagation = PropagationPolicy::kBackground;
      auto res = store->DeleteCollection(served.front()->info, "", ListOptions{}, d);
      (void)res;
    }
    registry.RemoveCustom(name);
    std::lock_guard lock(crd_mu);
    crds.erase(name);
  }

  void AfterWrite(const RequestTarget& t, const ResourceInfo& r, const std::string& name) {
    if (r.group == kCrdGroup && r.plural == "customresourcedefinitions" && t.subresource.empty()) {
      SyncCrd(name);
    }
  }

  // ---- HTTP plumbing ----

  void WriteJson(httplib::Response& res, int code, const Json& body,
                 const std::string& content_type = kJson) {
    res.status = code;
    res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), content_type);
  }

  // A list body as kube-apiserver sends it: gzip when the client accepts it
  // and the body is over the threshold, else as is. httplib would compress
  // it itself (brotli when offered: seconds for a 13 MB list at its default
  // quality); a content provider of known length it sends untouched.
  void WriteJsonText(const httplib::Request& req, httplib::Response& res, int code,
                     std::string body) {
    res.status = code;
    auto text = std::make_shared<std::string>(std::move(body));
    if (text->size() > kGzipThresholdBytes && AcceptsGzip(req)) {
      if (std::optional<std::string> packed = GzipLevel1(*text)) {
        *text = std::move(*packed);
        res.set_header("Content-Encoding", "gzip");
        res.set_header("Vary", "Accept-Encoding");
      }
    }
    res.set_content_provider(text->size(), kJson,
                             [text](size_t offset, size_t length, httplib::DataSink& sink) {
                               return sink.write(text->data() + offset, length);
                             });
  }

  void WriteError(httplib::Response& res, const ApiError& e) {
    if (e.details && e.details->retry_after_seconds > 0) {
      res.set_header("Retry-After", std::to_string(e.details->retry_after_seconds));
    }
    WriteJson(res, e.code, e.ToStatusJson());
  }

  // ---- authentication and authorisation ----

  // What a TokenRequest token is bound to.
  struct BoundToken {
    std::string ns, name, uid;
  };
  std::mutex token_mu;
  std::map<std::string, BoundToken> sa_tokens;  // GUARDED_BY(token_mu)

  // Who the request's bearer token names; nullopt: 401. Without a server
  // token, a request with no (or an unknown) token is anonymous.
  std::optional<UserInfo> Authenticate(const httplib::Request& req) {
    std::string auth = req.get_header_value("Authorization");
    std::string bearer = StartsWith(auth, "Bearer ") ? auth.substr(7) : "";
    if (!opts.token.empty() && ConstantTimeEquals(bearer, opts.token)) return AdminUser();
    if (!bearer.empty()) {
      std::optional<BoundToken> bound;
      {
        std::lock_guard lock(token_mu);
        auto it = sa_tokens.find(bearer);
        if (it != sa_tokens.end()) bound = it->second;
      }
      // A token dies with its ServiceAccount (a re-created one has a new uid).
      ServedPtr sas = registry.Find("", "v1", "serviceaccounts");
      if (bound) {
        auto sa = store->Get(sas->info, bound->ns, bound->name);
        if (sa.ok() && (*sa)->at("metadata").value("uid", "") == bound->uid) {
          return ServiceAccountUser(bound->ns, bound->name);
        }
      }
    }
    if (opts.token.empty()) return AnonymousUser();
    return std::nullopt;
  }

  // The RBAC objects a decision in `ns` reads ("" : cluster-wide only).
  RbacSnapshot Snapshot(const std::string& ns) {
    RbacSnapshot snap;
    auto list = [&](const char* plural, const std::string& in_ns,
                    std::vector<RbacSnapshot::Object>& out) {
      ServedPtr r = registry.Find(kRbacGroup, "v1", plural);
      auto l = store->List(r->info, in_ns);
      if (l.ok()) out = std::move(l->items);
    };
    list("clusterroles", "", snap.cluster_roles);
    list("clusterrolebindings", "", snap.cluster_role_bindings);
    if (!ns.empty()) {
      list("roles", ns, snap.roles);
      list("rolebindings", ns, snap.role_bindings);
    }
    return snap;
  }

  bool Authorize(const RequestAttributes& a) {
    if (!opts.rbac) return true;  // AlwaysAllow
    for (const auto& g : a.user.groups) {
      if (g == kSystemMasters) return true;
    }
    return Snapshot(a.resource_request ? a.ns : "").Allows(a);
  }

  static ApiError ForbiddenFor(const RequestAttributes& a) {
    std::string why = ForbiddenReason(a);
    if (!a.resource_request) {
      ApiError e = ForbiddenError({}, a.path, why);
      e.message = "forbidden: " + why;
      return e;
    }
    return ForbiddenError({a.group, a.resource}, a.name, why);
  }

  // The user the request acts as: the requester, or whom its
  // Impersonate-User / Impersonate-Group headers name when it may
  // `impersonate` them (users, groups, serviceaccounts).
  ApiResult<UserInfo> Impersonate(const UserInfo& requester, const httplib::Request& req) {
    std::string as = req.get_header_value("Impersonate-User");
    size_t groups = req.get_header_value_count("Impersonate-Group");
    if (as.empty()) {
      if (groups > 0) {
        return InternalServerError("requested impersonation of groups without impersonating a user");
      }
      return requester;
    }
    RequestAttributes a{requester, "impersonate", true, "", "users", "", "", as, ""};
    const std::string sa_prefix = "system:serviceaccount:";
    std::string sa_ns;
    if (StartsWith(as, sa_prefix)) {
      std::string rest = as.substr(sa_prefix.size());
      size_t colon = rest.find(':');
      if (colon != std::string::npos) {
        sa_ns = rest.substr(0, colon);
        a.resource = "serviceaccounts";
        a.ns = sa_ns;
        a.name = rest.substr(colon + 1);
      }
    }
    if (!Authorize(a)) return ForbiddenFor(a);
    UserInfo target{as, {}};
    for (size_t i = 0; i < groups; ++i) {
      std::string g = req.get_header_value("Impersonate-Group", i);
      RequestAttributes ga{requester, "impersonate", true, "", "groups", "", "", g, ""};
      if (!Authorize(ga)) return ForbiddenFor(ga);
      target.groups.push_back(g);
    }
    if (!sa_ns.empty() && groups == 0) {
      target.groups = ServiceAccountUser(sa_ns, a.name).groups;
    }
    auto has = [&](const std::string& g) {
      return std::find(target.groups.begin(), target.groups.end(), g) != target.groups.end();
    };
    if (as == "system:anonymous") {
      if (!has("system:unauthenticated")) target.groups.push_back("system:unauthenticated");
    } else if (!has("system:authenticated")) {
      target.groups.push_back("system:authenticated");
    }
    return target;
  }

  // Escalation prevention, on the final object of a write to a role or
  // binding by a client: the writer must hold every permission it grants,
  // unless it may `escalate` the role or `bind` the role a binding names.
  // An update that leaves the rules (roleRef and subjects) as they were is
  // not checked (kube skips updates of the garbage collector's fields).
  ApiStatus CheckEscalation(const ResourceInfo& r, const Json& obj, const Json* old) {
    if (!opts.rbac || tls_write == nullptr || tls_write->user == nullptr ||
        r.group != kRbacGroup) {
      return ApiStatus::Ok();
    }
    const UserInfo& u = *tls_write->user;
    for (const auto& g : u.groups) {
      if (g == kSystemMasters) return ApiStatus::Ok();
    }
    const bool is_role = r.plural == "roles" || r.plural == "clusterroles";
    if (old != nullptr) {
      auto same = [&](const char* key) { return obj.value(key, Json()) == old->value(key, Json()); };
      if (is_role ? same("rules") : same("roleRef") && same("subjects")) return ApiStatus::Ok();
    }
    const std::string ns = r.namespaced ? tls_write->ns : "";
    const std::string name = obj.value("metadata", Json::object()).value("name", "");
    RbacSnapshot snap = Snapshot(ns);
    std::vector<PolicyRule> wanted;
    if (is_role) {
      if (snap.Allows({u, "escalate", true, kRbacGroup, r.plural, "", ns, name, ""})) {
        return ApiStatus::Ok();
      }
      for (const Json& rule : obj.value("rules", Json::array())) {
        wanted.push_back(PolicyRule::FromJson(rule));
      }
    } else {
      const Json ref = obj.value("roleRef", Json::object());
      const std::string kind = ref.value("kind", ""), role = ref.value("name", "");
      const std::string role_resource = kind == "Role" ? "roles" : "clusterroles";
      if (snap.Allows({u, "bind", true, kRbacGroup, role_resource, "", ns, role, ""})) {
        return ApiStatus::Ok();
      }
      wanted = snap.RoleRules(kind, role, ns);
    }
    std::vector<PolicyRule> missing = MissingRules(snap.RulesFor(u, ns), wanted);
    if (missing.empty()) return ApiStatus::Ok();
    return ForbiddenError(r.Resource(), name, EscalationMessage(u, missing));
  }

  // A body in JSON, YAML or (kubectl's typed clients) protobuf.
  static ApiResult<Json> ParseAnyBody(const httplib::Request& req) {
    const std::string content_type = req.get_header_value("Content-Type");
    if (StartsWith(content_type, kProtobufMediaType)) {
      auto decoded = DecodeKubeProtobuf(req.body);
      if (!decoded.ok()) return BadRequestError(decoded.status().message());
      return std::move(decoded).value();
    }
    return ParseBody(req.body, StartsWith(content_type, "application/yaml"));
  }

  // POST serviceaccounts/NAME/token (authentication.k8s.io/v1
  // TokenRequest): a random token bound to the ServiceAccount's uid.
  void ServeTokenRequest(const ResourceInfo& sas, const RequestTarget& t,
                         const httplib::Request& req, httplib::Response& res) {
    auto sa = store->Get(sas, t.ns, t.name);
    if (!sa.ok()) return WriteError(res, sa.error());
    Json body = Json::object();
    if (!req.body.empty()) {
      auto parsed = ParseAnyBody(req);
      if (!parsed.ok()) return WriteError(res, parsed.error());
      body = std::move(parsed).value();
    }
    Json spec = body.value("spec", Json::object());
    if (spec.contains("boundObjectRef") && spec["boundObjectRef"].is_null()) {
      spec.erase("boundObjectRef");
    }
    int64_t seconds = spec.value("expirationSeconds", int64_t{3600});
    std::string token = NewToken();
    if (token.empty()) return WriteError(res, InternalServerError("no randomness for a token"));
    {
      std::lock_guard lock(token_mu);
      sa_tokens[token] = {t.ns, t.name, (*sa)->at("metadata").value("uid", "")};
    }
    auto now = std::chrono::system_clock::now();
    spec["expirationSeconds"] = seconds;
    if (!spec.contains("audiences")) spec["audiences"] = Json::array({"https://kubernetes.default.svc"});
    Json out{{"kind", "TokenRequest"},
             {"apiVersion", "authentication.k8s.io/v1"},
             {"metadata",
              {{"name", t.name},
               {"namespace", t.ns},
               {"creationTimestamp", FormatTimestamp(now)}}},
             {"spec", std::move(spec)},
             {"status",
              {{"token", token},
               {"expirationTimestamp", FormatTimestamp(now + std::chrono::seconds(seconds))}}}};
    WriteJson(res, 201, out);
  }

  // POST selfsubjectaccessreviews: may the requester (after impersonation)
  // do what spec.resourceAttributes or spec.nonResourceAttributes name?
  void ServeSelfSubjectAccessReview(const UserInfo& user, const httplib::Request& req,
                                    httplib::Response& res) {
    auto body = ParseAnyBody(req);
    if (!body.ok()) return WriteError(res, body.error());
    const Json spec = body->value("spec", Json::object());
    RequestAttributes a;
    a.user = user;
    if (spec.contains("nonResourceAttributes")) {
      const Json n = spec["nonResourceAttributes"];
      a.resource_request = false;
      a.verb = n.value("verb", "");
      a.path = n.value("path", "");
    } else if (spec.contains("resourceAttributes")) {
      const Json r = spec["resourceAttributes"];
      a.verb = r.value("verb", "");
      a.group = r.value("group", "");
      a.resource = r.value("resource", "");
      a.subresource = r.value("subresource", "");
      a.ns = r.value("namespace", "");
      a.name = r.value("name", "");
    } else {
      return WriteError(res, InvalidError("authorization.k8s.io", "SelfSubjectAccessReview", "",
                                          {FieldError::Required(
                                              "spec.resourceAttributes",
                                              "exactly one of nonResourceAttributes or "
                                              "resourceAttributes must be specified")}));
    }
    Json out = *body;
    out["apiVersion"] = "authorization.k8s.io/v1";
    out["kind"] = "SelfSubjectAccessReview";
    if (!out.contains("metadata")) out["metadata"] = Json::object();
    out["metadata"]["creationTimestamp"] = nullptr;
    out["status"] = {{"allowed", Authorize(a)}};
    WriteJson(res, 201, out);
  }

  void SleepInterruptible(milliseconds d) {
    auto until = std::chrono::steady_clock::now() + d;
    while (!stopping && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::min<milliseconds>(
          milliseconds(50),
          std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now()) +
              milliseconds(1)));
    }
  }

  // pods/binding (what kube-scheduler posts): sets spec.nodeName of a pod
  // not yet bound (409 once it is) and its PodScheduled condition.
  ApiStatus Bind(const ResourceInfo& pods, const RequestTarget& t, const Json& binding,
                 bool dry_run) {
    const GroupResource gr = pods.Resource();
    const Json target = binding.value("target", Json::object());
    const std::string node = target.is_object() ? target.value("name", "") : "";
    std::string name = binding.value("metadata", Json::object()).value("name", t.name);
    if (name != t.name) return BadRequestError("name in URL does not match name in Binding object");
    if (node.empty()) {
      return InvalidError("", "Binding", t.name,
                          {FieldError::Required("target.name", "a node name is required")});
    }
    for (int attempt = 0; attempt < 10; ++attempt) {
      auto cur = store->Get(pods, t.ns, t.name);
      if (!cur.ok()) return cur.error();
      Json pod = **cur;
      std::string bound = pod.value("spec", Json::object()).value("nodeName", "");
      if (!bound.empty()) {
        return ConflictError(gr, t.name,
                             "pod " + t.name + " is already assigned to node \"" + bound + "\"");
      }
      if (pod["metadata"].contains("deletionTimestamp")) {
        return ConflictError(gr, t.name,
                             "pod " + t.name + " is being deleted, cannot be assigned to a host");
      }
      if (dry_run) return ApiStatus::Ok();
      // spec.nodeName and PodScheduled=True in one write, as the real
      // binding registry makes them.
      pod["spec"]["nodeName"] = node;
      Json& status = pod["status"];
      if (!status.is_object()) status = Json::object();
      Json kept = Json::array();
      for (const auto& c : status.value("conditions", Json::array())) {
        if (!(c.is_object() && c.value("type", "") == "PodScheduled")) kept.push_back(c);
      }
      kept.push_back({{"type", "PodScheduled"},
                      {"status", "True"},
                      {"lastProbeTime", nullptr},
                      {"lastTransitionTime", FormatTimestamp(std::chrono::system_clock::now())}});
      status["conditions"] = std::move(kept);
      UpdateOptions uo;
      uo.subresource = "binding";
      auto updated = store->Update(pods, t.ns, t.name, pod, uo);
      if (updated.ok()) return ApiStatus::Ok();
      if (updated.error().code != 409) return updated.error();  // else changed meanwhile: again
    }
    return ConflictError(gr, t.name, "the pod kept changing while it was being bound; try again");
  }

  // pods/eviction: the PodDisruptionBudget check (disruption.h) and the
  // deletion, under one lock so that concurrent evictions (kubectl drain
  // sends them in parallel) each see the pods the others took away.
  ApiStatus Evict(const ResourceInfo& pods, const RequestTarget& t, const DeleteOptions& d) {
    std::lock_guard lock(eviction_mu);
    auto pod = store->Get(pods, t.ns, t.name);
    if (!pod.ok()) return pod.error();
    if (ServedPtr pdbs = registry.Find("policy", "v1", "poddisruptionbudgets")) {
      auto budgets = store->List(pdbs->info, t.ns);
      if (!budgets.ok()) return budgets.error();
      auto all_pods = store->List(pods, t.ns);
      if (!all_pods.ok()) return all_pods.error();
      GPUOP_API_RETURN_IF_ERROR(CheckEviction(
          **pod, all_pods->items, budgets->items,
          [this](const std::string& ns, const Json& ref) { return ControllerScale(ns, ref); }));
    }
    auto deleted = store->Delete(pods, t.ns, t.name, d);
    if (!deleted.ok()) return deleted.error();
    return ApiStatus::Ok();
  }

  // A namespaced object sent without a namespace takes the request's before
  // it is validated, as the real handlers do (a custom resource's metadata
  // is checked with the body).
  static void TakeRequestNamespace(const ResourceInfo& info, const RequestTarget& t, Json& obj) {
    if (!info.namespaced || t.ns.empty() || !obj.is_object()) return;
    auto meta = obj.find("metadata");
    if (meta == obj.end() || meta->is_null()) {
      obj["metadata"] = {{"namespace", t.ns}};
    } else if (meta->is_object()) {
      auto ns = meta->find("namespace");
      if (ns == meta->end() || *ns == "") (*meta)["namespace"] = t.ns;
    }
  }

  // PUT or PATCH of a Scale: the Scale (the body, or the current Scale
  // patched) written to the object's replicas. Retried on a concurrent write
  // unless the Scale named the resourceVersion it was read at, as the real
  // server's update loop does.
  ApiResult<Object> WriteScale(const ResourceInfo& info, const RequestTarget& t,
                               const std::string& method, const httplib::Request& req,
                               const ApiResult<Json>& body, bool dry_run) {
    std::optional<PatchType> type;
    if (method == "PATCH") {
      auto parsed = PatchTypeFor(req.get_header_value("Content-Type"));
      if (!parsed.ok()) return UnsupportedMediaTypeError(parsed.status().message());
      if (*parsed == PatchType::kApply) {
        return UnsupportedMediaTypeError(
            "the scale subresource takes merge, JSON and strategic merge patches; server-side "
            "apply is not supported by the API emulator: patch the object itself instead");
      }
      type = *parsed;
    }
    for (int attempt = 0;; ++attempt) {
      auto current = store->Get(info, t.ns, t.name);
      if (!current.ok()) return current.error();
      Json scale;
      if (!type) {
        if (!body.ok()) return body.error();
        scale = *body;
      } else {
        auto patch = ParseBody(req.body, false);
        if (!patch.ok()) return patch.error();
        Json view = ScaleOf(info, **current);
        if (*type == PatchType::kJson) {
          auto patched = ApplyJsonPatch(view, *patch);
          if (!patched.ok()) return BadRequestError(patched.status().message());
          scale = std::move(patched).value();
        } else {
          // A Scale has no lists, so a strategic merge is a merge.
          scale = MergePatch(view, *patch);
        }
      }
      auto updated = WithScale(info, **current, scale);
      if (!updated.ok()) return updated.error();
      UpdateOptions uo;
      uo.dry_run = dry_run;
      auto written = store->Update(info, t.ns, t.name, std::move(updated).value(), uo);
      bool stale = !written.ok() && written.error().code == 409 &&
                   !ScaleNamesResourceVersion(scale);
      if (!stale || attempt == 4) return written;
    }
  }

  // The disruption controller's scale finders: a ReplicaSet owned by a
  // Deployment answers with the Deployment's replicas; any other served
  // owner that scales (the apps workloads, ReplicationControllers, custom
  // resources with a scale subresource) with its own spec.replicas.
  std::optional<int64_t> ControllerScale(const std::string& ns, const Json& ref) {
    std::string api_version = ref.value("apiVersion", "");
    size_t slash = api_version.find('/');
    std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
    std::string version = api_version.substr(slash == std::string::npos ? 0 : slash + 1);
    std::string kind = ref.value("kind", "");
    ServedPtr owner = registry.FindKind(group, version, kind);
    bool replica_set = group == "apps" && kind == "ReplicaSet";
    bool scales = replica_set ||
                  (group == "apps" && (kind == "Deployment" || kind == "StatefulSet")) ||
                  (group.empty() && kind == "ReplicationController") ||
                  (owner && owner->info.subresources.scale);
    if (!owner || !scales) return std::nullopt;
    auto obj = store->Get(owner->info, ns, ref.value("name", ""));
    if (!obj.ok() || (*obj)->at("metadata").value("uid", "") != ref.value("uid", "")) {
      return std::nullopt;
    }
    if (replica_set) {
      for (const Json& up : (*obj)->at("metadata").value("ownerReferences", Json::array())) {
        if (up.value("controller", false) && up.value("kind", "") == "Deployment") {
          return ControllerScale(ns, up);
        }
      }
    }
    const Json spec = (*obj)->value("spec", Json::object());
    return spec.value("replicas", int64_t{1});
  }

  void Handle(const std::string& method, const httplib::Request& req, httplib::Response& res);
  bool HandleControl(const std::string& method, const httplib::Request& req,
                     httplib::Response& res);
  bool HandleDiscovery(const httplib::Request& req, httplib::Response& res);
  void ServeLog(const RequestTarget& t, const httplib::Request& req, httplib::Response& res);
  void HandleResource(const std::string& method, RequestTarget& t, const httplib::Request& req,
                      httplib::Response& res);
  void ServeWatch(const ServedResource& sr, RequestTarget& t, const httplib::Request& req,
                  httplib::Response& res, const FaultDecision& fault);
  void Respond(const ServedResource& sr, const httplib::Request& req, httplib::Response& res,
               int code, const Object& obj);
};

ApiResult<Json> ApiServer::Impl::Apply(const Json& current, const Json& patch,
                                       const ResourceInfo& r, const PatchOptions& o) {
  ApplyOptions ao;
  ao.field_manager = o.field_manager;
  ao.force = o.force;
  ao.subresource = o.subresource;
  ao.now = FormatTimestamp(std::chrono::system_clock::now());
  std::shared_ptr<const Schema> schema = SchemaFor(r);
  return ServerSideApply(current.is_null() ? nullptr : &current, patch, schema.get(), r, ao);
}

std::shared_ptr<const Schema> ApiServer::Impl::SchemaFor(const ResourceInfo& r) {
  if (!r.custom) {
    if (!schemas) return nullptr;
    const Schema* s = schemas->ForKind({r.group, r.version, r.kind});
    return s ? std::shared_ptr<const Schema>(schemas, s) : nullptr;
  }
  auto served = registry.Find(r.group, r.version, r.plural);
  if (!served) return nullptr;
  auto crd = CompiledFor(served->crd_name);
  if (!crd) return nullptr;
  const CrdVersion* v = crd->Version(r.version);
  // Shares ownership of the compiled CRD: an update of the CRD on another
  // thread (a Helm pre-upgrade hook) replaces it in `crds` while this
  // request still walks its schema.
  return v && v->schema ? std::shared_ptr<const Schema>(crd, v->schema) : nullptr;
}

bool ApiServer::Impl::HandleControl(const std::string& method, const httplib::Request& req,
                                    httplib::Response& res) {
  const std::string& path = req.path;
  if (!StartsWith(path, "/gpuop-sim/")) return false;
  if (path == "/gpuop-sim/faults") {
    if (method == "GET") {
      WriteJson(res, 200, faults.ToJson());
    } else if (method == "PUT" || method == "POST") {
      std::string spec = req.body;
      try {
        Json j = Json::parse(req.body);
        if (j.is_object() && j.contains("spec") && j["spec"].is_string()) spec = j["spec"];
      } catch (const std::exception&) {
        // a plain-text spec
      }
      Status s = faults.Set(spec);
      if (!s.ok()) {
        WriteError(res, BadRequestError(s.message()));
      } else {
        LogInfo("fault rules set", {{"spec", spec}});
        WriteJson(res, 200, faults.ToJson());
      }
    } else if (method == "DELETE") {
      faults.Clear();
      WriteJson(res, 200, faults.ToJson());
    } else {
      WriteError(res, MethodNotAllowedError({"", "faults"}, ""));
    }
    return true;
  }
  if (path == "/gpuop-sim/audit") {
    if (method == "DELETE") {
      audit.ResetCounters();
      WriteJson(res, 200, audit.Counters());
      return true;
    }
    StoreCounters sc = store->Counters();
    Json st{{"objects", sc.objects},          {"objectCount", sc.object_count},
            {"approxBytes", sc.approx_bytes}, {"resourceVersion", sc.resource_version},
            {"watchers", sc.watchers},        {"watchersClosedSlow", sc.watchers_closed_slow}};
    Json out = audit.Counters();
    out["store"] = std::move(st);
    WriteJson(res, 200, out);
    return true;
  }
  if (path == "/gpuop-sim/compact" && method == "POST") {
    uint64_t rv = store->CurrentResourceVersion();
    store->ForceCompaction(rv);
    WriteJson(res, 200, {{"compactedResourceVersion", std::to_string(rv)}});
    return true;
  }
  if (path == "/gpuop-sim/bookmarks" && method == "POST") {
    store->SendBookmarks();
    WriteJson(res, 200, Json::object());
    return true;
  }
  if (StartsWith(path, "/gpuop-sim/nodes/")) {
    std::vector<std::string> seg = Split(path.substr(sizeof("/gpuop-sim/nodes/") - 1), '/');
    ApiServer::NodeAction act;
    {
      std::lock_guard<std::mutex> l(hooks_mu);
      act = node_action;
    }
    if (!act || seg.size() != 2 || seg[0].empty() || seg[1].empty()) {
      WriteError(res, NotServedError());
    } else if (method != "POST") {
      WriteError(res, MethodNotAllowedError({"", "nodes"}, seg[0]));
    } else {
      Json params = Json::object();
      if (!req.body.empty()) {
        params = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
        if (params.is_discarded() || !params.is_object()) {
          WriteError(res, BadRequestError("the body of a node action must be a JSON object"));
          return true;
        }
      }
      Status s = act(seg[0], seg[1], params);
      if (s.ok()) {
        WriteJson(res, 200, Json{{"node", seg[0]}, {"action", seg[1]}});
      } else {
        WriteError(res, FromStatus(s));
      }
    }
    return true;
  }
  WriteError(res, NotServedError());
  return true;
}

bool ApiServer::Impl::HandleDiscovery(const httplib::Request& req, httplib::Response& res) {
  const std::string& path = req.path;
  std::string accept = req.get_header_value("Accept");
  if (path == "/version" || path == "/version/") {
    WriteJson(res, 200, VersionInfo());
    return true;
  }
  if (path == "/api" || path == "/api/" || path == "/apis" || path == "/apis/") {
    bool legacy = StartsWith(path, "/api") && !StartsWith(path, "/apis");
    std::string agg = AggregatedDiscoveryVersion(accept);
    if (!agg.empty()) {
      WriteJson(res, 200, AggregatedDiscovery(registry, legacy, agg), AggregatedContentType(agg));
      return true;
    }
    WriteJson(res, 200,
              legacy ? ApiVersions(host + ":" + std::to_string(port)) : ApiGroupList(registry));
    return true;
  }
  if (path == "/openapi/v2") {
    bool protobuf = accept.find("com.github.proto-openapi.spec.v2") != std::string::npos;
    res.status = 200;
    res.set_content(EmptyOpenApiV2(protobuf),
                    protobuf ? std::string(kOpenApiV2Protobuf) : std::string(kJson));
    return true;
  }
  if (path == "/openapi/v3" || path == "/openapi/v3/") {
    res.status = 200;
    res.set_content(openapi->index(), kJson);
    return true;
  }
  if (StartsWith(path, "/openapi/v3/")) {
    const std::string* doc = openapi->Find(path.substr(std::string("/openapi/v3/").size()));
    if (doc == nullptr) {
      WriteError(res, NotServedError());
    } else {
      res.status = 200;
      res.set_header("Cache-Control", "public, immutable");
      res.set_content(*doc, kJson);
    }
    return true;
  }
  std::vector<std::string> seg = Split(path, '/');
  if (seg.size() == 2 && seg[0] == "api") {
    Json list = ApiResourceList(registry, "", seg[1]);
    if (list.is_null())
      WriteError(res, NotServedError());
    else
      WriteJson(res, 200, list);
    return true;
  }
  if (seg.size() == 2 && seg[0] == "apis") {
    Json g = ApiGroup(registry, seg[1]);
    if (g.is_null())
      WriteError(res, NotServedError());
    else
      WriteJson(res, 200, g);
    return true;
  }
  if (seg.size() == 3 && seg[0] == "apis") {
    Json list = ApiResourceList(registry, seg[1], seg[2]);
    if (list.is_null())
      WriteError(res, NotServedError());
    else
      WriteJson(res, 200, list);
    return true;
  }
  return false;
}

void ApiServer::Impl::Respond(const ServedResource& sr, const httplib::Request& req,
                              httplib::Response& res, int code, const Object& obj) {
  if (WantsTable(req.get_header_value("Accept"))) {
    TableOptions to;
    to.include_object = QueryParam(req, "includeObject");
    if (to.include_object.empty()) to.include_object = "PartialObjectMetadata";
    to.resource_version = obj->value("metadata", Json::object()).value("resourceVersion", "");
    WriteJson(res, code, ToTable(sr, {*obj}, to));
    return;
  }
  WriteJson(res, code, *obj);
}

void ApiServer::Impl::Handle(const std::string& method, const httplib::Request& req,
                             httplib::Response& res) {
  const std::string& path = req.path;
  if (path == "/healthz" || path == "/livez" || path == "/readyz" ||
      StartsWith(path, "/healthz/") || StartsWith(path, "/livez/") ||
      StartsWith(path, "/readyz/")) {
    res.status = 200;
    res.set_content("ok", "text/plain; charset=utf-8");
    return;
  }
  std::optional<UserInfo> requester = Authenticate(req);
  if (!requester) {
    WriteError(res, UnauthorizedError());
    audit.Record({method, "", "", "", "", "", "system:anonymous", 401});
    return;
  }
  auto user = Impersonate(*requester, req);
  if (!user.ok()) {
    WriteError(res, user.error());
    audit.Record({"impersonate", "", "", "", "", "", requester->name, user.error().code});
    return;
  }

  // A resource request names a resource under /api/v1 or /apis/<g>/<v>;
  // anything else (discovery, /version, /openapi, controls) is a path.
  std::vector<std::string> seg = Split(path, '/');
  RequestTarget t;
  t.user = *user;
  std::vector<std::string> rest;
  if (seg.size() >= 3 && seg[0] == "api") {
    t.version = seg[1];
    rest.assign(seg.begin() + 2, seg.end());
  } else if (seg.size() >= 4 && seg[0] == "apis") {
    t.group = seg[1];
    t.version = seg[2];
    rest.assign(seg.begin() + 3, seg.end());
  }
  const bool resource_request = !rest.empty() && ParseResourcePath(rest, t);
  if (resource_request) t.verb = VerbFor(method, t, req);
  RequestAttributes attrs{t.user, resource_request ? t.verb : Lowercase(method),
                          resource_request, t.group, t.resource, t.subresource, t.ns, t.name, path};
  if ((t.verb == "list" || t.verb == "watch") && t.name.empty()) {
    attrs.name = SelectedName(QueryParam(req, "fieldSelector"));
  }
  if (!Authorize(attrs)) {
    WriteError(res, ForbiddenFor(attrs));
    audit.Record({attrs.verb, t.group, t.resource, t.subresource, t.ns, attrs.name, t.user.name,
                  403, resource_request ? "" : path});
    return;
  }
  if (HandleControl(method, req, res)) return;
  faults.WaitWhilePaused();
  if (stopping) {
    WriteError(res, ServiceUnavailableError("the server is shutting down"));
    return;
  }
  if (method == "GET" && HandleDiscovery(req, res)) return;
  if (!resource_request) {
    WriteError(res, NotServedError());
    return;
  }
  if (t.group == "authorization.k8s.io" && t.resource == "selfsubjectaccessreviews" &&
      t.ns.empty() && t.name.empty()) {
    if (method == "POST") {
      ServeSelfSubjectAccessReview(t.user, req, res);
    } else {
      WriteError(res, MethodNotAllowedError({t.group, t.resource}, ""));
    }
  } else {
    HandleResource(method, t, req, res);
  }
  audit.Record({t.verb, t.group, t.resource, t.subresource, t.ns, t.name, t.user.name, res.status});
}

void ApiServer::Impl::HandleResource(const std::string& method, RequestTarget& t,
                                     const httplib::Request& req, httplib::Response& res) {
  ServedPtr served = registry.Find(t.group, t.version, t.resource);
  if (!served || (!t.ns.empty() && !served->info.namespaced)) {
    WriteError(res, NotServedError());
    return;
  }
  const ResourceInfo& info = served->info;
  const GroupResource gr = info.Resource();
  if (t.subresource == "log" && info.group.empty() && info.plural == "pods" && method == "GET") {
    ServeLog(t, req, res);
    return;
  }
  if (t.subresource == "token" && info.group.empty() && info.plural == "serviceaccounts" &&
      method == "POST" && !t.name.empty()) {
    ServeTokenRequest(info, t, req, res);
    return;
  }
  if (!t.subresource.empty()) {
    bool ok = (t.subresource == "status" && info.subresources.status) ||
              (t.subresource == "eviction" && info.subresources.eviction && method == "POST") ||
              (t.subresource == "binding" && info.group.empty() && info.plural == "pods" &&
               method == "POST") ||
              (t.subresource == "scale" && info.subresources.scale &&
               (method == "GET" || method == "PUT" || method == "PATCH"));
    if (!ok || t.name.empty()) {
      WriteError(res, NotServedError());
      return;
    }
    if (t.subresource == "eviction" || t.subresource == "binding") t.verb = "create";
  }
  if ((method == "POST" && !t.name.empty() && t.subresource != "eviction" &&
       t.subresource != "binding") ||
      ((method == "PUT" || method == "PATCH") && t.name.empty()) ||
      (t.verb == "deletecollection" && !info.HasVerb("deletecollection"))) {
    WriteError(res, MethodNotAllowedError(gr, t.name));
    return;
  }

  FaultDecision fault = faults.Decide(t.verb, t.resource, t.group);
  if (fault.latency.count() > 0) SleepInterruptible(fault.latency);
  if (fault.error_code) {
    WriteError(res, InjectedError(*fault.error_code, fault.retry_after_s));
    return;
  }

  // Bodies are JSON or YAML, or protobuf as client-go's typed clients send
  // built-in kinds (kubectl create namespace|secret|..., helm's release
  // Secrets, deletions and evictions): decoded here into the JSON the rest of
  // the handler reads. Patches name their own media type.
  std::string content_type = req.get_header_value("Content-Type");
  bool yaml_body = StartsWith(content_type, "application/yaml");
  std::optional<Json> protobuf_body;
  if (method != "PATCH" && !req.body.empty() && StartsWith(content_type, kProtobufMediaType)) {
    auto decoded = DecodeKubeProtobuf(req.body);
    if (!decoded.ok()) {
      const std::string& why = decoded.status().message();
      WriteError(res, decoded.status().code() == StatusCode::kNotSupported
                          ? UnsupportedMediaTypeError(why)
                          : BadRequestError(why));
      return;
    }
    protobuf_body = std::move(decoded).value();
  }
  auto parse_body = [&](bool allow_yaml) -> ApiResult<Json> {
    if (protobuf_body) return *protobuf_body;
    return ParseBody(req.body, allow_yaml);
  };

  auto field_validation = ParseFieldValidation(QueryParam(req, "fieldValidation"));
  if (!field_validation.ok()) {
    WriteError(res, BadRequestError(field_validation.status().message()));
    return;
  }
  bool dry_run = req.has_param("dryRun");
  std::vector<std::string> warnings;
  auto send_warnings = [&] {
    for (const auto& w : warnings) {
      res.headers.emplace("Warning", "299 - " + JsonQuote(w));
    }
  };

  // Built-in bodies are decoded against their schema, custom resources
  // against their CRD's, with the request's fieldValidation.
  auto check_body = [&](Json& body) -> ApiStatus {
    if (!body.is_object()) {
      return BadRequestError("the body of the request must be a JSON object");
    }
    std::string api_version = body.value("apiVersion", "");
    std::string kind = body.value("kind", "");
    if (!api_version.empty() && api_version != info.ApiVersion()) {
      return BadRequestError("the API version in the data (" + api_version +
                             ") does not match the expected API version (" + info.ApiVersion() +
                             ")");
    }
    if (!kind.empty() && kind != info.kind) {
      return BadRequestError("the kind in the data (" + kind +
                             ") does not match the expected kind (" + info.kind + ")");
    }
    body["apiVersion"] = info.ApiVersion();
    body["kind"] = info.kind;
    if (info.custom) {
      auto crd = CompiledFor(served->crd_name);
      if (!crd) return ApiStatus::Ok();
      return PrepareCustomResource(*crd, info.version, body, *field_validation, &warnings);
    }
    if (!schemas) return ApiStatus::Ok();
    return DecodeBuiltinBody(*schemas, info, body, *field_validation, &warnings);
  };

  if (t.verb == "watch") {
    ServeWatch(*served, t, req, res, fault);
    return;
  }

  if (t.verb == "get" && t.subresource == "scale") {
    auto got = store->Get(info, t.ns, t.name);
    if (!got.ok()) return WriteError(res, got.error());
    return WriteJson(res, 200, ScaleOf(info, **got));
  }

  if (t.verb == "get") {
    auto got = store->Get(info, t.ns, t.name);
    if (!got.ok()) return WriteError(res, got.error());
    return Respond(*served, req, res, 200, *got);
  }

  if (t.verb == "list") {
    ListOptions lo;
    lo.label_selector = QueryParam(req, "labelSelector");
    lo.field_selector = QueryParam(req, "fieldSelector");
    lo.continue_token = QueryParam(req, "continue");
    lo.resource_version = QueryParam(req, "resourceVersion");
    lo.resource_version_match = QueryParam(req, "resourceVersionMatch");
    if (req.has_param("limit")) {
      auto l = ParseUint(QueryParam(req, "limit"));
      if (l) lo.limit = static_cast<int64_t>(*l);
    }
    if (fault.gone && !lo.continue_token.empty()) {
      return WriteError(
          res, ResourceExpiredError("The provided continue parameter is too old to display a "
                                    "consistent list result. You can start a new list without the "
                                    "continue parameter. (injected fault)"));
    }
    auto list = store->List(info, t.ns, lo);
    if (!list.ok()) return WriteError(res, list.error());
    if (WantsTable(req.get_header_value("Accept"))) {
      std::vector<Json> items;
      items.reserve(list->items.size());
      for (const auto& o : list->items) items.push_back(*o);
      TableOptions to;
      to.include_object = QueryParam(req, "includeObject");
      if (to.include_object.empty()) to.include_object = "PartialObjectMetadata";
      to.resource_version = list->resource_version;
      to.continue_token = list->continue_token;
      to.remaining_item_count = list->remaining_item_count;
      return WriteJson(res, 200, ToTable(*served, items, to));
    }
    // The items' JSON as the store serialised them, not dumped again.
    return WriteJsonText(req, res, 200, list->Dump(info));
  }

  WriteContext write_ctx;
  write_ctx.field_manager = QueryParam(req, "fieldManager");
  write_ctx.subresource = t.subresource;
  write_ctx.user = &t.user;
  write_ctx.ns = t.ns;
  write_ctx.apply = method == "PATCH" &&
                    StartsWith(req.get_header_value("Content-Type"), "application/apply-patch");
  if (write_ctx.field_manager.empty() && !write_ctx.apply) {
    // The real server names the manager after the client's User-Agent.
    std::string ua = req.get_header_value("User-Agent");
    write_ctx.field_manager = ua.substr(0, ua.find('/'));
    if (write_ctx.field_manager.empty()) write_ctx.field_manager = "unknown";
  }
  ScopedWrite scoped_write(&write_ctx);

  if (t.subresource == "eviction") {
    auto body = parse_body(false);
    if (!body.ok()) return WriteError(res, body.error());
    std::string evict_name = body->value("metadata", Json::object()).value("name", "");
    if (!evict_name.empty() && evict_name != t.name) {
      return WriteError(res, BadRequestError("name in URL does not match name in Eviction object"));
    }
    DeleteOptions d;
    d.dry_run = dry_run;
    Json opts = body->value("deleteOptions", Json::object());
    if (opts.contains("gracePeriodSeconds") && opts["gracePeriodSeconds"].is_number_integer()) {
      d.grace_period_seconds = opts["gracePeriodSeconds"].get<int64_t>();
    }
    if (auto evicted = Evict(info, t, d); !evicted.ok()) return WriteError(res, evicted.error());
    Json status = SuccessStatus();
    status["code"] = 201;
    return WriteJson(res, 201, status);
  }

  if (t.subresource == "scale") {
    auto scaled = WriteScale(info, t, method, req, parse_body(yaml_body), dry_run);
    if (!scaled.ok()) return WriteError(res, scaled.error());
    return WriteJson(res, 200, ScaleOf(info, **scaled));
  }

  if (t.subresource == "binding") {
    auto body = parse_body(yaml_body);
    if (!body.ok()) return WriteError(res, body.error());
    auto bound = Bind(info, t, *body, dry_run);
    if (!bound.ok()) return WriteError(res, bound.error());
    Json status = SuccessStatus();
    status["code"] = 201;
    return WriteJson(res, 201, status);
  }

  if (t.verb == "create") {
    auto body = parse_body(yaml_body);
    if (!body.ok()) return WriteError(res, body.error());
    Json obj = std::move(body).value();
    TakeRequestNamespace(info, t, obj);
    if (auto s = check_body(obj); !s.ok()) return WriteError(res, s.error());
    std::string body_ns = obj["metadata"].is_object() ? obj["metadata"].value("namespace", "") : "";
    if (info.namespaced && !body_ns.empty() && !t.ns.empty() && body_ns != t.ns) {
      return WriteError(res, BadRequestError("the namespace of the provided object does not match "
                                             "the namespace sent on the request"));
    }
    CreateOptions co;
    co.dry_run = dry_run;
    auto created = store->Create(info, t.ns, std::move(obj), co);
    if (!created.ok()) return WriteError(res, created.error());
    if (!dry_run) AfterWrite(t, info, (*created)->at("metadata").value("name", ""));
    send_warnings();
    return Respond(*served, req, res, 201, *created);
  }

  if (t.verb == "update") {
    auto body = parse_body(yaml_body);
    if (!body.ok()) return WriteError(res, body.error());
    Json obj = std::move(body).value();
    TakeRequestNamespace(info, t, obj);
    if (auto s = check_body(obj); !s.ok()) return WriteError(res, s.error());
    std::string body_name = obj["metadata"].is_object() ? obj["metadata"].value("name", "") : "";
    if (body_name != t.name) {
      return WriteError(res,
                        BadRequestError("the name of the object (" + body_name +
                                        ") does not match the name on the URL (" + t.name + ")"));
    }
    UpdateOptions uo;
    uo.subresource = t.subresource;
    uo.dry_run = dry_run;
    auto updated = store->Update(info, t.ns, t.name, std::move(obj), uo);
    if (!updated.ok()) return WriteError(res, updated.error());
    if (!dry_run) AfterWrite(t, info, t.name);
    send_warnings();
    return Respond(*served, req, res, 200, *updated);
  }

  if (t.verb == "patch") {
    auto type = PatchTypeFor(req.get_header_value("Content-Type"));
    if (!type.ok()) return WriteError(res, UnsupportedMediaTypeError(type.status().message()));
    if (*type == PatchType::kStrategicMerge && info.custom) {
      return WriteError(
          res, UnsupportedMediaTypeError(UnsupportedMediaTypeMessage(CustomResourcePatchTypes())));
    }
    auto body = ParseBody(req.body, *type == PatchType::kApply);
    if (!body.ok()) return WriteError(res, body.error());
    PatchOptions po;
    po.type = *type;
    po.subresource = t.subresource;
    po.field_manager = QueryParam(req, "fieldManager");
    po.force = TrueParam(req, "force");
    po.dry_run = dry_run;
    int code = 200;
    if (*type == PatchType::kApply) {
      if (po.field_manager.empty()) {
        return WriteError(res, BadRequestError("PatchOptions.meta.k8s.io \"\" is invalid: "
                                               "fieldManager: Required value: is required for "
                                               "apply patch"));
      }
      Json preview = *body;
      if (auto s = check_body(preview); !s.ok()) return WriteError(res, s.error());
      if (!store->Get(info, t.ns, t.name).ok()) {
        code = 201;
        // An apply that creates the object is authorised as a create too,
        // as kube-apiserver does.
        RequestAttributes create{t.user, "create", true, info.group, info.plural,
                                 t.subresource, t.ns, t.name, ""};
        if (!Authorize(create)) return WriteError(res, ForbiddenFor(create));
      }
    }
    auto patched = store->Patch(info, t.ns, t.name, *body, po);
    if (!patched.ok()) return WriteError(res, patched.error());
    if (!dry_run) AfterWrite(t, info, t.name);
    send_warnings();
    return Respond(*served, req, res, code, *patched);
  }

  // delete / deletecollection
  DeleteOptions d;
  Json opts = Json::object();
  if (!req.body.empty()) {
    auto body = parse_body(false);
    if (!body.ok()) return WriteError(res, body.error());
    if (body->is_object()) opts = std::move(body).value();
  }
  std::string policy = opts.value("propagationPolicy", QueryParam(req, "propagationPolicy"));
  if (policy == "Foreground")
    d.propagation = PropagationPolicy::kForeground;
  else if (policy == "Orphan")
    d.propagation = PropagationPolicy::kOrphan;
  else if (policy == "Background")
    d.propagation = PropagationPolicy::kBackground;
  else if (!policy.empty()) {
    return WriteError(res, BadRequestError("propagationPolicy \"" + policy +
                                           "\" is not one of Foreground, Background, Orphan"));
  }
  if (opts.contains("orphanDependents") && opts["orphanDependents"].is_boolean() &&
      !d.propagation) {
    d.propagation = opts["orphanDependents"].get<bool>() ? PropagationPolicy::kOrphan
                                                         : PropagationPolicy::kBackground;
  }
  if (opts.contains("gracePeriodSeconds") && opts["gracePeriodSeconds"].is_number_integer()) {
    d.grace_period_seconds = opts["gracePeriodSeconds"].get<int64_t>();
  } else if (req.has_param("gracePeriodSeconds")) {
    if (auto g = ParseUint(QueryParam(req, "gracePeriodSeconds"))) {
      d.grace_period_seconds = static_cast<int64_t>(*g);
    }
  }
  if (opts.contains("preconditions") && opts["preconditions"].is_object()) {
    const Json& pre = opts["preconditions"];
    if (pre.contains("uid") && pre["uid"].is_string()) d.preconditions.uid = pre["uid"];
    if (pre.contains("resourceVersion") && pre["resourceVersion"].is_string()) {
      d.preconditions.resource_version = pre["resourceVersion"];
    }
  }
  d.dry_run =
      dry_run || (opts.contains("dryRun") && opts["dryRun"].is_array() && !opts["dryRun"].empty());

  if (t.verb == "deletecollection") {
    ListOptions lo;
    lo.label_selector = QueryParam(req, "labelSelector");
    lo.field_selector = QueryParam(req, "fieldSelector");
    auto deleted = store->DeleteCollection(info, t.ns, lo, d);
    if (!deleted.ok()) return WriteError(res, deleted.error());
    if (!d.dry_run && info.group == kCrdGroup && info.plural == "customresourcedefinitions") {
      for (const auto& o : deleted->items) AfterWrite(t, info, o->at("metadata").value("name", ""));
    }
    return WriteJson(res, 200, deleted->ToJson(info));
  }

  auto deleted = store->Delete(info, t.ns, t.name, d);
  if (!deleted.ok()) return WriteError(res, deleted.error());
  if (!d.dry_run) AfterWrite(t, info, t.name);
  if (!deleted->deleted) return Respond(*served, req, res, 200, deleted->object);
  Json details{{"name", t.name}, {"kind", info.plural}};
  if (!info.group.empty()) details["group"] = info.group;
  std::string uid =
      deleted->object ? deleted->object->value("metadata", Json::object()).value("uid", "") : "";
  if (!uid.empty()) details["uid"] = uid;
  Json status = SuccessStatus();
  status["details"] = std::move(details);
  WriteJson(res, 200, status);
}

namespace {

// The state of one watch stream, kept by the chunked content provider.
struct WatchStream {
  std::unique_ptr<Watcher> watcher;
  ServedPtr resource;
  bool table = false;
  bool headers_sent = false;
  std::string include_object;
  std::chrono::steady_clock::time_point deadline;
  std::optional<int> drop_after;
  bool gone = false;
  int sent = 0;
  int peer_fd = -1;  // the client's connection, watched for a hang-up while idle
};

}  // namespace

void ApiServer::Impl::ServeWatch(const ServedResource& sr, RequestTarget& t,
                                 const httplib::Request& req, httplib::Response& res,
                                 const FaultDecision& fault) {
  WatchOptions wo;
  wo.resource_version = QueryParam(req, "resourceVersion");
  wo.label_selector = QueryParam(req, "labelSelector");
  wo.field_selector = QueryParam(req, "fieldSelector");
  wo.allow_bookmarks = TrueParam(req, "allowWatchBookmarks");
  if (req.has_param("sendInitialEvents")) {
    wo.send_initial_events = TrueParam(req, "sendInitialEvents");
  }
  if (!t.name.empty()) {
    std::string by_name = "metadata.name=" + t.name;
    wo.field_selector = wo.field_selector.empty() ? by_name : wo.field_selector + "," + by_name;
  }
  auto stream = std::make_shared<WatchStream>();
  stream->resource = registry.Find(sr.info.group, sr.info.version, sr.info.plural);
  if (!stream->resource) return WriteError(res, NotServedError());
  stream->gone = fault.gone;
  stream->drop_after = fault.drop_watch_after;
  if (!fault.gone) {
    auto w = store->Watch(sr.info, t.ns, wo);
    if (!w.ok()) return WriteError(res, w.error());
    stream->watcher = std::move(w).value();
  }
  stream->table = WantsTable(req.get_header_value("Accept"));
  stream->include_object = QueryParam(req, "includeObject");
  if (stream->include_object.empty()) stream->include_object = "PartialObjectMetadata";
  auto timeout = opts.max_watch_duration;
  if (auto s = ParseUint(QueryParam(req, "timeoutSeconds")); s && *s > 0) {
    timeout = std::min<std::chrono::seconds>(timeout, std::chrono::seconds(*s));
  }
  stream->deadline = std::chrono::steady_clock::now() + timeout;
  stream->peer_fd = FindConnectionSocket(req.local_port, req.remote_addr, req.remote_port);
  res.status = 200;
  res.set_header("Cache-Control", "no-cache, private");

  res.set_chunked_content_provider(
      kWatchJson,
      [this, stream](size_t, httplib::DataSink& sink) {
        auto write_text = [&](std::string line) {
          line += '\n';
          return sink.write(line.data(), line.size());
        };
        auto write_line = [&](const Json& j) {
          return write_text(j.dump(-1, ' ', false, Json::error_handler_t::replace));
        };
        if (stream->gone) {
          ApiError e = ResourceExpiredError("too old resource version (injected fault)");
          write_line({{"type", "ERROR"}, {"object", e.ToStatusJson()}});
          sink.done();
          return true;
        }
        if (stream->drop_after && stream->sent >= *stream->drop_after) return false;
        while (true) {
          if (stopping || std::chrono::steady_clock::now() >= stream->deadline) {
            sink.done();
            return true;
          }
          auto ev = stream->watcher->Next(milliseconds(200));
          if (!ev) {
            if (stream->watcher->closed()) {
              sink.done();
              return true;
            }
            // A client that went away frees its thread (kube-apiserver ends
            // the watch when its connection closes).
            if (stream->peer_fd >= 0 && PeerHungUp(stream->peer_fd)) return false;
            continue;
          }
          bool transformable = ev->type != WatchEvent::Type::kError &&
                               ev->type != WatchEvent::Type::kBookmark && ev->object;
          bool written;
          if (stream->table && transformable) {
            Json j = ev->ToJson();
            TableOptions to;
            to.include_object = stream->include_object;
            to.include_headers = !stream->headers_sent;
            to.resource_version = std::to_string(ev->resource_version);
            j["object"] = ToTable(*stream->resource, {*ev->object}, to);
            stream->headers_sent = true;
            written = write_line(j);
          } else {
            written = write_text(ev->Dump());  // the object's JSON as the store serialised it
          }
          if (!written) return false;
          ++stream->sent;
          if (ev->type == WatchEvent::Type::kError) {
            sink.done();
            return true;
          }
          if (stream->drop_after && stream->sent >= *stream->drop_after) return false;
          return true;
        }
      },
      [stream](bool) {
        if (stream->watcher) stream->watcher->Stop();
      });
}

// ---------------------------------------------------------------------------

ApiServer::ApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ApiServer::~ApiServer() { Stop(); }

Result<std::unique_ptr<ApiServer>> ApiServer::Start(ServerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  Impl* p = impl.get();
  GPUOP_ASSIGN_OR_RETURN(auto hostport, http::ParseListen(p->opts.listen, "--listen"));
  p->host = hostport.first;

  GPUOP_RETURN_IF_ERROR(p->faults.Set(p->opts.faults));
  if (!p->opts.audit_log.empty()) GPUOP_RETURN_IF_ERROR(p->audit.Open(p->opts.audit_log));

  std::string dir = p->opts.openapi_dir.empty() ? DefaultOpenApiDir() : p->opts.openapi_dir;
  GPUOP_ASSIGN_OR_RETURN(p->openapi, OpenApiDocs::Load(dir));
  auto schemas = SchemaSet::LoadDirectory(dir);
  if (!schemas.ok()) return schemas.status().Annotate("loading the OpenAPI schemas");
  p->schemas = *schemas;

  StoreOptions so = p->opts.store;
  so.hooks.strategic_merge = [p](const Json& cur, const Json& patch, const ResourceInfo& r,
                                 const PatchOptions&) { return p->StrategicMerge(cur, patch, r); };
  so.hooks.apply = [p](const Json& cur, const Json& patch, const ResourceInfo& r,
                       const PatchOptions& o) { return p->Apply(cur, patch, r, o); };
  so.hooks.admit = [p](const ResourceInfo& r, Json& obj, const Json* old) {
    return p->Admit(r, obj, old);
  };
  p->store = std::make_unique<Store>(std::move(so));
  if (p->opts.rbac) {
    // What kube-apiserver bootstraps and clients rely on (discovery,
    // SelfSubjectAccessReview, cluster-admin).
    ServedPtr roles = p->registry.Find(kRbacGroup, "v1", "clusterroles");
    ServedPtr bindings = p->registry.Find(kRbacGroup, "v1", "clusterrolebindings");
    for (Json& r : BootstrapClusterRoles()) {
      auto created = p->store->Create(roles->info, "", std::move(r));
      if (!created.ok()) return Internal("bootstrap ClusterRole: " + created.error().ToString());
    }
    for (Json& b : BootstrapClusterRoleBindings()) {
      auto created = p->store->Create(bindings->info, "", std::move(b));
      if (!created.ok()) {
        return Internal("bootstrap ClusterRoleBinding: " + created.error().ToString());
      }
    }
  }

  if (p->opts.tls) {
    GPUOP_ASSIGN_OR_RETURN(p->tls, GenerateServingCert(p->host));
    BIO* cb = BIO_new_mem_buf(p->tls.cert_pem.data(), static_cast<int>(p->tls.cert_pem.size()));
    X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    BIO_free(cb);
    BIO* kb = BIO_new_mem_buf(p->tls.key_pem.data(), static_cast<int>(p->tls.key_pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
    BIO_free(kb);
    if (cert == nullptr || key == nullptr) {
      X509_free(cert);
      EVP_PKEY_free(key);
      return Internal("loading the generated serving certificate failed");
    }
    auto server = std::make_unique<httplib::SSLServer>(cert, key);
    X509_free(cert);  // SSL_CTX holds its own references
    EVP_PKEY_free(key);
    if (!server->is_valid()) return Internal("the TLS server could not be set up");
    p->http = std::move(server);
  } else {
    p->http = std::make_unique<httplib::Server>();
  }
  size_t threads = std::max<size_t>(p->opts.threads, 4);
  p->http->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would
  // let a second emulator bind the same port and share its connections.
  // TCP_NODELAY (inherited by accepted sockets): httplib writes a response's
  // headers and body separately, and Nagle's algorithm would hold the body
  // until the client's delayed ACK, adding ~40 ms to every request.
  p->http->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  });
  p->http->set_keep_alive_max_count(1000);
  p->http->set_keep_alive_timeout(5);
  p->http->set_read_timeout(30);
  p->http->set_write_timeout(30);
  auto handler = [p](const char* method) {
    return [p, method](const httplib::Request& req, httplib::Response& res) {
      p->Handle(method, req, res);
    };
  };
  p->http->Get(".*", handler("GET"));
  p->http->Post(".*", handler("POST"));
  p->http->Put(".*", handler("PUT"));
  p->http->Patch(".*", handler("PATCH"));
  p->http->Delete(".*", handler("DELETE"));
  p->http->set_exception_handler(
      [p](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        LogError("request failed", {{"error", what}});
        p->WriteError(res, InternalServerError(what));
      });

  if (hostport.second == 0) {
    p->port = p->http->bind_to_any_port(p->host);
  } else {
    p->port = p->http->bind_to_port(p->host, hostport.second) ? hostport.second : -1;
  }
  if (p->port <= 0) {
    return Unavailable("cannot listen on " + p->opts.listen +
                       ": the address is in use or not local; pick another --listen");
  }
  p->listener = std::thread([p] { p->http->listen_after_bind(); });
  LogInfo("API emulator serving (not for production)",
          {{"url", p->Url()},
           {"tls", p->opts.tls},
           {"auth", !p->opts.token.empty()},
           {"authorization", p->opts.rbac ? "RBAC" : "AlwaysAllow"}});
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(impl)));
}

void ApiServer::Stop() {
  if (!impl_) return;
  if (impl_->stopping.exchange(true)) return;
  impl_->faults.Shutdown();
  if (impl_->http) impl_->http->stop();
  if (impl_->listener.joinable()) impl_->listener.join();
  {
    std::lock_guard lock(impl_->stop_mu);
    impl_->stopped = true;
  }
  impl_->stop_cv.notify_all();
}

void ApiServer::Wait() {
  std::unique_lock lock(impl_->stop_mu);
  impl_->stop_cv.wait(lock, [&] { return impl_->stopped; });
}

std::string ApiServer::url() const { return impl_->Url(); }
std::string ApiServer::host() const { return impl_->host; }
int ApiServer::port() const { return impl_->port; }
const std::string& ApiServer::ca_cert_pem() const { return impl_->tls.ca_cert_pem; }

KubeconfigParams ApiServer::kubeconfig() const {
  KubeconfigParams k;
  k.server = url();
  k.ca_cert_pem = impl_->tls.ca_cert_pem;
  k.token = impl_->opts.token;
  return k;
}

void ApiServer::SetLogProvider(LogProvider provider) {
  std::lock_guard<std::mutex> l(impl_->hooks_mu);
  impl_->log_provider = std::move(provider);
}

void ApiServer::SetNodeAction(NodeAction action) {
  std::lock_guard<std::mutex> l(impl_->hooks_mu);
  impl_->node_action = std::move(action);
}

void ApiServer::Impl::ServeLog(const RequestTarget& t, const httplib::Request& req,
                               httplib::Response& res) {
  LogProvider provider;
  {
    std::lock_guard<std::mutex> l(hooks_mu);
    provider = log_provider;
  }
  if (!provider) return WriteError(res, NotServedError());
  auto info = registry.Find("", "v1", "pods");
  auto pod = store->Get(info->info, t.ns, t.name);
  if (!pod.ok()) return WriteError(res, pod.error());
  const Json& spec = (*pod)->value("spec", Json::object());
  std::string container = QueryParam(req, "container");
  const Json containers = spec.value("containers", Json::array());
  if (container.empty()) {
    if (containers.size() != 1) {
      std::string names;
      for (const Json& c : containers) names += (names.empty() ? "" : " ") + c.value("name", "");
      return WriteError(res, BadRequestError("a container name must be specified for pod " +
                                             t.name + ", choose one of: [" + names + "]"));
    }
    container = containers[0].value("name", "");
  }
  std::string node = spec.value("nodeName", "");
  auto text = provider(t.ns, t.name, node, container, TrueParam(req, "previous"));
  if (!text.ok()) return WriteError(res, BadRequestError(text.status().message()));
  std::string out = *text;
  if (req.has_param("tailLines")) {
    auto n = ParseUint(QueryParam(req, "tailLines"));
    if (n) {
      size_t pos = out.size();
      if (pos > 0 && out[pos - 1] == '\n') --pos;
      for (uint64_t i = 0; i < *n && pos != std::string::npos && pos > 0; ++i) {
        pos = out.rfind('\n', pos - 1);
      }
      if (pos != std::string::npos && pos > 0) out = out.substr(pos + 1);
    }
  }
  res.status = 200;
  res.set_content(out, "text/plain");
}

Store& ApiServer::store() { return *impl_->store; }
Registry& ApiServer::registry() { return impl_->registry; }
FaultInjector& ApiServer::faults() { return impl_->faults; }
AuditLog& ApiServer::audit() { return impl_->audit; }

}  // namespace gpuop::simkube

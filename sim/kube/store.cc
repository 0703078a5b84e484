#include "sim/kube/store.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <set>
#include <unordered_map>

#include "sim/kube/json_patch.h"

namespace gpuop::simkube {

using nlohmann::json;

namespace {

constexpr std::string_view kFinalizerOrphan = "orphan";
constexpr std::string_view kFinalizerForeground = "foregroundDeletion";
constexpr std::string_view kNamespaceFinalizer = "kubernetes";
constexpr std::string_view kInitialEventsEnd = "k8s.io/initial-events-end";
constexpr int kMaxUpdateAttempts = 1000;

bool IsNamespaces(const ResourceInfo& r) { return r.group.empty() && r.plural == "namespaces"; }

std::string QualifiedOf(const ResourceInfo& r) { return r.QualifiedResource(); }

const json& Meta(const json& obj) {
  static const json kEmpty = json::object();
  auto it = obj.find("metadata");
  return (it != obj.end() && it->is_object()) ? *it : kEmpty;
}

std::string MetaString(const json& obj, const char* field) {
  const json& m = Meta(obj);
  auto it = m.find(field);
  return (it != m.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

bool HasDeletionTimestamp(const json& obj) {
  const json& m = Meta(obj);
  auto it = m.find("deletionTimestamp");
  return it != m.end() && !it->is_null();
}

std::vector<std::string> Finalizers(const json& obj) {
  std::vector<std::string> out;
  const json& m = Meta(obj);
  auto it = m.find("finalizers");
  if (it == m.end() || !it->is_array()) return out;
  for (const auto& f : *it) {
    if (f.is_string()) out.push_back(f.get<std::string>());
  }
  return out;
}

bool HasFinalizer(const json& obj, std::string_view f) {
  auto fs = Finalizers(obj);
  return std::find(fs.begin(), fs.end(), f) != fs.end();
}

void SetFinalizers(json& obj, const std::vector<std::string>& fs) {
  if (fs.empty()) {
    obj["metadata"].erase("finalizers");
  } else {
    obj["metadata"]["finalizers"] = fs;
  }
}

void AddFinalizer(json& obj, std::string_view f) {
  auto fs = Finalizers(obj);
  if (std::find(fs.begin(), fs.end(), f) == fs.end()) fs.emplace_back(f);
  SetFinalizers(obj, fs);
}

void DropFinalizer(json& obj, std::string_view f) {
  auto fs = Finalizers(obj);
  fs.erase(std::remove(fs.begin(), fs.end(), f), fs.end());
  SetFinalizers(obj, fs);
}

// Namespaces also wait on spec.finalizers (the namespace controller's "kubernetes").
bool HasSpecFinalizers(const json& obj) {
  auto s = obj.find("spec");
  if (s == obj.end() || !s->is_object()) return false;
  auto f = s->find("finalizers");
  return f != s->end() && f->is_array() && !f->empty();
}

int64_t MetaInt(const json& obj, const char* field, int64_t fallback) {
  const json& m = Meta(obj);
  auto it = m.find(field);
  return (it != m.end() && it->is_number_integer()) ? it->get<int64_t>() : fallback;
}

// Everything but metadata (and status, when the status subresource owns it).
bool SpecChanged(const json& a, const json& b, bool ignore_status) {
  if (!a.is_object() || !b.is_object()) return a != b;
  for (const auto& [k, v] : a.items()) {
    if (k == "metadata" || (ignore_status && k == "status")) continue;
    auto it = b.find(k);
    if (it == b.end() || *it != v) return true;
  }
  for (const auto& [k, v] : b.items()) {
    if (k == "metadata" || (ignore_status && k == "status")) continue;
    if (!a.contains(k)) return true;
  }
  return false;
}

// About the compact JSON size of v, without serializing it (string escapes
// and number widths estimated).
size_t ApproxJsonSize(const json& v) {
  switch (v.type()) {
    case json::value_t::object: {
      size_t n = 2;
      for (const auto& [k, e] : v.items()) n += k.size() + 4 + ApproxJsonSize(e);
      return n;
    }
    case json::value_t::array: {
      size_t n = 2;
      for (const auto& e : v) n += ApproxJsonSize(e) + 1;
      return n;
    }
    case json::value_t::string:
      return v.get_ref<const std::string&>().size() + 2;
    case json::value_t::boolean:
      return 5;
    case json::value_t::null:
      return 4;
    default:
      return 8;
  }
}

// Compact JSON as the HTTP layer writes it: invalid UTF-8 is replaced, not thrown.
std::string DumpJson(const json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Simplified pod QoS class: BestEffort without requests/limits, Guaranteed
// when every container's cpu and memory limits are set and equal the requests.
std::string PodQosClass(const json& pod) {
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return "BestEffort";
  auto containers = spec->find("containers");
  if (containers == spec->end() || !containers->is_array()) return "BestEffort";
  bool any = false;
  bool guaranteed = true;
  for (const auto& c : *containers) {
    const json res = c.value("resources", json::object());
    const json req = res.value("requests", json::object());
    const json lim = res.value("limits", json::object());
    if (!req.empty() || !lim.empty()) any = true;
    for (const char* name : {"cpu", "memory"}) {
      if (!lim.contains(name)) {
        guaranteed = false;
      } else if (req.contains(name) && req[name] != lim[name]) {
        guaranteed = false;
      }
    }
  }
  if (!any) return "BestEffort";
  return guaranteed ? "Guaranteed" : "Burstable";
}

// kube-apiserver's SetDefaults_Job, which it applies to every Job it
// decodes (create, update, patch).
void DefaultJobSpec(json& job) {
  json& spec = job["spec"];
  if (!spec.is_object()) spec = json::object();
  auto unset = [&](const char* field) { return !spec.contains(field) || spec[field].is_null(); };
  if (unset("completions") && unset("parallelism")) spec["completions"] = 1;
  if (unset("parallelism")) spec["parallelism"] = 1;
  if (unset("backoffLimit")) {
    spec["backoffLimit"] = unset("backoffLimitPerIndex") ? 6 : 2147483647;
  }
  if (unset("completionMode")) spec["completionMode"] = "NonIndexed";
  if (unset("suspend")) spec["suspend"] = false;
  if (unset("podReplacementPolicy")) {
    spec["podReplacementPolicy"] = unset("podFailurePolicy") ? "TerminatingOrFailed" : "Failed";
  }
  if (unset("manualSelector")) spec["manualSelector"] = false;
}

// What kube-apiserver fills in on a new Job beyond the spec defaults:
// unless spec.manualSelector, the Job strategy's generated selector (the
// controller-uid label in spec.selector, the job-name and controller-uid
// labels, both spellings, in the template). A Job without labels of its own
// shows the template's, as a read from etcd does.
void DefaultNewJob(json& job) {
  DefaultJobSpec(job);
  json& spec = job["spec"];
  if (spec["manualSelector"] == true) return;
  json& labels = spec["template"]["metadata"]["labels"];
  if (!labels.is_object()) labels = json::object();
  const std::string name = MetaString(job, "name"), uid = MetaString(job, "uid");
  for (const char* key : {"batch.kubernetes.io/job-name", "job-name"}) {
    if (!labels.contains(key)) labels[key] = name;
  }
  for (const char* key : {"batch.kubernetes.io/controller-uid", "controller-uid"}) {
    if (!labels.contains(key)) labels[key] = uid;
  }
  json& match = spec["selector"]["matchLabels"];
  if (!match.is_object()) match = json::object();
  if (!match.contains("batch.kubernetes.io/controller-uid")) {
    match["batch.kubernetes.io/controller-uid"] = uid;
  }
  json& own = job["metadata"]["labels"];
  if (!own.is_object() || own.empty()) own = labels;
}

// What kube-apiserver fills in on every apps/v1 DaemonSet or Deployment it
// decodes (SetDefaults_DaemonSet, SetDefaults_Deployment): the update strategy and
// its rolling-update bounds, the revision history limit, a Deployment's
// replicas and progress deadline. kubectl rollout status reads the strategy.
void DefaultAppsWorkload(const ResourceInfo& r, json& obj) {
  json& spec = obj["spec"];
  if (!spec.is_object()) spec = json::object();
  auto unset = [](const json& o, const char* field) {
    return !o.contains(field) || o[field].is_null();
  };
  const bool deployment = r.plural == "deployments";
  const char* strategy_field = deployment ? "strategy" : "updateStrategy";
  json& strategy = spec[strategy_field];
  if (!strategy.is_object()) strategy = json::object();
  if (unset(strategy, "type")) strategy["type"] = "RollingUpdate";
  if (strategy["type"] == "RollingUpdate") {
    json& rolling = strategy["rollingUpdate"];
    if (!rolling.is_object()) rolling = json::object();
    if (unset(rolling, "maxUnavailable"))
      rolling["maxUnavailable"] = deployment ? json("25%") : json(1);
    if (unset(rolling, "maxSurge")) rolling["maxSurge"] = deployment ? json("25%") : json(0);
  }
  if (unset(spec, "revisionHistoryLimit")) spec["revisionHistoryLimit"] = 10;
  if (deployment) {
    if (unset(spec, "replicas")) spec["replicas"] = 1;
    if (unset(spec, "progressDeadlineSeconds")) spec["progressDeadlineSeconds"] = 600;
  }
}

bool IsJobs(const ResourceInfo& r) { return r.group == "batch" && r.plural == "jobs"; }
bool IsDefaultedAppsWorkload(const ResourceInfo& r) {
  return r.group == "apps" && (r.plural == "daemonsets" || r.plural == "deployments");
}

std::string ValidateDns1123Label(std::string_view s) {
  auto ok_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  bool ok = !s.empty() && s.size() <= 63 && ok_char(s.front()) && ok_char(s.back()) &&
            std::all_of(s.begin(), s.end(), [&](char c) { return ok_char(c) || c == '-'; });
  if (ok) return "";
  if (s.size() > 63) return "must be no more than 63 characters";
  return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
         "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
         "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
}

std::string ValidateDns1123Subdomain(std::string_view s) {
  if (s.size() > 253) return "must be no more than 253 characters";
  size_t start = 0;
  bool ok = !s.empty();
  while (ok) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == s.npos ? s.npos : dot - start);
    if (!ValidateDns1123Label(label).empty()) ok = false;
    if (dot == s.npos) break;
    start = dot + 1;
  }
  if (ok) return "";
  return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
         "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
         "regex used for validation is "
         "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
}

std::string ValidatePathSegmentName(std::string_view s) {
  if (s == "." || s == "..") return "may not be '" + std::string(s) + "'";
  if (s.find('/') != s.npos) return "may not contain '/'";
  if (s.find('%') != s.npos) return "may not contain '%'";
  return "";
}

// The real server's per-resource name rules, roughly: RBAC names are path
// segments ("system:controller:x"), namespaces and services DNS labels,
// everything else DNS subdomains.
std::string ValidateName(const ResourceInfo& r, std::string_view name) {
  if (r.group == "rbac.authorization.k8s.io") return ValidatePathSegmentName(name);
  if (r.group.empty() && (r.plural == "namespaces" || r.plural == "services")) {
    return ValidateDns1123Label(name);
  }
  return ValidateDns1123Subdomain(name);
}

std::string ToLowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// metadata.labels / annotations keys and label values.
std::vector<FieldError> ValidateMetadataMaps(const json& obj) {
  std::vector<FieldError> errs;
  const json& m = Meta(obj);
  if (auto l = m.find("labels"); l != m.end() && !l->is_null()) {
    if (!l->is_object()) {
      errs.push_back(FieldError::TypeInvalid("metadata.labels", *l, "must be an object"));
    } else {
      for (const auto& [k, v] : l->items()) {
        std::string e = ValidateQualifiedName(k);
        if (!e.empty()) errs.push_back(FieldError::Invalid("metadata.labels", k, e));
        if (!v.is_string()) {
          errs.push_back(FieldError::TypeInvalid("metadata.labels", v, "must be a string"));
          continue;
        }
        e = ValidateLabelValue(v.get<std::string>());
        if (!e.empty()) errs.push_back(FieldError::Invalid("metadata.labels", v, e));
      }
    }
  }
  if (auto a = m.find("annotations"); a != m.end() && !a->is_null()) {
    if (!a->is_object()) {
      errs.push_back(FieldError::TypeInvalid("metadata.annotations", *a, "must be an object"));
    } else {
      for (const auto& [k, v] : a->items()) {
        std::string e = ValidateQualifiedName(ToLowerAscii(k));
        if (!e.empty()) errs.push_back(FieldError::Invalid("metadata.annotations", k, e));
        if (!v.is_string()) {
          errs.push_back(
              FieldError::TypeInvalid("metadata.annotations." + k, v, "must be a string"));
        }
      }
    }
  }
  return errs;
}

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(std::string_view in) {
  std::string out;
  size_t i = 0;
  while (i + 2 < in.size()) {
    uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += kB64[(n >> 18) & 63];
    out += kB64[(n >> 12) & 63];
    out += kB64[(n >> 6) & 63];
    out += kB64[n & 63];
    i += 3;
  }
  if (i + 1 == in.size()) {
    uint32_t n = uint8_t(in[i]) << 16;
    out += kB64[(n >> 18) & 63];
    out += kB64[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += kB64[(n >> 18) & 63];
    out += kB64[(n >> 12) & 63];
    out += kB64[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = val(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

// The continue token: base64 of {"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"},
// the shape the real server uses, so it is opaque and stable.
std::string EncodeContinue(uint64_t rv, const std::string& last_key) {
  json j = {{"v", "meta.k8s.io/v1"}, {"rv", rv}, {"start", last_key + std::string(1, '\0')}};
  return Base64Encode(j.dump());
}

struct ContinuePoint {
  uint64_t rv = 0;
  std::string start;  // first key to return (inclusive)
};

ApiResult<ContinuePoint> DecodeContinue(const std::string& token) {
  auto bad = [](std::string why) { return BadRequestError("continue key is not valid: " + why); };
  auto raw = Base64Decode(token);
  if (!raw) return bad("illegal base64 data");
  json j = json::parse(*raw, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("invalid character in continue token");
  if (j.value("v", "") != "meta.k8s.io/v1")
    return bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  auto rv = j.find("rv");
  auto start = j.find("start");
  if (rv == j.end() || !rv->is_number_unsigned() || start == j.end() || !start->is_string()) {
    return bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  ContinuePoint p;
  p.rv = rv->get<uint64_t>();
  p.start = start->get<std::string>();
  if (p.rv == 0) return bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  return p;
}

ApiResult<LabelSelector> ParseLabels(const std::string& text) {
  auto sel = LabelSelector::Parse(text);
  if (!sel.ok()) return BadRequestError(sel.status().message());
  return std::move(sel).value();
}

ApiResult<FieldSelector> ParseFields(const ResourceInfo& r, const std::string& text) {
  auto sel = FieldSelector::Parse(text);
  if (!sel.ok()) return BadRequestError(sel.status().message());
  for (const auto& req : sel->requirements()) {
    if (req.field == "metadata.name" || req.field == "metadata.namespace") continue;
    if (std::find(r.field_selectors.begin(), r.field_selectors.end(), req.field) ==
        r.field_selectors.end()) {
      return BadRequestError("field label not supported: " + req.field);
    }
  }
  return std::move(sel).value();
}

// Go's %v of a precondition pointer: the value, or "<nil>".
std::string Precond(const std::optional<std::string>& v) { return v ? *v : "<nil>"; }

json ListMetadata(const ListResult& l) {
  json meta = {{"resourceVersion", l.resource_version}};
  if (!l.continue_token.empty()) meta["continue"] = l.continue_token;
  if (l.remaining_item_count) meta["remainingItemCount"] = *l.remaining_item_count;
  return meta;
}

}  // namespace

std::string FormatTimestamp(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<uint64_t> ParseResourceVersion(std::string_view rv) {
  if (rv.empty() || rv.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : rv) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// --- ObjectJson ---

struct ObjectJson::Snapshot {
  json value;
  mutable std::once_flag once;
  mutable std::string text;
};

const std::string& ObjectJson::text() const {
  const Snapshot& s = *snapshot_;
  std::call_once(s.once, [&s] {
    s.text = DumpJson(s.value);
    s.text.shrink_to_fit();  // dump grows the string geometrically
  });
  return s.text;
}

// --- WatchEvent ---

std::string_view WatchEvent::TypeName(Type t) {
  switch (t) {
    case Type::kAdded:
      return "ADDED";
    case Type::kModified:
      return "MODIFIED";
    case Type::kDeleted:
      return "DELETED";
    case Type::kBookmark:
      return "BOOKMARK";
    case Type::kError:
      return "ERROR";
  }
  return "ERROR";
}

json WatchEvent::ToJson() const {
  return {{"type", TypeName(type)}, {"object", object ? *object : json::object()}};
}

std::string WatchEvent::Dump() const {
  if (!object_json) return DumpJson(ToJson());
  // ToJson()'s keys in the order json writes them (sorted).
  std::string out;
  const std::string& object = object_json.text();
  out.reserve(object.size() + 32);
  out.append("{\"object\":").append(object).append(",\"type\":\"");
  out.append(TypeName(type)).append("\"}");
  return out;
}

// --- Watcher ---

struct Watcher::Channel {
  struct Item {
    WatchEvent::Type type;
    Object obj;
    ObjectJson json;  // obj's, when known
    Object prev;      // raw MODIFIED/DELETED: the object before the change
    uint64_t rv;
    bool final;  // already converted (initial events, bookmarks, errors)
  };

  std::string bucket;
  std::string ns;  // "" = all namespaces
  LabelSelector labels;
  FieldSelector fields;
  bool allow_bookmarks = false;
  std::string kind;
  std::string api_version;
  size_t capacity = 0;
  uint64_t min_rv = 0;  // raw events at or below this are skipped

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> queue;    // GUARDED_BY(mu)
  bool closed = false;       // GUARDED_BY(mu)
  std::string close_reason;  // GUARDED_BY(mu)

  bool Filtered() const { return !labels.Empty() || !fields.Empty(); }
  bool Matches(const json& obj) const { return labels.MatchesObject(obj) && fields.Matches(obj); }
  bool InScope(const std::string& event_ns) const { return ns.empty() || ns == event_ns; }

  // Queues a raw store event. REQUIRES: the store lock (so pushes are ordered).
  // Returns false when the watcher just overflowed.
  bool Push(Item item, bool bounded) {
    std::lock_guard<std::mutex> lk(mu);
    if (closed) return true;
    if (bounded && queue.size() >= capacity) {
      closed = true;
      close_reason = "too slow";
      cv.notify_all();
      return false;
    }
    queue.push_back(std::move(item));
    cv.notify_one();
    return true;
  }

  void Close(std::string reason) {
    std::lock_guard<std::mutex> lk(mu);
    if (!closed) {
      closed = true;
      close_reason = std::move(reason);
    }
    cv.notify_all();
  }

  bool IsClosed() {
    std::lock_guard<std::mutex> lk(mu);
    return closed;
  }

  // The event a client sees for a raw change, given the selectors (the watch
  // cache's rule: an object that stops matching is DELETED, one that starts
  // matching is ADDED).
  std::optional<WatchEvent> Convert(Item item) const {
    if (item.final || !Filtered()) {
      return WatchEvent{item.type, std::move(item.obj), item.rv, std::move(item.json)};
    }
    bool cur = item.type != WatchEvent::Type::kDeleted && Matches(*item.obj);
    bool old = item.prev != nullptr && Matches(*item.prev);
    if (item.type == WatchEvent::Type::kAdded) old = false;
    if (cur && !old) {
      return WatchEvent{WatchEvent::Type::kAdded, std::move(item.obj), item.rv,
                        std::move(item.json)};
    }
    if (cur && old) {
      return WatchEvent{WatchEvent::Type::kModified, std::move(item.obj), item.rv,
                        std::move(item.json)};
    }
    if (!cur && old) {
      if (item.type == WatchEvent::Type::kDeleted) {
        return WatchEvent{WatchEvent::Type::kDeleted, std::move(item.obj), item.rv,
                          std::move(item.json)};
      }
      // The previous content with the event's resourceVersion.
      json gone = *item.prev;
      gone["metadata"]["resourceVersion"] = std::to_string(item.rv);
      return WatchEvent{WatchEvent::Type::kDeleted, std::make_shared<const json>(std::move(gone)),
                        item.rv};
    }
    return std::nullopt;
  }
};

Watcher::~Watcher() { Stop(); }

std::optional<WatchEvent> Watcher::Next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lk(channel_->mu);
  while (true) {
    while (!channel_->queue.empty()) {
      Channel::Item item = std::move(channel_->queue.front());
      channel_->queue.pop_front();
      lk.unlock();
      auto ev = channel_->Convert(std::move(item));
      if (ev) return ev;
      lk.lock();
    }
    if (channel_->closed) return std::nullopt;
    if (channel_->cv.wait_until(lk, deadline) == std::cv_status::timeout &&
        channel_->queue.empty()) {
      return std::nullopt;
    }
  }
}

bool Watcher::closed() const {
  std::lock_guard<std::mutex> lk(channel_->mu);
  return channel_->closed && channel_->queue.empty();
}

std::string Watcher::close_reason() const {
  std::lock_guard<std::mutex> lk(channel_->mu);
  return channel_->close_reason;
}

void Watcher::Stop() { channel_->Close("stopped"); }

// --- ListResult ---

json ListResult::ToJson(const ResourceInfo& resource) const {
  json out = {{"kind", resource.list_kind},
              {"apiVersion", resource.ApiVersion()},
              {"metadata", ListMetadata(*this)},
              {"items", json::array()}};
  auto& arr = out["items"];
  for (const auto& o : items) arr.push_back(*o);
  return out;
}

std::string ListResult::Dump(const ResourceInfo& resource) const {
  size_t size = 256;
  for (const auto& j : item_json) size += j ? j.text().size() + 1 : 0;
  std::string out;
  out.reserve(size);
  // ToJson()'s keys in the order json writes them (sorted).
  out.append("{\"apiVersion\":").append(DumpJson(resource.ApiVersion())).append(",\"items\":[");
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    if (i < item_json.size() && item_json[i]) {
      out.append(item_json[i].text());
    } else {
      out.append(DumpJson(*items[i]));
    }
  }
  out.append("],\"kind\":").append(DumpJson(resource.list_kind));
  out.append(",\"metadata\":").append(DumpJson(ListMetadata(*this))).append("}");
  return out;
}

// --- Store ---

Store::Store(StoreOptions options) : options_(std::move(options)), hooks_(options_.hooks) {
  if (!options_.now) options_.now = [] { return std::chrono::system_clock::now(); };
  if (options_.history_size == 0) options_.history_size = 1;
  if (options_.watcher_queue_size == 0) options_.watcher_queue_size = 1;
  uint64_t seed = options_.seed;
  if (seed == 0) {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  rand_.seed(seed);
  if (options_.initial_namespaces) {
    for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
      json obj = {{"metadata", {{"name", ns}}}};
      auto r = Create(NamespaceResource(), "", std::move(obj));
      (void)r;
    }
    // Start-up writes are not requests.
    std::lock_guard<std::mutex> lk(counters_mu_);
    requests_.clear();
  }
  if (options_.gc_thread) {
    bg_ = std::jthread([this](std::stop_token st) { BackgroundLoop(st); });
  }
}

Store::~Store() {
  if (bg_.joinable()) {
    bg_.request_stop();
    bg_cv_.notify_all();
    bg_.join();
  }
  std::unique_lock lk(mu_);
  for (auto& [bucket, chans] : channels_) {
    for (auto& ch : chans) ch->Close("store shut down");
  }
  channels_.clear();
}

void Store::SetHooks(StoreHooks hooks) { hooks_ = std::move(hooks); }

std::string Store::Key(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string k;
  k.reserve(ns.size() + name.size() + 1);
  k.append(ns).append("/").append(name);
  return k;
}

Store::Bucket& Store::BucketFor(const ResourceInfo& r) {
  std::string q = QualifiedOf(r);
  auto it = buckets_.find(q);
  if (it == buckets_.end()) {
    it = buckets_.emplace(q, Bucket{r, {}}).first;
  }
  return it->second;
}

const Store::Bucket* Store::FindBucket(const ResourceInfo& r) const {
  auto it = buckets_.find(QualifiedOf(r));
  return it == buckets_.end() ? nullptr : &it->second;
}

Object Store::Lookup(const ResourceInfo& r, const std::string& key) const {
  std::shared_lock lk(mu_);
  const Bucket* b = FindBucket(r);
  if (b == nullptr) return nullptr;
  auto it = b->objects.find(key);
  return it == b->objects.end() ? nullptr : it->second.obj;
}

void Store::Count(std::string_view verb, const ResourceInfo& r) {
  std::lock_guard<std::mutex> lk(counters_mu_);
  ++requests_[std::string(verb)][QualifiedOf(r)];
}

std::string Store::NowString() const { return FormatTimestamp(options_.now()); }

std::string Store::NewUid() {
  uint64_t a, b;
  {
    std::lock_guard<std::mutex> lk(rand_mu_);
    a = rand_();
    b = rand_();
  }
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

std::string Store::RandomSuffix() {
  // The real server's alphabet for generateName (no vowels, no confusables).
  static constexpr std::string_view kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::string s;
  std::lock_guard<std::mutex> lk(rand_mu_);
  for (int i = 0; i < 5; ++i) s += kAlphabet[rand_() % kAlphabet.size()];
  return s;
}

void Store::WakeBackground() {
  {
    std::lock_guard<std::mutex> lk(bg_mu_);
    gc_pending_ = true;
  }
  bg_cv_.notify_all();
}

void Store::BackgroundLoop(std::stop_token stop) {
  auto next_bookmark = std::chrono::steady_clock::now() + options_.bookmark_interval;
  while (!stop.stop_requested()) {
    bool gc = false;
    {
      std::unique_lock<std::mutex> lk(bg_mu_);
      bg_cv_.wait_until(lk, stop, next_bookmark, [this] { return gc_pending_; });
      gc = gc_pending_;
      gc_pending_ = false;
    }
    if (stop.stop_requested()) break;
    if (gc) CollectGarbage();
    if (std::chrono::steady_clock::now() >= next_bookmark) {
      SendBookmarks();
      next_bookmark = std::chrono::steady_clock::now() + options_.bookmark_interval;
    }
  }
}

// --- Commit primitives (mu_ held exclusively) ---

void Store::RecordEvent(WatchEvent::Type type, const Bucket& b, const Entry& cur, Object prev) {
  const std::string q = QualifiedOf(b.info);
  const std::string ns = MetaString(*cur.obj, "namespace");
  history_.push_back(HistoryEvent{type, q, ns, rv_, cur.obj, cur.json, prev});
  while (history_.size() > options_.history_size) {
    compacted_rv_ = std::max(compacted_rv_, history_.front().rv);
    history_.pop_front();
  }
  auto it = channels_.find(q);
  if (it == channels_.end()) return;
  auto& chans = it->second;
  for (size_t i = 0; i < chans.size();) {
    auto& ch = chans[i];
    if (ch->IsClosed()) {
      chans[i] = std::move(chans.back());
      chans.pop_back();
      continue;
    }
    if (ch->InScope(ns) && rv_ > ch->min_rv) {
      if (!ch->Push({type, cur.obj, cur.json, prev, rv_, false}, true)) ++closed_slow_;
    }
    ++i;
  }
}

Store::Entry Store::Freeze(json obj, uint64_t rv) {
  auto s = std::make_shared<ObjectJson::Snapshot>();
  s->value = std::move(obj);
  const json* labels = nullptr;
  if (auto m = s->value.find("metadata"); m != s->value.end() && m->is_object()) {
    if (auto l = m->find("labels"); l != m->end()) labels = &*l;
  }
  // The object shares the snapshot's allocation and keeps it alive.
  return Entry{Object(s, &s->value), ObjectJson(s), rv, 0, labels};
}

Object Store::CommitPut(Bucket& b, const std::string& key, json obj, bool is_create) {
  const uint64_t rv = NextRv();
  obj["metadata"]["resourceVersion"] = std::to_string(rv);
  Entry e = Freeze(std::move(obj), rv);
  e.bytes = ApproxJsonSize(*e.obj);
  Object prev;
  auto it = b.objects.find(key);
  if (it != b.objects.end()) {
    prev = it->second.obj;
    total_bytes_ -= it->second.bytes;
    it->second = e;
  } else {
    b.objects.emplace(key, e);
  }
  total_bytes_ += e.bytes;
  RecordEvent(is_create ? WatchEvent::Type::kAdded : WatchEvent::Type::kModified, b, e, prev);
  return e.obj;
}

Object Store::CommitRemove(Bucket& b, const std::string& key) {
  auto it = b.objects.find(key);
  if (it == b.objects.end()) return nullptr;
  Object prev = it->second.obj;
  total_bytes_ -= it->second.bytes;
  b.objects.erase(it);
  const uint64_t rv = NextRv();
  json gone = *prev;
  gone["metadata"]["resourceVersion"] = std::to_string(rv);
  Entry e = Freeze(std::move(gone), rv);
  RecordEvent(WatchEvent::Type::kDeleted, b, e, prev);
  return e.obj;
}

// --- Create ---

ApiStatus Store::CheckNamespace(const ResourceInfo& r, std::string_view ns, std::string_view name) {
  if (!r.namespaced) return {};
  const Bucket* nb = FindBucket(NamespaceResource());
  const Entry* e = nullptr;
  if (nb != nullptr) {
    auto it = nb->objects.find(std::string(ns));
    if (it != nb->objects.end()) e = &it->second;
  }
  if (e == nullptr) return NotFoundError({"", "namespaces"}, ns);
  if (HasDeletionTimestamp(*e->obj)) {
    ApiError err = ForbiddenError(r.Resource(), name,
                                  "unable to create new content in namespace " + std::string(ns) +
                                      " because it is being terminated");
    err.details->causes.push_back({"NamespaceTerminating",
                                   "namespace " + std::string(ns) + " is being terminated",
                                   "metadata.namespace"});
    return err;
  }
  return {};
}

ApiResult<Object> Store::Create(const ResourceInfo& r, std::string_view ns, json obj,
                                const CreateOptions& options) {
  Count("create", r);
  if (!obj.is_object()) return BadRequestError("the body of the request must be a JSON object");
  if (!obj.contains("metadata") || obj["metadata"].is_null()) obj["metadata"] = json::object();
  if (!obj["metadata"].is_object()) return BadRequestError("metadata must be an object");
  json& meta = obj["metadata"];
  if (r.namespaced) {
    if (ns.empty()) return BadRequestError("a namespace is required for " + QualifiedOf(r));
    std::string body_ns = MetaString(obj, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      return BadRequestError(
          "the namespace of the provided object does not match the namespace sent on the request");
    }
    meta["namespace"] = std::string(ns);
  } else {
    meta.erase("namespace");
  }
  return DoCreate(r, std::string(ns), std::move(obj), options.dry_run);
}

ApiResult<Object> Store::DoCreate(const ResourceInfo& r, std::string ns, json obj, bool dry_run) {
  json& meta = obj["metadata"];
  if (!r.namespaced) ns.clear();
  if (auto rv = ParseResourceVersion(MetaString(obj, "resourceVersion")); rv && *rv != 0) {
    ApiError e;
    e.code = 500;
    e.message = "resourceVersion should not be set on objects to be created";
    return e;
  }
  meta.erase("resourceVersion");
  std::string name = MetaString(obj, "name");
  std::string generate = MetaString(obj, "generateName");
  const bool generated = name.empty() && !generate.empty();
  auto generate_name = [&] {
    name = generate.substr(0, std::min<size_t>(generate.size(), 58)) + RandomSuffix();
    meta["name"] = name;
  };
  if (generated) generate_name();
  if (name.empty()) {
    return InvalidError(
        r.group, r.kind, "",
        {FieldError::Required("metadata.name", "name or generateName is required")});
  }
  std::vector<FieldError> errs;
  if (std::string e = ValidateName(r, name); !e.empty()) {
    errs.push_back(FieldError::Invalid("metadata.name", name, e));
  }
  auto map_errs = ValidateMetadataMaps(obj);
  errs.insert(errs.end(), map_errs.begin(), map_errs.end());
  if (!errs.empty()) return InvalidError(r.group, r.kind, name, errs);

  obj["apiVersion"] = r.ApiVersion();
  obj["kind"] = r.kind;
  meta["uid"] = NewUid();
  meta["creationTimestamp"] = NowString();
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  meta.erase("selfLink");
  if (r.tracks_generation) {
    meta["generation"] = 1;
  } else {
    meta.erase("generation");
  }
  if (IsNamespaces(r)) {
    if (!obj.contains("spec") || !obj["spec"].is_object()) obj["spec"] = json::object();
    obj["spec"]["finalizers"] = json::array({kNamespaceFinalizer});
    obj["status"] = {{"phase", "Active"}};
  } else if (r.group.empty() && r.plural == "pods") {
    obj["status"] = {{"phase", "Pending"}, {"qosClass", PodQosClass(obj)}};
  } else if (r.reset_status_on_create) {
    if (r.custom) {
      obj.erase("status");
    } else {
      obj["status"] = json::object();
    }
  }
  if (IsJobs(r)) DefaultNewJob(obj);
  if (IsDefaultedAppsWorkload(r)) DefaultAppsWorkload(r, obj);
  if (hooks_.admit) GPUOP_API_RETURN_IF_ERROR(hooks_.admit(r, obj, nullptr));

  for (int attempt = 0;; ++attempt) {
    const std::string key = Key(ns, name);
    std::unique_lock lk(mu_);
    GPUOP_API_RETURN_IF_ERROR(CheckNamespace(r, ns, name));
    Bucket& b = BucketFor(r);
    if (b.objects.count(key) > 0) {
      // Like the real server (RetryGenerateName), a generated name that is
      // taken is generated again a few times before giving up.
      if (generated && attempt < 7) {
        lk.unlock();
        generate_name();
        continue;
      }
      return AlreadyExistsError(r.Resource(), name);
    }
    if (dry_run) return std::make_shared<const json>(std::move(obj));
    const bool owned = obj["metadata"].contains("ownerReferences");
    Object out = CommitPut(b, key, std::move(obj), /*is_create=*/true);
    // An owner may already be gone (the garbage collector deletes such objects).
    if (owned) WakeBackground();
    return out;
  }
}

// --- Get / List ---

ApiResult<Object> Store::Get(const ResourceInfo& r, std::string_view ns, std::string_view name) {
  Count("get", r);
  Object o = Lookup(r, Key(r.namespaced ? ns : "", name));
  if (!o) return NotFoundError(r.Resource(), name);
  return o;
}

ApiResult<ListResult> Store::List(const ResourceInfo& r, std::string_view ns,
                                  const ListOptions& options) {
  Count("list", r);
  GPUOP_API_ASSIGN_OR_RETURN(LabelSelector labels, ParseLabels(options.label_selector));
  GPUOP_API_ASSIGN_OR_RETURN(FieldSelector fields, ParseFields(r, options.field_selector));
  if (options.limit < 0) return BadRequestError("limit must be non-negative");
  std::optional<ContinuePoint> cont;
  if (!options.continue_token.empty()) {
    GPUOP_API_ASSIGN_OR_RETURN(cont, DecodeContinue(options.continue_token));
  }
  const std::string prefix = (r.namespaced && !ns.empty()) ? std::string(ns) + "/" : "";
  const bool filtered = !labels.Empty() || !fields.Empty();

  ListResult out;
  std::shared_lock lk(mu_);
  if (cont && cont->rv < forced_compaction_rv_) {
    return ResourceExpiredError(
        "The provided continue parameter is too old to display a consistent list result. You "
        "can start a new list without the continue parameter, or use the continue token in this "
        "response to retrieve the remainder of the results. Continuing with the provided token "
        "results in an inconsistent list - objects that were created, modified, or deleted "
        "between the time the first chunk was returned and now may show up in the list.");
  }
  const uint64_t list_rv = cont ? cont->rv : rv_;
  out.resource_version = std::to_string(list_rv);
  const Bucket* b = FindBucket(r);
  if (b == nullptr) return out;
  if (!filtered && prefix.empty()) {
    // At most the whole bucket (or a page): the vectors grow once.
    size_t n = b->objects.size();
    if (options.limit > 0) n = std::min(n, static_cast<size_t>(options.limit));
    out.items.reserve(n);
    out.item_json.reserve(n);
  }

  std::string start = prefix;
  if (cont && cont->start > start) start = cont->start;
  auto it = b->objects.lower_bound(start);
  auto in_range = [&](const std::string& k) {
    return prefix.empty() || k.compare(0, prefix.size(), prefix) == 0;
  };
  // Single-object shortcut for fieldSelector=metadata.name=x (kubelets, informers on one node).
  std::optional<std::string> only = fields.RequiredValue("metadata.name");
  std::string last_key;
  for (; it != b->objects.end() && in_range(it->first); ++it) {
    const json& o = *it->second.obj;
    if (only && MetaString(o, "name") != *only) continue;
    if (filtered) {
      static const json kNoLabels;
      const json& l = it->second.labels ? *it->second.labels : kNoLabels;
      if (!(labels.Matches(l) && fields.Matches(o))) continue;
    }
    if (options.limit > 0 && static_cast<int64_t>(out.items.size()) == options.limit) {
      // Another match exists: hand out a continue token.
      out.continue_token = EncodeContinue(list_rv, last_key);
      if (!filtered) {
        int64_t remaining = 0;
        for (auto rest = it; rest != b->objects.end() && in_range(rest->first); ++rest) {
          ++remaining;
        }
        out.remaining_item_count = remaining;
      }
      break;
    }
    out.items.push_back(it->second.obj);
    out.item_json.push_back(it->second.json);
    last_key = it->first;
  }
  return out;
}

// --- Update / Patch ---

ApiResult<json> Store::PrepareUpdate(const ResourceInfo& r, const json& old, json obj,
                                     const std::string& subresource) {
  if (!obj.is_object()) return BadRequestError("the body of the request must be a JSON object");
  if (!obj.contains("metadata") || obj["metadata"].is_null()) obj["metadata"] = json::object();
  if (!obj["metadata"].is_object()) return BadRequestError("metadata must be an object");
  const json& old_meta = Meta(old);
  const std::string name = old_meta.value("name", "");
  const std::string ns = old_meta.value("namespace", "");

  std::string new_name = MetaString(obj, "name");
  if (!new_name.empty() && new_name != name) {
    return BadRequestError("the name of the object (" + new_name +
                           ") does not match the name on the URL (" + name + ")");
  }
  if (r.namespaced) {
    std::string body_ns = MetaString(obj, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      return BadRequestError(
          "the namespace of the provided object does not match the namespace sent on the request");
    }
  }
  // Optimistic concurrency.
  const std::string old_rv = old_meta.value("resourceVersion", "");
  const std::string new_rv = MetaString(obj, "resourceVersion");
  if (new_rv.empty()) {
    if (!r.allow_unconditional_update) {
      return InvalidError(
          r.group, r.kind, name,
          {FieldError::Invalid("metadata.resourceVersion", 0, "must be specified for an update")});
    }
  } else if (new_rv != old_rv) {
    if (!ParseResourceVersion(new_rv)) {
      return BadRequestError("invalid resourceVersion " + json(new_rv).dump());
    }
    return ConflictError(r.Resource(), name, kOptimisticLockErrorMsg);
  }

  json out;
  if (subresource == "status") {
    // Only status changes; everything else stays as stored.
    out = old;
    if (obj.contains("status")) {
      out["status"] = obj["status"];
    } else {
      out.erase("status");
    }
  } else {
    out = std::move(obj);
    // An update is decoded and defaulted like a create (kubectl apply of a
    // manifest without updateStrategy still stores RollingUpdate).
    if (IsJobs(r)) DefaultJobSpec(out);
    if (IsDefaultedAppsWorkload(r)) DefaultAppsWorkload(r, out);
    json& meta = out["metadata"];
    std::vector<FieldError> errs;
    std::string uid = MetaString(out, "uid");
    if (!uid.empty() && uid != old_meta.value("uid", "")) {
      errs.push_back(FieldError::Invalid("metadata.uid", uid, "field is immutable"));
    }
    // New finalizers cannot be added to an object being deleted.
    if (HasDeletionTimestamp(old)) {
      auto old_f = Finalizers(old);
      for (const auto& f : Finalizers(out)) {
        if (std::find(old_f.begin(), old_f.end(), f) == old_f.end()) {
          errs.push_back(FieldError::Forbidden("metadata.finalizers",
                                               "no new finalizers can be added if the object is "
                                               "being deleted, found new finalizers []string{" +
                                                   json(f).dump() + "}"));
        }
      }
    }
    auto map_errs = ValidateMetadataMaps(out);
    errs.insert(errs.end(), map_errs.begin(), map_errs.end());
    if (!errs.empty()) return InvalidError(r.group, r.kind, name, errs);
    meta["name"] = name;
    if (r.namespaced) {
      meta["namespace"] = ns;
    } else {
      meta.erase("namespace");
    }
    for (const char* f : {"uid", "creationTimestamp", "deletionTimestamp", "generation"}) {
      if (old_meta.contains(f)) {
        meta[f] = old_meta[f];
      } else {
        meta.erase(f);
      }
    }
    if (old_meta.contains("deletionGracePeriodSeconds") &&
        !meta.contains("deletionGracePeriodSeconds")) {
      meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"];
    }
    meta.erase("selfLink");
    if (r.subresources.status && subresource != "binding") {
      if (old.contains("status")) {
        out["status"] = old["status"];
      } else {
        out.erase("status");
      }
    }
    if (IsNamespaces(r)) {
      // spec.finalizers change only through /finalize (here: the store's namespace cleanup).
      if (old.contains("spec")) {
        out["spec"] = old["spec"];
      }
    }
  }
  out["apiVersion"] = r.ApiVersion();
  out["kind"] = r.kind;
  out["metadata"]["resourceVersion"] = old_rv;
  if (r.tracks_generation && SpecChanged(old, out, r.subresources.status)) {
    out["metadata"]["generation"] = MetaInt(old, "generation", 0) + 1;
  }
  return out;
}

ApiResult<Object> Store::GuaranteedUpdate(const ResourceInfo& r, std::string_view ns,
                                          std::string_view name, const std::string& subresource,
                                          bool dry_run, bool retry, const Mutator& mutate,
                                          bool create_if_missing) {
  const std::string rns = r.namespaced ? std::string(ns) : std::string();
  const std::string key = Key(rns, name);
  for (int attempt = 0; attempt < kMaxUpdateAttempts; ++attempt) {
    Object cur = Lookup(r, key);
    if (!cur) {
      if (!create_if_missing) return NotFoundError(r.Resource(), name);
      GPUOP_API_ASSIGN_OR_RETURN(json created, mutate(nullptr));
      if (!created.is_object())
        return BadRequestError("the body of the request must be a JSON object");
      if (!created.contains("metadata") || !created["metadata"].is_object()) {
        created["metadata"] = json::object();
      }
      std::string body_name = MetaString(created, "name");
      if (!body_name.empty() && body_name != name) {
        return BadRequestError("the name of the object (" + body_name +
                               ") does not match the name on the URL (" + std::string(name) + ")");
      }
      created["metadata"]["name"] = std::string(name);
      if (r.namespaced) created["metadata"]["namespace"] = rns;
      created["metadata"].erase("resourceVersion");
      auto res = DoCreate(r, rns, std::move(created), dry_run);
      if (!res.ok() && res.error().reason == "AlreadyExists" && retry) continue;
      return res;
    }
    GPUOP_API_ASSIGN_OR_RETURN(json next, mutate(cur));
    GPUOP_API_ASSIGN_OR_RETURN(json prepared, PrepareUpdate(r, *cur, std::move(next), subresource));
    if (hooks_.admit) GPUOP_API_RETURN_IF_ERROR(hooks_.admit(r, prepared, cur.get()));
    if (prepared == *cur) return cur;  // no-op: no write, no event, same resourceVersion
    if (dry_run) return std::make_shared<const json>(std::move(prepared));
    const bool remove_now = HasDeletionTimestamp(prepared) && Finalizers(prepared).empty() &&
                            !(IsNamespaces(r) && HasSpecFinalizers(prepared)) &&
                            MetaInt(prepared, "deletionGracePeriodSeconds", 0) == 0;
    {
      std::unique_lock lk(mu_);
      Bucket& b = BucketFor(r);
      auto it = b.objects.find(key);
      const bool gone = it == b.objects.end();
      if (gone || it->second.obj != cur) {
        lk.unlock();
        if (!retry && gone) return NotFoundError(r.Resource(), name);
        continue;  // changed meanwhile: re-read and re-apply
      }
      if (remove_now) {
        // The last finalizer of an object being deleted is gone: delete it.
        CommitPut(b, key, std::move(prepared), false);
        Object gone = CommitRemove(b, key);
        lk.unlock();
        WakeBackground();
        return gone;
      }
      const bool owned = prepared["metadata"].contains("ownerReferences");
      Object out = CommitPut(b, key, std::move(prepared), false);
      if (owned) WakeBackground();
      return out;
    }
  }
  return ConflictError(r.Resource(), name, kOptimisticLockErrorMsg);
}

ApiResult<Object> Store::Update(const ResourceInfo& r, std::string_view ns, std::string_view name,
                                json obj, const UpdateOptions& options) {
  Count("update", r);
  const bool subresource_ok = options.subresource.empty() ||
                              (options.subresource == "status" && r.subresources.status) ||
                              (options.subresource == "binding" && r.subresources.status);
  if (!subresource_ok) return NotFoundError(r.Resource(), name);
  const bool conditional = obj.is_object() && obj.contains("metadata") &&
                           obj["metadata"].is_object() &&
                           !MetaString(obj, "resourceVersion").empty();
  Mutator mutate = [&obj](const Object&) -> ApiResult<json> { return obj; };
  return GuaranteedUpdate(
      r, ns, name, options.subresource, options.dry_run,
      /*retry=*/!conditional, mutate,
      /*create_if_missing=*/r.allow_create_on_update && options.subresource.empty());
}

ApiResult<Object> Store::Patch(const ResourceInfo& r, std::string_view ns, std::string_view name,
                               const json& patch, const PatchOptions& options) {
  Count("patch", r);
  if (!options.subresource.empty() && (options.subresource != "status" || !r.subresources.status)) {
    return NotFoundError(r.Resource(), name);
  }
  const PatchHook* hook = nullptr;
  if (options.type == PatchType::kStrategicMerge) hook = &hooks_.strategic_merge;
  if (options.type == PatchType::kApply) hook = &hooks_.apply;
  if (hook != nullptr && !*hook) {
    return UnsupportedMediaTypeError(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json");
  }
  if ((options.type == PatchType::kMerge || options.type == PatchType::kStrategicMerge) &&
      !patch.is_object()) {
    return BadRequestError("json: cannot unmarshal " + std::string(patch.type_name()) +
                           " into Go value of type map[string]interface {}");
  }
  Mutator mutate = [&](const Object& cur) -> ApiResult<json> {
    json next;
    if (!cur) {
      // Only apply creates.
      GPUOP_API_ASSIGN_OR_RETURN(next, (*hook)(json(nullptr), patch, r, options));
      return next;
    }
    switch (options.type) {
      case PatchType::kMerge:
        next = MergePatch(*cur, patch);
        break;
      case PatchType::kJson: {
        auto res = ApplyJsonPatch(*cur, patch);
        if (!res.ok()) {
          ApiError e;
          e.code = 422;
          e.reason = "Invalid";
          e.message = res.status().message();
          return e;
        }
        next = std::move(res).value();
        break;
      }
      case PatchType::kStrategicMerge:
      case PatchType::kApply: {
        GPUOP_API_ASSIGN_OR_RETURN(next, (*hook)(*cur, patch, r, options));
        break;
      }
    }
    // A resourceVersion the patch sets is a precondition; one it removes means "any".
    if (next.is_object() && next.contains("metadata") && next["metadata"].is_object() &&
        MetaString(next, "resourceVersion").empty()) {
      next["metadata"]["resourceVersion"] = MetaString(*cur, "resourceVersion");
    }
    return next;
  };
  return GuaranteedUpdate(r, ns, name, options.subresource, options.dry_run, /*retry=*/true, mutate,
                          /*create_if_missing=*/options.type == PatchType::kApply);
}

// --- Delete ---

namespace {

// What a delete does to an object: the object to keep (with deletionTimestamp
// and the propagation finalizers) or nullopt to remove it now.
struct DeletePlan {
  std::optional<json> keep;
  bool unchanged = false;  // already being deleted, nothing to do
};

DeletePlan PlanDelete(const ResourceInfo& r, const json& cur,
                      std::optional<PropagationPolicy> policy, std::optional<int64_t> grace_request,
                      std::chrono::system_clock::time_point now_tp, int64_t* grace_out) {
  DeletePlan plan;
  json obj = cur;
  const bool being_deleted = HasDeletionTimestamp(cur);
  bool changed = false;
  // Propagation finalizers (the garbage collector acts on them).
  if (policy || !being_deleted) {
    PropagationPolicy p = policy.value_or(PropagationPolicy::kBackground);
    if (!policy && HasFinalizer(cur, kFinalizerOrphan)) p = PropagationPolicy::kOrphan;
    auto before = Finalizers(obj);
    if (p == PropagationPolicy::kOrphan) {
      AddFinalizer(obj, kFinalizerOrphan);
      DropFinalizer(obj, kFinalizerForeground);
    } else if (p == PropagationPolicy::kForeground) {
      AddFinalizer(obj, kFinalizerForeground);
      DropFinalizer(obj, kFinalizerOrphan);
    } else if (policy) {
      DropFinalizer(obj, kFinalizerOrphan);
      DropFinalizer(obj, kFinalizerForeground);
    }
    if (Finalizers(obj) != before) changed = true;
  }
  // Graceful deletion (pods bound to a node).
  int64_t grace = 0;
  if (r.graceful_deletion) {
    const json spec = cur.value("spec", json::object());
    const std::string node = spec.value("nodeName", "");
    const std::string phase = cur.value("status", json::object()).value("phase", "");
    grace = grace_request.value_or(spec.value("terminationGracePeriodSeconds", int64_t{30}));
    if (node.empty() || phase == "Succeeded" || phase == "Failed") grace = 0;
    if (grace < 0) grace = 0;
  }
  *grace_out = grace;
  const std::string now = FormatTimestamp(now_tp);
  const std::string now_plus_grace = FormatTimestamp(now_tp + std::chrono::seconds(grace));
  const bool finalizers = !Finalizers(obj).empty() || (IsNamespaces(r) && HasSpecFinalizers(obj));
  if (!finalizers && grace == 0) return plan;  // remove now
  json& meta = obj["metadata"];
  if (!being_deleted) {
    meta["deletionTimestamp"] = grace > 0 ? now_plus_grace : now;
    meta["deletionGracePeriodSeconds"] = grace;
    if (MetaInt(obj, "generation", 0) > 0) meta["generation"] = MetaInt(obj, "generation", 0) + 1;
    changed = true;
    if (IsNamespaces(r)) obj["status"]["phase"] = "Terminating";
  } else if (grace < MetaInt(cur, "deletionGracePeriodSeconds", 0)) {
    // A shorter grace period replaces a longer one.
    meta["deletionTimestamp"] = grace > 0 ? now_plus_grace : now;
    meta["deletionGracePeriodSeconds"] = grace;
    changed = true;
  }
  plan.unchanged = !changed;
  plan.keep = std::move(obj);
  return plan;
}

}  // namespace

ApiResult<DeleteResult> Store::Delete(const ResourceInfo& r, std::string_view ns,
                                      std::string_view name, const DeleteOptions& options) {
  Count("delete", r);
  if (IsNamespaces(r) && (name == "default" || name == "kube-system" || name == "kube-public")) {
    return ForbiddenError(r.Resource(), name, "this namespace may not be deleted");
  }
  const std::string key = Key(r.namespaced ? ns : "", name);
  for (int attempt = 0; attempt < kMaxUpdateAttempts; ++attempt) {
    Object cur = Lookup(r, key);
    if (!cur) return NotFoundError(r.Resource(), name);
    const auto& pre = options.preconditions;
    const std::string uid = MetaString(*cur, "uid");
    const std::string rv = MetaString(*cur, "resourceVersion");
    if (pre.uid && *pre.uid != uid) {
      return ConflictError(r.Resource(), name,
                           "Precondition failed: UID in precondition: " + Precond(pre.uid) +
                               ", UID in object meta: " + uid);
    }
    if (pre.resource_version && *pre.resource_version != rv) {
      return ConflictError(
          r.Resource(), name,
          "Precondition failed: ResourceVersion in precondition: " + Precond(pre.resource_version) +
              ", ResourceVersion in object meta: " + rv);
    }
    int64_t grace = 0;
    DeletePlan plan = PlanDelete(r, *cur, options.propagation, options.grace_period_seconds,
                                 options_.now(), &grace);
    if (plan.keep && plan.unchanged) return DeleteResult{cur, false};
    if (options.dry_run) {
      return DeleteResult{plan.keep ? std::make_shared<const json>(*plan.keep) : cur,
                          !plan.keep.has_value()};
    }
    std::unique_lock lk(mu_);
    Bucket& b = BucketFor(r);
    auto it = b.objects.find(key);
    if (it == b.objects.end()) return NotFoundError(r.Resource(), name);
    if (it->second.obj != cur) continue;  // changed meanwhile: re-check preconditions
    DeleteResult out;
    if (plan.keep) {
      out.object = CommitPut(b, key, std::move(*plan.keep), false);
      out.deleted = false;
    } else {
      out.object = CommitRemove(b, key);
      out.deleted = true;
    }
    lk.unlock();
    WakeBackground();
    return out;
  }
  return ConflictError(r.Resource(), name, kOptimisticLockErrorMsg);
}

ApiResult<ListResult> Store::DeleteCollection(const ResourceInfo& r, std::string_view ns,
                                              const ListOptions& list,
                                              const DeleteOptions& options) {
  Count("deletecollection", r);
  ListOptions all = list;
  all.limit = 0;
  all.continue_token.clear();
  GPUOP_API_ASSIGN_OR_RETURN(ListResult listed, List(r, ns, all));
  ListResult out;
  out.resource_version = listed.resource_version;
  for (const auto& o : listed.items) {
    auto res = Delete(r, MetaString(*o, "namespace"), MetaString(*o, "name"), options);
    if (res.ok()) {
      out.items.push_back(res->object);
    } else if (res.error().code != 404) {
      return std::move(res).error();
    }
  }
  return out;
}

// --- Garbage collection (mu_ held exclusively) ---

bool Store::DeleteLocked(Bucket& b, const std::string& key, PropagationPolicy policy) {
  auto it = b.objects.find(key);
  if (it == b.objects.end()) return false;
  Object cur = it->second.obj;
  int64_t grace = 0;
  DeletePlan plan = PlanDelete(b.info, *cur, policy, std::nullopt, options_.now(), &grace);
  if (plan.keep) {
    if (plan.unchanged) return false;
    CommitPut(b, key, std::move(*plan.keep), false);
  } else {
    CommitRemove(b, key);
  }
  return true;
}

void Store::RemoveFinalizerLocked(Bucket& b, const std::string& key, std::string_view finalizer) {
  auto it = b.objects.find(key);
  if (it == b.objects.end()) return;
  json obj = *it->second.obj;
  DropFinalizer(obj, finalizer);
  const bool remove = HasDeletionTimestamp(obj) && Finalizers(obj).empty() &&
                      !(IsNamespaces(b.info) && HasSpecFinalizers(obj)) &&
                      MetaInt(obj, "deletionGracePeriodSeconds", 0) == 0;
  CommitPut(b, key, std::move(obj), false);
  if (remove) CommitRemove(b, key);
}

bool Store::GcPassLocked() {
  struct Loc {
    Bucket* b;
    std::string key;
  };
  std::unordered_map<std::string, Loc> by_uid;
  std::unordered_map<std::string, std::vector<Loc>> dependents;  // owner uid → dependents
  std::vector<Loc> terminating_ns;
  bool any_gc_work = false;
  for (auto& [q, b] : buckets_) {
    for (auto& [key, e] : b.objects) {
      const json& o = *e.obj;
      by_uid.emplace(MetaString(o, "uid"), Loc{&b, key});
      const json& m = Meta(o);
      if (auto refs = m.find("ownerReferences"); refs != m.end() && refs->is_array()) {
        for (const auto& ref : *refs) {
          if (ref.is_object() && ref.contains("uid") && ref["uid"].is_string()) {
            dependents[ref["uid"].get<std::string>()].push_back(Loc{&b, key});
            any_gc_work = true;
          }
        }
      }
      if (HasDeletionTimestamp(o)) {
        any_gc_work = true;
        if (IsNamespaces(b.info)) terminating_ns.push_back(Loc{&b, key});
      }
    }
  }
  if (!any_gc_work) return false;
  auto get = [](const Loc& l) -> Object {
    auto it = l.b->objects.find(l.key);
    return it == l.b->objects.end() ? nullptr : it->second.obj;
  };

  // 1. Owners being deleted in the foreground or orphaning their dependents.
  for (auto& [uid, loc] : by_uid) {
    Object o = get(loc);
    if (!o || !HasDeletionTimestamp(*o)) continue;
    auto deps = dependents.find(uid);
    if (HasFinalizer(*o, kFinalizerOrphan)) {
      if (deps != dependents.end()) {
        for (const auto& d : deps->second) {
          Object dep = get(d);
          if (!dep) continue;
          json changed = *dep;
          json& refs = changed["metadata"]["ownerReferences"];
          json kept = json::array();
          for (const auto& ref : refs) {
            if (!(ref.is_object() && ref.value("uid", "") == uid)) kept.push_back(ref);
          }
          if (kept.empty()) {
            changed["metadata"].erase("ownerReferences");
          } else {
            refs = std::move(kept);
          }
          CommitPut(*d.b, d.key, std::move(changed), false);
        }
      }
      RemoveFinalizerLocked(*loc.b, loc.key, kFinalizerOrphan);
      return true;
    }
    if (HasFinalizer(*o, kFinalizerForeground)) {
      bool blocked = false;
      if (deps != dependents.end()) {
        for (const auto& d : deps->second) {
          Object dep = get(d);
          if (!dep) continue;
          for (const auto& ref : Meta(*dep).value("ownerReferences", json::array())) {
            if (ref.is_object() && ref.value("uid", "") == uid &&
                ref.value("blockOwnerDeletion", false)) {
              blocked = true;
            }
          }
        }
      }
      if (!blocked) {
        RemoveFinalizerLocked(*loc.b, loc.key, kFinalizerForeground);
        return true;
      }
    }
  }

  // 2. Dependents whose owners are gone (or waiting for their dependents).
  bool changed_any = false;
  for (auto& [q, b] : buckets_) {
    std::vector<std::string> keys;
    for (const auto& [key, e] : b.objects) {
      if (Meta(*e.obj).contains("ownerReferences")) keys.push_back(key);
    }
    for (const auto& key : keys) {
      auto it = b.objects.find(key);
      if (it == b.objects.end()) continue;
      Object o = it->second.obj;
      const json refs = Meta(*o).value("ownerReferences", json::array());
      if (!refs.is_array() || refs.empty()) continue;
      int solid = 0, absent = 0, waiting = 0;
      json kept = json::array();
      for (const auto& ref : refs) {
        std::string uid = ref.is_object() ? ref.value("uid", "") : "";
        auto owner = by_uid.find(uid);
        Object owner_obj = owner == by_uid.end() ? nullptr : get(owner->second);
        if (!owner_obj) {
          ++absent;
          continue;
        }
        kept.push_back(ref);
        if (HasDeletionTimestamp(*owner_obj) && HasFinalizer(*owner_obj, kFinalizerForeground)) {
          ++waiting;
        } else {
          ++solid;
        }
      }
      if (solid > 0) {
        if (absent > 0) {
          // Drop references to owners that no longer exist.
          json next = *o;
          next["metadata"]["ownerReferences"] = std::move(kept);
          CommitPut(b, key, std::move(next), false);
          changed_any = true;
        }
        continue;
      }
      if (absent == 0 && waiting == 0) continue;
      if (HasDeletionTimestamp(*o)) continue;
      const std::string uid = MetaString(*o, "uid");
      const bool has_deps = dependents.count(uid) > 0;
      PropagationPolicy p = (waiting > 0 && has_deps) ? PropagationPolicy::kForeground
                                                      : PropagationPolicy::kBackground;
      if (DeleteLocked(b, key, p)) changed_any = true;
    }
  }
  if (changed_any) return true;

  // 3. Terminating namespaces: delete their content, then finalize.
  for (const auto& loc : terminating_ns) {
    Object nso = get(loc);
    if (!nso) continue;
    const std::string ns = MetaString(*nso, "name");
    const std::string prefix = ns + "/";
    bool remaining = false;
    for (auto& [q, b] : buckets_) {
      if (!b.info.namespaced) continue;
      std::vector<std::string> keys;
      for (auto it = b.objects.lower_bound(prefix);
           it != b.objects.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        keys.push_back(it->first);
      }
      for (const auto& key : keys) {
        remaining = true;
        if (DeleteLocked(b, key, PropagationPolicy::kBackground)) changed_any = true;
      }
    }
    if (!remaining && HasSpecFinalizers(*nso)) {
      json next = *nso;
      json& fs = next["spec"]["finalizers"];
      json kept = json::array();
      for (const auto& f : fs) {
        if (f != kNamespaceFinalizer) kept.push_back(f);
      }
      fs = std::move(kept);
      bool remove = Finalizers(next).empty() && fs.empty();
      CommitPut(*loc.b, loc.key, std::move(next), false);
      if (remove) CommitRemove(*loc.b, loc.key);
      changed_any = true;
    }
  }
  return changed_any;
}

void Store::CollectGarbage() {
  std::unique_lock lk(mu_);
  for (int i = 0; i < 100000 && GcPassLocked(); ++i) {
  }
}

// --- Watch ---

ApiResult<std::unique_ptr<Watcher>> Store::Watch(const ResourceInfo& r, std::string_view ns,
                                                 const WatchOptions& options) {
  Count("watch", r);
  GPUOP_API_ASSIGN_OR_RETURN(LabelSelector labels, ParseLabels(options.label_selector));
  GPUOP_API_ASSIGN_OR_RETURN(FieldSelector fields, ParseFields(r, options.field_selector));
  std::optional<uint64_t> from;
  if (!options.resource_version.empty()) {
    from = ParseResourceVersion(options.resource_version);
    if (!from) {
      return BadRequestError("invalid resource version: " + json(options.resource_version).dump());
    }
  }
  auto ch = std::make_shared<Watcher::Channel>();
  ch->bucket = QualifiedOf(r);
  ch->ns = r.namespaced ? std::string(ns) : std::string();
  ch->labels = std::move(labels);
  ch->fields = std::move(fields);
  ch->allow_bookmarks = options.allow_bookmarks;
  ch->kind = r.kind;
  ch->api_version = r.ApiVersion();
  ch->capacity = options_.watcher_queue_size;
  const bool initial = options.send_initial_events.value_or(!from || *from == 0);

  std::unique_lock lk(mu_);
  if (initial) {
    ch->min_rv = rv_;
    if (const Bucket* b = FindBucket(r)) {
      const std::string prefix = ch->ns.empty() ? "" : ch->ns + "/";
      for (auto it = b->objects.lower_bound(prefix);
           it != b->objects.end() &&
           (prefix.empty() || it->first.compare(0, prefix.size(), prefix) == 0);
           ++it) {
        const json& o = *it->second.obj;
        if (ch->Filtered() && !ch->Matches(o)) continue;
        ch->Push({WatchEvent::Type::kAdded, it->second.obj, it->second.json, nullptr, it->second.rv,
                  true},
                 false);
      }
    }
    if (options.send_initial_events.value_or(false) && options.allow_bookmarks) {
      json bm = {{"kind", ch->kind},
                 {"apiVersion", ch->api_version},
                 {"metadata",
                  {{"resourceVersion", std::to_string(rv_)},
                   {"annotations", {{std::string(kInitialEventsEnd), "true"}}}}}};
      ch->Push({WatchEvent::Type::kBookmark, std::make_shared<const json>(std::move(bm)),
                ObjectJson(), nullptr, rv_, true},
               false);
    }
  } else {
    // No initial events: from the given version, or from now when none was given.
    if (!from) from = rv_;
    if (*from < compacted_rv_) {
      ApiError gone = ResourceExpiredError("too old resource version: " + std::to_string(*from) +
                                           " (" + std::to_string(compacted_rv_) + ")");
      ch->Push({WatchEvent::Type::kError, std::make_shared<const json>(gone.ToStatusJson()),
                ObjectJson(), nullptr, 0, true},
               false);
      ch->Close("expired");
      return std::unique_ptr<Watcher>(new Watcher(std::move(ch)));
    }
    ch->min_rv = *from;
    for (const auto& ev : history_) {
      if (ev.rv <= *from || ev.bucket != ch->bucket || !ch->InScope(ev.ns)) continue;
      ch->Push({ev.type, ev.obj, ev.json, ev.prev, ev.rv, false}, false);
    }
    ch->min_rv = std::max(*from, rv_);
  }
  channels_[ch->bucket].push_back(ch);
  return std::unique_ptr<Watcher>(new Watcher(std::move(ch)));
}

void Store::SendBookmarks() {
  std::shared_lock lk(mu_);
  const std::string rv = std::to_string(rv_);
  for (auto& [bucket, chans] : channels_) {
    for (auto& ch : chans) {
      if (!ch->allow_bookmarks) continue;
      json bm = {{"kind", ch->kind},
                 {"apiVersion", ch->api_version},
                 {"metadata", {{"resourceVersion", rv}}}};
      ch->Push({WatchEvent::Type::kBookmark, std::make_shared<const json>(std::move(bm)),
                ObjectJson(), nullptr, rv_, true},
               false);
    }
  }
}

uint64_t Store::CurrentResourceVersion() const {
  std::shared_lock lk(mu_);
  return rv_;
}

void Store::ForceCompaction(uint64_t rv) {
  std::unique_lock lk(mu_);
  compacted_rv_ = std::max(compacted_rv_, rv);
  forced_compaction_rv_ = std::max(forced_compaction_rv_, rv);
  while (!history_.empty() && history_.front().rv <= rv) history_.pop_front();
}

StoreCounters Store::Counters() const {
  StoreCounters c;
  {
    std::lock_guard<std::mutex> lk(counters_mu_);
    c.requests = requests_;
  }
  std::shared_lock lk(mu_);
  for (const auto& [q, b] : buckets_) {
    if (b.objects.empty()) continue;
    c.objects[q] = b.objects.size();
    c.object_count += b.objects.size();
  }
  c.approx_bytes = total_bytes_;
  c.resource_version = rv_;
  for (const auto& [q, chans] : channels_) {
    for (const auto& ch : chans) {
      if (!ch->IsClosed()) ++c.watchers;
    }
  }
  c.watchers_closed_slow = closed_slow_;
  return c;
}

}  // namespace gpuop::simkube

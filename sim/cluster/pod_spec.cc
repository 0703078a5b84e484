#include "sim/cluster/pod_spec.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "base/files.h"
#include "base/json_field.h"
#include "base/strings.h"

namespace gpuop::simcluster {
namespace {

bool Bool(const Json& j, const char* key, bool fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return fallback;
  return it->get<bool>();
}

std::optional<int64_t> Int(const Json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

const Json& Obj(const Json& j, const char* key) {
  static const Json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

const Json& Arr(const Json& j, const char* key) {
  static const Json kEmpty = Json::array();
  const Json& v = Obj(j, key);
  return v.is_array() ? v : kEmpty;
}

// ---- pod facts -------------------------------------------------------------

std::string PodNamespace(const Json& pod) {
  std::string ns = StringField(Obj(pod, "metadata"), "namespace");
  return ns.empty() ? "default" : ns;
}

std::string PodUid(const Json& pod) { return StringField(Obj(pod, "metadata"), "uid"); }

// "key=\"value\"" lines sorted by key, as the downward API writes a map.
std::string FormatMap(const Json& m) {
  std::vector<std::string> lines;
  if (m.is_object()) {
    for (auto it = m.begin(); it != m.end(); ++it) {
      std::string v = it->is_string() ? it->get<std::string>() : it->dump();
      std::string q = JsonQuote(v);
      lines.push_back(it.key() + "=" + q);
    }
  }
  std::sort(lines.begin(), lines.end());
  return Join(lines, "\n");
}

// metadata.labels['x'] → ("labels", "x").
std::optional<std::pair<std::string, std::string>> SubscriptPath(const std::string& path) {
  for (const char* kind : {"labels", "annotations"}) {
    std::string prefix = std::string("metadata.") + kind + "['";
    if (StartsWith(path, prefix) && EndsWith(path, "']") && path.size() > prefix.size() + 2) {
      return std::make_pair(std::string(kind), path.substr(prefix.size(), path.size() - prefix.size() - 2));
    }
  }
  return std::nullopt;
}

// A fieldRef's value. `for_volume` allows the whole label/annotation maps.
Result<std::string> FieldValue(const Json& pod, const NodeContext& ctx, const std::string& path,
                               bool for_volume) {
  const Json& md = Obj(pod, "metadata");
  if (path == "metadata.name") return StringField(md, "name");
  if (path == "metadata.namespace") return PodNamespace(pod);
  if (path == "metadata.uid") return StringField(md, "uid");
  if (auto sub = SubscriptPath(path)) {
    const Json& m = Obj(md, sub->first.c_str());
    return StringField(m, sub->second.c_str());
  }
  if (for_volume && path == "metadata.labels") return FormatMap(Obj(md, "labels"));
  if (for_volume && path == "metadata.annotations") return FormatMap(Obj(md, "annotations"));
  const Json& spec = Obj(pod, "spec");
  if (path == "spec.nodeName") {
    std::string n = StringField(spec, "nodeName");
    return n.empty() ? ctx.node_name : n;
  }
  if (path == "spec.serviceAccountName") {
    std::string sa = StringField(spec, "serviceAccountName");
    return sa.empty() ? StringField(spec, "serviceAccount") : sa;
  }
  if (path == "status.hostIP" || path == "status.hostIPs" || path == "status.podIP" ||
      path == "status.podIPs") {
    return ctx.node_ip;
  }
  return InvalidArgument("unsupported fieldPath: " + path);
}

// The container's resource value of "limits.cpu" ... for resourceFieldRef.
Result<std::string> ResourceValue(const Json& container, const NodeContext& ctx, const std::string& resource,
                                  const Json& divisor_json) {
  size_t dot = resource.find('.');
  if (dot == std::string::npos) return InvalidArgument("unsupported container resource: " + resource);
  std::string kind = resource.substr(0, dot), name = resource.substr(dot + 1);
  if ((kind != "limits" && kind != "requests") ||
      (name != "cpu" && name != "memory" && name != "ephemeral-storage" && !StartsWith(name, "hugepages-"))) {
    return InvalidArgument("unsupported container resource: " + resource);
  }
  const Json& res = Obj(container, "resources");
  auto quantity_of = [](const Json& m, const std::string& key) -> std::string {
    if (!m.is_object() || !m.contains(key)) return "";
    const Json& v = m[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) return v.dump();
    return "";
  };
  std::string q = quantity_of(Obj(res, kind.c_str()), name);
  // Defaulting as the API server and kubelet do: requests default to limits,
  // unset limits read as the node's allocatable.
  if (q.empty() && kind == "requests") q = quantity_of(Obj(res, "limits"), name);
  if (q.empty() && kind == "limits") q = quantity_of(ctx.node_allocatable, name);
  if (q.empty()) q = "0";
  auto value = ParseQuantityNano(q);
  if (!value) return InvalidArgument("resource " + resource + " has an invalid quantity \"" + q + "\"");
  std::string div = "1";
  if (divisor_json.is_string()) div = divisor_json.get<std::string>();
  if (divisor_json.is_number()) div = divisor_json.dump();
  auto divisor = ParseQuantityNano(div);
  if (!divisor || *divisor <= 0) return InvalidArgument("invalid divisor \"" + div + "\" for " + resource);
  Int128 n = (*value + *divisor - 1) / *divisor;  // ceil, as the kubelet rounds
  if (name == "cpu" && n == 0 && *value > 0) n = 1;
  return std::to_string(static_cast<long long>(n));
}

Result<std::string> ResourceFieldValue(const Json& pod, const Json& container, const NodeContext& ctx,
                                       const Json& ref) {
  const Json* c = &container;
  std::string cname = StringField(ref, "containerName");
  if (!cname.empty()) {
    c = nullptr;
    for (const char* list : {"containers", "initContainers"}) {
      for (const Json& cc : Arr(Obj(pod, "spec"), list)) {
        if (StringField(cc, "name") == cname) c = &cc;
      }
    }
    if (c == nullptr) return InvalidArgument("resourceFieldRef names unknown container \"" + cname + "\"");
  } else if (container.is_null()) {
    return InvalidArgument("resourceFieldRef in a downwardAPI volume needs containerName");
  }
  return ResourceValue(*c, ctx, StringField(ref, "resource"), Obj(ref, "divisor"));
}

// ---- files -----------------------------------------------------------------

// Resolves `path` (absolute, as seen on the node) inside `root` the way the
// node would resolve it: symlinks followed, an absolute target starting again
// at the root, ".." never leaving it. Components that do not exist are kept.
std::string ResolveInRoot(const std::string& root, const std::string& path) {
  std::vector<std::string> todo = Split(path, '/');
  std::reverse(todo.begin(), todo.end());
  std::vector<std::string> done;
  int links = 0;
  auto join = [&](const std::vector<std::string>& parts) {
    std::string p = root.empty() || root == "/" ? "" : root;
    while (!p.empty() && p.back() == '/') p.pop_back();
    for (const auto& s : parts) p += "/" + s;
    return p.empty() ? std::string("/") : p;
  };
  while (!todo.empty()) {
    std::string c = todo.back();
    todo.pop_back();
    if (c == "." || c.empty()) continue;
    if (c == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    done.push_back(c);
    std::string full = join(done);
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0 || !S_ISLNK(st.st_mode) || ++links > 40) continue;
    char buf[4096];
    ssize_t n = ::readlink(full.c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) continue;
    std::string target(buf, static_cast<size_t>(n));
    done.pop_back();
    if (!target.empty() && target[0] == '/') done.clear();
    auto parts = Split(target, '/');
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
  }
  return join(done);
}

// The files of one volume: relative path → (content, mode).
struct Payload {
  std::map<std::string, std::pair<std::string, mode_t>> files;
};

Status CheckRelPath(const std::string& p) {
  if (p.empty() || p[0] == '/') return InvalidArgument("path \"" + p + "\" must be relative");
  for (const auto& part : Split(p, '/', false)) {
    if (part == "..") return InvalidArgument("path \"" + p + "\" must not contain '..'");
  }
  return Status::Ok();
}

mode_t ModeOf(const Json& j, const char* key, mode_t fallback) {
  auto m = Int(j, key);
  return m ? static_cast<mode_t>(*m & 07777) : fallback;
}

// Writes the payload into dir and removes files it no longer holds.
Status WritePayload(const std::string& dir, const Payload& payload) {
  GPUOP_RETURN_IF_ERROR(MakeDirs(dir));
  for (const auto& [rel, data] : payload.files) {
    std::string path = dir + "/" + rel;
    GPUOP_RETURN_IF_ERROR(MakeDirs(DirName(path)));
    GPUOP_RETURN_IF_ERROR(WriteFileAtomic(path, data.first, data.second));
    // WriteFileAtomic keeps an existing file's mode under umask rules: set it.
    if (::chmod(path.c_str(), data.second) != 0) {
      return Internal("chmod " + path + ": " + ErrnoText(errno));
    }
  }
  std::error_code ec;
  std::vector<std::filesystem::path> stale;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory()) continue;
    std::string rel = std::filesystem::relative(it->path(), dir).string();
    if (!payload.files.count(rel)) stale.push_back(it->path());
  }
  for (const auto& p : stale) std::filesystem::remove(p, ec);
  return Status::Ok();
}

// configMap/secret data → payload (items or all keys). `what` is "configmap"
// or "secret". Missing object: nullopt payload when optional.
Status AddObjectPayload(const Json& source, const std::string& ns, const NodeContext& ctx, bool secret,
                        mode_t default_mode, Payload* out) {
  std::string name = StringField(source, "name");
  bool optional = Bool(source, "optional", false);
  const auto& getter = secret ? ctx.get_secret : ctx.get_configmap;
  const char* kind = secret ? "secret" : "configmap";
  if (!getter) return Internal(std::string("no ") + kind + " source configured in the simulated kubelet");
  auto obj = getter(ns, name);
  if (!obj.ok()) {
    if (obj.status().code() == StatusCode::kNotFound) {
      if (optional) return Status::Ok();
      return NotFound(std::string(kind) + " \"" + name + "\" not found");
    }
    return obj.status().Annotate(std::string("getting ") + kind + " " + ns + "/" + name);
  }
  std::map<std::string, std::string> data;
  for (const char* field : {"data", "binaryData"}) {
    const Json& d = Obj(*obj, field);
    if (!d.is_object()) continue;
    bool b64 = secret || std::string(field) == "binaryData";
    for (auto it = d.begin(); it != d.end(); ++it) {
      if (!it->is_string()) continue;
      std::string v = it->get<std::string>();
      if (b64) {
        auto dec = Base64Decode(v);
        if (!dec) return InvalidArgument(std::string(kind) + " " + ns + "/" + name + " key " + it.key() +
                                         " is not valid base64");
        v = *dec;
      }
      data[it.key()] = v;
    }
  }
  if (secret) {  // stringData is merged on write by the API server; honour it if a fake keeps it
    const Json& sd = Obj(*obj, "stringData");
    if (sd.is_object()) {
      for (auto it = sd.begin(); it != sd.end(); ++it) {
        if (it->is_string()) data[it.key()] = it->get<std::string>();
      }
    }
  }
  const Json& items = Arr(source, "items");
  if (items.empty()) {
    for (const auto& [k, v] : data) out->files[k] = {v, default_mode};
    return Status::Ok();
  }
  for (const Json& item : items) {
    std::string key = StringField(item, "key"), path = StringField(item, "path");
    auto it = data.find(key);
    if (it == data.end()) {
      if (optional) continue;
      return NotFound(std::string(secret ? "references non-existent secret key: "
                                         : "configmap references non-existent config key: ") +
                      key);
    }
    GPUOP_RETURN_IF_ERROR(CheckRelPath(path));
    out->files[path] = {it->second, ModeOf(item, "mode", default_mode)};
  }
  return Status::Ok();
}

Status AddDownwardPayload(const Json& pod, const NodeContext& ctx, const Json& items, mode_t default_mode,
                          Payload* out) {
  for (const Json& item : items) {
    std::string path = StringField(item, "path");
    GPUOP_RETURN_IF_ERROR(CheckRelPath(path));
    std::string value;
    if (item.contains("fieldRef")) {
      GPUOP_ASSIGN_OR_RETURN(
          value, FieldValue(pod, ctx, StringField(item["fieldRef"], "fieldPath"), true));
    } else if (item.contains("resourceFieldRef")) {
      GPUOP_ASSIGN_OR_RETURN(value, ResourceFieldValue(pod, Json(), ctx, item["resourceFieldRef"]));
    } else {
      return InvalidArgument("downwardAPI item " + path + " has neither fieldRef nor resourceFieldRef");
    }
    out->files[path] = {value, ModeOf(item, "mode", default_mode)};
  }
  return Status::Ok();
}

Status AddTokenPayload(const Json& pod, const NodeContext& ctx, const Json& source, mode_t mode, Payload* out) {
  if (!ctx.service_account_token) return Internal("no token source configured in the simulated kubelet");
  std::string path = StringField(source, "path", "token");
  GPUOP_RETURN_IF_ERROR(CheckRelPath(path));
  int64_t exp = Int(source, "expirationSeconds").value_or(3600);
  auto token = ctx.service_account_token(pod, StringField(source, "audience"), exp);
  if (!token.ok()) return token.status().Annotate("requesting a service account token");
  out->files[path] = {*token, mode};
  return Status::Ok();
}

// hostPath: the kubelet's type checks, on the path resolved in the node root.
Result<std::string> SetUpHostPath(const Json& hp, const NodeContext& ctx) {
  std::string path = StringField(hp, "path");
  if (path.empty() || path[0] != '/') return InvalidArgument("hostPath path \"" + path + "\" must be absolute");
  std::string type = StringField(hp, "type");
  std::string real = ResolveInRoot(ctx.host_root, path);
  struct stat st;
  bool exists = ::stat(real.c_str(), &st) == 0;
  auto fail = [&](const char* what) {
    return InvalidArgument("hostPath type check failed: " + path + " is not " + what);
  };
  if (type.empty()) {
    // No check; the container runtime creates a missing source as a directory.
    if (!exists) GPUOP_RETURN_IF_ERROR(MakeDirs(real));
    return real;
  }
  if (type == "DirectoryOrCreate") {
    if (!exists) {
      if (Status s = MakeDirs(real, 0755); !s.ok()) return Internal(s.message());
      return real;
    }
    type = "Directory";
  }
  if (type == "FileOrCreate") {
    if (!exists) {
      // Like the kubelet: the parent directory is not created.
      int fd = ::open(real.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) return Internal("open " + path + ": " + ErrnoText(errno));
      ::close(fd);
      return real;
    }
    type = "File";
  }
  if (type == "Directory") return exists && S_ISDIR(st.st_mode) ? Result<std::string>(real) : fail("a directory");
  if (type == "File") return exists && S_ISREG(st.st_mode) ? Result<std::string>(real) : fail("a file");
  if (type == "Socket") return exists && S_ISSOCK(st.st_mode) ? Result<std::string>(real) : fail("a socket file");
  if (type == "CharDevice") {
    return exists && S_ISCHR(st.st_mode) ? Result<std::string>(real) : fail("a character device");
  }
  if (type == "BlockDevice") {
    return exists && S_ISBLK(st.st_mode) ? Result<std::string>(real) : fail("a block device");
  }
  return InvalidArgument(type + " is an invalid volume type");
}

bool MountsServiceAccountPath(const Json& pod) {
  for (const char* list : {"containers", "initContainers"}) {
    for (const Json& c : Arr(Obj(pod, "spec"), list)) {
      for (const Json& m : Arr(c, "volumeMounts")) {
        std::string p = StringField(m, "mountPath");
        while (p.size() > 1 && p.back() == '/') p.pop_back();
        if (p == kServiceAccountMountPath) return true;
      }
    }
  }
  return false;
}

bool AutomountToken(const Json& pod) { return Bool(Obj(pod, "spec"), "automountServiceAccountToken", true); }

Result<std::string> SetUpVolume(const Json& pod, const Json& vol, const NodeContext& ctx, const std::string& base) {
  std::string name = StringField(vol, "name");
  std::string ns = PodNamespace(pod);
  if (vol.contains("hostPath")) return SetUpHostPath(vol["hostPath"], ctx);
  if (vol.contains("emptyDir")) {
    std::string dir = base + "/kubernetes.io~empty-dir/" + name;
    GPUOP_RETURN_IF_ERROR(MakeDirs(dir, 0777));
    ::chmod(dir.c_str(), 0777);  // as the kubelet makes it
    return dir;
  }
  Payload payload;
  std::string dir;
  if (vol.contains("configMap") || vol.contains("secret")) {
    bool secret = vol.contains("secret");
    const Json& src = secret ? vol["secret"] : vol["configMap"];
    Json ref = src;
    if (secret) ref["name"] = StringField(src, "secretName");
    GPUOP_RETURN_IF_ERROR(AddObjectPayload(ref, ns, ctx, secret, ModeOf(src, "defaultMode", 0644), &payload));
    dir = base + (secret ? "/kubernetes.io~secret/" : "/kubernetes.io~configmap/") + name;
  } else if (vol.contains("downwardAPI")) {
    const Json& src = vol["downwardAPI"];
    GPUOP_RETURN_IF_ERROR(
        AddDownwardPayload(pod, ctx, Arr(src, "items"), ModeOf(src, "defaultMode", 0644), &payload));
    dir = base + "/kubernetes.io~downward-api/" + name;
  } else if (vol.contains("projected")) {
    const Json& src = vol["projected"];
    mode_t mode = ModeOf(src, "defaultMode", 0644);
    for (const Json& s : Arr(src, "sources")) {
      if (s.contains("serviceAccountToken")) {
        GPUOP_RETURN_IF_ERROR(AddTokenPayload(pod, ctx, s["serviceAccountToken"], mode, &payload));
      } else if (s.contains("configMap")) {
        GPUOP_RETURN_IF_ERROR(AddObjectPayload(s["configMap"], ns, ctx, false, mode, &payload));
      } else if (s.contains("secret")) {
        GPUOP_RETURN_IF_ERROR(AddObjectPayload(s["secret"], ns, ctx, true, mode, &payload));
      } else if (s.contains("downwardAPI")) {
        GPUOP_RETURN_IF_ERROR(AddDownwardPayload(pod, ctx, Arr(s["downwardAPI"], "items"), mode, &payload));
      } else {
        return NotSupported("projected source " + (s.is_object() && !s.empty() ? s.begin().key() : "(empty)") +
                            " is not supported by the simulated kubelet");
      }
    }
    dir = base + "/kubernetes.io~projected/" + name;
  } else {
    std::string kind = "(none)";
    for (auto it = vol.begin(); it != vol.end(); ++it) {
      if (it.key() != "name") kind = it.key();
    }
    return NotSupported("volume type " + kind + " is not supported by the simulated kubelet");
  }
  GPUOP_RETURN_IF_ERROR(WritePayload(dir, payload));
  return dir;
}

// ---- env -------------------------------------------------------------------

void SetEnv(std::vector<std::pair<std::string, std::string>>* env, const std::string& k, std::string v) {
  for (auto& [name, value] : *env) {
    if (name == k) {
      value = std::move(v);
      return;
    }
  }
  env->emplace_back(k, std::move(v));
}

// A configMap/secret for env: NotFound → `configmap "x" not found`.
Result<Json> GetEnvSource(const NodeContext& ctx, bool secret, const std::string& ns, const std::string& name) {
  const auto& getter = secret ? ctx.get_secret : ctx.get_configmap;
  const char* kind = secret ? "secret" : "configmap";
  if (!getter) return Internal(std::string("no ") + kind + " source configured in the simulated kubelet");
  auto obj = getter(ns, name);
  if (!obj.ok()) {
    if (obj.status().code() == StatusCode::kNotFound) return NotFound(std::string(kind) + " \"" + name + "\" not found");
    return obj.status().Annotate(std::string("getting ") + kind + " " + ns + "/" + name);
  }
  return obj;
}

std::optional<std::string> DataValue(const Json& obj, bool secret, const std::string& key) {
  const Json& d = Obj(obj, "data");
  if (d.is_object() && d.contains(key) && d[key].is_string()) {
    std::string v = d[key].get<std::string>();
    if (!secret) return v;
    return Base64Decode(v);
  }
  if (!secret) {
    const Json& b = Obj(obj, "binaryData");
    if (b.is_object() && b.contains(key) && b[key].is_string()) return Base64Decode(b[key].get<std::string>());
  }
  return std::nullopt;
}

void AddServiceEnv(const NodeContext& ctx, std::vector<std::pair<std::string, std::string>>* env) {
  if (ctx.api_host.empty()) return;
  std::string port = std::to_string(ctx.api_port);
  std::string url = "tcp://" + ctx.api_host + ":" + port;
  SetEnv(env, "KUBERNETES_SERVICE_HOST", ctx.api_host);
  SetEnv(env, "KUBERNETES_SERVICE_PORT", port);
  SetEnv(env, "KUBERNETES_SERVICE_PORT_HTTPS", port);
  SetEnv(env, "KUBERNETES_PORT", url);
  std::string p = "KUBERNETES_PORT_" + port + "_TCP";
  SetEnv(env, p, url);
  SetEnv(env, p + "_PROTO", "tcp");
  SetEnv(env, p + "_PORT", port);
  SetEnv(env, p + "_ADDR", ctx.api_host);
}

Status ResolveEnv(const Json& pod, const Json& c, const NodeContext& ctx,
                  std::vector<std::pair<std::string, std::string>>* env) {
  std::string ns = PodNamespace(pod);
  AddServiceEnv(ctx, env);
  for (const Json& from : Arr(c, "envFrom")) {
    bool secret = from.contains("secretRef");
    const Json& ref = secret ? Obj(from, "secretRef") : Obj(from, "configMapRef");
    if (!ref.is_object()) return InvalidArgument("envFrom entry needs configMapRef or secretRef");
    std::string name = StringField(ref, "name");
    auto obj = GetEnvSource(ctx, secret, ns, name);
    if (!obj.ok()) {
      if (obj.status().code() == StatusCode::kNotFound && Bool(ref, "optional", false)) continue;
      return obj.status();
    }
    std::string prefix = StringField(from, "prefix");
    std::set<std::string> keys;
    for (const char* f : {"data", "binaryData"}) {
      if (secret && std::string(f) == "binaryData") continue;
      const Json& d = Obj(*obj, f);
      if (d.is_object()) {
        for (auto it = d.begin(); it != d.end(); ++it) keys.insert(it.key());
      }
    }
    for (const auto& k : keys) {
      // Keys that are not valid variable names are skipped (the kubelet
      // records an InvalidEnvironmentVariableNames event).
      std::string name_ = prefix + k;
      if (name_.empty() || name_.find('=') != std::string::npos) continue;
      SetEnv(env, name_, DataValue(*obj, secret, k).value_or(""));
    }
  }
  for (const Json& e : Arr(c, "env")) {
    std::string name = StringField(e, "name");
    if (e.contains("value") || !e.contains("valueFrom")) {
      SetEnv(env, name, ExpandVars(StringField(e, "value"), *env));
      continue;
    }
    const Json& vf = e["valueFrom"];
    if (vf.contains("fieldRef")) {
      GPUOP_ASSIGN_OR_RETURN(std::string v,
                             FieldValue(pod, ctx, StringField(vf["fieldRef"], "fieldPath"), false));
      SetEnv(env, name, v);
    } else if (vf.contains("resourceFieldRef")) {
      GPUOP_ASSIGN_OR_RETURN(std::string v, ResourceFieldValue(pod, c, ctx, vf["resourceFieldRef"]));
      SetEnv(env, name, v);
    } else if (vf.contains("configMapKeyRef") || vf.contains("secretKeyRef")) {
      bool secret = vf.contains("secretKeyRef");
      const Json& ref = secret ? vf["secretKeyRef"] : vf["configMapKeyRef"];
      std::string oname = StringField(ref, "name"), key = StringField(ref, "key");
      bool optional = Bool(ref, "optional", false);
      auto obj = GetEnvSource(ctx, secret, ns, oname);
      if (!obj.ok()) {
        if (obj.status().code() == StatusCode::kNotFound && optional) continue;
        return obj.status();
      }
      auto v = DataValue(*obj, secret, key);
      if (!v) {
        if (optional) continue;
        return NotFound("couldn't find key " + key + " in " + (secret ? "Secret " : "ConfigMap ") + ns + "/" + oname);
      }
      SetEnv(env, name, *v);
    } else {
      return InvalidArgument("env " + name + ": unsupported valueFrom source");
    }
  }
  return Status::Ok();
}

}  // namespace

// ---- public ----------------------------------------------------------------

std::optional<Int128> ParseQuantityNano(const std::string& q) {
  std::string s(Trim(q));
  if (s.empty()) return std::nullopt;
  bool neg = false;
  size_t i = 0;
  if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
  Int128 mant = 0;
  int frac_digits = 0, digits = 0;
  bool dot = false;
  for (; i < s.size(); ++i) {
    char ch = s[i];
    if (ch >= '0' && ch <= '9') {
      if (mant > (Int128(1) << 100)) return std::nullopt;
      mant = mant * 10 + (ch - '0');
      ++digits;
      if (dot) ++frac_digits;
    } else if (ch == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0) return std::nullopt;
  std::string suffix = s.substr(i);
  int exp10 = 9 - frac_digits;  // nano units
  Int128 mult = 1;
  static const std::pair<const char*, int> kDec[] = {{"n", -9}, {"u", -6}, {"m", -3}, {"", 0}, {"k", 3},
                                                     {"M", 6},  {"G", 9},  {"T", 12}, {"P", 15}, {"E", 18}};
  static const std::pair<const char*, int> kBin[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30},
                                                     {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  bool found = false;
  for (const auto& [sfx, e] : kDec) {
    if (suffix == sfx) {
      exp10 += e;
      found = true;
    }
  }
  for (const auto& [sfx, e] : kBin) {
    if (suffix == sfx) {
      mult = Int128(1) << e;
      found = true;
    }
  }
  if (!found && (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E'))) {
    std::string e = suffix.substr(1);
    bool eneg = !e.empty() && e[0] == '-';
    if (!e.empty() && (e[0] == '-' || e[0] == '+')) e = e.substr(1);
    auto ev = ParseUint(e);
    if (!ev || *ev > 30) return std::nullopt;
    exp10 += eneg ? -static_cast<int>(*ev) : static_cast<int>(*ev);
    found = true;
  }
  if (!found) return std::nullopt;
  Int128 v = mant * mult;
  for (; exp10 > 0; --exp10) {
    if (v > (Int128(1) << 120)) return std::nullopt;
    v *= 10;
  }
  bool inexact = false;
  for (; exp10 < 0; ++exp10) {
    if (v % 10) inexact = true;
    v /= 10;
  }
  if (inexact) v += 1;  // Kubernetes rounds up to the smallest unit
  return neg ? -v : v;
}

std::string ExpandVars(const std::string& in, const std::vector<std::pair<std::string, std::string>>& env) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '$' || i + 1 >= in.size()) {
      out += in[i];
      continue;
    }
    if (in[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (in[i + 1] == '(') {
      size_t close = in.find(')', i + 2);
      if (close != std::string::npos) {
        std::string name = in.substr(i + 2, close - i - 2);
        const std::string* value = nullptr;
        for (const auto& [k, v] : env) {
          if (k == name) value = &v;
        }
        if (value) {
          out += *value;
        } else {
          out += in.substr(i, close - i + 1);
        }
        i = close;
        continue;
      }
    }
    out += in[i];
  }
  return out;
}

Result<std::map<std::string, std::string>> PrepareVolumes(const Json& pod, const NodeContext& ctx) {
  std::map<std::string, std::string> out;
  std::string uid = PodUid(pod);
  if (uid.empty())
    return InvalidArgument("pod " + StringField(Obj(pod, "metadata"), "name") +
                           " has no metadata.uid");
  std::string base = ctx.pods_dir + "/" + uid + "/volumes";
  for (const Json& vol : Arr(Obj(pod, "spec"), "volumes")) {
    std::string name = StringField(vol, "name");
    auto path = SetUpVolume(pod, vol, ctx, base);
    if (!path.ok()) {
      return Status(path.status().code(),
                    "MountVolume.SetUp failed for volume \"" + name + "\" : " + path.status().message());
    }
    out[name] = *path;
  }
  if (AutomountToken(pod) && !MountsServiceAccountPath(pod)) {
    Payload payload;
    Json token_source = {{"path", "token"}, {"expirationSeconds", 3607}};
    Status s = AddTokenPayload(pod, ctx, token_source, 0644, &payload);
    if (s.ok() && !ctx.ca_file.empty()) {
      auto ca = ReadFile(ctx.ca_file);
      if (ca.ok()) {
        payload.files["ca.crt"] = {*ca, 0644};
      } else {
        s = ca.status();
      }
    }
    payload.files["namespace"] = {PodNamespace(pod), 0644};
    if (s.ok()) s = WritePayload(base + "/kubernetes.io~projected/" + kServiceAccountVolume, payload);
    if (!s.ok()) {
      return Status(s.code(), std::string("MountVolume.SetUp failed for volume \"") + kServiceAccountVolume +
                                  "\" : " + s.message());
    }
    out[kServiceAccountVolume] = base + "/kubernetes.io~projected/" + kServiceAccountVolume;
  }
  return out;
}

Result<ContainerPlan> PlanContainer(const Json& pod, const Json& c, const NodeContext& ctx,
                                    const std::map<std::string, std::string>& volumes) {
  const Json& spec = Obj(pod, "spec");
  ContainerPlan plan;
  plan.name = StringField(c, "name");
  plan.image = StringField(c, "image");
  if (plan.image.empty()) return InvalidArgument("container " + plan.name + " has no image");
  plan.image_pull_policy = StringField(c, "imagePullPolicy");
  if (plan.image_pull_policy.empty()) {
    // The API server's default: Always for :latest or no tag, else IfNotPresent.
    std::string ref = plan.image.substr(0, plan.image.find('@'));
    size_t slash = ref.rfind('/'), colon = ref.rfind(':');
    bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
    bool digest = plan.image.find('@') != std::string::npos;
    std::string tag = tagged ? ref.substr(colon + 1) : "";
    plan.image_pull_policy = digest || (tagged && tag != "latest") ? "IfNotPresent" : "Always";
  }
  plan.working_dir = StringField(c, "workingDir");

  GPUOP_RETURN_IF_ERROR(ResolveEnv(pod, c, ctx, &plan.env));
  for (const Json& s : Arr(c, "command")) plan.command.push_back(ExpandVars(s.get<std::string>(), plan.env));
  for (const Json& s : Arr(c, "args")) plan.args.push_back(ExpandVars(s.get<std::string>(), plan.env));

  plan.host_network = Bool(spec, "hostNetwork", false);
  plan.host_pid = Bool(spec, "hostPID", false);
  plan.host_ipc = Bool(spec, "hostIPC", false);
  if (plan.host_network) {
    plan.hostname = ctx.node_name;
  } else {
    plan.hostname = StringField(spec, "hostname", StringField(Obj(pod, "metadata"), "name"));
  }

  // Security context: the container's fields override the pod's.
  const Json& psc = Obj(spec, "securityContext");
  const Json& sc = Obj(c, "securityContext");
  plan.privileged = Bool(sc, "privileged", false);
  plan.read_only_root = Bool(sc, "readOnlyRootFilesystem", false);
  plan.no_new_privileges = sc.is_object() && sc.contains("allowPrivilegeEscalation") &&
                           !Bool(sc, "allowPrivilegeEscalation", true);
  const Json& seccomp = Obj(sc, "seccompProfile").is_object() ? Obj(sc, "seccompProfile") : Obj(psc, "seccompProfile");
  if (std::string type = StringField(seccomp, "type"); type == "Unconfined") {
    plan.seccomp_unconfined = true;
  } else if (!type.empty() && type != "RuntimeDefault") {
    return InvalidArgument("container " + plan.name + ": seccompProfile type " + type +
                           " is not supported by the simulated kubelet (RuntimeDefault or Unconfined)");
  }
  for (const Json& cap : Arr(Obj(sc, "capabilities"), "add")) plan.cap_add.push_back(cap.get<std::string>());
  for (const Json& cap : Arr(Obj(sc, "capabilities"), "drop")) plan.cap_drop.push_back(cap.get<std::string>());
  plan.run_as_user = Int(sc, "runAsUser");
  if (!plan.run_as_user) plan.run_as_user = Int(psc, "runAsUser");
  plan.run_as_group = Int(sc, "runAsGroup");
  if (!plan.run_as_group) plan.run_as_group = Int(psc, "runAsGroup");
  for (const Json& g : Arr(psc, "supplementalGroups")) {
    if (g.is_number_integer()) plan.supplemental_groups.push_back(g.get<int64_t>());
  }
  if (auto fs = Int(psc, "fsGroup")) plan.supplemental_groups.push_back(*fs);
  bool non_root = Bool(sc, "runAsNonRoot", Bool(psc, "runAsNonRoot", false));
  if (non_root && plan.run_as_user && *plan.run_as_user == 0) {
    return InvalidArgument("container's runAsUser breaks non-root policy (pod: \"" +
                           StringField(Obj(pod, "metadata"), "name") +
                           "\", container: " + plan.name + ")");
  }

  // Mounts.
  for (const Json& m : Arr(c, "volumeMounts")) {
    std::string vname = StringField(m, "name");
    auto it = volumes.find(vname);
    if (it == volumes.end()) {
      return NotFound("cannot find volume \"" + vname + "\" to mount into container \"" + plan.name + "\"");
    }
    Mount mount;
    mount.target = StringField(m, "mountPath");
    mount.read_only = Bool(m, "readOnly", false);
    std::string prop = StringField(m, "mountPropagation");
    if (prop == "HostToContainer") {
      mount.propagation = "rslave";
    } else if (prop == "Bidirectional") {
      if (!plan.privileged) {
        return InvalidArgument("volumeMount " + vname + " in container " + plan.name +
                               ": Bidirectional mount propagation is available only to privileged containers");
      }
      mount.propagation = "rshared";
    } else if (!prop.empty() && prop != "None") {
      return InvalidArgument("volumeMount " + vname + ": unknown mountPropagation " + prop);
    }
    std::string sub = StringField(m, "subPath");
    if (sub.empty() && m.contains("subPathExpr"))
      sub = ExpandVars(StringField(m, "subPathExpr"), plan.env);
    mount.source = it->second;
    if (!sub.empty()) {
      if (Status s = CheckRelPath(sub); !s.ok()) {
        return InvalidArgument("volumeMount " + vname + " subPath: " + s.message());
      }
      // Inside the volume, never out of it: resolve symlinks with the volume as root.
      mount.source = ResolveInRoot(it->second, "/" + sub);
      if (!PathExists(mount.source)) {
        // The kubelet creates a missing subPath as a directory.
        if (Status s = MakeDirs(mount.source, 0750); !s.ok()) {
          return Internal("failed to create subPath directory for volumeMount \"" + vname + "\" of container \"" +
                          plan.name + "\": " + s.message());
        }
      }
    }
    plan.mounts.push_back(std::move(mount));
  }
  auto sa = volumes.find(kServiceAccountVolume);
  if (sa != volumes.end()) {
    bool mounted = false;
    for (const auto& m : plan.mounts) mounted |= m.target == kServiceAccountMountPath;
    if (!mounted) plan.mounts.push_back(Mount{sa->second, kServiceAccountMountPath, true, ""});
  }

  for (const char* unsupported : {"volumeDevices", "resizePolicy"}) {
    if (!Arr(c, unsupported).empty()) {
      return NotSupported(std::string("container ") + plan.name + ": " + unsupported +
                          " is not supported by the simulated kubelet");
    }
  }
  return plan;
}

Result<std::optional<Probe>> ParseProbe(const Json& container, const char* which) {
  const Json& p = Obj(container, which);
  if (!p.is_object()) return std::optional<Probe>();
  Probe probe;
  std::string cname = StringField(container, "name");
  auto port_of = [&](const Json& handler) -> Result<int> {
    const Json& port = Obj(handler, "port");
    if (port.is_number_integer()) return port.get<int>();
    std::string name = port.is_string() ? port.get<std::string>() : "";
    if (auto n = ParseUint(name); n && *n <= 65535) return static_cast<int>(*n);
    for (const Json& cp : Arr(container, "ports")) {
      if (StringField(cp, "name") == name && Int(cp, "containerPort"))
        return static_cast<int>(*Int(cp, "containerPort"));
    }
    return InvalidArgument(std::string(which) + " of container " + cname + ": port \"" + name +
                           "\" is not a number and no container port has that name");
  };
  if (p.contains("exec")) {
    probe.kind = Probe::kExec;
    for (const Json& s : Arr(p["exec"], "command")) probe.command.push_back(s.get<std::string>());
  } else if (p.contains("httpGet")) {
    const Json& h = p["httpGet"];
    probe.kind = Probe::kHttpGet;
    GPUOP_ASSIGN_OR_RETURN(probe.port, port_of(h));
    probe.host = StringField(h, "host");
    probe.path = StringField(h, "path", "/");
    if (probe.path.empty()) probe.path = "/";
    probe.scheme = StringField(h, "scheme", "HTTP");
    for (const Json& hd : Arr(h, "httpHeaders"))
      probe.headers.emplace_back(StringField(hd, "name"), StringField(hd, "value"));
  } else if (p.contains("tcpSocket")) {
    probe.kind = Probe::kTcpSocket;
    GPUOP_ASSIGN_OR_RETURN(probe.port, port_of(p["tcpSocket"]));
    probe.host = StringField(p["tcpSocket"], "host");
  } else if (p.contains("grpc")) {
    probe.kind = Probe::kGrpc;
    GPUOP_ASSIGN_OR_RETURN(probe.port, port_of(p["grpc"]));
    probe.service = StringField(p["grpc"], "service");
  } else {
    return InvalidArgument(std::string(which) + " of container " + cname +
                           " has no handler (exec, httpGet, tcpSocket or grpc)");
  }
  auto num = [&](const char* key, int fallback) {
    auto v = Int(p, key);
    return v && *v > 0 ? static_cast<int>(*v) : fallback;
  };
  probe.initial_delay_s = static_cast<int>(Int(p, "initialDelaySeconds").value_or(0));
  probe.period_s = num("periodSeconds", 10);
  probe.timeout_s = num("timeoutSeconds", 1);
  probe.success_threshold = num("successThreshold", 1);
  probe.failure_threshold = num("failureThreshold", 3);
  probe.termination_grace_s = Int(p, "terminationGracePeriodSeconds").value_or(-1);
  return std::optional<Probe>(std::move(probe));
}

}  // namespace gpuop::simcluster

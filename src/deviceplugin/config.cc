#include "deviceplugin/config.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "base/strings.h"
#include "base/yaml_json.h"
#include "kube/names.h"

namespace gpuop::deviceplugin {
namespace {

using nlohmann::json;

constexpr std::string_view kResourcePrefix = "nvidia.com/";

// Values are quoted in errors as excerpts (see Excerpt).
std::string Quote(std::string_view s) { return "\"" + Excerpt(s) + "\""; }
std::string Got(const json& v) { return Excerpt(v.dump()); }

// flags.gfd.sleepInterval as a number: Go's Duration, in nanoseconds (as
// upstream reads it), written as e.g. "1h30s" for toolkit::ParseDuration,
// which counts in whole milliseconds.
Result<std::string> DurationFromNanoseconds(double ns) {
  constexpr double kNanosPerMs = 1e6, kMaxMs = 1e15;  // ~31,000 years
  const double ms_exact = ns / kNanosPerMs;
  if (!(ms_exact >= 1) || ms_exact > kMaxMs) {
    return InvalidArgument(
        "flags.gfd.sleepInterval: a number is nanoseconds (Go's Duration) and must come to at "
        "least 1ms; got " +
        Excerpt(json(ns).dump()) + "; write a duration such as \"60s\" instead");
  }
  auto ms = static_cast<int64_t>(ms_exact);
  std::string out;
  auto part = [&](int64_t per_unit, const char* unit) {
    if (ms >= per_unit) out += std::to_string(ms / per_unit) + unit;
    ms %= per_unit;
  };
  part(3'600'000, "h");
  part(60'000, "m");
  part(1'000, "s");
  part(1, "ms");
  return out;
}

// "line N" of the first line of `text` that holds YAML content: where a
// document that is not a mapping starts.
std::string FirstContentLine(std::string_view text) {
  size_t line = 1;
  for (std::string_view rest = text; !rest.empty(); ++line) {
    size_t eol = rest.find('\n');
    std::string_view t = Trim(rest.substr(0, eol));
    if (!t.empty() && t[0] != '#' && t != "---") break;
    if (eol == std::string_view::npos) break;
    rest.remove_prefix(eol + 1);
  }
  return "line " + std::to_string(line);
}

// Go's strconv.ParseBool, which urfave/cli applies to boolean env variables.
std::optional<bool> ParseGoBool(std::string_view s) {
  for (std::string_view t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (s == t) return true;
  }
  for (std::string_view f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (s == f) return false;
  }
  return std::nullopt;
}

// A resource name as upstream's NewResourceName makes it: "nvidia.com/" is
// prepended when missing, the whole is at most 63 characters and the part
// after the prefix is a DNS subdomain. Returns an error text, or "".
std::string NormalizeResourceName(std::string_view raw, std::string* out) {
  std::string n(raw);
  if (!StartsWith(n, kResourcePrefix)) n = std::string(kResourcePrefix) + n;
  if (n.size() > kMaxResourceNameLength) {
    return "resource name " + Quote(n) + " is " + std::to_string(n.size()) +
           " characters; the limit is 63";
  }
  if (!kube::IsDns1123Subdomain(std::string_view(n).substr(kResourcePrefix.size())).empty()) {
    return "resource name " + Quote(n) +
           " is not valid: after \"nvidia.com/\" use lowercase letters, digits, '-' and '.'";
  }
  *out = std::move(n);
  return "";
}

bool IsDecimal(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "8-4-4-4-12" hex groups.
bool IsUuidBody(std::string_view s) {
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  std::vector<std::string> parts = Split(s, '-', /*skip_empty=*/false);
  if (parts.size() != 5) return false;
  for (size_t i = 0; i < 5; ++i) {
    if (parts[i].size() != kGroups[i]) return false;
    for (char c : parts[i]) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
  }
  return true;
}

// A sharing device reference: "i", "i:j", "GPU-<uuid>", "MIG-<uuid>" or the
// old "MIG-GPU-<uuid>/<gi>/<ci>" (upstream's ReplicatedDeviceRef forms).
bool IsDeviceRef(std::string_view s) {
  if (IsDecimal(s)) return true;
  if (size_t colon = s.find(':'); colon != std::string_view::npos) {
    return IsDecimal(s.substr(0, colon)) && IsDecimal(s.substr(colon + 1));
  }
  if (StartsWith(s, "GPU-")) return IsUuidBody(s.substr(4));
  if (!StartsWith(s, "MIG-")) return false;
  std::string_view rest = s.substr(4);
  if (IsUuidBody(rest)) return true;
  std::vector<std::string> parts = Split(rest, '/', /*skip_empty=*/false);
  return parts.size() == 3 && StartsWith(parts[0], "GPU-") &&
         IsUuidBody(std::string_view(parts[0]).substr(4)) && IsDecimal(parts[1]) &&
         IsDecimal(parts[2]);
}

// Walks the parsed document. Every error is "<origin>: <path>: <problem>".
class FileParser {
 public:
  explicit FileParser(std::string_view origin) : origin_(origin) {}

  Status Fail(const std::string& path, const std::string& problem) const {
    return InvalidArgument(origin_ + ": " + (path.empty() ? "" : path + ": ") + problem);
  }

  static std::string Child(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  // `j` must be an object whose keys are all in `known`.
  Status Object(const json& j, const std::string& path,
                std::initializer_list<std::string_view> known) const {
    if (!j.is_object()) return Fail(path, "must be a mapping, got " + Got(j));
    for (const auto& [key, value] : j.items()) {
      bool ok = false;
      for (std::string_view k : known) ok = ok || key == k;
      if (!ok) {
        std::string list;
        for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        return Fail(Child(path, key), "unknown field; the fields here are " + list);
      }
    }
    return Status::Ok();
  }

  // Field readers: an absent or null field leaves *out unchanged.
  Status Bool(const json& obj, const std::string& path, std::string_view key, bool* out) const {
    const json* v = Field(obj, key);
    if (!v) return Status::Ok();
    if (!v->is_boolean()) {
      return Fail(Child(path, key), "must be true or false, got " + Got(*v));
    }
    *out = v->get<bool>();
    return Status::Ok();
  }

  Status String(const json& obj, const std::string& path, std::string_view key,
                std::string* out) const {
    const json* v = Field(obj, key);
    if (!v) return Status::Ok();
    if (!v->is_string()) return Fail(Child(path, key), "must be a string, got " + Got(*v));
    *out = v->get<std::string>();
    return Status::Ok();
  }

  // A string field parsed by `parse`, whose error text is appended.
  template <typename T, typename F>
  Status Enum(const json& obj, const std::string& path, std::string_view key, F parse,
              T* out) const {
    std::string s;
    bool present = Field(obj, key) != nullptr;
    GPUOP_RETURN_IF_ERROR(String(obj, path, key, &s));
    if (!present) return Status::Ok();
    Result<T> r = parse(s);
    if (!r.ok()) return Fail(Child(path, key), r.status().message());
    *out = *r;
    return Status::Ok();
  }

  static const json* Field(const json& obj, std::string_view key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Status Flags(const json& j, Config* c) const {
    const std::string p = "flags";
    GPUOP_RETURN_IF_ERROR(
        Object(j, p,
               {"migStrategy", "failOnInitError", "nvidiaDriverRoot", "nvidiaDevRoot", "mpsRoot",
                "gdrcopyEnabled", "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI",
                "deviceDiscoveryStrategy", "restartOnDeviceUnhealthy", "plugin", "gfd"}));
    GPUOP_RETURN_IF_ERROR(Enum(j, p, "migStrategy", ParseMigStrategy, &c->mig_strategy));
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "failOnInitError", &c->fail_on_init_error));
    GPUOP_RETURN_IF_ERROR(String(j, p, "nvidiaDriverRoot", &c->nvidia_driver_root));
    GPUOP_RETURN_IF_ERROR(String(j, p, "nvidiaDevRoot", &c->nvidia_dev_root));
    GPUOP_RETURN_IF_ERROR(String(j, p, "mpsRoot", &c->mps_root));
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "gdrcopyEnabled", &c->gdrcopy));
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "gdsEnabled", &c->gds));
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "mofedEnabled", &c->mofed));
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "useNodeFeatureAPI", &c->use_node_feature_api));
    GPUOP_RETURN_IF_ERROR(String(j, p, "deviceDiscoveryStrategy", &c->device_discovery_strategy));
    if (c->device_discovery_strategy != "auto" && c->device_discovery_strategy != "nvml" &&
        c->device_discovery_strategy != "tegra") {
      return Fail(
          Child(p, "deviceDiscoveryStrategy"),
          "unknown strategy " + Quote(c->device_discovery_strategy) + "; use auto, nvml or tegra");
    }
    bool restart_on_unhealthy = false;
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "restartOnDeviceUnhealthy", &restart_on_unhealthy));
    if (restart_on_unhealthy) {
      c->warnings.push_back(
          "flags.restartOnDeviceUnhealthy is ignored: gpuop returns recovered devices to "
          "Healthy without a restart");
    }
    if (const json* plugin = Field(j, "plugin")) GPUOP_RETURN_IF_ERROR(Plugin(*plugin, c));
    if (const json* gfd = Field(j, "gfd")) GPUOP_RETURN_IF_ERROR(Gfd(*gfd, c));
    return Status::Ok();
  }

  Status Plugin(const json& j, Config* c) const {
    const std::string p = "flags.plugin";
    GPUOP_RETURN_IF_ERROR(Object(j, p,
                                 {"passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy",
                                  "cdiAnnotationPrefix", "nvidiaCTKPath", "nvidiaCDIHookPath",
                                  "containerDriverRoot", "sharedDevicesAllocationPolicy"}));
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "passDeviceSpecs", &c->pass_device_specs));
    if (const json* v = Field(j, "deviceListStrategy")) {
      // A string or a list of strings (upstream's deviceListStrategyFlag).
      std::vector<std::string> names;
      if (v->is_string()) {
        names = Split(v->get<std::string>(), ',');  // "envvar,cdi-cri" as the flag takes it
      } else if (v->is_array()) {
        for (const json& e : *v) {
          if (!e.is_string()) {
            return Fail(Child(p, "deviceListStrategy"),
                        "must be a string or a list of strings, got " + Got(*v));
          }
          names.push_back(e.get<std::string>());
        }
      } else {
        return Fail(Child(p, "deviceListStrategy"),
                    "must be a string or a list of strings, got " + Got(*v));
      }
      auto s = ParseDeviceListStrategy(names);
      if (!s.ok()) return Fail(Child(p, "deviceListStrategy"), s.status().message());
      c->device_list = *s;
    }
    GPUOP_RETURN_IF_ERROR(Enum(j, p, "deviceIDStrategy", ParseDeviceIdStrategy, &c->id_strategy));
    GPUOP_RETURN_IF_ERROR(String(j, p, "cdiAnnotationPrefix", &c->cdi_annotation_prefix));
    GPUOP_RETURN_IF_ERROR(String(j, p, "nvidiaCTKPath", &c->nvidia_ctk_path));
    GPUOP_RETURN_IF_ERROR(String(j, p, "nvidiaCDIHookPath", &c->nvidia_ctk_path));
    GPUOP_RETURN_IF_ERROR(String(j, p, "containerDriverRoot", &c->container_driver_root));
    GPUOP_RETURN_IF_ERROR(Enum(j, p, "sharedDevicesAllocationPolicy", ParseSharedAllocationPolicy,
                               &c->shared_policy));
    return Status::Ok();
  }

  Status Gfd(const json& j, Config* c) const {
    const std::string p = "flags.gfd";
    GPUOP_RETURN_IF_ERROR(
        Object(j, p, {"oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile"}));
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "oneshot", &c->gfd.oneshot));
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "noTimestamp", &c->gfd.no_timestamp));
    if (const json* v = Field(j, "sleepInterval"); v && v->is_number()) {
      GPUOP_ASSIGN_OR_RETURN(c->gfd.sleep_interval, DurationFromNanoseconds(v->get<double>()));
    } else {
      GPUOP_RETURN_IF_ERROR(String(j, p, "sleepInterval", &c->gfd.sleep_interval));
    }
    if (Field(j, "outputFile")) {
      GPUOP_RETURN_IF_ERROR(String(j, p, "outputFile", &c->gfd.output_file.emplace()));
    }
    GPUOP_RETURN_IF_ERROR(String(j, p, "machineTypeFile", &c->gfd.machine_type_file));
    return Status::Ok();
  }

  // resources.gpus / resources.mig: upstream ignores custom naming with a
  // warning; so does gpuop, after checking the shape.
  Status Resources(const json& j, Config* c) const {
    GPUOP_RETURN_IF_ERROR(Object(j, "resources", {"gpus", "mig"}));
    bool any = false;
    for (std::string_view key : {"gpus", "mig"}) {
      const json* list = Field(j, key);
      if (!list) continue;
      std::string p = Child("resources", key);
      if (!list->is_array()) return Fail(p, "must be a list, got " + Got(*list));
      for (size_t i = 0; i < list->size(); ++i) {
        std::string ep = p + "[" + std::to_string(i) + "]";
        const json& e = (*list)[i];
        GPUOP_RETURN_IF_ERROR(Object(e, ep, {"pattern", "name"}));
        if (!Field(e, "pattern") || !Field(e, "name")) {
          return Fail(ep, "needs both pattern and name");
        }
        any = true;
      }
    }
    if (any) {
      c->warnings.push_back(
          "resources: customizing resource names is not supported (as upstream); ignored");
    }
    return Status::Ok();
  }

  Status Replicated(const json& j, const std::string& p, bool rename_by_default,
                    ReplicatedResource* r) const {
    GPUOP_RETURN_IF_ERROR(Object(j, p, {"name", "rename", "devices", "replicas"}));
    std::string raw;
    GPUOP_RETURN_IF_ERROR(String(j, p, "name", &raw));
    if (raw.empty())
      return Fail(Child(p, "name"), "missing; name the resource, e.g. nvidia.com/gpu");
    if (std::string e = NormalizeResourceName(raw, &r->name); !e.empty()) {
      return Fail(Child(p, "name"), e);
    }
    raw.clear();
    GPUOP_RETURN_IF_ERROR(String(j, p, "rename", &raw));
    if (!raw.empty()) {
      if (std::string e = NormalizeResourceName(raw, &r->rename); !e.empty()) {
        return Fail(Child(p, "rename"), e);
      }
    } else if (rename_by_default) {
      r->rename = r->name + ".shared";
      if (r->rename.size() > kMaxResourceNameLength) {
        return Fail(Child(p, "name"), "renameByDefault makes " + Quote(r->rename) +
                                          ", over the 63-character limit; set a shorter rename");
      }
    }
    const json* replicas = Field(j, "replicas");
    if (!replicas) return Fail(Child(p, "replicas"), "missing; set replicas: 2 or more");
    if (!replicas->is_number_integer()) {
      return Fail(Child(p, "replicas"), "must be an integer, got " + Got(*replicas));
    }
    int64_t n = replicas->get<int64_t>();
    if (n < 2) {
      return Fail(Child(p, "replicas"), "must be at least 2, got " + std::to_string(n));
    }
    if (n > 1024)
      return Fail(Child(p, "replicas"), "must be at most 1024, got " + std::to_string(n));
    r->replicas = static_cast<int>(n);
    if (const json* d = Field(j, "devices"))
      GPUOP_RETURN_IF_ERROR(Devices(*d, Child(p, "devices"), &r->devices));
    return Status::Ok();
  }

  Status Devices(const json& d, const std::string& p, ReplicaDevices* out) const {
    if (d.is_string()) {
      if (d.get<std::string>() != "all") {
        return Fail(p, "the only string allowed is \"all\", got " + Got(d) +
                           "; or give a count or a list of indexes/UUIDs");
      }
      *out = ReplicaDevices{};
      return Status::Ok();
    }
    if (d.is_number_integer()) {
      int64_t n = d.get<int64_t>();
      if (n <= 0) return Fail(p, "a count of devices must be at least 1, got " + std::to_string(n));
      *out = ReplicaDevices{.all = false, .count = static_cast<int>(n), .list = {}};
      return Status::Ok();
    }
    if (!d.is_array() || d.empty()) {
      return Fail(
          p, "must be \"all\", a count, or a non-empty list of indexes or UUIDs, got " + Got(d));
    }
    ReplicaDevices r{.all = false, .count = 0, .list = {}};
    for (size_t i = 0; i < d.size(); ++i) {
      const json& e = d[i];
      std::string ref;
      if (e.is_number_integer() && e.get<int64_t>() >= 0) {
        ref = std::to_string(e.get<int64_t>());
      } else if (e.is_string() && IsDeviceRef(e.get<std::string>())) {
        ref = e.get<std::string>();
      } else {
        return Fail(p + "[" + std::to_string(i) + "]",
                    "not a device: " + Got(e) +
                        "; use a GPU index (0), a MIG index (\"0:1\") or a GPU-/MIG- UUID");
      }
      r.list.push_back(std::move(ref));
    }
    *out = std::move(r);
    return Status::Ok();
  }

  Status SharingBlock(const json& j, const std::string& p, Sharing::Kind kind, Sharing* s) const {
    GPUOP_RETURN_IF_ERROR(
        Object(j, p, {"renameByDefault", "failRequestsGreaterThanOne", "resources"}));
    s->kind = kind;
    s->rename_by_default = false;
    s->fail_requests_greater_than_one = kind == Sharing::Kind::kMps;
    GPUOP_RETURN_IF_ERROR(Bool(j, p, "renameByDefault", &s->rename_by_default));
    GPUOP_RETURN_IF_ERROR(
        Bool(j, p, "failRequestsGreaterThanOne", &s->fail_requests_greater_than_one));
    const json* list = Field(j, "resources");
    const std::string rp = Child(p, "resources");
    if (!list || (list->is_array() && list->empty())) {
      return Fail(rp, "no resources listed; add one, e.g. {name: nvidia.com/gpu, replicas: 4}");
    }
    if (!list->is_array()) return Fail(rp, "must be a list, got " + Got(*list));
    std::set<std::string> seen;
    for (size_t i = 0; i < list->size(); ++i) {
      std::string ep = rp + "[" + std::to_string(i) + "]";
      ReplicatedResource r;
      GPUOP_RETURN_IF_ERROR(Replicated((*list)[i], ep, s->rename_by_default, &r));
      if (!seen.insert(r.name).second) {
        return Fail(ep + ".name", Quote(r.name) + " is listed twice; keep one entry per resource");
      }
      s->resources.push_back(std::move(r));
    }
    return Status::Ok();
  }

  Status SharingSection(const json& j, Config* c) const {
    GPUOP_RETURN_IF_ERROR(Object(j, "sharing", {"timeSlicing", "mps"}));
    const json* ts = Field(j, "timeSlicing");
    const json* mps = Field(j, "mps");
    // An empty timeSlicing: {} is how upstream's defaults serialise it: no sharing.
    if (ts && !(ts->is_object() && ts->empty())) {
      GPUOP_RETURN_IF_ERROR(
          SharingBlock(*ts, "sharing.timeSlicing", Sharing::Kind::kTimeSlicing, &c->sharing));
    }
    if (mps) {
      if (ts && c->sharing.kind == Sharing::Kind::kTimeSlicing) {
        c->warnings.push_back("sharing: both timeSlicing and mps are set; mps wins (as upstream)");
      }
      c->sharing = Sharing{};
      GPUOP_RETURN_IF_ERROR(SharingBlock(*mps, "sharing.mps", Sharing::Kind::kMps, &c->sharing));
    }
    return Status::Ok();
  }

  Status Imex(const json& j, Config* c) const {
    GPUOP_RETURN_IF_ERROR(Object(j, "imex", {"channelIDs", "required"}));
    GPUOP_RETURN_IF_ERROR(Bool(j, "imex", "required", &c->imex.required));
    if (const json* ids = Field(j, "channelIDs")) {
      bool valid = ids->is_array() && (ids->empty() || (ids->size() == 1 && (*ids)[0] == 0));
      if (!valid) return Fail("imex.channelIDs", "must be [] or [0], got " + Got(*ids));
      c->imex.channel_ids = ids->empty() ? std::vector<int>{} : std::vector<int>{0};
    }
    return Status::Ok();
  }

 private:
  std::string origin_;
};

}  // namespace

Result<MigStrategy> ParseMigStrategy(std::string_view s) {
  if (s == "none") return MigStrategy::kNone;
  if (s == "single") return MigStrategy::kSingle;
  if (s == "mixed") return MigStrategy::kMixed;
  return InvalidArgument("unknown MIG strategy " + Quote(s) + "; use none, single or mixed");
}

Result<DeviceIdStrategy> ParseDeviceIdStrategy(std::string_view s) {
  if (s == "uuid") return DeviceIdStrategy::kUuid;
  if (s == "index") return DeviceIdStrategy::kIndex;
  return InvalidArgument("unknown device ID strategy " + Quote(s) + "; use uuid or index");
}

Result<SharedAllocationPolicy> ParseSharedAllocationPolicy(std::string_view s) {
  if (s == "distributed") return SharedAllocationPolicy::kDistributed;
  if (s == "packed") return SharedAllocationPolicy::kPacked;
  return InvalidArgument("unknown shared devices allocation policy " + Quote(s) +
                         "; use distributed or packed");
}

Result<DeviceListStrategy> ParseDeviceListStrategy(const std::vector<std::string>& names) {
  DeviceListStrategy s{.envvar = false};
  bool any = false;
  for (const std::string& raw : names) {
    std::string_view n = Trim(raw);
    if (n == "envvar") {
      s.envvar = true;
    } else if (n == "volume-mounts") {
      s.volume_mounts = true;
    } else if (n == "cdi-annotations") {
      s.cdi_annotations = true;
    } else if (n == "cdi-cri") {
      s.cdi_cri = true;
    } else {
      return InvalidArgument("unknown device list strategy " + Quote(n) +
                             "; use envvar, volume-mounts, cdi-annotations or cdi-cri");
    }
    any = true;
  }
  if (!any) {
    return InvalidArgument(
        "no device list strategy; give at least one of envvar, volume-mounts, cdi-annotations, "
        "cdi-cri");
  }
  return s;
}

Result<DeviceListStrategy> ParseDeviceListStrategy(std::string_view csv) {
  return ParseDeviceListStrategy(Split(csv, ','));
}

std::string_view MigStrategyName(MigStrategy s) {
  switch (s) {
    case MigStrategy::kSingle:
      return "single";
    case MigStrategy::kMixed:
      return "mixed";
    case MigStrategy::kNone:
      break;
  }
  return "none";
}

std::string DeviceListStrategyString(const DeviceListStrategy& s) {
  std::vector<std::string> parts;
  if (s.envvar) parts.push_back("envvar");
  if (s.volume_mounts) parts.push_back("volume-mounts");
  if (s.cdi_annotations) parts.push_back("cdi-annotations");
  if (s.cdi_cri) parts.push_back("cdi-cri");
  return Join(parts, ",");
}

Result<Config> ParseConfig(std::string_view text, std::string_view origin) {
  FileParser p(origin);
  auto docs = ParseYamlDocuments(text);
  if (!docs.ok()) return p.Fail("", "not valid YAML or JSON: " + docs.status().message());
  if (docs->size() != 1) {
    return p.Fail("", "holds " + std::to_string(docs->size()) +
                          " documents; a config file is one mapping starting with version: v1");
  }
  const json& doc = docs->front();
  if (!doc.is_object()) {
    return p.Fail(FirstContentLine(text),
                  "must be a mapping starting with version: v1, got " + Got(doc));
  }
  GPUOP_RETURN_IF_ERROR(p.Object(doc, "", {"version", "flags", "resources", "sharing", "imex"}));
  const json* version = FileParser::Field(doc, "version");
  if (!version) return p.Fail("version", "missing; add version: v1 at the top");
  if (*version != "v1") {
    return p.Fail("version", "unknown version " + Got(*version) + "; this plugin reads v1");
  }
  Config c;
  if (const json* f = FileParser::Field(doc, "flags")) GPUOP_RETURN_IF_ERROR(p.Flags(*f, &c));
  if (const json* r = FileParser::Field(doc, "resources"))
    GPUOP_RETURN_IF_ERROR(p.Resources(*r, &c));
  if (const json* s = FileParser::Field(doc, "sharing"))
    GPUOP_RETURN_IF_ERROR(p.SharingSection(*s, &c));
  if (const json* i = FileParser::Field(doc, "imex")) GPUOP_RETURN_IF_ERROR(p.Imex(*i, &c));
  if (c.sharing.kind == Sharing::Kind::kMps && c.mig_strategy == MigStrategy::kMixed) {
    return p.Fail("sharing.mps",
                  "MPS sharing is not supported with migStrategy mixed; use "
                  "timeSlicing or migStrategy none");
  }
  return c;
}

Status ApplyEnv(const std::map<std::string, std::string>& env, Config* c) {
  auto get = [&](const char* name) -> const std::string* {
    auto it = env.find(name);
    return it == env.end() || it->second.empty() ? nullptr : &it->second;
  };
  auto bad = [](const char* name, const std::string& value, const std::string& problem) {
    return InvalidArgument("environment " + std::string(name) + "=" + Quote(value) + ": " +
                           problem);
  };
  auto boolean = [&](const char* name, bool* out) -> Status {
    const std::string* v = get(name);
    if (!v) return Status::Ok();
    auto b = ParseGoBool(*v);
    if (!b) return bad(name, *v, "not a boolean; use true or false");
    *out = *b;
    return Status::Ok();
  };
  auto string = [&](const char* name, std::string* out) {
    if (const std::string* v = get(name)) *out = *v;
  };
  // Parses with `parse` and assigns; the parser's text names the fix.
  auto parsed = [&](const char* name, auto parse, auto* out) -> Status {
    const std::string* v = get(name);
    if (!v) return Status::Ok();
    auto r = parse(*v);
    if (!r.ok()) return bad(name, *v, r.status().message());
    *out = *r;
    return Status::Ok();
  };

  GPUOP_RETURN_IF_ERROR(parsed("MIG_STRATEGY", ParseMigStrategy, &c->mig_strategy));
  GPUOP_RETURN_IF_ERROR(boolean("FAIL_ON_INIT_ERROR", &c->fail_on_init_error));
  string("NVIDIA_DRIVER_ROOT", &c->nvidia_driver_root);
  string("NVIDIA_DEV_ROOT", &c->nvidia_dev_root);
  GPUOP_RETURN_IF_ERROR(boolean("PASS_DEVICE_SPECS", &c->pass_device_specs));
  GPUOP_RETURN_IF_ERROR(parsed(
      "DEVICE_LIST_STRATEGY", [](std::string_view s) { return ParseDeviceListStrategy(s); },
      &c->device_list));
  GPUOP_RETURN_IF_ERROR(parsed("DEVICE_ID_STRATEGY", ParseDeviceIdStrategy, &c->id_strategy));
  string("CDI_ANNOTATION_PREFIX", &c->cdi_annotation_prefix);
  string("CONTAINER_DRIVER_ROOT", &c->container_driver_root);
  string("MPS_ROOT", &c->mps_root);
  string("NVIDIA_CTK_PATH", &c->nvidia_ctk_path);
  GPUOP_RETURN_IF_ERROR(boolean("GDRCOPY_ENABLED", &c->gdrcopy));
  GPUOP_RETURN_IF_ERROR(boolean("GDS_ENABLED", &c->gds));
  GPUOP_RETURN_IF_ERROR(boolean("MOFED_ENABLED", &c->mofed));
  GPUOP_RETURN_IF_ERROR(
      parsed("SHARED_DEVICES_ALLOCATION_POLICY", ParseSharedAllocationPolicy, &c->shared_policy));
  GPUOP_RETURN_IF_ERROR(boolean("IMEX_REQUIRED", &c->imex.required));
  if (const std::string* v = get("IMEX_CHANNEL_IDS")) {
    if (Trim(*v) != "0") return bad("IMEX_CHANNEL_IDS", *v, "only channel 0 is supported; use 0");
    c->imex.channel_ids = {0};
  }
  return Status::Ok();
}

Status ApplyOverrides(const ConfigOverrides& o, Config* c) {
  auto bad = [](const char* flag, const std::string& value, const Status& s) {
    return InvalidArgument(std::string(flag) + " " + Quote(value) + ": " + s.message());
  };
  if (o.mig_strategy) {
    auto r = ParseMigStrategy(*o.mig_strategy);
    if (!r.ok()) return bad("--mig-strategy", *o.mig_strategy, r.status());
    c->mig_strategy = *r;
  }
  if (o.device_list_strategy) {
    auto r = ParseDeviceListStrategy(std::string_view(*o.device_list_strategy));
    if (!r.ok()) return bad("--device-list-strategy", *o.device_list_strategy, r.status());
    c->device_list = *r;
  }
  if (o.device_id_strategy) {
    auto r = ParseDeviceIdStrategy(*o.device_id_strategy);
    if (!r.ok()) return bad("--device-id-strategy", *o.device_id_strategy, r.status());
    c->id_strategy = *r;
  }
  if (o.pass_device_specs) c->pass_device_specs = *o.pass_device_specs;
  return Status::Ok();
}

Status ValidateConfig(const Config& c) {
  if (c.sharing.kind != Sharing::Kind::kMps) return Status::Ok();
  if (c.mig_strategy == MigStrategy::kMixed) {
    return InvalidArgument(
        "MPS sharing is not supported with mig-strategy mixed; use time-slicing or "
        "mig-strategy none");
  }
  if (c.mps_root.empty()) {
    return InvalidArgument(
        "MPS sharing needs an MPS root; set flags.mpsRoot or MPS_ROOT (the chart uses "
        "/run/nvidia/mps)");
  }
  return Status::Ok();
}

Result<Config> ResolveConfig(const std::optional<std::string>& file_text, std::string_view origin,
                             const std::map<std::string, std::string>& env,
                             const ConfigOverrides& overrides) {
  Config c;
  if (file_text) {
    GPUOP_ASSIGN_OR_RETURN(c, ParseConfig(*file_text, origin));
  }
  GPUOP_RETURN_IF_ERROR(ApplyEnv(env, &c));
  GPUOP_RETURN_IF_ERROR(ApplyOverrides(overrides, &c));
  GPUOP_RETURN_IF_ERROR(ValidateConfig(c));
  return c;
}

}  // namespace gpuop::deviceplugin

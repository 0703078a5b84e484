#include "toolkit/cdi_spec.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/strings.h"
#include "base/yaml_json.h"

namespace gpuop::toolkit::cdi {
namespace {

using OJson = nlohmann::ordered_json;

constexpr std::array<std::string_view, 8> kKnownVersions = {"0.3.0", "0.4.0", "0.5.0", "0.6.0",
                                                            "0.7.0", "0.8.0", "1.0.0", "1.1.0"};
constexpr std::array<std::string_view, 5> kHookNames = {"createRuntime", "createContainer",
                                                        "startContainer", "poststart", "poststop"};

// ---- spec → ordered JSON (the one place that knows field names and order) --

OJson StringList(const std::vector<std::string>& v) {
  OJson a = OJson::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

OJson EditsJson(const ContainerEdits& e) {
  OJson o = OJson::object();
  if (!e.env.empty()) o["env"] = StringList(e.env);
  if (!e.device_nodes.empty()) {
    OJson a = OJson::array();
    for (const DeviceNode& d : e.device_nodes) {
      OJson n = OJson::object();
      n["path"] = d.path;
      if (!d.host_path.empty() && d.host_path != d.path) n["hostPath"] = d.host_path;
      if (!d.type.empty()) n["type"] = d.type;
      if (d.major) n["major"] = *d.major;
      if (d.minor) n["minor"] = *d.minor;
      if (d.file_mode) n["fileMode"] = *d.file_mode;
      if (!d.permissions.empty()) n["permissions"] = d.permissions;
      if (d.uid) n["uid"] = *d.uid;
      if (d.gid) n["gid"] = *d.gid;
      a.push_back(std::move(n));
    }
    o["deviceNodes"] = std::move(a);
  }
  if (!e.hooks.empty()) {
    OJson a = OJson::array();
    for (const Hook& h : e.hooks) {
      OJson n = OJson::object();
      n["hookName"] = h.hook_name;
      n["path"] = h.path;
      if (!h.args.empty()) n["args"] = StringList(h.args);
      if (!h.env.empty()) n["env"] = StringList(h.env);
      if (h.timeout) n["timeout"] = *h.timeout;
      a.push_back(std::move(n));
    }
    o["hooks"] = std::move(a);
  }
  if (!e.mounts.empty()) {
    OJson a = OJson::array();
    for (const Mount& m : e.mounts) {
      OJson n = OJson::object();
      n["hostPath"] = m.host_path;
      n["containerPath"] = m.container_path;
      if (!m.options.empty()) n["options"] = StringList(m.options);
      if (!m.type.empty()) n["type"] = m.type;
      a.push_back(std::move(n));
    }
    o["mounts"] = std::move(a);
  }
  if (!e.additional_gids.empty()) {
    OJson a = OJson::array();
    for (uint32_t g : e.additional_gids) a.push_back(g);
    o["additionalGids"] = std::move(a);
  }
  return o;
}

OJson SpecJson(const Spec& spec) {
  OJson o = OJson::object();
  o["cdiVersion"] = spec.cdi_version;
  o["kind"] = spec.kind;
  if (!spec.annotations.empty()) o["annotations"] = spec.annotations;
  OJson devices = OJson::array();
  for (const Device& d : spec.devices) {
    OJson n = OJson::object();
    n["name"] = d.name;
    if (!d.annotations.empty()) n["annotations"] = d.annotations;
    n["containerEdits"] = EditsJson(d.edits);
    devices.push_back(std::move(n));
  }
  o["devices"] = std::move(devices);
  if (!spec.edits.empty()) o["containerEdits"] = EditsJson(spec.edits);
  return o;
}

// ---- ordered JSON → block YAML ---------------------------------------------

bool IsYamlKeyword(std::string_view s) {
  static const std::set<std::string> kWords = {"true", "false", "yes", "no",   "on",
                                               "off",  "y",     "n",   "null", "~"};
  return kWords.count(ToLower(s)) > 0;
}

// A plain (unquoted) scalar only when no YAML reader can take it for anything
// but this string: starts with a letter, '/' or '_' (or "--"/"-x"), holds no
// space or indicator that matters, and is no keyword. Everything else is
// double-quoted with JSON escapes, which YAML reads the same way.
bool PlainSafe(std::string_view s) {
  if (s.empty() || IsYamlKeyword(s)) return false;
  // "0.5.0": a version with two dots is no number to any YAML reader.
  if (CompareVersions(s, s).has_value()) return true;
  const char c0 = s[0];
  const bool first_ok = std::isalpha(static_cast<unsigned char>(c0)) || c0 == '/' || c0 == '_' ||
                        (c0 == '-' && s.size() > 1 &&
                         (s[1] == '-' || std::isalpha(static_cast<unsigned char>(s[1]))));
  if (!first_ok) return false;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) continue;
    switch (c) {
      case '_':
      case '.':
      case '/':
      case '=':
      case ',':
      case ':':
      case '+':
      case '@':
      case '-':
        continue;
      default:
        return false;
    }
  }
  return s.back() != ':';
}

void Scalar(const OJson& v, std::string& out) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (PlainSafe(s)) {
      out += s;
    } else {
      out += JsonQuote(s);
    }
  } else {
    out += v.dump();
  }
}

void Pad(int n, std::string& out) { out.append(static_cast<size_t>(n), ' '); }

void EmitMap(const OJson& obj, int indent, bool first_inline, std::string& out);

void EmitSeq(const OJson& arr, int indent, std::string& out) {
  for (const auto& item : arr) {
    Pad(indent, out);
    out += "- ";
    if (item.is_object() && !item.empty()) {
      EmitMap(item, indent + 2, /*first_inline=*/true, out);
    } else {
      Scalar(item, out);
      out += '\n';
    }
  }
}

void EmitMap(const OJson& obj, int indent, bool first_inline, std::string& out) {
  bool first = true;
  for (const auto& [key, val] : obj.items()) {
    if (!(first && first_inline)) Pad(indent, out);
    first = false;
    out += key;
    out += ':';
    if (val.is_object()) {
      if (val.empty()) {
        out += " {}\n";
      } else {
        out += '\n';
        EmitMap(val, indent + 2, false, out);
      }
    } else if (val.is_array()) {
      if (val.empty()) {
        out += " []\n";
      } else {
        out += '\n';
        EmitSeq(val, indent, out);
      }
    } else {
      out += ' ';
      Scalar(val, out);
      out += '\n';
    }
  }
}

// ---- validation helpers ----------------------------------------------------

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Letters, digits and `extra` inside; alphanumeric at both ends (a letter first
// when `letter_first`).
bool NameOk(std::string_view s, std::string_view extra, bool letter_first) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  if (letter_first && !std::isalpha(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s) {
    if (!IsAlnum(c) && extra.find(c) == std::string_view::npos) return false;
  }
  return true;
}

Status CheckEdits(const ContainerEdits& e, const std::string& where) {
  for (size_t i = 0; i < e.device_nodes.size(); ++i) {
    const DeviceNode& d = e.device_nodes[i];
    std::string at = where + ".deviceNodes[" + std::to_string(i) + "]";
    if (!StartsWith(d.path, "/"))
      return InvalidArgument(at + ".path \"" + d.path + "\" is not absolute");
    if (!d.host_path.empty() && !StartsWith(d.host_path, "/")) {
      return InvalidArgument(at + ".hostPath \"" + d.host_path + "\" is not absolute");
    }
    if (!d.type.empty() && d.type != "c" && d.type != "b" && d.type != "u" && d.type != "p") {
      return InvalidArgument(at + ".type \"" + d.type + "\" is not one of b, c, u, p");
    }
    for (char c : d.permissions) {
      if (c != 'r' && c != 'w' && c != 'm') {
        return InvalidArgument(at + ".permissions \"" + d.permissions +
                               "\" is not a subset of rwm");
      }
    }
  }
  for (size_t i = 0; i < e.mounts.size(); ++i) {
    const Mount& m = e.mounts[i];
    std::string at = where + ".mounts[" + std::to_string(i) + "]";
    if (m.host_path.empty()) return InvalidArgument(at + ".hostPath is empty");
    if (!StartsWith(m.container_path, "/")) {
      return InvalidArgument(at + ".containerPath \"" + m.container_path + "\" is not absolute");
    }
  }
  for (size_t i = 0; i < e.hooks.size(); ++i) {
    const Hook& h = e.hooks[i];
    std::string at = where + ".hooks[" + std::to_string(i) + "]";
    bool known = false;
    for (auto n : kHookNames) known = known || h.hook_name == n;
    if (!known) {
      return InvalidArgument(at + ".hookName \"" + h.hook_name +
                             "\" is not one of createRuntime, createContainer, startContainer, "
                             "poststart, poststop");
    }
    if (!StartsWith(h.path, "/"))
      return InvalidArgument(at + ".path \"" + h.path + "\" is not absolute");
    if (h.timeout && *h.timeout <= 0) return InvalidArgument(at + ".timeout must be positive");
  }
  for (const std::string& env : e.env) {
    if (env.empty() || env.front() == '=') {
      return InvalidArgument(where + ".env entry \"" + env + "\" is not KEY=VALUE");
    }
  }
  return Status::Ok();
}

// ---- parsing ---------------------------------------------------------------

class Parser {
 public:
  Status Fail(const std::string& where, const std::string& what) {
    return InvalidArgument("CDI spec: " + where + ": " + what);
  }

  Status CheckKeys(const YAML::Node& n, const std::string& where,
                   std::initializer_list<std::string_view> known) {
    if (!n.IsMap()) return Fail(where, "must be a mapping");
    for (const auto& kv : n) {
      std::string key = kv.first.as<std::string>();
      bool ok = false;
      for (auto k : known) ok = ok || key == k;
      if (!ok) {
        std::string path = where.empty() ? key : where + "." + key;
        if (key == "intelRdt" || key == "netDevices") {
          return Fail(path, "not supported by gpuop");
        }
        return Fail(path, "unknown field");
      }
    }
    return Status::Ok();
  }

  Result<std::string> Str(const YAML::Node& n, const std::string& where) {
    if (!n.IsScalar()) return Fail(where, "must be a string");
    return n.as<std::string>();
  }

  template <typename T>
  Result<T> Num(const YAML::Node& n, const std::string& where) {
    if (!n.IsScalar()) return Fail(where, "must be a number");
    auto v = ParseUint(n.Scalar());
    bool neg = false;
    std::string_view s = n.Scalar();
    if (!v && !s.empty() && s[0] == '-') {
      v = ParseUint(s.substr(1));
      neg = true;
    }
    if (!v) return Fail(where, "\"" + Excerpt(n.Scalar()) + "\" is not a number");
    if constexpr (std::is_unsigned_v<T>) {
      if (neg || *v > std::numeric_limits<T>::max()) return Fail(where, "out of range");
      return static_cast<T>(*v);
    } else {
      if (*v > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        return Fail(where, "out of range");
      return neg ? -static_cast<T>(*v) : static_cast<T>(*v);
    }
  }

  Result<std::vector<std::string>> StrList(const YAML::Node& n, const std::string& where) {
    if (!n.IsSequence()) return Fail(where, "must be a list of strings");
    std::vector<std::string> out;
    for (size_t i = 0; i < n.size(); ++i) {
      GPUOP_ASSIGN_OR_RETURN(auto s, Str(n[i], where + "[" + std::to_string(i) + "]"));
      out.push_back(std::move(s));
    }
    return out;
  }

  Result<std::map<std::string, std::string>> StrMap(const YAML::Node& n, const std::string& where) {
    if (!n.IsMap()) return Fail(where, "must be a mapping of strings");
    std::map<std::string, std::string> out;
    for (const auto& kv : n) {
      std::string k = kv.first.as<std::string>();
      GPUOP_ASSIGN_OR_RETURN(out[k], Str(kv.second, where + "." + k));
    }
    return out;
  }

  Result<ContainerEdits> Edits(const YAML::Node& n, const std::string& where) {
    GPUOP_RETURN_IF_ERROR(CheckKeys(
        n, where,
        {"env", "deviceNodes", "hooks", "mounts", "additionalGids", "intelRdt", "netDevices"}));
    ContainerEdits e;
    if (n["env"]) {
      GPUOP_ASSIGN_OR_RETURN(e.env, StrList(n["env"], where + ".env"));
    }
    if (const YAML::Node dn = n["deviceNodes"]) {
      if (!dn.IsSequence()) return Fail(where + ".deviceNodes", "must be a list");
      for (size_t i = 0; i < dn.size(); ++i) {
        std::string at = where + ".deviceNodes[" + std::to_string(i) + "]";
        const YAML::Node d = dn[i];
        GPUOP_RETURN_IF_ERROR(CheckKeys(d, at,
                                        {"path", "hostPath", "type", "major", "minor", "fileMode",
                                         "permissions", "uid", "gid"}));
        DeviceNode node;
        if (!d["path"]) return Fail(at + ".path", "missing");
        GPUOP_ASSIGN_OR_RETURN(node.path, Str(d["path"], at + ".path"));
        if (d["hostPath"]) {
          GPUOP_ASSIGN_OR_RETURN(node.host_path, Str(d["hostPath"], at + ".hostPath"));
        }
        if (d["type"]) {
          GPUOP_ASSIGN_OR_RETURN(node.type, Str(d["type"], at + ".type"));
        }
        if (d["major"]) {
          GPUOP_ASSIGN_OR_RETURN(node.major, Num<int64_t>(d["major"], at + ".major"));
        }
        if (d["minor"]) {
          GPUOP_ASSIGN_OR_RETURN(node.minor, Num<int64_t>(d["minor"], at + ".minor"));
        }
        if (d["fileMode"]) {
          GPUOP_ASSIGN_OR_RETURN(node.file_mode, Num<uint32_t>(d["fileMode"], at + ".fileMode"));
        }
        if (d["permissions"]) {
          GPUOP_ASSIGN_OR_RETURN(node.permissions, Str(d["permissions"], at + ".permissions"));
        }
        if (d["uid"]) {
          GPUOP_ASSIGN_OR_RETURN(node.uid, Num<uint32_t>(d["uid"], at + ".uid"));
        }
        if (d["gid"]) {
          GPUOP_ASSIGN_OR_RETURN(node.gid, Num<uint32_t>(d["gid"], at + ".gid"));
        }
        e.device_nodes.push_back(std::move(node));
      }
    }
    if (const YAML::Node hs = n["hooks"]) {
      if (!hs.IsSequence()) return Fail(where + ".hooks", "must be a list");
      for (size_t i = 0; i < hs.size(); ++i) {
        std::string at = where + ".hooks[" + std::to_string(i) + "]";
        const YAML::Node h = hs[i];
        GPUOP_RETURN_IF_ERROR(CheckKeys(h, at, {"hookName", "path", "args", "env", "timeout"}));
        Hook hook;
        if (!h["hookName"]) return Fail(at + ".hookName", "missing");
        if (!h["path"]) return Fail(at + ".path", "missing");
        GPUOP_ASSIGN_OR_RETURN(hook.hook_name, Str(h["hookName"], at + ".hookName"));
        GPUOP_ASSIGN_OR_RETURN(hook.path, Str(h["path"], at + ".path"));
        if (h["args"]) {
          GPUOP_ASSIGN_OR_RETURN(hook.args, StrList(h["args"], at + ".args"));
        }
        if (h["env"]) {
          GPUOP_ASSIGN_OR_RETURN(hook.env, StrList(h["env"], at + ".env"));
        }
        if (h["timeout"]) {
          GPUOP_ASSIGN_OR_RETURN(hook.timeout, Num<int>(h["timeout"], at + ".timeout"));
        }
        e.hooks.push_back(std::move(hook));
      }
    }
    if (const YAML::Node ms = n["mounts"]) {
      if (!ms.IsSequence()) return Fail(where + ".mounts", "must be a list");
      for (size_t i = 0; i < ms.size(); ++i) {
        std::string at = where + ".mounts[" + std::to_string(i) + "]";
        const YAML::Node m = ms[i];
        GPUOP_RETURN_IF_ERROR(CheckKeys(m, at, {"hostPath", "containerPath", "options", "type"}));
        Mount mount;
        if (!m["hostPath"]) return Fail(at + ".hostPath", "missing");
        if (!m["containerPath"]) return Fail(at + ".containerPath", "missing");
        GPUOP_ASSIGN_OR_RETURN(mount.host_path, Str(m["hostPath"], at + ".hostPath"));
        GPUOP_ASSIGN_OR_RETURN(mount.container_path,
                               Str(m["containerPath"], at + ".containerPath"));
        if (m["options"]) {
          GPUOP_ASSIGN_OR_RETURN(mount.options, StrList(m["options"], at + ".options"));
        }
        if (m["type"]) {
          GPUOP_ASSIGN_OR_RETURN(mount.type, Str(m["type"], at + ".type"));
        }
        e.mounts.push_back(std::move(mount));
      }
    }
    if (const YAML::Node gs = n["additionalGids"]) {
      if (!gs.IsSequence()) return Fail(where + ".additionalGids", "must be a list of numbers");
      for (size_t i = 0; i < gs.size(); ++i) {
        GPUOP_ASSIGN_OR_RETURN(
            uint32_t g, Num<uint32_t>(gs[i], where + ".additionalGids[" + std::to_string(i) + "]"));
        e.additional_gids.push_back(g);
      }
    }
    return e;
  }

  Result<Spec> Run(std::string_view text) {
    if (Status s = CheckYamlText(text); !s.ok()) return s.Annotate("CDI spec");
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      return InvalidArgument(std::string("CDI spec is not valid YAML or JSON: ") + e.what());
    }
    try {
      return Build(root);
    } catch (const YAML::Exception& e) {  // a key that is not a scalar, and the like
      return InvalidArgument(std::string("CDI spec: ") + e.what());
    }
  }

  Result<Spec> Build(const YAML::Node& root) {
    if (!root.IsMap()) return InvalidArgument("CDI spec: the document must be a mapping");
    GPUOP_RETURN_IF_ERROR(
        CheckKeys(root, "", {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}));
    Spec spec;
    if (!root["cdiVersion"]) return Fail("cdiVersion", "missing");
    if (!root["kind"]) return Fail("kind", "missing");
    if (!root["devices"]) return Fail("devices", "missing");
    GPUOP_ASSIGN_OR_RETURN(spec.cdi_version, Str(root["cdiVersion"], "cdiVersion"));
    GPUOP_ASSIGN_OR_RETURN(spec.kind, Str(root["kind"], "kind"));
    if (root["annotations"]) {
      GPUOP_ASSIGN_OR_RETURN(spec.annotations, StrMap(root["annotations"], "annotations"));
    }
    const YAML::Node devs = root["devices"];
    if (!devs.IsSequence()) return Fail("devices", "must be a list");
    for (size_t i = 0; i < devs.size(); ++i) {
      std::string at = "devices[" + std::to_string(i) + "]";
      const YAML::Node d = devs[i];
      GPUOP_RETURN_IF_ERROR(CheckKeys(d, at, {"name", "annotations", "containerEdits"}));
      Device dev;
      if (!d["name"]) return Fail(at + ".name", "missing");
      if (!d["containerEdits"]) return Fail(at + ".containerEdits", "missing");
      GPUOP_ASSIGN_OR_RETURN(dev.name, Str(d["name"], at + ".name"));
      if (d["annotations"]) {
        GPUOP_ASSIGN_OR_RETURN(dev.annotations, StrMap(d["annotations"], at + ".annotations"));
      }
      GPUOP_ASSIGN_OR_RETURN(dev.edits, Edits(d["containerEdits"], at + ".containerEdits"));
      spec.devices.push_back(std::move(dev));
    }
    if (root["containerEdits"]) {
      GPUOP_ASSIGN_OR_RETURN(spec.edits, Edits(root["containerEdits"], "containerEdits"));
    }
    return spec;
  }
};

bool HasHostPath(const ContainerEdits& e) {
  for (const DeviceNode& d : e.device_nodes) {
    if (!d.host_path.empty() && d.host_path != d.path) return true;
  }
  return false;
}
bool HasMountType(const ContainerEdits& e) {
  for (const Mount& m : e.mounts) {
    if (!m.type.empty()) return true;
  }
  return false;
}

}  // namespace

std::optional<int> CompareVersions(std::string_view a, std::string_view b) {
  auto parts = [](std::string_view v) -> std::optional<std::array<uint64_t, 3>> {
    auto p = Split(v, '.', /*skip_empty=*/false);
    if (p.size() != 3) return std::nullopt;
    std::array<uint64_t, 3> out{};
    for (int i = 0; i < 3; ++i) {
      auto n = ParseUint(p[i]);
      if (!n || StartsWith(p[i], "0x")) return std::nullopt;
      out[i] = *n;
    }
    return out;
  };
  auto pa = parts(a), pb = parts(b);
  if (!pa || !pb) return std::nullopt;
  if (*pa < *pb) return -1;
  if (*pa > *pb) return 1;
  return 0;
}

std::string MinimumVersion(const Spec& spec) {
  std::string v(kOldestVersion);
  auto raise = [&v](std::string_view to) {
    if (*CompareVersions(v, to) < 0) v = std::string(to);
  };
  bool mount_type = HasMountType(spec.edits);
  bool host_path = HasHostPath(spec.edits);
  bool annotations = !spec.annotations.empty();
  bool gids = !spec.edits.additional_gids.empty();
  bool digit_name = false;
  for (const Device& d : spec.devices) {
    mount_type = mount_type || HasMountType(d.edits);
    host_path = host_path || HasHostPath(d.edits);
    annotations = annotations || !d.annotations.empty();
    gids = gids || !d.edits.additional_gids.empty();
    digit_name =
        digit_name || (!d.name.empty() && std::isdigit(static_cast<unsigned char>(d.name[0])));
  }
  size_t slash = spec.kind.find('/');
  bool dotted_class = slash != std::string::npos && spec.kind.find('.', slash) != std::string::npos;
  if (mount_type) raise("0.4.0");
  if (host_path || digit_name) raise("0.5.0");
  if (annotations || dotted_class) raise("0.6.0");
  if (gids) raise("0.7.0");
  return v;
}

Status Validate(const Spec& spec) {
  bool known = false;
  for (auto k : kKnownVersions) known = known || spec.cdi_version == k;
  if (!known) {
    return InvalidArgument("CDI spec: cdiVersion \"" + spec.cdi_version +
                           "\" is not a known version (0.3.0 to 1.1.0)");
  }
  std::string min = MinimumVersion(spec);
  if (*CompareVersions(spec.cdi_version, min) < 0) {
    return InvalidArgument("CDI spec: cdiVersion " + spec.cdi_version +
                           " is too old for its features: " + min + " or later is needed");
  }
  size_t slash = spec.kind.find('/');
  if (slash == std::string::npos || spec.kind.find('/', slash + 1) != std::string::npos) {
    return InvalidArgument("CDI spec: kind \"" + spec.kind + "\" is not vendor/class");
  }
  std::string_view vendor = std::string_view(spec.kind).substr(0, slash);
  std::string_view cls = std::string_view(spec.kind).substr(slash + 1);
  if (!NameOk(vendor, "-_.", /*letter_first=*/true)) {
    return InvalidArgument("CDI spec: vendor \"" + std::string(vendor) +
                           "\" must start with a letter, end with a letter or digit and hold only "
                           "letters, digits, '-', '_' and '.'");
  }
  if (cls.size() > 63 || !NameOk(cls, "-_.", /*letter_first=*/false)) {
    return InvalidArgument("CDI spec: class \"" + std::string(cls) +
                           "\" must be at most 63 characters, alphanumeric at both ends, with only "
                           "'-', '_' and '.' inside");
  }
  if (spec.devices.empty()) return InvalidArgument("CDI spec: no devices");
  std::set<std::string> names;
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    const Device& d = spec.devices[i];
    std::string at = "devices[" + std::to_string(i) + "] \"" + d.name + "\"";
    if (!NameOk(d.name, "-_.:", /*letter_first=*/false)) {
      return InvalidArgument(
          "CDI spec: " + at +
          ": a device name must be alphanumeric at both ends with only '-', '_', "
          "'.' and ':' inside");
    }
    if (!names.insert(d.name).second)
      return InvalidArgument("CDI spec: " + at + ": duplicate name");
    if (d.edits.empty()) return InvalidArgument("CDI spec: " + at + ": empty containerEdits");
    GPUOP_RETURN_IF_ERROR(CheckEdits(d.edits, "CDI spec: " + at + " containerEdits"));
  }
  return CheckEdits(spec.edits, "CDI spec: containerEdits");
}

std::string ToJson(const Spec& spec) { return SpecJson(spec).dump(2) + "\n"; }

std::string ToYaml(const Spec& spec) {
  std::string out = "---\n";
  out.reserve(16384);
  EmitMap(SpecJson(spec), 0, false, out);
  return out;
}

Result<Spec> Parse(std::string_view text) { return Parser().Run(text); }

}  // namespace gpuop::toolkit::cdi

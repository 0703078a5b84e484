#include "mig/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>

#include "base/strings.h"
#include "base/yaml_json.h"

namespace gpuop::mig {
namespace {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08X", v);
  return buf;
}

std::optional<uint32_t> ParseHex32(std::string_view s) {
  if (s.size() != 10 || !(StartsWith(s, "0x") || StartsWith(s, "0X"))) return std::nullopt;
  uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), v, 16);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Reads decimal digits at `pos`; nullopt when there are none.
std::optional<unsigned> ReadNumber(std::string_view s, size_t* pos) {
  size_t start = *pos;
  while (*pos < s.size() && s[*pos] >= '0' && s[*pos] <= '9') ++*pos;
  if (*pos == start || *pos - start > 6) return std::nullopt;
  unsigned v = 0;
  std::from_chars(s.data() + start, s.data() + *pos, v);
  return v;
}

// Parse errors carry the line of the node they are about.
class Parser {
 public:
  explicit Parser(std::string origin) : origin_(std::move(origin)) {}

  Status Error(const YAML::Node& node, const std::string& what) const {
    int line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
    return InvalidArgument(origin_ + (line > 0 ? ":" + std::to_string(line) : std::string()) +
                           ": " + what);
  }

  Status CheckKeys(const YAML::Node& map, const std::set<std::string>& allowed,
                   const std::string& where) const {
    for (const auto& kv : map) {
      std::string key = kv.first.Scalar();
      if (!allowed.contains(key)) {
        std::vector<std::string> names(allowed.begin(), allowed.end());
        return Error(kv.first, "unknown field \"" + key + "\" in " + where +
                                   " (known: " + Join(names, ", ") + ")");
      }
    }
    return Status::Ok();
  }

  // The key node of `key` in `map` (its line is where the field starts).
  static YAML::Node KeyOf(const YAML::Node& map, const std::string& key) {
    for (const auto& kv : map) {
      if (kv.first.Scalar() == key) return kv.first;
    }
    return map;
  }

  Result<DeviceFilter> Filter(const YAML::Node& node) const {
    if (!node.IsScalar()) return Error(node, "device-filter entries must be strings");
    std::string s(Trim(node.Scalar()));
    std::string_view dev = s, sub;
    if (auto colon = s.find(':'); colon != std::string::npos) {
      dev = std::string_view(s).substr(0, colon);
      sub = std::string_view(s).substr(colon + 1);
    }
    DeviceFilter f;
    auto d = ParseHex32(dev);
    if (!d) {
      return Error(node, "device-filter \"" + s +
                             "\" is not 0xDDDDVVVV (PCI device and vendor id, e.g. 0x233010DE), "
                             "optionally followed by :0xSSSSssss");
    }
    f.device_id = *d;
    if (!sub.empty() || s.find(':') != std::string::npos) {
      auto ss = ParseHex32(sub);
      if (!ss) return Error(node, "device-filter \"" + s + "\": subsystem id is not 0xSSSSssss");
      f.subsystem_id = *ss;
    }
    return f;
  }

  Result<ConfigEntry> Entry(const YAML::Node& node, const std::string& config) const {
    const std::string where = "an entry of mig-config \"" + config + "\"";
    if (!node.IsMap()) return Error(node, where + " must be a map");
    GPUOP_RETURN_IF_ERROR(
        CheckKeys(node, {"devices", "device-filter", "mig-enabled", "mig-devices"}, where));
    ConfigEntry e;
    e.line = node.Mark().line + 1;

    const YAML::Node devices = node["devices"];
    if (!devices) return Error(node, where + " has no \"devices\" (all, or a list of indexes)");
    if (devices.IsScalar() && devices.Scalar() == "all") {
      e.all_devices = true;
    } else if (devices.IsSequence()) {
      for (const auto& d : devices) {
        auto v = d.IsScalar() ? ParseUint(d.Scalar()) : std::nullopt;
        if (!v || *v > 1024)
          return Error(d, "devices: \"" + Excerpt(d.Scalar()) + "\" is not a GPU index");
        if (std::find(e.devices.begin(), e.devices.end(), *v) != e.devices.end()) {
          return Error(d, "devices: GPU " + d.Scalar() + " is listed twice");
        }
        e.devices.push_back(static_cast<unsigned>(*v));
      }
      if (e.devices.empty()) return Error(devices, "devices: the list is empty");
    } else {
      return Error(devices, "devices must be \"all\" or a list of GPU indexes");
    }

    if (const YAML::Node f = node["device-filter"]) {
      if (f.IsScalar()) {
        GPUOP_ASSIGN_OR_RETURN(auto one, Filter(f));
        e.filters.push_back(one);
      } else if (f.IsSequence()) {
        for (const auto& x : f) {
          GPUOP_ASSIGN_OR_RETURN(auto one, Filter(x));
          e.filters.push_back(one);
        }
      } else {
        return Error(f, "device-filter must be a string or a list of strings");
      }
    }

    const YAML::Node enabled = node["mig-enabled"];
    if (!enabled) return Error(node, where + " has no \"mig-enabled\" (true or false)");
    if (!enabled.IsScalar() || (enabled.Scalar() != "true" && enabled.Scalar() != "false")) {
      return Error(enabled, "mig-enabled must be true or false");
    }
    e.mig_enabled = enabled.Scalar() == "true";

    const YAML::Node mds = node["mig-devices"];
    if (e.mig_enabled && !mds) {
      return Error(node, where + " enables MIG but has no \"mig-devices\" (use {} for none)");
    }
    if (mds && !mds.IsNull()) {
      if (!mds.IsMap()) return Error(mds, "mig-devices must be a map of profile to count");
      if (!e.mig_enabled && mds.size() > 0) {
        return Error(KeyOf(node, "mig-devices"),
                     "mig-devices must be empty when mig-enabled is false");
      }
      for (const auto& kv : mds) {
        auto profile = ParseProfileName(kv.first.Scalar());
        if (!profile.ok()) return Error(kv.first, profile.status().message());
        auto count = kv.second.IsScalar() ? ParseUint(kv.second.Scalar()) : std::nullopt;
        if (!count || *count == 0 || *count > 64) {
          return Error(kv.second, "mig-devices \"" + kv.first.Scalar() +
                                      "\": the count must be a whole number above 0");
        }
        std::string name = profile->ToString();
        if (e.mig_devices.contains(name)) {
          return Error(kv.first, "mig-devices: \"" + kv.first.Scalar() + "\" is listed twice");
        }
        e.mig_devices[name] = static_cast<unsigned>(*count);
      }
    }
    return e;
  }

  Result<ConfigFile> File(const YAML::Node& root) const {
    if (!root.IsMap())
      return Error(root, "a MIG config must be a map with version and mig-configs");
    GPUOP_RETURN_IF_ERROR(CheckKeys(root, {"version", "mig-configs"}, "the top level"));
    const YAML::Node version = root["version"];
    if (!version) return Error(root, "missing \"version\" (want: version: v1)");
    if (!version.IsScalar() || version.Scalar() != "v1") {
      return Error(version, "unsupported version \"" +
                                (version.IsScalar() ? version.Scalar() : "") + "\" (want v1)");
    }
    const YAML::Node configs = root["mig-configs"];
    if (!configs) return Error(root, "missing \"mig-configs\"");
    if (!configs.IsMap()) return Error(configs, "mig-configs must be a map of config names");
    ConfigFile file;
    file.origin = origin_;
    for (const auto& kv : configs) {
      std::string name = kv.first.Scalar();
      if (name.empty()) return Error(kv.first, "a mig-config has an empty name");
      if (!kv.second.IsSequence() || kv.second.size() == 0) {
        return Error(kv.second, "mig-config \"" + name + "\" must be a non-empty list of entries");
      }
      std::vector<ConfigEntry> entries;
      for (const auto& item : kv.second) {
        GPUOP_ASSIGN_OR_RETURN(auto e, Entry(item, name));
        entries.push_back(std::move(e));
      }
      file.configs[name] = std::move(entries);
    }
    return file;
  }

 private:
  std::string origin_;
};

}  // namespace

bool DeviceFilter::Matches(uint32_t pci_device_id, uint32_t pci_subsystem_id) const {
  if (pci_device_id != device_id) return false;
  return !subsystem_id || *subsystem_id == pci_subsystem_id;
}

std::string DeviceFilter::ToString() const {
  std::string s = Hex32(device_id);
  if (subsystem_id) s += ":" + Hex32(*subsystem_id);
  return s;
}

std::string ProfileName::GiName() const {
  return std::to_string(gi_slices) + "g." + std::to_string(memory_gb) + "gb" + suffix;
}

std::string ProfileName::ToString() const {
  std::string gi = GiName();
  return ci_slices == gi_slices ? gi : std::to_string(ci_slices) + "c." + gi;
}

Result<ProfileName> ParseProfileName(std::string_view name) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("MIG profile \"" + std::string(name) + "\" " + why +
                           " (want <G>g.<GB>gb or <C>c.<G>g.<GB>gb, e.g. 1g.10gb, 1g.10gb+me, "
                           "1c.2g.20gb)");
  };
  ProfileName p;
  size_t pos = 0;
  auto first = ReadNumber(name, &pos);
  if (!first) return bad("does not start with a slice count");
  if (pos < name.size() && name[pos] == 'c') {
    if (++pos >= name.size() || name[pos] != '.') return bad("has no '.' after the compute slices");
    ++pos;
    auto g = ReadNumber(name, &pos);
    if (!g) return bad("has no GPU instance slice count after <C>c.");
    p.ci_slices = *first;
    p.gi_slices = *g;
  } else {
    p.gi_slices = *first;
    p.ci_slices = *first;
  }
  if (pos + 1 >= name.size() || name.substr(pos, 2) != "g.") return bad("has no 'g.'");
  pos += 2;
  auto gb = ReadNumber(name, &pos);
  if (!gb) return bad("has no memory size");
  if (name.substr(pos, 2) != "gb") return bad("has no 'gb' after the memory size");
  pos += 2;
  p.memory_gb = *gb;
  p.suffix = std::string(name.substr(pos));
  if (!p.suffix.empty() && p.suffix != "+me" && p.suffix != "+me.all" && p.suffix != "+gfx" &&
      p.suffix != "-me") {
    return bad("has an unknown suffix \"" + p.suffix + "\" (known: +me, +me.all, +gfx, -me)");
  }
  if (p.gi_slices == 0 || p.gi_slices > 8 || p.memory_gb == 0)
    return bad("has a zero or too large size");
  if (p.ci_slices == 0 || p.ci_slices > p.gi_slices) {
    return bad("has more compute slices than GPU instance slices");
  }
  return p;
}

bool ConfigEntry::Covers(unsigned index, uint32_t pci_device_id, uint32_t pci_subsystem_id) const {
  if (!all_devices && std::find(devices.begin(), devices.end(), index) == devices.end()) {
    return false;
  }
  if (filters.empty()) return true;
  return std::any_of(filters.begin(), filters.end(), [&](const DeviceFilter& f) {
    return f.Matches(pci_device_id, pci_subsystem_id);
  });
}

Result<std::vector<ConfigEntry>> ConfigFile::Select(const std::string& name) const {
  auto it = configs.find(name);
  if (it != configs.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [n, _] : configs) names.push_back(n);
  return NotFound("mig-config \"" + name + "\" is not in " +
                  (origin.empty() ? std::string("the config") : origin) +
                  " (it has: " + Join(names, ", ") + ")");
}

Result<ConfigFile> ParseConfig(std::string_view yaml, const std::string& origin) {
  // Not UTF-8, a name would not read back from SerializeConfig (tests/fuzz).
  if (Status s = CheckYamlText(yaml); !s.ok()) return s.Annotate(origin);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(origin + ":" + std::to_string(e.mark.line + 1) +
                           ": not valid YAML: " + e.msg);
  }
  try {
    return Parser(origin).File(root);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(origin + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

std::string SerializeConfig(const ConfigFile& file) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "version" << YAML::Value << "v1";
  out << YAML::Key << "mig-configs" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, entries] : file.configs) {
    out << YAML::Key << name << YAML::Value << YAML::BeginSeq;
    for (const auto& e : entries) {
      out << YAML::BeginMap;
      if (!e.filters.empty()) {
        out << YAML::Key << "device-filter" << YAML::Value;
        if (e.filters.size() == 1) {
          out << YAML::DoubleQuoted << e.filters[0].ToString();
        } else {
          out << YAML::Flow << YAML::BeginSeq;
          for (const auto& f : e.filters) out << YAML::DoubleQuoted << f.ToString();
          out << YAML::EndSeq;
        }
      }
      out << YAML::Key << "devices" << YAML::Value;
      if (e.all_devices) {
        out << "all";
      } else {
        out << YAML::Flow << YAML::BeginSeq;
        for (unsigned d : e.devices) out << d;
        out << YAML::EndSeq;
      }
      out << YAML::Key << "mig-enabled" << YAML::Value << e.mig_enabled;
      if (e.mig_enabled) {
        out << YAML::Key << "mig-devices" << YAML::Value;
        if (e.mig_devices.empty()) {
          out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        } else {
          out << YAML::BeginMap;
          for (const auto& [p, n] : e.mig_devices) {
            out << YAML::Key << YAML::DoubleQuoted << p << YAML::Value << n;
          }
          out << YAML::EndMap;
        }
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace gpuop::mig

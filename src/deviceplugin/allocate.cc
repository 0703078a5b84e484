#include "deviceplugin/allocate.h"

#include <algorithm>
#include <set>

#include "base/files.h"
#include "base/strings.h"

namespace gpuop::deviceplugin {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

}  // namespace

Result<std::string> CdiAnnotationKey(std::string_view prefix, std::string_view plugin,
                                     std::string_view id) {
  if (plugin.empty() || id.empty()) return Internal("CDI annotation key: empty plugin name or ID");
  std::string name = std::string(plugin) + "_" + std::string(id);
  std::replace(name.begin(), name.end(), '/', '_');
  if (name.size() > 63) {
    return Internal("CDI annotation key \"" + name + "\" is over 63 characters");
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const bool edge = i == 0 || i + 1 == name.size();
    const char c = name[i];
    if (!IsAlnum(c) && (edge || (c != '_' && c != '-' && c != '.'))) {
      return Internal("CDI annotation key \"" + name + "\" has an invalid character '" +
                      std::string(1, c) + "'");
    }
  }
  return std::string(prefix) + name;
}

Result<ContainerAllocation> Allocate(const Resource& r, const std::vector<std::string>& device_ids,
                                     const Config& c,
                                     const std::function<std::string()>& new_uuid) {
  if (device_ids.empty()) {
    return InvalidArgument("invalid allocation request for '" + r.name + "': no device IDs");
  }
  if (r.shared() && r.fail_requests_greater_than_one && device_ids.size() > 1) {
    return InvalidArgument("request for '" + r.name + ": " + std::to_string(device_ids.size()) +
                           "' too large: maximum request size for shared resources is 1");
  }
  std::vector<const Unit*> units;
  std::set<const Unit*> seen;
  for (const std::string& id : device_ids) {
    const Unit* u = r.FindUnit(id);
    if (!u) {
      return InvalidArgument("invalid allocation request for '" + r.name +
                             "': unknown device: " + id +
                             " (the kubelet's device list is stale; it refreshes from "
                             "ListAndWatch)");
    }
    if (seen.insert(u).second) units.push_back(u);
  }

  std::vector<std::string> ids;
  for (const Unit* u : units)
    ids.push_back(c.id_strategy == DeviceIdStrategy::kIndex ? u->index : u->uuid);

  ContainerAllocation a;
  const DeviceListStrategy& s = c.device_list;
  if (s.AnyCdi()) {
    std::vector<std::string> names;
    for (const Unit* u : units) names.push_back(c.cdi_kind + "=" + u->uuid);
    if (s.cdi_annotations) {
      GPUOP_ASSIGN_OR_RETURN(std::string key, CdiAnnotationKey(c.cdi_annotation_prefix,
                                                               "nvidia-device-plugin", new_uuid()));
      a.annotations[key] = Join(names, ",");
    }
    if (s.cdi_cri) a.cdi_devices = names;
  }
  if (r.sharing == Sharing::Kind::kMps) {
    // The daemon's pipe directory is per resource; /dev/shm is the daemon's.
    const std::string pipe = "/mps/" + r.name + "/pipe";
    a.envs["CUDA_MPS_PIPE_DIRECTORY"] = pipe;
    a.mounts.push_back({pipe, JoinRoot(c.mps_root, "/" + r.name + "/pipe"), false});
    a.mounts.push_back({"/dev/shm", JoinRoot(c.mps_root, "/shm"), false});
  }
  if (s.AllCdi()) return a;

  if (s.envvar) {
    a.envs["NVIDIA_VISIBLE_DEVICES"] = Join(ids, ",");
    if (!c.imex.channel_ids.empty()) {
      std::vector<std::string> ch;
      for (int id : c.imex.channel_ids) ch.push_back(std::to_string(id));
      a.envs["NVIDIA_IMEX_CHANNELS"] = Join(ch, ",");
    }
  }
  if (s.volume_mounts) {
    // The runtime hook reads the device list from the mount points' names.
    a.envs["NVIDIA_VISIBLE_DEVICES"] = kVolumeMountsDir;
    for (const std::string& id : ids) {
      a.mounts.push_back({std::string(kVolumeMountsDir) + "/" + id, "/dev/null", false});
    }
  }
  if (c.pass_device_specs) {
    std::set<std::string> added;
    auto spec = [&](const std::string& path) {
      if (added.insert(path).second) a.devices.push_back({path, JoinRoot(c.DevRoot(), path), "rw"});
    };
    for (const std::string& p : c.control_device_nodes) spec(p);
    for (const Unit* u : units) {
      for (const std::string& p : u->device_nodes) spec(p);
    }
  }
  if (c.gdrcopy) a.envs["NVIDIA_GDRCOPY"] = "enabled";
  if (c.gds) a.envs["NVIDIA_GDS"] = "enabled";
  if (c.mofed) a.envs["NVIDIA_MOFED"] = "enabled";
  return a;
}

}  // namespace gpuop::deviceplugin

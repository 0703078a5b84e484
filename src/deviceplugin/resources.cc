#include "deviceplugin/resources.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "base/strings.h"

namespace gpuop::deviceplugin {
namespace {

constexpr std::string_view kGpuResource = "nvidia.com/gpu";

std::string GpuName(const nvml::Gpu& g) {
  return "GPU " + std::to_string(g.index) + " (" + g.uuid + ")";
}

std::string MigName(const nvml::Gpu& g, const nvml::MigDevice& m) {
  return "MIG device " + std::to_string(g.index) + ":" + std::to_string(m.index) + " (" + m.uuid +
         ", " + m.profile + ")";
}

// "1c.2g.20gb": a compute instance smaller than its GPU instance (C != G).
bool IsPartialComputeProfile(std::string_view profile) {
  size_t i = 0;
  while (i < profile.size() && profile[i] >= '0' && profile[i] <= '9') ++i;
  return i > 0 && i + 1 < profile.size() && profile[i] == 'c' && profile[i + 1] == '.';
}

Result<Unit> GpuUnit(const nvml::Gpu& g) {
  if (g.minor < 0) {
    return FailedPrecondition(GpuName(g) +
                              ": NVML reports no minor number, so its /dev/nvidia node is "
                              "unknown; check the driver (nvidia-smi -q shows Minor Number)");
  }
  Unit u;
  u.uuid = g.uuid;
  u.index = std::to_string(g.index);
  u.gpu = g.index;
  u.parent_uuid = g.uuid;
  u.numa_node = g.numa_node;
  u.bus_id = g.pci.bus_id;
  u.device_nodes = {"/dev/nvidia" + std::to_string(g.minor)};
  return u;
}

Result<Unit> MigUnit(const nvml::Gpu& g, const nvml::MigDevice& m, const host::MigMinors* minors) {
  GPUOP_ASSIGN_OR_RETURN(Unit u, GpuUnit(g));
  u.uuid = m.uuid;
  u.index = std::to_string(g.index) + ":" + std::to_string(m.index);
  u.mig = m.index;
  u.profile = m.profile;
  if (minors) {
    const auto gpu_minor = static_cast<unsigned>(g.minor);
    auto gi = minors->Gi(gpu_minor, m.gi_id);
    auto ci = minors->Ci(gpu_minor, m.gi_id, m.ci_id);
    if (!gi || !ci) {
      return FailedPrecondition(
          MigName(g, m) + ": /proc/driver/nvidia-caps/mig-minors has no entry gpu" +
          std::to_string(gpu_minor) + "/gi" + std::to_string(m.gi_id) +
          (gi ? "/ci" + std::to_string(m.ci_id) : std::string()) +
          "/access; the driver's capability table is out of date (reload the nvidia module)");
    }
    u.device_nodes.push_back("/dev/nvidia-caps/nvidia-cap" + std::to_string(*gi));
    u.device_nodes.push_back("/dev/nvidia-caps/nvidia-cap" + std::to_string(*ci));
  }
  return u;
}

// The MIG checks of upstream's deviceMapBuilder for single and mixed.
Status CheckMigLayout(const std::vector<const nvml::Gpu*>& gpus, MigStrategy strategy) {
  for (const nvml::Gpu* g : gpus) {
    if (g->mig_enabled && g->mig_devices.empty()) {
      return FailedPrecondition(
          "invalid MIG configuration: " + GpuName(*g) +
          " has MIG enabled but no MIG devices; create MIG devices (the nvidia.com/mig.config "
          "label) or disable MIG on it");
    }
  }
  if (strategy != MigStrategy::kSingle) return Status::Ok();
  const nvml::Gpu* first_mig = nullptr;
  const nvml::Gpu* first_full = nullptr;
  const nvml::MigDevice* first_dev = nullptr;
  for (const nvml::Gpu* g : gpus) {
    if (!g->mig_enabled) {
      if (!first_full) first_full = g;
      continue;
    }
    if (!first_mig) first_mig = g;
    for (const nvml::MigDevice& m : g->mig_devices) {
      if (!first_dev) {
        first_dev = &m;
      } else if (m.profile != first_dev->profile) {
        return FailedPrecondition(
            "invalid MIG configuration: more than one MIG device type present on node (" +
            first_dev->profile + " and " + m.profile + " on " + GpuName(*g) +
            "); mig-strategy single needs one profile on every GPU: repartition the GPUs "
            "alike or use mig-strategy mixed");
      }
    }
  }
  if (first_mig && first_full) {
    return FailedPrecondition(
        "all devices on the node must be configured with the same migEnabled value: " +
        GpuName(*first_mig) + " has MIG enabled, " + GpuName(*first_full) +
        " has not; enable MIG on every GPU or use mig-strategy mixed");
  }
  return Status::Ok();
}

bool UnitLess(const Unit& a, const Unit& b) {
  return std::tie(a.gpu, a.mig) < std::tie(b.gpu, b.mig);
}

// The units a sharing entry selects from `base`, in base's order.
Result<std::vector<size_t>> SelectUnits(const Resource& base, const ReplicatedResource& rr,
                                        const std::string& where) {
  std::vector<size_t> picked;
  if (rr.devices.all) {
    for (size_t i = 0; i < base.units.size(); ++i) picked.push_back(i);
    return picked;
  }
  if (rr.devices.count > 0) {
    if (static_cast<size_t>(rr.devices.count) > base.units.size()) {
      return InvalidArgument(where + ": requested " + std::to_string(rr.devices.count) +
                             " devices to be replicated, but only " +
                             std::to_string(base.units.size()) + " " + base.name +
                             " devices are available; lower devices or use \"all\"");
    }
    for (int i = 0; i < rr.devices.count; ++i) picked.push_back(static_cast<size_t>(i));
    return picked;
  }
  std::set<size_t> chosen;
  for (const std::string& ref : rr.devices.list) {
    const Unit* u = base.FindUnit(ref);
    if (!u) {
      return InvalidArgument(where + ": no " + base.name + " device with index or UUID \"" + ref +
                             "\" on this node; list devices this node has (nvidia-smi -L)");
    }
    chosen.insert(static_cast<size_t>(u - base.units.data()));
  }
  return std::vector<size_t>(chosen.begin(), chosen.end());
}

Status ApplySharing(const Sharing& sharing, std::map<std::string, Resource>* by_name) {
  const std::string block =
      sharing.kind == Sharing::Kind::kMps ? "sharing.mps" : "sharing.timeSlicing";
  for (size_t i = 0; i < sharing.resources.size(); ++i) {
    const ReplicatedResource& rr = sharing.resources[i];
    const std::string where = block + ".resources[" + std::to_string(i) + "] (" + rr.name + ")";
    auto it = by_name->find(rr.name);
    if (it == by_name->end() || it->second.units.empty()) continue;  // as upstream: no match, no-op
    Resource& base = it->second;
    if (base.shared()) {
      return InvalidArgument(where + ": " + rr.name +
                             " is already the rename of another shared resource; share each "
                             "resource once");
    }
    GPUOP_ASSIGN_OR_RETURN(std::vector<size_t> picked, SelectUnits(base, rr, where));
    const std::string target = rr.rename.empty() ? rr.name : rr.rename;
    if (target == rr.name && picked.size() < base.units.size()) {
      return InvalidArgument(where + ": devices selects " + std::to_string(picked.size()) + " of " +
                             std::to_string(base.units.size()) +
                             " devices but sets no rename, so shared and whole devices would "
                             "share one name; add rename (e.g. " +
                             rr.name + ".shared)");
    }
    if (target != rr.name && by_name->count(target) && !(*by_name)[target].units.empty()) {
      return InvalidArgument(where + ": rename " + target +
                             " is already a resource on this node; choose another name");
    }
    Resource shared{.name = target,
                    .units = {},
                    .replicas = rr.replicas,
                    .sharing = sharing.kind,
                    .fail_requests_greater_than_one = sharing.fail_requests_greater_than_one};
    std::vector<Unit> rest;
    for (size_t u = 0; u < base.units.size(); ++u) {
      bool take = std::binary_search(picked.begin(), picked.end(), u);
      (take ? shared.units : rest).push_back(std::move(base.units[u]));
    }
    if (sharing.kind == Sharing::Kind::kMps) {
      for (const Unit& u : shared.units) {
        if (u.is_mig()) {
          return InvalidArgument(where + ": sharing using MPS is not supported for MIG devices (" +
                                 u.index + " " + u.uuid +
                                 "); use timeSlicing, or share only whole GPUs");
        }
      }
    }
    base.units = std::move(rest);
    (*by_name)[target] = std::move(shared);
  }
  return Status::Ok();
}

}  // namespace

std::string MigResourceName(std::string_view profile) {
  std::string name = "nvidia.com/mig-" + std::string(profile);
  std::replace(name.begin(), name.end(), '+', '.');
  return name;
}

std::vector<PluginDevice> Resource::Devices(const std::function<bool(const Unit&)>& healthy) const {
  std::vector<PluginDevice> out;
  out.reserve(units.size() * static_cast<size_t>(std::max(replicas, 1)));
  for (const Unit& u : units) {
    const bool ok = !healthy || healthy(u);
    if (!shared()) {
      out.push_back({u.uuid, ok, u.numa_node});
      continue;
    }
    for (int n = 0; n < replicas; ++n) {
      out.push_back({u.uuid + "::" + std::to_string(n), ok, u.numa_node});
    }
  }
  return out;
}

const Unit* Resource::FindUnit(std::string_view device_id) const {
  std::string_view id = device_id;
  if (size_t sep = id.find("::"); sep != std::string_view::npos) {
    std::string_view n = id.substr(sep + 2);
    if (!shared() || n.empty() || n.size() > 9 ||
        !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(std::string(n)) >= replicas) {
      return nullptr;
    }
    id = id.substr(0, sep);
  }
  for (const Unit& u : units) {
    if (u.uuid == id || u.index == id) return &u;
  }
  return nullptr;
}

Result<std::vector<Resource>> BuildResources(const std::vector<nvml::Gpu>& gpus,
                                             const Config& config, const host::MigMinors* minors) {
  std::vector<const nvml::Gpu*> sorted;
  for (const nvml::Gpu& g : gpus) sorted.push_back(&g);
  std::sort(sorted.begin(), sorted.end(),
            [](const nvml::Gpu* a, const nvml::Gpu* b) { return a->index < b->index; });

  const MigStrategy strategy = config.mig_strategy;
  if (strategy != MigStrategy::kNone) GPUOP_RETURN_IF_ERROR(CheckMigLayout(sorted, strategy));

  std::map<std::string, Resource> by_name;
  auto add = [&](const std::string& name, Unit u) {
    Resource& r = by_name[name];
    r.name = name;
    r.units.push_back(std::move(u));
  };
  for (const nvml::Gpu* g : sorted) {
    if (!g->mig_enabled || strategy == MigStrategy::kNone) {
      GPUOP_ASSIGN_OR_RETURN(Unit u, GpuUnit(*g));
      add(std::string(kGpuResource), std::move(u));
      continue;
    }
    for (const nvml::MigDevice& m : g->mig_devices) {
      std::string name(kGpuResource);
      if (strategy == MigStrategy::kMixed) {
        if (IsPartialComputeProfile(m.profile)) {
          return FailedPrecondition(
              MigName(*g, m) +
              ": MIG profile does not match any resource pattern; mig-strategy mixed exposes "
              "only devices whose compute instance fills its GPU instance: recreate it as "
              "a full GPU instance (e.g. " +
              m.profile.substr(m.profile.find('.') + 1) + ")");
        }
        name = MigResourceName(m.profile);
      }
      GPUOP_ASSIGN_OR_RETURN(Unit u, MigUnit(*g, m, minors));
      add(name, std::move(u));
    }
  }

  if (config.sharing.kind != Sharing::Kind::kNone) {
    GPUOP_RETURN_IF_ERROR(ApplySharing(config.sharing, &by_name));
  }

  std::vector<Resource> out;
  for (auto& [name, r] : by_name) {
    if (r.units.empty()) continue;
    if (name.size() > kMaxResourceNameLength) {
      return FailedPrecondition("resource name " + name + " is " + std::to_string(name.size()) +
                                " characters; the kubelet allows 63: use a shorter rename");
    }
    std::sort(r.units.begin(), r.units.end(), UnitLess);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace gpuop::deviceplugin

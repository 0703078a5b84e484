// The resources the device plugin advertises: which GPUs and MIG devices go
// under which extended resource name, and how many replicas of each unit the
// kubelet sees. A pure function of the NVML view, the config and the MIG
// capability table, as upstream's rm.AddDefaultResourcesToConfig +
// NewDeviceMap + updateDeviceMapWithReplicas:
//   - none:   every GPU is nvidia.com/gpu, MIG mode or not;
//   - single: GPUs without MIG and the MIG devices are all nvidia.com/gpu;
//             every GPU must agree on MIG mode, and all MIG devices must have
//             one profile;
//   - mixed:  GPUs without MIG are nvidia.com/gpu, MIG devices are
//             nvidia.com/mig-<profile> with '+' written '.';
//   - single and mixed: a MIG-enabled GPU without MIG devices is an error;
//   - sharing (time-slicing or MPS) turns the selected units of a resource
//     into `replicas` devices "<uuid>::<n>", under the rename if one is set.
// Resources are sorted by name and units by (GPU, MIG) index, so the result is
// deterministic. Values only; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "deviceplugin/config.h"
#include "deviceplugin/types.h"
#include "host/mig_minors.h"
#include "nvml/device.h"

namespace gpuop::deviceplugin {

// One allocatable GPU or MIG device.
struct Unit {
  std::string uuid;             // "GPU-..." or "MIG-..."
  std::string index;            // "i" (GPU) or "i:j" (MIG device j of GPU i), NVML order
  unsigned gpu = 0;             // NVML index of the (parent) GPU
  std::optional<unsigned> mig;  // j for a MIG device
  std::string parent_uuid;      // the GPU's UUID (== uuid for a whole GPU)
  std::string profile;          // MIG profile ("1g.10gb", "1g.10gb+me"); empty for a GPU
  int numa_node = -1;           // -1: unknown
  std::string bus_id;           // the GPU's PCI bus ID, as NVML writes it
  // Container paths of the nodes this unit needs: /dev/nvidia<minor>, and for
  // MIG the GI and CI capability nodes /dev/nvidia-caps/nvidia-cap<N>.
  std::vector<std::string> device_nodes;

  bool is_mig() const { return mig.has_value(); }
  bool operator==(const Unit&) const = default;
};

struct Resource {
  std::string name;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"
  std::vector<Unit> units;
  int replicas = 1;  // 1: not shared
  Sharing::Kind sharing = Sharing::Kind::kNone;
  bool fail_requests_greater_than_one = false;

  bool shared() const { return replicas > 1; }

  // The ListAndWatch list: one device per unit (ID = its UUID), or
  // "<uuid>::<n>" for n in [0, replicas) when shared. Device IDs are UUIDs
  // whatever the ID strategy, as upstream (the strategy only changes what
  // Allocate hands the runtime). `healthy` (null: all healthy) decides each
  // unit's health; replicas share their unit's.
  std::vector<PluginDevice> Devices(
      const std::function<bool(const Unit&)>& healthy = nullptr) const;

  // The unit behind a device ID: a UUID, "<uuid>::<n>" (n < replicas, shared
  // resources only) or an index "i"/"i:j". Null when none matches.
  const Unit* FindUnit(std::string_view device_id) const;
};

// `minors` (nullable): the /proc/driver/nvidia-caps/mig-minors table; without
// it MIG units list only their parent GPU node. Errors name the GPU and the
// fix; `config.sharing` is applied after naming (sharing errors name the
// sharing entry).
Result<std::vector<Resource>> BuildResources(const std::vector<nvml::Gpu>& gpus,
                                             const Config& config, const host::MigMinors* minors);

// "nvidia.com/mig-" + profile, '+' replaced by '.' ("1g.10gb+me" → "nvidia.com/mig-1g.10gb.me").
std::string MigResourceName(std::string_view profile);

}  // namespace gpuop::deviceplugin

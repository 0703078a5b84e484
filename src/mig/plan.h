// The MIG planner: from the GPUs' current MIG state and a named config, the
// operations that bring each GPU to the wanted layout. Pure: no NVML, no I/O;
// apply.h executes a plan and reads the state it starts from.
//
// Rules (what makes gpuop's MIG changes cheap and safe):
//  - A GPU whose mode and MIG devices already match (as a multiset of
//    profiles, wherever they are placed) gets no operation at all; so does a
//    GPU no entry of the config covers.
//  - On a GPU that differs, instances that the wanted layout can keep stay;
//    the rest are destroyed (compute instances first) and the missing ones
//    created at placements found by a backtracking search over the GPU's real
//    placement rules, largest first. When no packing exists the error names
//    the GPU, its model and the profiles.
//
// All types are plain values; the functions are pure and thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "mig/config.h"
#include "nvml/device.h"

namespace gpuop::mig {

// What the planner needs to know about one GPU.
struct GpuState {
  unsigned index = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  uint32_t pci_device_id = 0;
  uint32_t pci_subsystem_id = 0;
  bool mig_capable = false;
  bool mig_enabled = false;               // current mode
  bool mig_pending = false;               // mode after the next reset
  std::vector<nvml::GiProfile> profiles;  // with placements
  std::vector<nvml::GpuInstance> instances;

  std::string Describe() const;  // "GPU 2 (NVIDIA L40S)"
};

// The MIG device names on a GPU, one per compute instance ("1g.10gb",
// "1c.2g.20gb"), sorted: the multiset assert and the planner compare.
std::vector<std::string> DeviceNames(const GpuState& gpu);

// What one GPU should become.
struct GpuWant {
  unsigned gpu = 0;
  bool mig_enabled = false;
  std::map<std::string, unsigned> devices;  // canonical profile name -> count
};

// The wanted state of each GPU covered by config `config_name` (the last
// entry covering a GPU wins, as in mig-parted; GPUs no entry covers are left
// alone). Errors name the GPU, its model, the profile and the config: MIG
// wanted on a GPU without MIG, a profile the model lacks.
Result<std::vector<GpuWant>> SelectWants(const std::vector<ConfigEntry>& entries,
                                         const std::vector<GpuState>& gpus,
                                         const std::string& config_name);

// One MIG device to create: a GI of `gi_profile_id` at `placement`, holding
// one compute instance of `ci_slices` slices.
struct CreateOp {
  unsigned gi_profile_id = 0;
  std::string gi_profile;  // "2g.20gb"
  nvml::Placement placement;
  unsigned ci_slices = 0;
  std::string device;  // "1c.2g.20gb" or "2g.20gb"
};

struct CiRef {
  unsigned gi_id = 0, ci_id = 0;
};

// The operations for one GPU, in the order they run: destroy compute
// instances, destroy GPU instances, set the mode, create.
struct GpuPlan {
  unsigned gpu = 0;
  std::string gpu_desc;          // "GPU 0 (NVIDIA H100 80GB HBM3)"
  std::optional<bool> set_mode;  // request this MIG mode
  // The wanted layout, planned again once the new mode is in force (after a
  // GPU reset): NVML cannot place instances while MIG is off.
  std::optional<GpuWant> after_reset;
  std::vector<CiRef> destroy_cis;
  std::vector<unsigned> destroy_gis;
  std::vector<CreateOp> creates;
  std::vector<unsigned> kept_gis;  // GI ids left as they are
  bool empty() const {
    return !set_mode && destroy_cis.empty() && destroy_gis.empty() && creates.empty();
  }
};

struct Plan {
  std::vector<GpuPlan> gpus;  // only GPUs with at least one operation
  // One line per operation, for `apply --dry-run` and logs.
  std::string Describe() const;
};

// Where wanted MIG devices go on an empty or partly used GPU: a packing that
// honours placements, compute slices, per-profile counts and the single
// media-extension engine, or an error naming the GPU and profiles.
// `kept` are instances that stay where they are.
Result<std::vector<CreateOp>> Pack(const GpuState& gpu, const std::vector<std::string>& devices,
                                   const std::vector<nvml::GpuInstance>& kept);

// The plan for one GPU. `mode_only`: only the mode, never instances.
Result<GpuPlan> PlanGpu(const GpuState& gpu, const GpuWant& want, bool mode_only);

// The plan for every wanted GPU (`gpus` indexed by GpuState::index).
Result<Plan> PlanAll(const std::vector<GpuState>& gpus, const std::vector<GpuWant>& wants,
                     bool mode_only);

// Whether the GPUs are in the wanted state: OK, or FailedPrecondition with
// one line per difference ("GPU 0 (...): has 7x 1g.10gb, want 1x 7g.80gb").
Status CheckWants(const std::vector<GpuState>& gpus, const std::vector<GpuWant>& wants,
                  bool mode_only);

// The current layout as a config named `config_name`: GPUs with the same
// mode and devices share one entry (devices: all when that is every MIG GPU).
// GPUs without MIG are left out.
ConfigFile ExportConfig(const std::vector<GpuState>& gpus, const std::string& config_name);

// Default configs for the GPU models present, like the operator's default
// ConfigMap: all-disabled, all-enabled, all-<profile> for every GPU instance
// profile (all-1g.10gb, all-1g.10gb.me, ...: as many as fit), and
// all-balanced; model-specific entries carry a device-filter.
ConfigFile DefaultConfigs(const std::vector<GpuState>& gpus);

}  // namespace gpuop::mig

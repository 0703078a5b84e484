// Simulated machines: which GPUs a simulated node has, with the values NVML
// reports for each model on real hardware (name, memory, compute capability,
// PCI ids, MIG profile tables and placements).
//
// A Machine is plain data, built once from GPUOP_SIM_MACHINE (a preset name
// such as "dgx-h100" or a YAML file) and never changed afterwards; it is safe
// to read from any thread. What changes at run time (MIG layout, faults, ECC
// counters) lives in the shared state (state.h), not here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::sim {

// One GPU instance profile as NVML describes it (nvmlGpuInstanceProfileInfo_t).
struct GiProfile {
  unsigned nvml_index = 0;  // NVML_GPU_INSTANCE_PROFILE_* (0 = 1 slice, 4 = 7 slices, ...)
  unsigned id = 0;          // driver profile id (nvidia-smi -lgip), e.g. 19 for 1g on A100/H100
  std::string name;         // "1g.10gb", "1g.10gb+me"
  unsigned slices = 0;      // compute slices (the G in <G>g)
  unsigned max_count = 0;   // instanceCount
  unsigned multiprocessors = 0;
  unsigned copy_engines = 0, decoders = 0, encoders = 0, jpegs = 0, ofas = 0;
  uint64_t memory_mib = 0;
  unsigned placement_size = 0;             // memory slices one instance occupies
  std::vector<unsigned> placement_starts;  // allowed starts on the memory-slice axis
};

// One GPU model, as NVML reports it.
struct GpuModel {
  std::string key;   // short name used in presets and YAML: "h100-80gb"
  std::string name;  // "NVIDIA H100 80GB HBM3"
  uint64_t memory_mib = 0;
  int cc_major = 0, cc_minor = 0;
  uint32_t pci_device_id = 0;  // 0x233010DE
  uint32_t pci_subsystem_id = 0;
  unsigned architecture = 0;  // NVML_DEVICE_ARCH_*
  unsigned brand = 0;         // NVML_BRAND_*
  unsigned multiprocessors = 0;
  unsigned power_limit_w = 0;
  unsigned max_sm_clock_mhz = 0, max_mem_clock_mhz = 0;
  unsigned nvlinks = 0;                 // active NVLinks per GPU (0: PCIe only)
  unsigned memory_slices = 0;           // 8 on A100/H100/H200, 4 on A30; 0: no MIG
  unsigned compute_slices = 0;          // 7 on A100/H100/H200, 4 on A30; 0: no MIG
  unsigned encoders = 0;                // NVENC engines (0 on A100/H100)
  std::vector<GiProfile> mig_profiles;  // empty: MIG not supported
  // Joins a multi-node NVLink fabric (GB200): nvmlDeviceGetGpuFabricInfo
  // answers, with state NOT_STARTED until the GPU has a SimGpu::fabric.
  // false: NVML_ERROR_NOT_SUPPORTED, as on PCIe and HGX boards.
  bool fabric_capable = false;
  bool mig_capable() const { return !mig_profiles.empty(); }
  // The profile with this driver id (GiProfile::id) or NVML enum index; null if none.
  const GiProfile* ProfileById(unsigned id) const;
  const GiProfile* ProfileByNvmlIndex(unsigned nvml_index) const;
};

// One end of an active NVLink, seen from the GPU that owns the link.
struct SimNvLink {
  bool to_switch = false;  // the far end is an NVSwitch, not a GPU
  unsigned remote = 0;     // the far GPU's index, or the NVSwitch's index in Machine::nvswitches
  bool operator==(const SimNvLink&) const = default;
};

// The NVLink domain a fabric-capable GPU was registered in, as
// nvmlDeviceGetGpuFabricInfoV reports it once the fabric manager is done.
struct SimFabric {
  std::string cluster_uuid;  // "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lowercase hex
  unsigned clique_id = 0;
  bool operator==(const SimFabric&) const = default;
};

// One GPU of a machine.
//
// Topology: GPUs under the same PCIe switch meet at NVML_TOPOLOGY_SINGLE,
// under the same host bridge (root complex) at HOSTBRIDGE, on the same NUMA
// node at NODE, otherwise at SYSTEM. `nvlinks[i]` is active link i; links
// past the end are inactive. An NVSwitch system gives every GPU links to
// every switch, and two GPUs then talk over each switch they both reach.
struct SimGpu {
  GpuModel model;
  unsigned index = 0;
  unsigned minor = 0;  // /dev/nvidia<minor>
  std::string uuid;    // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", stable per seed
  std::string serial;
  std::string bus_id;  // "00000000:18:00.0"
  int numa_node = -1;
  int pcie_switch = -1;  // -1: on a root port of its own
  int host_bridge = -1;  // -1: unknown (treated as its own)
  std::vector<SimNvLink> nvlinks;
  bool mig_enabled_at_boot = false;
  std::optional<SimFabric> fabric;  // state COMPLETED, status SUCCESS when set
};

struct Machine {
  std::string name;  // preset name or YAML file's `name`
  std::string driver_version = "570.172.08";
  int cuda_driver_version = 12080;  // 12.8
  std::vector<SimGpu> gpus;
  std::vector<std::string> nvswitches;  // NVSwitch PCI bus ids ("00000000:C0:00.0")
};

// The newest CUDA version (1000*major + 10*minor) a driver of this version
// supports, from its branch (the number before the first dot): 535 -> 12020,
// 550 -> 12040, 570 -> 12080, 580 -> 13000, as NVIDIA's release notes pair
// them. 0 when the version does not start with a number.
int CudaVersionForDriver(std::string_view driver_version);

// The branch of a driver version ("580.95.05" -> 580); 0 when it does not
// start with a number.
unsigned DriverBranch(std::string_view driver_version);

// The level at which GPUs `a` and `b` of `m` meet on PCIe, as
// nvmlDeviceGetTopologyCommonAncestor reports it (NVML_TOPOLOGY_* values).
// REQUIRES: a and b are indices of m.gpus.
unsigned TopologyLevel(const Machine& m, unsigned a, unsigned b);

// The built-in GPU models (a100-40gb, a100-80gb, h100-80gb, h200-141gb, l40s, t4,
// h100-nvl, a30, gb200, b200, rtx-pro-6000).
const std::vector<GpuModel>& BuiltinModels();
Result<GpuModel> FindModel(const std::string& key_or_name);

// Preset names: dgx-a100, dgx-h100, hgx-h200, h100-nvl-8, l40s-4, t4-1,
// gb200-nvl4, dgx-b200 and each model key. The Blackwell MIG boards (dgx-b200,
// b200, rtx-pro-6000) come with a 580-branch driver, which knows their newer
// MIG profile kinds; the others with the default 570 one.
// h100-nvl-8 is the one with partial NVLink: eight H100 NVL PCIe cards
// joined in pairs (0-1, 2-3, 4-5, 6-7) by NVLink bridges, each on
// its own root port, GPUs 0-3 on NUMA node 0 and 4-7 on node 1.
// gb200-nvl4 is one compute tray of a GB200 NVL72 rack: four GB200 GPUs, two
// per Grace CPU (NUMA nodes 0 and 1), 18 NVLinks each to the rack's NVSwitches,
// registered in fabric clique kGb200CliqueId of the cluster
// Gb200ClusterUuid(): every node simulated with it is in the same rack.
std::vector<std::string> PresetNames();

inline constexpr unsigned kGb200CliqueId = 32767;
// The cluster UUID of the gb200-nvl4 preset's fabric (a hash of its name).
std::string Gb200ClusterUuid();

// The MIG profile name that go-nvlib derives from a memory size: "<G>g.<GB>gb"
// with GB = round(ceil(8*mem/total)/8 * ceil(total GiB)); `c` < `g` gives
// "<C>c.<G>g.<GB>gb". Used to check the tables and to name MIG devices.
std::string MigProfileName(unsigned c, unsigned g, uint64_t profile_memory_mib,
                           uint64_t total_memory_mib);

// A UUID-shaped string ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx") from a hash of
// `key`: the same key always gives the same text. The caller adds "GPU-"/"MIG-".
std::string HashUuid(std::string_view key);

// One line per preset: "dgx-h100: 8x NVIDIA H100 80GB HBM3 (MIG)".
std::string DescribePresets();

// The 16 bytes of a "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" UUID (hex digits in
// either case); false when `text` is not one.
bool ParseUuidBytes(std::string_view text, unsigned char out[16]);

// Loads GPUOP_SIM_MACHINE's value: a preset name or a path to a YAML file.
// `seed` makes UUIDs and serials distinct between simulated nodes (the cluster
// simulator passes the node name); the same seed always gives the same UUIDs.
Result<Machine> LoadMachine(const std::string& preset_or_file, const std::string& seed);

}  // namespace gpuop::sim

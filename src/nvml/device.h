// The C++ model of what NVML reports: GPUs, MIG profiles, MIG devices,
// GPU/compute instances, telemetry and events. Every gpuop component sees the
// GPUs through these plain structs (filled in by nvml::Client) and never the
// raw NVML C ABI.
//
// All types are plain values: copyable, no ownership of NVML handles, safe to
// pass between threads. The free functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuop::nvml {

struct PciInfo {
  std::string bus_id;  // "00000000:18:00.0", as NVML writes it
  unsigned domain = 0, bus = 0, device = 0;
  uint32_t device_id = 0;  // device << 16 | vendor, e.g. 0x233010DE
  uint32_t subsystem_id = 0;
};

// Where an instance sits on the memory-slice axis (GIs) or the compute-slice
// axis of its GI (CIs).
struct Placement {
  unsigned start = 0;
  unsigned size = 0;
  bool operator==(const Placement&) const = default;
};

// Engine counts of a profile or a MIG device.
struct Engines {
  unsigned copy = 0, decoders = 0, encoders = 0, jpegs = 0, ofas = 0;
};

// A GPU instance profile (nvidia-smi mig -lgip).
struct GiProfile {
  unsigned index = 0;  // NVML_GPU_INSTANCE_PROFILE_* passed to NVML (0 = 1 slice, 7 = 1 slice REV1)
  unsigned id = 0;     // the driver's profile id (19 for 1g on A100/H100), used to create
  std::string name;    // "1g.10gb", "1g.10gb+me", computed by MigProfileName
  unsigned slices = 0;     // compute slices: the G in <G>g
  unsigned max_count = 0;  // instances of this profile that fit an empty GPU
  unsigned multiprocessors = 0;
  Engines engines;
  uint64_t memory_mib = 0;
  bool p2p = false;
  std::vector<Placement> placements;
};

// A compute instance profile inside a GI (nvidia-smi mig -lcip).
struct CiProfile {
  unsigned index = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  unsigned id = 0;
  unsigned slices = 0;
  unsigned max_count = 0;
  unsigned multiprocessors = 0;
};

struct ComputeInstance {
  unsigned id = 0;
  unsigned profile_id = 0;
  unsigned slices = 0;
  Placement placement;
  std::string profile_name;  // "1g.10gb" or "1c.2g.20gb"
};

struct GpuInstance {
  unsigned id = 0;
  unsigned profile_id = 0;     // driver profile id
  unsigned profile_index = 0;  // NVML_GPU_INSTANCE_PROFILE_*
  std::string profile_name;    // "3g.40gb"
  Placement placement;
  std::vector<ComputeInstance> compute_instances;
};

// A MIG device: one compute instance as CUDA and the device plugin see it.
struct MigDevice {
  unsigned index = 0;  // j in nvmlDeviceGetMigDeviceHandleByIndex(gpu, j)
  std::string uuid;    // "MIG-..."
  std::string name;    // NVML's device name for the MIG handle
  unsigned gi_id = 0, ci_id = 0;
  unsigned gi_profile_id = 0, ci_profile_id = 0;
  std::string profile;  // "1g.10gb", "1g.10gb+me" or "1c.2g.20gb"
  // The GI's placement; nullopt when unknown: NVML tells it only to a
  // process with MIG privilege (nvmlDeviceGetGpuInstanceById). gi_profile_id
  // and ci_profile_id are then derived from the device's attributes.
  std::optional<Placement> placement;
  uint64_t memory_mib = 0;
  unsigned multiprocessors = 0;
  unsigned gi_slices = 0, ci_slices = 0;
  Engines engines;  // shared engine counts
};

// nvmlGpuFabricState_t: how far the fabric manager got registering a GPU.
enum class FabricState : unsigned {
  kNotSupported = 0,
  kNotStarted = 1,
  kInProgress = 2,
  kCompleted = 3,
};

// The GPU fabric (multi-node NVLink domain, e.g. a GB200 NVL72 rack) a GPU
// belongs to: nvmlDeviceGetGpuFabricInfoV.
struct GpuFabric {
  std::string cluster_uuid;  // "7c3a0f5e-...", 8-4-4-4-12 lowercase hex; all zeros: none
  unsigned clique_id = 0;
  FabricState state = FabricState::kNotSupported;
  int status = 0;  // nvmlReturn_t of the registration; meaningful when kCompleted (0: success)
  bool operator==(const GpuFabric&) const = default;
};

// Whether `f` says the GPU is in an NVLink domain: registration completed,
// successfully, with a cluster UUID that is not all zeros (what go-nvlib's
// IsFabricAttached checks).
inline bool FabricAttached(const GpuFabric& f) {
  return f.state == FabricState::kCompleted && f.status == 0 && !f.cluster_uuid.empty() &&
         f.cluster_uuid.find_first_not_of("0-") != std::string::npos;
}

struct Gpu {
  unsigned index = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::string uuid;  // "GPU-..."
  std::string serial;
  int minor = -1;  // /dev/nvidia<minor>; -1 unknown
  PciInfo pci;
  uint64_t memory_mib = 0;
  int cc_major = 0, cc_minor = 0;
  std::string architecture;  // "Hopper"
  std::string brand;         // "Tesla", "NVIDIA"
  int numa_node = -1;        // -1 unknown
  bool mig_capable = false;
  bool mig_enabled = false;  // current mode
  bool mig_pending = false;  // mode after the next reset
  std::vector<MigDevice> mig_devices;
  // The GPU fabric; nullopt when the GPU or driver has none (PCIe and
  // single-node NVSwitch boards, drivers before nvmlDeviceGetGpuFabricInfo).
  std::optional<GpuFabric> fabric;
};

struct SystemInfo {
  std::string driver_version;   // "570.172.08"
  int cuda_driver_version = 0;  // 12080
  std::string cuda_version;     // "12.8"
  std::string nvml_version;     // "12.570.172.08"
};

// One reading of everything the exporter publishes. A field is nullopt when
// NVML says the GPU (or the driver) does not support it, so a consumer can
// skip exactly that field.
struct Telemetry {
  std::optional<unsigned> gpu_temp_c, memory_temp_c;
  std::optional<unsigned> gpu_util_pct, mem_util_pct, enc_util_pct, dec_util_pct;
  std::optional<double> power_w, power_limit_w;
  std::optional<uint64_t> total_energy_mj;
  std::optional<unsigned> sm_clock_mhz, mem_clock_mhz;
  std::optional<uint64_t> fb_total_mib, fb_free_mib, fb_used_mib, fb_reserved_mib;
  std::optional<uint64_t> ecc_sbe_volatile, ecc_dbe_volatile, ecc_sbe_aggregate, ecc_dbe_aggregate;
  std::optional<unsigned> remapped_rows_correctable, remapped_rows_uncorrectable;
  std::optional<bool> remapped_rows_pending, remapped_rows_failure;
  std::optional<unsigned> pcie_replay;
  std::optional<unsigned> pcie_tx_kbps, pcie_rx_kbps;    // KB/s
  std::optional<uint64_t> nvlink_tx_kib, nvlink_rx_kib;  // totals over all links
  std::optional<unsigned> nvlink_active_links;
  std::optional<uint64_t> clock_event_reasons;  // nvmlClocksEventReason* bits
};

// Profiling metrics NVML's GPM computes between two samples of a GPU or of a
// MIG GPU instance (Hopper and newer): activities in percent of the time
// between the samples (0-100), traffic in MiB per second. nullopt where NVML
// did not give that metric for the device (PCIe and NVLink traffic of a MIG
// instance, NVLink on a GPU without it).
struct GpmMetrics {
  std::optional<double> graphics_util, sm_util, sm_occupancy, integer_util;
  std::optional<double> any_tensor_util, dfma_tensor_util, hmma_tensor_util, imma_tensor_util;
  std::optional<double> dram_bw_util, fp64_util, fp32_util, fp16_util;
  std::optional<double> pcie_tx_mib_s, pcie_rx_mib_s, nvlink_tx_mib_s, nvlink_rx_mib_s;
};

// NVML event types, the bits of nvmlEventType*.
enum EventType : uint64_t {
  kEventSingleBitEcc = 0x1,
  kEventDoubleBitEcc = 0x2,
  kEventPState = 0x4,
  kEventXid = 0x8,
  kEventClock = 0x10,
};
inline constexpr uint64_t kHealthEvents = kEventSingleBitEcc | kEventDoubleBitEcc | kEventXid;

struct Event {
  unsigned gpu = 0;
  std::string uuid;
  uint64_t type = 0;                     // one EventType bit
  uint64_t xid = 0;                      // eventData: the XID for kEventXid (999: unknown)
  std::optional<unsigned> gi_id, ci_id;  // set for events of one MIG instance
};

// ---- Topology ----

// Where two GPUs meet on PCIe: nvmlGpuTopologyLevel_t, closest first.
enum class TopologyLevel : unsigned {
  kInternal = 0,     // the same board (multi-GPU cards)
  kSingle = 10,      // one PCIe switch between them (nvidia-smi topo: PIX)
  kMultiple = 20,    // several switches, no host bridge (PXB)
  kHostBridge = 30,  // the same host bridge (PHB)
  kNode = 40,        // the same NUMA node, different host bridges (NODE)
  kSystem = 50,      // across NUMA nodes (SYS)
};

// nvidia-smi topo's short name: "PIX", "PXB", "PHB", "NODE", "SYS" ("X" for internal).
inline const char* TopologyLevelName(TopologyLevel l) {
  switch (l) {
    case TopologyLevel::kInternal:
      return "X";
    case TopologyLevel::kSingle:
      return "PIX";
    case TopologyLevel::kMultiple:
      return "PXB";
    case TopologyLevel::kHostBridge:
      return "PHB";
    case TopologyLevel::kNode:
      return "NODE";
    case TopologyLevel::kSystem:
      return "SYS";
  }
  return "SYS";
}

// One active NVLink of a GPU.
struct NvLink {
  enum class Remote { kGpu, kSwitch, kOther };
  unsigned link = 0;          // link number on this GPU
  std::string remote_bus_id;  // the far end's PCI bus id, as NVML writes it
  Remote remote = Remote::kOther;
  std::optional<unsigned> remote_gpu;  // NVML index of the far GPU (kGpu only)
  bool operator==(const NvLink&) const = default;
};

// A GPU reachable from another over NVLink, and over how many links. Through
// NVSwitches, two GPUs share min(links of each to that switch) per switch
// both reach, summed: what they can use at once to talk to each other.
struct NvLinkPeer {
  unsigned gpu = 0;
  unsigned links = 0;
  bool via_switch = false;
  bool operator==(const NvLinkPeer&) const = default;
};

// The NvLink peers of GPU `gpu`, given the active links of every GPU
// (`links_by_gpu[i]` for GPU i), ordered by GPU index. Pure.
std::vector<NvLinkPeer> NvLinkPeersFromLinks(unsigned gpu,
                                             const std::vector<std::vector<NvLink>>& links_by_gpu);

// ---- Health evidence ----

// nvmlDeviceGpuRecoveryAction_t: what the driver says a GPU needs.
enum class RecoveryAction : unsigned {
  kNone = 0,
  kGpuReset = 1,
  kNodeReboot = 2,
  kDrainP2P = 3,
  kDrainAndReset = 4,
  kRecoverImexDomain = 5,
};

// One health probe of a GPU: does it answer NVML, and the values that show
// whether a past fault is still in force. Every value is nullopt where the
// GPU or driver does not report it.
struct GpuHealth {
  bool responds = false;                          // NVML answered for this GPU
  std::string error;                              // why not, when !responds ("GPU is lost")
  std::optional<RecoveryAction> recovery_action;  // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
  std::optional<uint64_t> ecc_dbe_volatile;       // uncorrectable errors since the last reset
  std::optional<bool> remapped_rows_pending;      // a row remap waits for a reset
};

// A process using a GPU (nvmlDeviceGetComputeRunningProcesses_v3).
struct GpuProcess {
  unsigned pid = 0;
  std::string name;  // /proc/<pid>/comm; empty where it cannot be read
  uint64_t used_mib = 0;
};

// What the driver did with a MIG mode change (its activationStatus).
enum class MigActivation {
  kActive,         // the requested mode is in force now
  kResetRequired,  // the mode is pending until the GPU is reset
  kInUse,          // processes hold the GPU: idle it and ask again (never reset it)
};

// Result of SetMigMode.
struct MigModeChange {
  bool enabled = false;  // the mode now requested
  bool current = false;  // the mode in force now
  MigActivation activation = MigActivation::kActive;
  bool reset_required = false;  // activation == kResetRequired
  // kInUse: the processes holding the GPU, as far as NVML lists them.
  std::vector<GpuProcess> processes;
};

// "1234 (python3), 5678" for messages.
std::string DescribeProcesses(const std::vector<GpuProcess>& processes);

// ---- Pure helpers ----------------------------------------------------------

// The memory size in a MIG profile name: GB = round(ceil(8 * mem / total) / 8
// * ceil(total / 1 GiB)) with mem in MiB and total in bytes (NVIDIA's rule, so
// names match nvidia-smi and mig-parted on every GPU).
unsigned MigMemoryGb(uint64_t memory_mib, uint64_t total_memory_bytes);

// "<G>g.<GB>gb" when ci_slices == gi_slices, else "<C>c.<G>g.<GB>gb", plus
// the suffix of the profile kind, as nvidia-smi, go-nvlib and mig-parted
// write it: "+me" (NVML_GPU_INSTANCE_PROFILE_*_REV1), "+me.all" (*_ALL_ME),
// "-me" (*_NO_ME), "+gfx" (*_GFX).
std::string MigProfileName(unsigned ci_slices, unsigned gi_slices, uint64_t memory_mib,
                           uint64_t total_memory_bytes, unsigned gi_profile_index);

// NVML_COMPUTE_INSTANCE_PROFILE_* for a CI of `slices` compute slices;
// nullopt when no such profile exists.
std::optional<unsigned> CiProfileIndexForSlices(unsigned slices);

std::string ArchitectureName(unsigned nvml_arch);  // NVML_DEVICE_ARCH_* → "Hopper"
std::string BrandName(unsigned nvml_brand);        // NVML_BRAND_* → "Tesla"
// 12080 → "12.8"; 0 → "".
std::string CudaVersionString(int cuda_driver_version);

}  // namespace gpuop::nvml

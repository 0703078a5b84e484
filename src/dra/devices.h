// The DRA devices a node publishes, as NVIDIA's GPU DRA driver models them in
// its default ("static MIG") mode:
//   - a GPU with MIG off is one `gpu` device, gpu-<minor>;
//   - a GPU with MIG on publishes the MIG devices it has (made by mig-manager)
//     and not itself;
//   - attributes in the driver's domain (gpu.nvidia.com) unless qualified,
//     versions semver-coerced, the standard PCI/NUMA attributes;
//   - capacity: a GPU's memory in bytes; a MIG device's engines, memory and
//     one memorySlice<i> per memory slice its GPU instance occupies;
//   - an unhealthy GPU's devices carry taints (gpu.nvidia.com/xid,
//     gpu.nvidia.com/gpu-lost).
//
// BuildDevices and the helpers below it are pure and thread-safe. ReadPcieRoot
// is the one function here that reads files (a host root's sysfs).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "nvml/device.h"

namespace gpuop::dra {

// A `version` attribute: a semver 2.0 string ("9.0.0").
struct Version {
  std::string semver;
  bool operator==(const Version&) const = default;
};
// One of resource.k8s.io/v1 DeviceAttribute's members: string, int, bool, version.
using AttributeValue = std::variant<std::string, int64_t, bool, Version>;

inline constexpr char kTaintXid[] = "gpu.nvidia.com/xid";
inline constexpr char kTaintGpuLost[] = "gpu.nvidia.com/gpu-lost";
inline constexpr char kEffectNoSchedule[] = "NoSchedule";
inline constexpr char kEffectNone[] = "None";

// XIDs NVIDIA's driver taints with effect None (application faults, not the
// GPU's): 13, 31, 43, 45, 68, 109.
inline const std::set<uint64_t> kIgnoredXids = {13, 31, 43, 45, 68, 109};

struct DeviceTaint {
  std::string key;
  std::string value;
  std::string effect;      // kEffectNoSchedule or kEffectNone
  std::string time_added;  // RFC 3339, when the fault was seen
  bool operator==(const DeviceTaint&) const = default;
};

struct Device {
  enum class Kind { kGpu, kMig };
  std::string name;  // gpu-0, gpu-0-mig-1g5gb-19-0
  Kind kind = Kind::kGpu;
  // Which hardware the device is, for whoever prepares it.
  unsigned gpu_index = 0;   // the (parent) GPU's NVML index
  std::string uuid;         // GPU-... or MIG-...
  std::string parent_uuid;  // the GPU's UUID for a MIG device; empty for a GPU
  // Keys are QualifiedNames: "type" (the driver's domain) or
  // "resource.kubernetes.io/pciBusID".
  std::map<std::string, AttributeValue> attributes;
  std::map<std::string, uint64_t> capacity;  // bytes for memory, counts otherwise
  std::vector<DeviceTaint> taints;
  bool operator==(const Device&) const = default;
};

// What is wrong with one GPU, as the health checker last saw it. A default
// value is a healthy GPU.
struct GpuHealthState {
  // The XID to report (the caller keeps the one that matters, e.g. the first
  // XID not in the ignored set).
  std::optional<uint64_t> xid;
  bool lost = false;  // the GPU fell off the bus
  std::string since;  // RFC 3339: the taints' timeAdded
};

// Inputs besides NVML's, all optional.
struct DeviceInputs {
  std::map<std::string, GpuHealthState> health;  // by GPU UUID; absent: healthy
  // pcieRoot by sysfs bus id ("0000:18:00.0"); absent: not published.
  std::map<std::string, std::string> pcie_roots;
  // --additional-xids-to-ignore: tainted with effect None like kIgnoredXids.
  std::set<uint64_t> additional_ignored_xids;
};

// The node's devices, sorted by name. Errors name the GPU: one without a
// /dev/nvidia minor (its device name is unknown), two devices with one name,
// or a version NVML reported that is not a version.
Result<std::vector<Device>> BuildDevices(const std::vector<nvml::Gpu>& gpus,
                                         const nvml::SystemInfo& system,
                                         const DeviceInputs& inputs = {});

// ---- Pure helpers, exposed for tests and for other DRA parts ----

// Semver coercion as NVIDIA applies it: dot-separated decimal segments parsed
// as integers (leading zeros dropped), missing minor/patch set to 0:
// "9.0" → "9.0.0", "580.105.08" → "580.105.8". More than three segments or a
// non-number is an error.
Result<std::string> CoerceSemver(std::string_view version);
// NVML's CUDA driver version integer as a semver: 12080 → "12.8.0".
std::string CudaDriverSemver(int cuda_driver_version);
// The sysfs form of a GPU's PCI address: "0000:18:00.0".
std::string SysfsBusId(const nvml::PciInfo& pci);
// The pcieRoot in a /sys/bus/pci/devices/<BDF> link target: the path element
// after "devices" that starts with "pci" ("../../../devices/pci0000:00/
// 0000:00:01.0/0000:18:00.0" → "pci0000:00"); nullopt when there is none.
std::optional<std::string> PcieRootFromLinkTarget(std::string_view target);

// Reads <host_root>/sys/bus/pci/devices/<bus_id> as a link; nullopt when it
// is not one or names no root (a simulated host's plain directory).
std::optional<std::string> ReadPcieRoot(const std::string& host_root, const std::string& bus_id);

}  // namespace gpuop::dra

#include "dra/devices.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "base/files.h"
#include "dra/names.h"

namespace gpuop::dra {
namespace {

constexpr char kPciBusIdAttribute[] = "resource.kubernetes.io/pciBusID";
constexpr char kPcieRootAttribute[] = "resource.kubernetes.io/pcieRoot";
constexpr char kNumaNodeAttribute[] = "resource.kubernetes.io/numaNode";

// NVML reports a GPU's memory to us in MiB (nvml::Gpu::memory_mib); NVIDIA's
// driver publishes the byte total NVML's nvmlDeviceGetMemoryInfo gives.
// Unconfirmed whether that total is always a whole number of MiB; ours is.
constexpr uint64_t kBytesPerMib = uint64_t{1} << 20;

// The attributes a GPU and its MIG devices share: the board, the driver, PCI
// and NUMA placement.
Status AddCommonAttributes(const nvml::Gpu& gpu, const nvml::SystemInfo& system,
                           const DeviceInputs& inputs, Device& d) {
  auto& a = d.attributes;
  a["productName"] = gpu.name;
  a["brand"] = gpu.brand;
  a["architecture"] = gpu.architecture;
  const std::string cc = std::to_string(gpu.cc_major) + "." + std::to_string(gpu.cc_minor);
  GPUOP_ASSIGN_OR_RETURN(std::string cc_semver, CoerceSemver(cc));
  a["cudaComputeCapability"] = Version{cc_semver};
  auto driver = CoerceSemver(system.driver_version);
  if (!driver.ok()) {
    return driver.status().Annotate("driver version of GPU " + std::to_string(gpu.index) + " (" +
                                    gpu.name + ")");
  }
  a["driverVersion"] = Version{*driver};
  // 0: NVML did not say; publish nothing rather than "0.0.0".
  if (system.cuda_driver_version > 0) {
    a["cudaDriverVersion"] = Version{CudaDriverSemver(system.cuda_driver_version)};
  }
  const std::string bus_id = SysfsBusId(gpu.pci);
  a[kPciBusIdAttribute] = bus_id;
  if (auto root = inputs.pcie_roots.find(bus_id); root != inputs.pcie_roots.end()) {
    a[kPcieRootAttribute] = root->second;
  }
  if (gpu.numa_node >= 0) a[kNumaNodeAttribute] = int64_t{gpu.numa_node};
  return Status::Ok();
}

std::vector<DeviceTaint> TaintsFor(const nvml::Gpu& gpu, const DeviceInputs& inputs) {
  std::vector<DeviceTaint> taints;
  auto it = inputs.health.find(gpu.uuid);
  if (it == inputs.health.end()) return taints;
  const GpuHealthState& h = it->second;
  if (h.xid) {
    const bool ignored =
        kIgnoredXids.count(*h.xid) > 0 || inputs.additional_ignored_xids.count(*h.xid) > 0;
    taints.push_back(DeviceTaint{kTaintXid, std::to_string(*h.xid),
                                 ignored ? kEffectNone : kEffectNoSchedule, h.since});
  }
  if (h.lost) taints.push_back(DeviceTaint{kTaintGpuLost, "", kEffectNoSchedule, h.since});
  return taints;
}

Result<Device> GpuDevice(const nvml::Gpu& gpu, const nvml::SystemInfo& system,
                         const DeviceInputs& inputs) {
  Device d;
  d.name = GpuDeviceName(gpu);
  d.kind = Device::Kind::kGpu;
  d.gpu_index = gpu.index;
  d.uuid = gpu.uuid;
  d.attributes["type"] = std::string("gpu");
  d.attributes["uuid"] = gpu.uuid;
  GPUOP_RETURN_IF_ERROR(AddCommonAttributes(gpu, system, inputs, d));
  d.capacity["memory"] = gpu.memory_mib * kBytesPerMib;
  d.taints = TaintsFor(gpu, inputs);
  return d;
}

Result<Device> MigDevice(const nvml::Gpu& gpu, const nvml::MigDevice& mig,
                         const nvml::SystemInfo& system, const DeviceInputs& inputs) {
  Device d;
  d.name = MigDeviceName(gpu, mig);
  d.kind = Device::Kind::kMig;
  d.gpu_index = gpu.index;
  d.uuid = mig.uuid;
  d.parent_uuid = gpu.uuid;
  d.attributes["type"] = std::string("mig");
  d.attributes["uuid"] = mig.uuid;
  d.attributes["parentUUID"] = gpu.uuid;
  d.attributes["profile"] = mig.profile;
  GPUOP_RETURN_IF_ERROR(AddCommonAttributes(gpu, system, inputs, d));
  auto& c = d.capacity;
  c["multiprocessors"] = mig.multiprocessors;
  c["copyEngines"] = mig.engines.copy;
  c["decoders"] = mig.engines.decoders;
  c["encoders"] = mig.engines.encoders;
  c["jpegEngines"] = mig.engines.jpegs;
  c["ofaEngines"] = mig.engines.ofas;
  c["memory"] = mig.memory_mib * kBytesPerMib;
  // The GI's placement is on the memory-slice axis (unknown without MIG privilege).
  if (mig.placement) {
    for (unsigned i = mig.placement->start; i < mig.placement->start + mig.placement->size; ++i) {
      c["memorySlice" + std::to_string(i)] = 1;
    }
  }
  d.taints = TaintsFor(gpu, inputs);
  return d;
}

std::string Describe(const nvml::Gpu& gpu) {
  return "GPU " + std::to_string(gpu.index) + " (" + gpu.name + ", " + gpu.uuid + ")";
}

}  // namespace

Result<std::vector<Device>> BuildDevices(const std::vector<nvml::Gpu>& gpus,
                                         const nvml::SystemInfo& system,
                                         const DeviceInputs& inputs) {
  std::vector<Device> devices;
  for (const nvml::Gpu& gpu : gpus) {
    if (gpu.minor < 0) {
      return FailedPrecondition(Describe(gpu) +
                                " has no /dev/nvidia minor number, which names its DRA device; "
                                "check that the nvidia kernel module created its device node");
    }
    if (!gpu.mig_enabled) {
      GPUOP_ASSIGN_OR_RETURN(Device d, GpuDevice(gpu, system, inputs));
      devices.push_back(std::move(d));
      continue;
    }
    for (const nvml::MigDevice& mig : gpu.mig_devices) {
      GPUOP_ASSIGN_OR_RETURN(Device d, MigDevice(gpu, mig, system, inputs));
      devices.push_back(std::move(d));
    }
  }
  std::sort(devices.begin(), devices.end(),
            [](const Device& a, const Device& b) { return a.name < b.name; });
  for (size_t i = 1; i < devices.size(); ++i) {
    if (devices[i].name == devices[i - 1].name) {
      return FailedPrecondition("two DRA devices are named " + devices[i].name + " (" +
                                devices[i - 1].uuid + " and " + devices[i].uuid +
                                "); two GPUs report the same /dev/nvidia minor number");
    }
  }
  return devices;
}

Result<std::string> CoerceSemver(std::string_view version) {
  std::vector<uint64_t> parts;
  std::string_view rest = version;
  while (true) {
    const size_t dot = rest.find('.');
    const std::string_view part = rest.substr(0, dot);
    uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size()) {
      return InvalidArgument("version \"" + std::string(version) +
                             "\" is not dot-separated numbers (like 580.105.08)");
    }
    parts.push_back(n);
    if (dot == std::string_view::npos) break;
    rest = rest.substr(dot + 1);
  }
  if (parts.size() > 3) {
    return InvalidArgument("version \"" + std::string(version) +
                           "\" has more than three parts (major.minor.patch)");
  }
  parts.resize(3, 0);
  return std::to_string(parts[0]) + "." + std::to_string(parts[1]) + "." + std::to_string(parts[2]);
}

std::string CudaDriverSemver(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) + ".0";
}

std::string SysfsBusId(const nvml::PciInfo& pci) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.device);
  return buf;
}

std::optional<std::string> PcieRootFromLinkTarget(std::string_view target) {
  bool after_devices = false;
  while (!target.empty()) {
    const size_t slash = target.find('/');
    const std::string_view part = target.substr(0, slash);
    if (after_devices && part.starts_with("pci")) return std::string(part);
    after_devices = part == "devices";
    if (slash == std::string_view::npos) break;
    target = target.substr(slash + 1);
  }
  return std::nullopt;
}

std::optional<std::string> ReadPcieRoot(const std::string& host_root, const std::string& bus_id) {
  const std::string link = JoinRoot(host_root, "/sys/bus/pci/devices/" + bus_id);
  std::string target(4096, '\0');
  const ssize_t n = ::readlink(link.c_str(), target.data(), target.size());
  if (n <= 0) return std::nullopt;  // not a link: no root to read
  target.resize(static_cast<size_t>(n));
  return PcieRootFromLinkTarget(target);
}

}  // namespace gpuop::dra

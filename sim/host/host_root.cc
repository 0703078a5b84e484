// The pure half of the host root: which entries a simulated node has.
#include "sim/host/host_root.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "base/strings.h"

namespace gpuop::sim {
namespace {

constexpr uint32_t kNvidiaVendor = 0x10de;
constexpr gid_t kVideoGid = 44;  // Debian's fixed "video" group, owner of /dev/dri/card*

std::string Hex(uint32_t v, int width) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*" PRIx32, width, v);
  return buf;
}

// PCI devices that are not GPUs, as every server has: node discovery has to
// filter by vendor and class, not count every PCI device (the ASPEED BMC is
// even a VGA controller).
struct OtherPciDevice {
  const char* address;
  uint32_t vendor, device, pci_class, subsystem_vendor, subsystem_device;
};
constexpr OtherPciDevice kOtherPciDevices[] = {
    {"0000:00:00.0", 0x8086, 0x09a2, 0x060000, 0x8086, 0x0000},  // Intel host bridge
    {"0000:03:00.0", 0x1a03, 0x2000, 0x030000, 0x1a03, 0x2000},  // ASPEED BMC VGA
    {"0000:0c:00.0", 0x15b3, 0x1021, 0x020700, 0x15b3, 0x0041},  // Mellanox ConnectX-7 (IB)
    {"0000:4b:00.0", 0x8086, 0x1593, 0x020000, 0x8086, 0x0002},  // Intel E810 Ethernet
};

// A driver library: the file is <stem>.so.<driver version> unless `fixed_file`
// is set; the soname is <stem>.so.<soname_suffix>, or the file name itself
// when the suffix is empty (the driver's private, version-locked libraries).
struct DriverLib {
  const char* stem;
  const char* soname_suffix;
  const char* fixed_file = nullptr;
};
// Sonames as the driver packages ship them (each has a <soname> symlink made
// by ldconfig, except the version-locked ones).
constexpr DriverLib kDriverLibs[] = {
    {"libcuda", "1"},
    {"libnvidia-ml", "1"},
    {"libnvidia-ptxjitcompiler", "1"},
    {"libnvidia-nvvm", "4"},
    {"libcudadebugger", "1"},
    {"libnvidia-opencl", "1"},
    {"libnvidia-cfg", "1"},
    {"libnvidia-gpucomp", ""},
    {"libnvidia-allocator", "1"},
    {"libnvidia-pkcs11", ""},
    {"libnvidia-pkcs11-openssl3", ""},
    {"libnvidia-encode", "1"},
    {"libnvcuvid", "1"},
    {"libnvidia-opticalflow", "1"},
    {"libnvidia-fbc", "1"},
    // NVVM for CUDA 11.x: its own version, not the driver's.
    {"libnvidia-nvvm70", "", "libnvidia-nvvm70.so.4"},
};

constexpr const char* kDriverBinaries[] = {
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
};

class PlanBuilder {
 public:
  explicit PlanBuilder(HostRootPlan* plan) : plan_(plan) {}

  void Dir(std::string path, mode_t mode = 0755) {
    Add({HostEntryType::kDirectory, std::move(path), mode});
  }
  void File(std::string path, std::string content, mode_t mode = 0644) {
    HostEntry e{HostEntryType::kFile, std::move(path), mode};
    e.content = std::move(content);
    Add(std::move(e));
  }
  void CharDev(std::string path, unsigned major, unsigned minor, mode_t mode, gid_t gid = 0) {
    HostEntry e{HostEntryType::kCharDevice, std::move(path), mode, major, minor, gid};
    Add(std::move(e));
  }
  void Symlink(std::string path, std::string target) {
    HostEntry e{HostEntryType::kSymlink, std::move(path), 0777};
    e.content = std::move(target);
    Add(std::move(e));
  }
  void Socket(std::string path) { Add({HostEntryType::kSocket, std::move(path), 0666}); }
  void Copy(std::string path, std::string source, mode_t mode) {
    HostEntry e{HostEntryType::kCopy, std::move(path), mode};
    e.content = std::move(source);
    Add(std::move(e));
  }
  void Library(std::string path, std::string soname, std::string bytes_or_source, bool copy) {
    HostEntry e{copy ? HostEntryType::kCopy : HostEntryType::kFile, std::move(path), 0755};
    e.content = std::move(bytes_or_source);
    e.soname = std::move(soname);
    Add(std::move(e));
  }

 private:
  void Add(HostEntry e) { plan_->entries.push_back(std::move(e)); }
  HostRootPlan* plan_;
};

std::string ProcDevices() {
  // The character majors the NVIDIA stack looks up by name, among ordinary ones.
  std::string s =
      "Character devices:\n  1 mem\n  4 /dev/vc/0\n  4 tty\n  5 /dev/tty\n"
      "  5 /dev/console\n  5 /dev/ptmx\n 10 misc\n 13 input\n";
  s += std::to_string(kNvidiaMajor) + " nvidia-frontend\n";
  s += std::to_string(kDrmMajor) + " drm\n";
  s += "254 gpiochip\n";
  s += std::to_string(kNvidiaUvmMajor) + " nvidia-uvm\n";
  s += std::to_string(kNvidiaCapsMajor) + " nvidia-caps\n";
  s += "\nBlock devices:\n  7 loop\n  8 sd\n259 blkext\n";
  return s;
}

std::string GpuInformation(const SimGpu& gpu, const std::string& address, unsigned irq,
                           const std::string& driver_version) {
  // Field names and the tab layout of /proc/driver/nvidia/gpus/<bus>/information.
  std::string s;
  s += "Model: \t\t " + gpu.model.name + "\n";
  s += "IRQ:   \t\t " + std::to_string(irq) + "\n";
  s += "GPU UUID: \t " + gpu.uuid + "\n";
  s += "Video BIOS: \t 96.00.99.00.01\n";
  s += "Bus Type: \t PCIe\n";
  s += "DMA Size: \t 52 bits\n";
  s += "DMA Mask: \t 0xfffffffffffff\n";
  s += "Bus Location: \t " + address + "\n";
  s += "Device Minor: \t " + std::to_string(gpu.minor) + "\n";
  s += "GPU Firmware: \t " + driver_version + "\n";
  s += "GPU Excluded: \t No\n";
  return s;
}

std::string CapabilityFile(unsigned minor, mode_t mode) {
  // /proc/driver/nvidia/capabilities/... files: the minor, the mode in decimal.
  return "DeviceFileMinor: " + std::to_string(minor) + "\nDeviceFileMode: " + std::to_string(mode) +
         "\nDeviceFileModify: 1\n";
}

std::string BinaryScript(const std::string& name, const std::string& version) {
  return "#!/bin/sh\n"
         "# " +
         name + " stand-in for a gpuop simulated node (driver " + version +
         ").\n"
         "echo \"" +
         name + ": simulated by gpuop (driver " + version +
         "); this is not the NVIDIA tool\"\n"
         "exit 0\n";
}

}  // namespace

unsigned MigGiCapMinor(unsigned gpu_minor, unsigned gi) {
  constexpr unsigned kPerGi = 1 + kMigCapCisPerGi;
  constexpr unsigned kPerGpu = kMigCapGisPerGpu * kPerGi;
  return kMigMonitorCapMinor + 1 + gpu_minor * kPerGpu + gi * kPerGi;
}

unsigned MigCiCapMinor(unsigned gpu_minor, unsigned gi, unsigned ci) {
  return MigGiCapMinor(gpu_minor, gi) + 1 + ci;
}

std::string MigMinorsFileContent() {
  std::string s = "config " + std::to_string(kMigConfigCapMinor) + "\nmonitor " +
                  std::to_string(kMigMonitorCapMinor) + "\n";
  for (unsigned gpu = 0; gpu < kMigCapGpus; ++gpu) {
    std::string prefix = "gpu" + std::to_string(gpu) + "/gi";
    for (unsigned gi = 0; gi < kMigCapGisPerGpu; ++gi) {
      std::string gi_name = prefix + std::to_string(gi);
      s += gi_name + "/access " + std::to_string(MigGiCapMinor(gpu, gi)) + "\n";
      for (unsigned ci = 0; ci < kMigCapCisPerGi; ++ci) {
        s += gi_name + "/ci" + std::to_string(ci) + "/access " +
             std::to_string(MigCiCapMinor(gpu, gi, ci)) + "\n";
      }
    }
  }
  return s;
}

Result<std::string> SysfsPciAddress(const std::string& nvml_bus_id) {
  // Strict: hex digits only, with the field widths PCI allows (sscanf's %x
  // would take "0x" prefixes and signs).
  auto hex = [](std::string_view s, size_t max_digits, unsigned max) -> std::optional<unsigned> {
    if (s.empty() || s.size() > max_digits) return std::nullopt;
    unsigned v = 0;
    for (char c : s) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
      v = v * 16 +
          static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(c))
                                    ? c - '0'
                                    : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
    }
    if (v > max) return std::nullopt;
    return v;
  };
  auto bad = [&] {
    return InvalidArgument("PCI bus id \"" + nvml_bus_id +
                           "\" is not of the form 00000000:18:00.0 (domain:bus:device.function)");
  };
  std::vector<std::string> parts = Split(nvml_bus_id, ':', /*skip_empty=*/false);
  if (parts.size() != 3) return bad();
  size_t dot = parts[2].find('.');
  if (dot == std::string::npos) return bad();
  auto domain = hex(parts[0], 8, 0xffff);
  auto bus = hex(parts[1], 2, 0xff);
  auto dev = hex(std::string_view(parts[2]).substr(0, dot), 2, 0x1f);
  auto fn = hex(std::string_view(parts[2]).substr(dot + 1), 1, 7);
  if (!domain || !bus || !dev || !fn) return bad();
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", *domain, *bus, *dev, *fn);
  return std::string(buf);
}

uint32_t PciClassForModel(const GpuModel& model) {
  for (const char* vga : {"GeForce", "TITAN", "Quadro", "RTX"}) {
    if (model.name.find(vga) != std::string::npos) return 0x030000;
  }
  return 0x030200;
}

size_t HostRootPlan::CountDeviceNodes() const {
  size_t n = 0;
  for (const HostEntry& e : entries) n += e.type == HostEntryType::kCharDevice;
  return n;
}

size_t HostRootPlan::CountLibraries() const {
  size_t n = 0;
  for (const HostEntry& e : entries) n += !e.soname.empty();
  return n;
}

const HostEntry* HostRootPlan::Find(const std::string& path) const {
  for (const HostEntry& e : entries) {
    if (e.path == path) return &e;
  }
  return nullptr;
}

Result<HostRootPlan> PlanHostRoot(const Machine& machine, const HostRootOptions& options) {
  HostRootPlan plan;
  GPUOP_ASSIGN_OR_RETURN(plan.lib_dir, MultiarchLibDir(options.elf_machine));
  const std::string& ver = machine.driver_version;
  if (ver.empty() || ver.find('/') != std::string::npos) {
    return InvalidArgument("machine \"" + machine.name + "\" has no usable driver version (\"" +
                           ver + "\")");
  }
  plan.gpus = machine.gpus.size();

  // Validate before building: every GPU needs a distinct minor and bus id.
  std::vector<std::string> addresses;
  std::set<unsigned> minors;
  std::set<std::string> seen_addresses;
  for (const SimGpu& gpu : machine.gpus) {
    auto addr = SysfsPciAddress(gpu.bus_id);
    if (!addr.ok()) return addr.status().Annotate("GPU " + std::to_string(gpu.index));
    if (!minors.insert(gpu.minor).second) {
      return InvalidArgument("GPU " + std::to_string(gpu.index) + " has minor " +
                             std::to_string(gpu.minor) + ", which another GPU has already");
    }
    if (gpu.minor >= kNvidiaModesetMinor) {
      return InvalidArgument("GPU " + std::to_string(gpu.index) + " has minor " +
                             std::to_string(gpu.minor) + "; GPU minors must be below 254");
    }
    if (!seen_addresses.insert(*addr).second) {
      return InvalidArgument("GPU " + std::to_string(gpu.index) + " has bus id " + gpu.bus_id +
                             ", which another GPU has already");
    }
    addresses.push_back(*addr);
  }

  PlanBuilder b(&plan);
  const std::string arch = options.elf_machine == kElfMachineAarch64 ? "aarch64" : "x86_64";

  // Directories with a meaning of their own (parents of files are implied).
  b.Dir("/dev");
  b.Dir("/dev/nvidia-caps");
  b.Dir("/dev/dri");
  b.Dir("/dev/dri/by-path");
  b.Dir("/tmp", 01777);
  b.Dir("/run");
  b.Dir("/var");
  b.Symlink("/var/run", "../run");  // relative: it must resolve inside the root
  b.Dir("/etc/kubernetes/node-feature-discovery/features.d");
  b.Dir("/var/lib/kubelet/device-plugins");
  b.Dir("/var/lib/kubelet/pod-resources");
  b.Dir("/run/nvidia/validations");
  b.Dir("/var/cache/ldconfig", 0700);  // ldconfig -r keeps its aux cache here

  // Control device nodes, shared by every GPU.
  b.CharDev("/dev/nvidiactl", kNvidiaMajor, kNvidiaCtlMinor, 0666);
  b.CharDev("/dev/nvidia-modeset", kNvidiaMajor, kNvidiaModesetMinor, 0666);
  b.CharDev("/dev/nvidia-uvm", kNvidiaUvmMajor, 0, 0666);
  b.CharDev("/dev/nvidia-uvm-tools", kNvidiaUvmMajor, 1, 0666);
  b.CharDev("/dev/nvidia-caps/nvidia-cap" + std::to_string(kMigConfigCapMinor), kNvidiaCapsMajor,
            kMigConfigCapMinor, 0400);
  b.CharDev("/dev/nvidia-caps/nvidia-cap" + std::to_string(kMigMonitorCapMinor), kNvidiaCapsMajor,
            kMigMonitorCapMinor, 0444);

  // Per GPU: its node, its DRI nodes, and the GI/CI caps of MIG-capable GPUs.
  for (size_t i = 0; i < machine.gpus.size(); ++i) {
    const SimGpu& gpu = machine.gpus[i];
    const std::string& addr = addresses[i];
    const unsigned card = static_cast<unsigned>(i);
    const unsigned render = kDrmRenderMinorBase + card;
    b.CharDev("/dev/nvidia" + std::to_string(gpu.minor), kNvidiaMajor, gpu.minor, 0666);
    // card* is group video 0660 and renderD* world-accessible, as udev makes them.
    b.CharDev("/dev/dri/card" + std::to_string(card), kDrmMajor, card, 0660, kVideoGid);
    b.CharDev("/dev/dri/renderD" + std::to_string(render), kDrmMajor, render, 0666);
    b.Symlink("/dev/dri/by-path/pci-" + addr + "-card", "../card" + std::to_string(card));
    b.Symlink("/dev/dri/by-path/pci-" + addr + "-render", "../renderD" + std::to_string(render));
    if (gpu.model.mig_capable() && gpu.minor < kMigCapGpus) {
      for (unsigned gi = 0; gi < kMigCapGisPerGpu; ++gi) {
        unsigned m = MigGiCapMinor(gpu.minor, gi);
        b.CharDev("/dev/nvidia-caps/nvidia-cap" + std::to_string(m), kNvidiaCapsMajor, m, 0444);
        for (unsigned ci = 0; ci < kMigCapCisPerGi; ++ci) {
          m = MigCiCapMinor(gpu.minor, gi, ci);
          b.CharDev("/dev/nvidia-caps/nvidia-cap" + std::to_string(m), kNvidiaCapsMajor, m, 0444);
        }
      }
    }
  }

  // procfs.
  b.File("/proc/devices", ProcDevices(), 0444);
  b.File("/proc/driver/nvidia/version",
         "NVRM version: NVIDIA UNIX Open Kernel Module for " + arch + "  " + ver +
             "  Release Build  (gpuop-sim)  Thu Jan  1 00:00:00 UTC 2026\n"
             "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
         0444);
  b.File("/proc/driver/nvidia-caps/mig-minors", MigMinorsFileContent(), 0444);
  b.File("/proc/driver/nvidia/capabilities/mig/config", CapabilityFile(kMigConfigCapMinor, 0400),
         0444);
  b.File("/proc/driver/nvidia/capabilities/mig/monitor", CapabilityFile(kMigMonitorCapMinor, 0444),
         0444);
  for (size_t i = 0; i < machine.gpus.size(); ++i) {
    b.File("/proc/driver/nvidia/gpus/" + addresses[i] + "/information",
           GpuInformation(machine.gpus[i], addresses[i], 100 + static_cast<unsigned>(i), ver),
           0444);
  }

  // sysfs: the NVIDIA GPUs among other PCI devices.
  b.Dir("/sys/bus/pci/drivers/nvidia");
  b.File("/sys/module/nvidia/version", ver + "\n", 0444);
  // The firmware loader's search path (a kernel parameter, empty by default):
  // the driver container mounts it to point the kernel at its firmware.
  b.File("/sys/module/firmware_class/parameters/path", "\n", 0644);
  auto pci_device = [&](const std::string& addr, uint32_t vendor, uint32_t device,
                        uint32_t pci_class, uint32_t sub_vendor, uint32_t sub_device, int numa) {
    const std::string dir = "/sys/bus/pci/devices/" + addr;
    b.File(dir + "/vendor", Hex(vendor, 4) + "\n", 0444);
    b.File(dir + "/device", Hex(device, 4) + "\n", 0444);
    b.File(dir + "/class", Hex(pci_class, 6) + "\n", 0444);
    b.File(dir + "/subsystem_vendor", Hex(sub_vendor, 4) + "\n", 0444);
    b.File(dir + "/subsystem_device", Hex(sub_device, 4) + "\n", 0444);
    b.File(dir + "/numa_node", std::to_string(numa) + "\n", 0444);
  };
  for (const OtherPciDevice& d : kOtherPciDevices) {
    if (seen_addresses.count(d.address) != 0) continue;  // a GPU sits there in this machine
    pci_device(d.address, d.vendor, d.device, d.pci_class, d.subsystem_vendor, d.subsystem_device,
               0);
  }
  for (size_t i = 0; i < machine.gpus.size(); ++i) {
    const SimGpu& gpu = machine.gpus[i];
    const std::string& addr = addresses[i];
    const std::string dir = "/sys/bus/pci/devices/" + addr;
    // NVML packs ids as (device << 16) | vendor.
    pci_device(addr, gpu.model.pci_device_id & 0xffff, gpu.model.pci_device_id >> 16,
               PciClassForModel(gpu.model), gpu.model.pci_subsystem_id & 0xffff,
               gpu.model.pci_subsystem_id >> 16, gpu.numa_node);
    b.Symlink(dir + "/driver", "../../drivers/nvidia");
    b.Symlink("/sys/bus/pci/drivers/nvidia/" + addr, "../../devices/" + addr);
    const unsigned card = static_cast<unsigned>(i);
    const unsigned render = kDrmRenderMinorBase + card;
    b.File(dir + "/drm/card" + std::to_string(card) + "/dev",
           std::to_string(kDrmMajor) + ":" + std::to_string(card) + "\n", 0444);
    b.File(dir + "/drm/renderD" + std::to_string(render) + "/dev",
           std::to_string(kDrmMajor) + ":" + std::to_string(render) + "\n", 0444);
  }

  // Driver libraries, then the loader configuration ldconfig reads.
  for (const DriverLib& lib : kDriverLibs) {
    std::string stem = lib.stem;
    std::string file = lib.fixed_file ? lib.fixed_file : stem + ".so." + ver;
    std::string soname = *lib.soname_suffix ? stem + ".so." + lib.soname_suffix : file;
    std::string path = plan.lib_dir + "/" + file;
    if (stem == "libnvidia-ml" && !options.nvml_sim_library.empty()) {
      b.Library(path, soname, options.nvml_sim_library, /*copy=*/true);
    } else if (stem == "libcuda" && !options.cuda_sim_library.empty()) {
      b.Library(path, soname, options.cuda_sim_library, /*copy=*/true);
    } else {
      b.Library(path, soname, BuildElfSharedObject(soname, options.elf_machine), false);
    }
  }
  // No soname links here: the real ldconfig makes them, as on a driver install.
  // vdpau/ is not an ldconfig directory: the driver ships its soname link itself.
  b.Library(plan.lib_dir + "/vdpau/libvdpau_nvidia.so." + ver, "libvdpau_nvidia.so.1",
            BuildElfSharedObject("libvdpau_nvidia.so.1", options.elf_machine), false);
  b.Symlink(plan.lib_dir + "/vdpau/libvdpau_nvidia.so.1", "libvdpau_nvidia.so." + ver);
  b.File("/etc/ld.so.conf",
         "# gpuop simulated node: the driver's library directory first\n" + plan.lib_dir + "\n");

  for (const char* bin : kDriverBinaries) {
    if (std::string_view(bin) == "nvidia-smi" && !options.nvidia_smi.empty()) {
      b.Copy("/usr/bin/nvidia-smi", options.nvidia_smi, 0755);  // it resets GPUs
      continue;
    }
    b.File(std::string("/usr/bin/") + bin, BinaryScript(bin, ver), 0755);
  }
  for (const char* fw : {"gsp_ga10x.bin", "gsp_tu10x.bin"}) {
    b.File("/lib/firmware/nvidia/" + ver + "/" + fw,
           "gpuop simulated GSP firmware " + std::string(fw) + " for driver " + ver + "\n");
  }

  // IPC endpoints of the driver's daemons.
  b.Dir("/run/nvidia-persistenced");
  b.Socket("/run/nvidia-persistenced/socket");
  b.Dir("/run/nvidia-fabricmanager");
  b.Socket("/run/nvidia-fabricmanager/socket");
  b.Dir("/tmp/nvidia-mps");
  return plan;
}

bool IsDriverFile(const HostRootPlan& plan, const HostEntry& e) {
  return StartsWith(e.path, plan.lib_dir + "/") || StartsWith(e.path, "/usr/bin/nvidia-") ||
         StartsWith(e.path, "/lib/firmware/nvidia/");
}

HostRootPlan WithoutDriverFiles(const HostRootPlan& plan) {
  HostRootPlan out = plan;
  std::erase_if(out.entries, [&](const HostEntry& e) {
    return IsDriverFile(plan, e) || e.path == "/proc/driver/nvidia/version" ||
           e.path == "/sys/module/nvidia/version";
  });
  return out;
}

HostRootPlan DriverFilesOnly(const HostRootPlan& plan) {
  HostRootPlan out = plan;
  std::erase_if(out.entries, [&](const HostEntry& e) {
    return !IsDriverFile(plan, e) && e.path != "/etc/ld.so.conf" && e.path != "/var/cache/ldconfig";
  });
  return out;
}

}  // namespace gpuop::sim

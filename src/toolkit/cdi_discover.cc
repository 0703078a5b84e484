#include "toolkit/cdi_discover.h"

#include <unistd.h>

#include <cctype>
#include <set>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "host/driver_files.h"

namespace gpuop::toolkit {
namespace {

constexpr const char* kMigMinors = "/proc/driver/nvidia-caps/mig-minors";

// Stats `path` under `read_root` into `nodes`; an absent node is left out.
Status StatInto(const std::string& read_root, const std::string& path,
                std::map<std::string, host::DeviceNodeInfo>& nodes) {
  if (nodes.count(path)) return Status::Ok();
  auto info = host::StatDeviceNode(JoinRoot(read_root, path));
  if (info.ok()) {
    nodes.emplace(path, *info);
    return Status::Ok();
  }
  if (info.status().code() == StatusCode::kNotFound) return Status::Ok();
  return info.status();
}

// The node a /dev/dri/by-path link points at ("../card1" → "/dev/dri/card1").
std::string DriLinkTarget(const std::string& read_dev_root, const std::string& link) {
  char buf[256];
  const std::string full = JoinRoot(read_dev_root, "/dev/dri/by-path/" + link);
  ssize_t n = ::readlink(full.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string target(buf, static_cast<size_t>(n));
  size_t slash = target.rfind('/');
  std::string name = slash == std::string::npos ? target : target.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return "";
  return "/dev/dri/" + name;
}

Result<host::MigMinors> ReadMigMinors(const CdiHostRoots& roots) {
  // The table is the kernel's: with a separate dev root (a simulated node, a
  // driver container) it sits beside that /dev, else in the host's /proc.
  std::vector<std::string> candidates = {
      JoinRoot(JoinRoot(roots.host_root, roots.dev_root), kMigMinors)};
  if (roots.dev_root != "/") candidates.push_back(JoinRoot(roots.host_root, kMigMinors));
  for (const std::string& path : candidates) {
    if (!PathExists(path)) continue;
    GPUOP_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    return host::ParseMigMinors(text, path);
  }
  return NotFound(candidates.front() +
                  " does not exist: MIG devices need the driver's nvidia-caps "
                  "table; is the NVIDIA driver loaded with MIG support?");
}

}  // namespace

Result<std::string> SysfsBusId(const std::string& nvml_bus_id) {
  auto parts = Split(nvml_bus_id, ':', /*skip_empty=*/false);
  auto hex = [](std::string_view s) {
    if (s.empty()) return false;
    for (char c : s) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
    return true;
  };
  if (parts.size() != 3 || !hex(parts[0]) || !hex(parts[1]) || parts[1].size() != 2) {
    return InvalidArgument("PCI bus id \"" + nvml_bus_id + "\" is not domain:bus:device.function");
  }
  auto df = Split(parts[2], '.', /*skip_empty=*/false);
  if (df.size() != 2 || !hex(df[0]) || df[0].size() != 2 || df[1].size() != 1 || !hex(df[1])) {
    return InvalidArgument("PCI bus id \"" + nvml_bus_id + "\" is not domain:bus:device.function");
  }
  std::string domain = parts[0];
  if (domain.size() > 4) {
    for (size_t i = 0; i + 4 < domain.size(); ++i) {
      if (domain[i] != '0') {
        return InvalidArgument("PCI bus id \"" + nvml_bus_id +
                               "\" has a domain wider than 16 bits");
      }
    }
    domain = domain.substr(domain.size() - 4);
  }
  while (domain.size() < 4) domain = "0" + domain;
  return ToLower(domain + ":" + parts[1] + ":" + parts[2]);
}

Result<CdiInputs> DiscoverCdiInputs(const std::vector<nvml::Gpu>& gpus,
                                    const std::string& driver_version, const CdiHostRoots& roots) {
  const std::string read_dev = JoinRoot(roots.host_root, roots.dev_root);
  const std::string read_driver = JoinRoot(roots.host_root, roots.driver_root);
  CdiInputs in;
  in.driver_version = driver_version;
  if (driver_version.empty()) {
    return FailedPrecondition("NVML reports no driver version; is the NVIDIA driver loaded?");
  }

  for (std::string_view path : kControlNodes) {
    GPUOP_RETURN_IF_ERROR(StatInto(read_dev, std::string(path), in.device_nodes));
  }

  bool any_mig = false;
  for (const nvml::Gpu& g : gpus) {
    CdiGpuInput gpu;
    gpu.index = g.index;
    gpu.minor = g.minor;
    gpu.uuid = g.uuid;
    GPUOP_ASSIGN_OR_RETURN(gpu.pci_bus_id, SysfsBusId(g.pci.bus_id));
    gpu.mig_enabled = g.mig_enabled;
    for (const nvml::MigDevice& m : g.mig_devices) {
      gpu.migs.push_back({m.index, m.gi_id, m.ci_id, m.uuid, m.profile});
    }
    any_mig = any_mig || (gpu.mig_enabled && !gpu.migs.empty());
    if (g.minor >= 0) {
      GPUOP_RETURN_IF_ERROR(
          StatInto(read_dev, "/dev/nvidia" + std::to_string(g.minor), in.device_nodes));
    }
    CdiDriNodes dri;
    dri.card = DriLinkTarget(read_dev, "pci-" + gpu.pci_bus_id + "-card");
    dri.render = DriLinkTarget(read_dev, "pci-" + gpu.pci_bus_id + "-render");
    if (!dri.card.empty()) GPUOP_RETURN_IF_ERROR(StatInto(read_dev, dri.card, in.device_nodes));
    if (!dri.render.empty()) GPUOP_RETURN_IF_ERROR(StatInto(read_dev, dri.render, in.device_nodes));
    if (!dri.card.empty() || !dri.render.empty()) in.dri_by_pci[gpu.pci_bus_id] = dri;
    in.gpus.push_back(std::move(gpu));
  }

  if (any_mig) {
    GPUOP_ASSIGN_OR_RETURN(in.cap_minors, ReadMigMinors(roots));
    for (const CdiGpuInput& gpu : in.gpus) {
      if (!gpu.mig_enabled || gpu.minor < 0) continue;
      for (const CdiMigInput& m : gpu.migs) {
        const unsigned minor = static_cast<unsigned>(gpu.minor);
        for (auto cap :
             {in.cap_minors.Gi(minor, m.gi_id), in.cap_minors.Ci(minor, m.gi_id, m.ci_id)}) {
          if (!cap) continue;
          GPUOP_RETURN_IF_ERROR(StatInto(
              read_dev, "/dev/nvidia-caps/nvidia-cap" + std::to_string(*cap), in.device_nodes));
        }
      }
    }
  }

  GPUOP_ASSIGN_OR_RETURN(host::DriverLibraries libs,
                         host::FindDriverLibraries(read_driver, driver_version, roots.driver_root));
  in.libraries = std::move(libs.paths);
  in.libcuda_dir = std::move(libs.libcuda_dir);
  in.binaries = host::FindDriverBinaries(read_driver);
  in.firmware = host::FindGspFirmware(read_driver, driver_version);
  in.sockets = host::FindIpcSockets(read_driver);
  LogDebug("cdi inputs discovered", {{"gpus", in.gpus.size()},
                                     {"device_nodes", in.device_nodes.size()},
                                     {"libraries", in.libraries.size()},
                                     {"ld_cache", libs.from_ld_cache},
                                     {"binaries", in.binaries.size()},
                                     {"firmware", in.firmware.size()},
                                     {"sockets", in.sockets.size()}});
  return in;
}

Result<CdiInputs> DiscoverCdiInputs(const nvml::Client& client, const CdiHostRoots& roots) {
  GPUOP_ASSIGN_OR_RETURN(nvml::SystemInfo system, client.System());
  GPUOP_ASSIGN_OR_RETURN(std::vector<nvml::Gpu> gpus, client.Gpus());
  return DiscoverCdiInputs(gpus, system.driver_version, roots);
}

}  // namespace gpuop::toolkit

#include "toolkit/cdi_build.h"

#include <algorithm>
#include <set>

#include "base/files.h"
#include "base/strings.h"
#include "host/driver_files.h"

namespace gpuop::toolkit {
namespace {

constexpr std::string_view kNvidiactl = "/dev/nvidiactl";

std::string BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string HostPath(const std::string& root, const std::string& path) {
  return JoinRoot(root, path);
}

void AddGid(cdi::ContainerEdits& e, uint32_t gid) {
  if (std::find(e.additional_gids.begin(), e.additional_gids.end(), gid) ==
      e.additional_gids.end()) {
    e.additional_gids.push_back(gid);
  }
}

void AddNode(cdi::ContainerEdits& e, const cdi::DeviceNode& n) {
  for (const auto& have : e.device_nodes) {
    if (have.path == n.path) return;
  }
  e.device_nodes.push_back(n);
}

void AddHook(cdi::ContainerEdits& e, const cdi::Hook& h) {
  if (std::find(e.hooks.begin(), e.hooks.end(), h) == e.hooks.end()) e.hooks.push_back(h);
}

class Builder {
 public:
  Builder(const CdiInputs& in, const CdiBuildOptions& opt) : in_(in), opt_(opt) {}

  Result<cdi::Spec> Run() {
    GPUOP_RETURN_IF_ERROR(CheckOptions());
    if (!in_.device_nodes.count(std::string(kNvidiactl))) {
      return FailedPrecondition(HostPath(opt_.dev_root, std::string(kNvidiactl)) +
                                " is missing: is the NVIDIA driver loaded? (driver root " +
                                opt_.driver_root + ", dev root " + opt_.dev_root +
                                "; set --dev-root where the device nodes are)");
    }
    if (in_.libraries.empty()) {
      return NotFound("no NVIDIA driver libraries for driver version " + in_.driver_version +
                      " under driver root " + opt_.driver_root +
                      "; install the driver there or point --driver-root at the driver's root");
    }
    if (in_.gpus.empty()) {
      return FailedPrecondition("NVML reports no GPUs: there is nothing to put in a CDI spec");
    }

    cdi::Spec spec;
    spec.kind = opt_.vendor + "/" + opt_.device_class;
    cdi::ContainerEdits all;
    for (const CdiGpuInput& gpu : in_.gpus) {
      if (gpu.mig_enabled) {
        for (const CdiMigInput& mig : gpu.migs) {
          GPUOP_ASSIGN_OR_RETURN(cdi::ContainerEdits e, MigEdits(gpu, mig));
          AddDevices(spec, MigDeviceNames(gpu, mig, opt_.name_strategies), e, all);
        }
      } else {
        GPUOP_ASSIGN_OR_RETURN(cdi::ContainerEdits e, GpuEdits(gpu));
        AddDevices(spec, GpuDeviceNames(gpu, opt_.name_strategies), e, all);
      }
    }
    if (spec.devices.empty()) {
      return FailedPrecondition(
          "no devices for the CDI spec: every GPU is in MIG mode without MIG devices; create MIG "
          "devices (gpuop mig-manager, nvidia-smi mig) or disable MIG mode");
    }
    if (!opt_.no_all_device) spec.devices.push_back({"all", {}, std::move(all)});

    GPUOP_RETURN_IF_ERROR(CommonEdits(spec.edits));
    spec.cdi_version = cdi::MinimumVersion(spec);
    Status valid = cdi::Validate(spec);
    if (!valid.ok()) return valid;
    return spec;
  }

 private:
  Status CheckOptions() const {
    if (opt_.vendor.empty() || opt_.device_class.empty()) {
      return InvalidArgument(
          "the CDI vendor and class must not be empty (e.g. --vendor nvidia.com "
          "--class gpu)");
    }
    if (!StartsWith(opt_.hook_path, "/")) {
      return InvalidArgument("the hook path \"" + opt_.hook_path +
                             "\" is not absolute; pass --hook-path with gpuop's path on the host");
    }
    if (opt_.name_strategies.empty()) {
      return InvalidArgument("no device name strategy; pass --device-name-strategy index,uuid");
    }
    return Status::Ok();
  }

  cdi::Hook MakeHook(const std::string& name, std::vector<std::string> args) const {
    cdi::Hook h;
    h.hook_name = "createContainer";
    h.path = opt_.hook_path;
    h.args = {BaseName(opt_.hook_path), "cdi", "hook", name};
    for (auto& a : args) h.args.push_back(std::move(a));
    return h;
  }

  // The spec entry of a device node found on the host; adds its gid to
  // additionalGids when asked to and the node is not world read/write.
  Result<cdi::DeviceNode> Node(const std::string& path, cdi::ContainerEdits& e,
                               const std::string& owner) const {
    auto it = in_.device_nodes.find(path);
    if (it == in_.device_nodes.end()) {
      return FailedPrecondition(owner + ": device node " + HostPath(opt_.dev_root, path) +
                                " is missing: is the NVIDIA driver loaded and are its device nodes "
                                "created (nvidia-modprobe)? (dev root " +
                                opt_.dev_root + ")");
    }
    const host::DeviceNodeInfo& info = it->second;
    cdi::DeviceNode n;
    n.path = path;
    std::string hp = HostPath(opt_.dev_root, path);
    if (hp != path) n.host_path = std::move(hp);
    n.type = std::string(1, info.type);
    n.major = info.major;
    n.minor = info.minor;
    n.file_mode = info.mode;
    if (info.gid != 0) {
      n.gid = info.gid;
      if (opt_.additional_gids && !info.WorldReadWrite()) AddGid(e, info.gid);
    }
    return n;
  }

  Status AddDri(const CdiGpuInput& gpu, cdi::ContainerEdits& e, const std::string& owner) const {
    auto it = in_.dri_by_pci.find(gpu.pci_bus_id);
    if (it == in_.dri_by_pci.end()) return Status::Ok();
    std::vector<std::string> links;
    for (const auto& [node, kind] :
         {std::pair{it->second.card, "card"}, std::pair{it->second.render, "render"}}) {
      if (node.empty() || !in_.device_nodes.count(node)) continue;
      GPUOP_ASSIGN_OR_RETURN(cdi::DeviceNode n, Node(node, e, owner));
      AddNode(e, n);
      links.push_back("--link");
      links.push_back("../" + BaseName(node) + "::/dev/dri/by-path/pci-" + gpu.pci_bus_id + "-" +
                      kind);
    }
    if (!links.empty()) AddHook(e, MakeHook("create-symlinks", std::move(links)));
    return Status::Ok();
  }

  Result<cdi::DeviceNode> GpuNode(const CdiGpuInput& gpu, cdi::ContainerEdits& e,
                                  const std::string& owner) const {
    if (gpu.minor < 0) {
      return FailedPrecondition(owner +
                                ": NVML reports no device minor number, so its /dev/nvidia<N> "
                                "node is unknown; check the driver installation");
    }
    return Node("/dev/nvidia" + std::to_string(gpu.minor), e, owner);
  }

  Result<cdi::ContainerEdits> GpuEdits(const CdiGpuInput& gpu) const {
    const std::string owner = "GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + ")";
    cdi::ContainerEdits e;
    GPUOP_ASSIGN_OR_RETURN(cdi::DeviceNode n, GpuNode(gpu, e, owner));
    AddNode(e, n);
    GPUOP_RETURN_IF_ERROR(AddDri(gpu, e, owner));
    return e;
  }

  Result<cdi::ContainerEdits> MigEdits(const CdiGpuInput& gpu, const CdiMigInput& mig) const {
    const std::string owner = "MIG device " + std::to_string(gpu.index) + ":" +
                              std::to_string(mig.index) + " (" + mig.uuid + ", GPU instance " +
                              std::to_string(mig.gi_id) + ", compute instance " +
                              std::to_string(mig.ci_id) + ")";
    cdi::ContainerEdits e;
    GPUOP_ASSIGN_OR_RETURN(cdi::DeviceNode parent, GpuNode(gpu, e, owner));
    AddNode(e, parent);
    const unsigned m = static_cast<unsigned>(gpu.minor);
    auto gi = in_.cap_minors.Gi(m, mig.gi_id);
    auto ci = in_.cap_minors.Ci(m, mig.gi_id, mig.ci_id);
    const std::string table = HostPath(opt_.dev_root, "/proc/driver/nvidia-caps/mig-minors");
    if (!gi) {
      return FailedPrecondition(owner + ": no entry gpu" + std::to_string(m) + "/gi" +
                                std::to_string(mig.gi_id) + "/access in " + table +
                                "; is the nvidia-caps support of the driver loaded?");
    }
    if (!ci) {
      return FailedPrecondition(owner + ": no entry gpu" + std::to_string(m) + "/gi" +
                                std::to_string(mig.gi_id) + "/ci" + std::to_string(mig.ci_id) +
                                "/access in " + table +
                                "; is the nvidia-caps support of the driver loaded?");
    }
    for (unsigned cap : {*gi, *ci}) {
      GPUOP_ASSIGN_OR_RETURN(cdi::DeviceNode n,
                             Node("/dev/nvidia-caps/nvidia-cap" + std::to_string(cap), e, owner));
      AddNode(e, n);
    }
    if (mig.profile.find("+gfx") != std::string::npos) GPUOP_RETURN_IF_ERROR(AddDri(gpu, e, owner));
    return e;
  }

  void AddDevices(cdi::Spec& spec, const std::vector<std::string>& names,
                  const cdi::ContainerEdits& e, cdi::ContainerEdits& all) const {
    for (const std::string& name : names) spec.devices.push_back({name, {}, e});
    for (const auto& n : e.device_nodes) AddNode(all, n);
    for (const auto& h : e.hooks) AddHook(all, h);
    for (uint32_t g : e.additional_gids) AddGid(all, g);
  }

  cdi::Mount FileMount(const std::string& path, const std::vector<std::string>& options) const {
    return {HostPath(opt_.driver_root, path), path, options, ""};
  }

  Status CommonEdits(cdi::ContainerEdits& e) const {
    for (std::string_view path : kControlNodes) {
      if (!in_.device_nodes.count(std::string(path))) continue;  // only nvidiactl is required
      GPUOP_ASSIGN_OR_RETURN(cdi::DeviceNode n, Node(std::string(path), e, "control node"));
      AddNode(e, n);
    }
    e.env.push_back("NVIDIA_VISIBLE_DEVICES=void");
    if (!in_.libcuda_dir.empty()) e.env.push_back("NVIDIA_CTK_LIBCUDA_DIR=" + in_.libcuda_dir);

    for (const auto& p : in_.libraries) e.mounts.push_back(FileMount(p, kReadOnlyMountOptions));
    for (const auto& p : in_.firmware) e.mounts.push_back(FileMount(p, kReadOnlyMountOptions));
    for (const auto& p : in_.binaries) e.mounts.push_back(FileMount(p, kReadOnlyMountOptions));
    for (const auto& p : in_.sockets) e.mounts.push_back(FileMount(p, kSocketMountOptions));

    // Development symlinks the driver does not install (nvidia-ctk's list).
    std::vector<std::string> links;
    const std::string& v = in_.driver_version;
    auto link = [&](const std::string& lib, const std::string& target, const std::string& name) {
      for (const std::string& p : in_.libraries) {
        if (BaseName(p) == lib) {
          links.push_back("--link");
          links.push_back(target + "::" + DirName(p) + "/" + name);
          return;
        }
      }
    };
    link("libcuda.so." + v, "libcuda.so.1", "libcuda.so");
    link("libnvidia-opticalflow.so." + v, "libnvidia-opticalflow.so.1", "libnvidia-opticalflow.so");
    link("libGLX_nvidia.so." + v, "libGLX_nvidia.so." + v, "libGLX_indirect.so.0");
    if (!links.empty()) e.hooks.push_back(MakeHook("create-symlinks", std::move(links)));

    std::vector<std::string> folders;
    for (const std::string& p : in_.libraries) {
      std::string dir = DirName(p);
      if (EndsWith(dir, "/vdpau")) continue;  // dlopen()ed by path, not through the cache
      if (std::find(folders.begin(), folders.end(), dir) == folders.end()) folders.push_back(dir);
    }
    std::vector<std::string> args;
    for (const auto& f : folders) {
      args.push_back("--folder");
      args.push_back(f);
    }
    if (!args.empty()) e.hooks.push_back(MakeHook("update-ldcache", std::move(args)));
    return Status::Ok();
  }

  const CdiInputs& in_;
  const CdiBuildOptions& opt_;
};

}  // namespace

std::vector<std::string> GpuDeviceNames(const CdiGpuInput& gpu,
                                        const std::vector<DeviceNameStrategy>& strategies) {
  std::vector<std::string> names;
  for (DeviceNameStrategy s : strategies) {
    switch (s) {
      case DeviceNameStrategy::kIndex:
        names.push_back(std::to_string(gpu.index));
        break;
      case DeviceNameStrategy::kUuid:
        names.push_back(gpu.uuid);
        break;
      case DeviceNameStrategy::kTypeIndex:
        names.push_back("gpu" + std::to_string(gpu.index));
        break;
    }
  }
  return names;
}

std::vector<std::string> MigDeviceNames(const CdiGpuInput& gpu, const CdiMigInput& mig,
                                        const std::vector<DeviceNameStrategy>& strategies) {
  const std::string idx = std::to_string(gpu.index) + ":" + std::to_string(mig.index);
  std::vector<std::string> names;
  for (DeviceNameStrategy s : strategies) {
    switch (s) {
      case DeviceNameStrategy::kIndex:
        names.push_back(idx);
        break;
      case DeviceNameStrategy::kUuid:
        names.push_back(mig.uuid);
        break;
      case DeviceNameStrategy::kTypeIndex:
        names.push_back("mig" + idx);
        break;
    }
  }
  return names;
}

Result<cdi::Spec> BuildSpec(const CdiInputs& inputs, const CdiBuildOptions& options) {
  return Builder(inputs, options).Run();
}

Result<std::vector<DeviceNameStrategy>> ParseDeviceNameStrategies(const std::string& csv) {
  std::vector<DeviceNameStrategy> out;
  for (const std::string& raw : Split(csv, ',')) {
    std::string_view s = Trim(raw);
    DeviceNameStrategy d;
    if (s == "index") {
      d = DeviceNameStrategy::kIndex;
    } else if (s == "uuid") {
      d = DeviceNameStrategy::kUuid;
    } else if (s == "type-index") {
      d = DeviceNameStrategy::kTypeIndex;
    } else {
      return InvalidArgument("unknown device name strategy \"" + std::string(s) +
                             "\"; use index, uuid or type-index (comma-separated)");
    }
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  if (out.empty()) {
    return InvalidArgument("no device name strategy given; use index, uuid or type-index");
  }
  return out;
}

}  // namespace gpuop::toolkit

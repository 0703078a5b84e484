// BuildSpec: the pure core of CDI spec generation. Plain inputs (the GPUs and
// MIG devices NVML reports, the device nodes, capability minors and driver
// files found on the host) in, a complete cdi::Spec out; no I/O, so unit tests
// drive every decision and golden files pin the output.
//
// What it decides (as `nvidia-ctk cdi generate` does):
//   - one device entry per name strategy for each whole GPU (/dev/nvidia<minor>
//     plus its DRI card/render nodes) and for each MIG device (the parent node
//     plus its GI and CI capability nodes); a MIG-enabled GPU gets only its MIG
//     devices; "all" merges every device's edits unless disabled;
//   - top-level edits: the control nodes, NVIDIA_VISIBLE_DEVICES=void and
//     NVIDIA_CTK_LIBCUDA_DIR, read-only mounts of libraries, firmware and
//     binaries, mounts of the IPC sockets, and the create-symlinks and
//     update-ldcache hooks run as `<hook path> cdi hook <name> ...`;
//   - device nodes carry type, major, minor, fileMode and a non-zero gid from
//     the host; with additional_gids, a node that is not world read/write
//     adds its gid to additionalGids;
//   - cdiVersion = cdi::MinimumVersion of the result.
// Missing inputs are errors naming the problem and the fix: no /dev/nvidiactl,
// no libraries, a GPU or capability node that is absent, no device at all.
// Thread-safe: pure function of its arguments.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "host/device_node.h"
#include "host/mig_minors.h"
#include "toolkit/cdi_generate.h"
#include "toolkit/cdi_spec.h"

namespace gpuop::toolkit {

// The control device nodes, in the order nvidia-ctk lists them; only
// nvidiactl is required.
inline constexpr std::string_view kControlNodes[] = {"/dev/nvidia-modeset", "/dev/nvidia-uvm-tools",
                                                     "/dev/nvidia-uvm", "/dev/nvidiactl"};

struct CdiMigInput {
  unsigned index = 0;  // j in "<gpu>:<j>"
  unsigned gi_id = 0, ci_id = 0;
  std::string uuid;     // "MIG-..."
  std::string profile;  // "1g.10gb" (a "+gfx" profile also gets the DRI nodes)
};

struct CdiGpuInput {
  unsigned index = 0;
  int minor = -1;          // /dev/nvidia<minor>
  std::string uuid;        // "GPU-..."
  std::string pci_bus_id;  // sysfs form "0000:18:00.0"
  bool mig_enabled = false;
  std::vector<CdiMigInput> migs;
};

// The DRI nodes of one GPU (container paths, e.g. "/dev/dri/card1").
struct CdiDriNodes {
  std::string card, render;
};

struct CdiInputs {
  std::string driver_version;
  std::vector<CdiGpuInput> gpus;
  // Every device node found, by its path in the container ("/dev/nvidiactl",
  // "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21", "/dev/dri/card1").
  std::map<std::string, host::DeviceNodeInfo> device_nodes;
  host::MigMinors cap_minors;
  std::map<std::string, CdiDriNodes> dri_by_pci;  // by sysfs PCI address
  std::vector<std::string> libraries;             // paths inside the driver root
  std::string libcuda_dir;                        // directory of libcuda.so.<version>
  std::vector<std::string> binaries, firmware, sockets;
};

struct CdiBuildOptions {
  std::string vendor = "nvidia.com";
  std::string device_class = "gpu";
  std::vector<DeviceNameStrategy> name_strategies = {DeviceNameStrategy::kIndex,
                                                     DeviceNameStrategy::kUuid};
  bool no_all_device = false;
  // Adds the gid of each node that is not world read/write to additionalGids
  // (so non-root containers can open /dev/dri/card*). Off by default: it makes
  // the spec cdiVersion 0.7.0, which podman 4.3 and the CDI code vendored by
  // containerd 1.7 cannot read (they stop at 0.5.0/0.6.0), and compute needs
  // only the world-accessible nodes.
  bool additional_gids = false;
  std::string hook_path;          // absolute; required
  std::string driver_root = "/";  // prefixes library/binary/firmware/socket host paths
  std::string dev_root = "/";     // prefixes device node host paths
};

// Mount options of driver files and of IPC sockets.
inline const std::vector<std::string> kReadOnlyMountOptions = {"ro", "nosuid", "nodev", "rbind",
                                                               "rprivate"};
inline const std::vector<std::string> kSocketMountOptions = {"nosuid", "nodev", "rbind", "rprivate",
                                                             "noexec"};

Result<cdi::Spec> BuildSpec(const CdiInputs& inputs, const CdiBuildOptions& options);

// The names one device gets, one per strategy: GPU 0 → "0", "GPU-…", "gpu0";
// MIG device 1 of GPU 0 → "0:1", "MIG-…", "mig0:1".
std::vector<std::string> GpuDeviceNames(const CdiGpuInput& gpu,
                                        const std::vector<DeviceNameStrategy>& strategies);
std::vector<std::string> MigDeviceNames(const CdiGpuInput& gpu, const CdiMigInput& mig,
                                        const std::vector<DeviceNameStrategy>& strategies);

}  // namespace gpuop::toolkit

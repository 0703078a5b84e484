// Simulated host roots: the host file system a GPU node shows its node
// components, laid out under a directory for one simulated Machine.
//
// gpuop's node components find GPUs and the driver through paths under the
// host root (--host-root): device nodes in /dev, /proc/driver/nvidia*, PCI
// devices in /sys/bus/pci/devices, driver libraries found through
// /etc/ld.so.cache, binaries, firmware and IPC sockets. A simulated node gets
// the same tree in a directory, so that the toolkit, node discovery and the
// device plugin run unchanged against it (the host files seam).
//
// PlanHostRoot is pure: it computes every entry (path, type, mode, device
// numbers, content) from a Machine, so tests check the layout without I/O.
// WriteHostRoot creates the entries and runs the real ldconfig; it is
// idempotent (a second run leaves the same tree) and never touches anything
// outside the directory. Everything here is thread-compatible: plans are
// values; two writers must not target the same directory at once.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/host/elf_stub.h"
#include "sim/nvml/machine.h"

namespace gpuop::sim {

// Character device majors. 195 (nvidia) and 226 (drm) are fixed by the kernel;
// nvidia-uvm and nvidia-caps get dynamic majors at module load, so any free
// number is as real as another: these two are what /proc/devices reports.
inline constexpr unsigned kNvidiaMajor = 195;
inline constexpr unsigned kNvidiaModesetMinor = 254;
inline constexpr unsigned kNvidiaCtlMinor = 255;
inline constexpr unsigned kDrmMajor = 226;
inline constexpr unsigned kDrmRenderMinorBase = 128;
inline constexpr unsigned kNvidiaUvmMajor = 510;
inline constexpr unsigned kNvidiaCapsMajor = 511;

// MIG capability minors, numbered as the kernel module's nv-caps table does:
// minor 0 is the NVLink fabric-mgmt cap, 1 and 2 the MIG config and monitor
// caps, then for GPU minors 0..31 and GI ids 0..14 the GI access cap followed
// by the access caps of CI ids 0..7. /proc/driver/nvidia-caps/mig-minors lists
// the whole static table, whatever GPUs are present.
inline constexpr unsigned kMigCapGpus = 32;
inline constexpr unsigned kMigCapGisPerGpu = 15;
inline constexpr unsigned kMigCapCisPerGi = 8;
inline constexpr unsigned kMigConfigCapMinor = 1;
inline constexpr unsigned kMigMonitorCapMinor = 2;
// REQUIRES: gpu_minor < kMigCapGpus, gi < kMigCapGisPerGpu, ci < kMigCapCisPerGi.
unsigned MigGiCapMinor(unsigned gpu_minor, unsigned gi);
unsigned MigCiCapMinor(unsigned gpu_minor, unsigned gi, unsigned ci);
// The content of /proc/driver/nvidia-caps/mig-minors.
std::string MigMinorsFileContent();

// "00000000:18:00.0" (NVML) → "0000:18:00.0" (sysfs, procfs: 4-digit domain,
// lower case). Strict: anything else is an InvalidArgument.
Result<std::string> SysfsPciAddress(const std::string& nvml_bus_id);

// The PCI class code sysfs reports. Data-centre GPUs (A100, H100, H200, A30,
// T4, L4, L40S, ...) enumerate as 3D controllers (0x030200: no VGA legacy
// decoding); GeForce, TITAN, Quadro and RTX workstation boards as VGA
// controllers (0x030000). Node discovery must accept both.
uint32_t PciClassForModel(const GpuModel& model);

enum class HostEntryType {
  kDirectory,
  kFile,        // content holds the bytes
  kCharDevice,  // major, minor
  kSymlink,     // content holds the link target
  kSocket,      // a UNIX socket inode (bound, then closed)
  kCopy,        // content holds the path of a file on this machine to copy
};

struct HostEntry {
  HostEntryType type = HostEntryType::kFile;
  std::string path;  // absolute path inside the host root: "/dev/nvidia0"
  mode_t mode = 0644;
  unsigned major = 0, minor = 0;
  gid_t gid = 0;        // group owner, applied when running as root
  std::string content;  // see HostEntryType
  std::string soname;   // non-empty for driver libraries
};

struct HostRootOptions {
  // libnvml-sim.so to install as libnvidia-ml.so.<version>; empty: a stub.
  std::string nvml_sim_library;
  // libcuda-sim.so to install as libcuda.so.<version>; empty: a stub.
  std::string cuda_sim_library;
  // nvidia-smi-sim (sim/host/nvidia_smi_sim.c) to install as /usr/bin/nvidia-smi;
  // empty: a script that says it is a stand-in.
  std::string nvidia_smi;
  // Architecture of the stub libraries and of the multiarch library dir.
  uint16_t elf_machine = kElfMachineX86_64;
};

struct HostRootPlan {
  std::string lib_dir;             // "/usr/lib/x86_64-linux-gnu"
  std::vector<HostEntry> entries;  // in creation order
  size_t gpus = 0;

  size_t CountDeviceNodes() const;
  size_t CountLibraries() const;
  // The entry at `path`, or nullptr.
  const HostEntry* Find(const std::string& path) const;
};

// Every entry of the host root for `machine`. Fails on a GPU whose bus id does
// not parse, two GPUs with one minor, or an unsupported ELF machine.
Result<HostRootPlan> PlanHostRoot(const Machine& machine, const HostRootOptions& options);

// Whether an entry is part of the driver's installation (its libraries,
// tools and firmware), as opposed to the node (device nodes, procfs, sysfs).
bool IsDriverFile(const HostRootPlan& plan, const HostEntry& e);
// The plan of a node without an installed driver: every driver file, and what
// only a loaded module shows (/proc/driver/nvidia/version,
// /sys/module/nvidia/version), left out.
HostRootPlan WithoutDriverFiles(const HostRootPlan& plan);
// Only the driver's installation, with the loader configuration: the root a
// driver container sets up at /run/nvidia/driver.
HostRootPlan DriverFilesOnly(const HostRootPlan& plan);

struct HostRootResult {
  std::string root;  // the directory, made absolute
  size_t gpus = 0;
  size_t device_nodes = 0;
  size_t libraries = 0;
  bool device_nodes_are_files = false;  // mknod was not permitted (not root)
  std::string ld_cache;                 // <root>/etc/ld.so.cache
};

struct WriteHostRootOptions {
  // ldconfig to run; empty: /sbin/ldconfig, /usr/sbin/ldconfig, then $PATH.
  std::string ldconfig;
};

// Checks that `dir` may hold a host root: not empty and not "/" (in any
// spelling). Returns the absolute, normalized path; creates the directory.
Result<std::string> PrepareHostRootDir(const std::string& dir);

// Creates the plan's entries under `dir`, then writes <dir>/etc/ld.so.cache
// with `ldconfig -r <dir>`. Idempotent. Entries an earlier run made (listed in
// <dir>/.gpuop-host-root) that this plan lacks are removed, so a root can be
// re-laid for another machine; nothing else in `dir` is. When mknod is not
// permitted, device nodes become empty regular files and one warning is
// logged. Fails with a clear message when ldconfig cannot be found or fails.
Result<HostRootResult> WriteHostRoot(const std::string& dir, const HostRootPlan& plan,
                                     const WriteHostRootOptions& options = {});

// <directory of the running executable>/../lib/libnvml-sim.so when that file
// exists (the build and install layout), else "".
std::string NvmlSimBesideExecutable();
// The same for <...>/../lib/libcuda-sim.so.
std::string CudaSimBesideExecutable();
// The same for <...>/../lib/nvidia-smi-sim.
std::string NvidiaSmiSimBesideExecutable();

}  // namespace gpuop::sim

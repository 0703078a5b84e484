// The kernel's loaded modules, and unloading one: what the driver manager and
// the driver container need to tell whether the NVIDIA driver is loaded, which
// version, who holds it, and to unload it with rmmod's semantics (a module in
// use is refused, never forced).
//
// A seam between gpuop and the machine: SystemKernelModules is the real kernel (/proc/modules,
// /sys/module/nvidia/version, delete_module(2)); a simulated node's kernel
// (sim/nvml/sim_kernel.h) implements the same interface over the simulator's
// GPU state. The command line picks one, as it picks the NVML library; the
// components never know which.
//
// Thread-safety: implementations are thread-safe; ParseProcModules is pure.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::host {

struct KernelModule {
  std::string name;                  // "nvidia_uvm" (the kernel's spelling: '_', not '-')
  int64_t refcount = 0;              // users: other modules and open device files
  std::vector<std::string> used_by;  // modules that depend on it
  bool operator==(const KernelModule&) const = default;
};

// The NVIDIA driver's modules in the order they must be unloaded (users before
// the modules they use; `nvidia` last).
inline constexpr const char* kNvidiaModulesUnloadOrder[] = {
    "nvidia_modeset",   "nvidia_uvm", "nvidia_peermem", "nvidia_fs",
    "nvidia_vgpu_vfio", "gdrdrv",     "nvidia"};

class KernelModules {
 public:
  virtual ~KernelModules() = default;
  // The loaded modules.
  virtual Result<std::vector<KernelModule>> List() = 0;
  // Unloads one module. FailedPrecondition naming its users when it is in use
  // (EBUSY/EWOULDBLOCK), NotFound when it is not loaded.
  virtual Status Unload(const std::string& name) = 0;
  // The loaded `nvidia` module's version ("550.127.05"), nullopt when it is
  // not loaded.
  virtual Result<std::optional<std::string>> NvidiaVersion() = 0;
};

// /proc/modules: "name size refcount deps state address" per line, deps a
// comma-terminated list or "-". `origin` names the file in errors.
Result<std::vector<KernelModule>> ParseProcModules(std::string_view text,
                                                   const std::string& origin);

// The module called `name` in `modules`, or nullptr.
const KernelModule* FindModule(const std::vector<KernelModule>& modules, std::string_view name);

// The running kernel: `proc_root` + /proc/modules, `sys_root` +
// /sys/module/nvidia/version (both "/" on a node), delete_module(2) with
// O_NONBLOCK (never waits for users to go).
std::unique_ptr<KernelModules> SystemKernelModules(std::string proc_root = "/",
                                                   std::string sys_root = "/");

}  // namespace gpuop::host

// What the simulated driver knows, by its version, and what this process may
// do, by its environment: the differences a real node shows between driver
// branches and between a privileged and an unprivileged container.
//
// Driver branches (the number before the first dot of the version), from
// NVIDIA's NVML change log:
//   570  GPU instance profiles with graphics (+gfx): indices 0xA-0xC
//   575  profiles with all or none of the media engines (+me.all, -me): 0xD-0x10
//   595  the 3-slice graphics profile: 0x11
//   565  nvmlDeviceGetTemperatureV (absent from 550-branch libraries; the
//        change log does not list it, third-party reports place it at 565)
// A driver enumerates GI profile indices up to its header's
// NVML_GPU_INSTANCE_PROFILE_COUNT and answers INVALID_ARGUMENT past it.
//
// Environment of the process (read once, at nvmlInit):
//   GPUOP_SIM_MIG_PRIVILEGED  1: MIG management allowed; 0: denied; unset: as
//       the MIG config capability decides: in the container view
//       (GPUOP_SIM_VISIBLE=devnodes) the process may manage MIG only when
//       <GPUOP_SIM_DEV_DIR>/nvidia-caps/nvidia-cap1 exists (minor 1 is the
//       config capability, /proc/driver/nvidia/capabilities/mig/config);
//       the host view is privileged.
//   GPUOP_SIM_DEPRECATED      comma-separated NVML symbols that answer
//       NVML_ERROR_DEPRECATED (a later driver that dropped them).
//   GPUOP_SIM_DENY_GPUS       comma-separated machine GPU indices whose
//       handles the process may not open (NO_PERMISSION from
//       nvmlDeviceGetHandleByIndex; nvmlDeviceGetCount still counts them).
//   GPUOP_SIM_LIBCUDA         "absent": libcuda.so.1 cannot be loaded, so
//       nvmlSystemGetCudaDriverVersion(_v2) answer LIBRARY_NOT_FOUND.
//
// Pure functions plus one FromEnv adapter; all thread-safe.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>

#include "base/status.h"
#include "sim/nvml/visibility.h"

namespace gpuop::sim {

inline constexpr unsigned kBranchGfxProfiles = 570;
inline constexpr unsigned kBranchMediaProfiles = 575;
inline constexpr unsigned kBranch3SliceGfxProfile = 595;
inline constexpr unsigned kBranchTemperatureV = 565;

// How many GPU instance profile indices a driver of this version knows
// (0xA before 570, 0xD from 570, 0x11 from 575, 0x12 from 595). A version
// that is not a number counts as the newest.
unsigned GiProfileCountForDriver(std::string_view driver_version);

// Whether a driver of this version has nvmlDeviceGetTemperatureV.
bool DriverHasTemperatureV(std::string_view driver_version);

struct ProcessEnv {
  bool mig_privileged = true;
  std::set<std::string> deprecated;  // NVML symbol names
  std::set<unsigned> denied_gpus;    // machine GPU indices
  bool libcuda_absent = false;
};

// The path of the MIG config capability node under `dev_dir`.
std::string MigConfigCapPath(const std::string& dev_dir);

// Parses the variables above. `env` returns a variable's value or null;
// `exists` answers whether a path exists. Errors name the variable, the bad
// value and what is accepted.
Result<ProcessEnv> ParseProcessEnv(const std::function<const char*(const char*)>& env,
                                   const VisibilityConfig& visibility,
                                   const std::function<bool(const std::string&)>& exists);

// The same with the process environment and the real file system.
Result<ProcessEnv> ProcessEnvFromEnv();

}  // namespace gpuop::sim

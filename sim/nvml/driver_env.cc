#include "sim/nvml/driver_env.h"

#include <sys/stat.h>

#include <cstdlib>
#include <optional>

#include "base/strings.h"

namespace gpuop::sim {

unsigned GiProfileCountForDriver(std::string_view driver_version) {
  const unsigned branch = DriverBranch(driver_version);
  if (branch == 0 || branch >= kBranch3SliceGfxProfile) return 0x12;
  if (branch >= kBranchMediaProfiles) return 0x11;
  if (branch >= kBranchGfxProfiles) return 0xD;
  return 0xA;
}

bool DriverHasTemperatureV(std::string_view driver_version) {
  const unsigned branch = DriverBranch(driver_version);
  return branch == 0 || branch >= kBranchTemperatureV;
}

std::string MigConfigCapPath(const std::string& dev_dir) {
  return dev_dir + "/nvidia-caps/nvidia-cap1";
}

Result<ProcessEnv> ParseProcessEnv(const std::function<const char*(const char*)>& env,
                                   const VisibilityConfig& visibility,
                                   const std::function<bool(const std::string&)>& exists) {
  ProcessEnv out;
  auto value = [&](const char* name) -> std::optional<std::string> {
    const char* v = env(name);
    if (v == nullptr) return std::nullopt;
    return std::string(Trim(v));
  };

  const auto privileged = value("GPUOP_SIM_MIG_PRIVILEGED");
  if (privileged && *privileged != "0" && *privileged != "1") {
    return InvalidArgument("GPUOP_SIM_MIG_PRIVILEGED='" + *privileged +
                           "': use 1 (may manage MIG), 0 (may not), or unset it (the MIG "
                           "config capability node decides)");
  }
  if (privileged) {
    out.mig_privileged = *privileged == "1";
  } else {
    // Only the container view has a device directory of its own to look in.
    out.mig_privileged = !visibility.devnodes || exists(MigConfigCapPath(visibility.dev_dir));
  }

  if (const auto list = value("GPUOP_SIM_DEPRECATED")) {
    for (const std::string& name : Split(*list, ',')) {
      const std::string symbol(Trim(name));
      if (symbol.empty()) continue;
      if (!StartsWith(symbol, "nvml")) {
        return InvalidArgument("GPUOP_SIM_DEPRECATED: '" + symbol +
                               "' is not an NVML symbol; list names like "
                               "nvmlDeviceGetTemperature, separated by commas");
      }
      out.deprecated.insert(symbol);
    }
  }

  if (const auto list = value("GPUOP_SIM_DENY_GPUS")) {
    for (const std::string& item : Split(*list, ',')) {
      const std::string_view index = Trim(item);
      if (index.empty()) continue;
      auto n = ParseUint(index);
      if (!n || *n > 0xFFFF) {
        return InvalidArgument("GPUOP_SIM_DENY_GPUS: '" + std::string(index) +
                               "' is not a GPU index; list machine GPU indices like 0,3");
      }
      out.denied_gpus.insert(static_cast<unsigned>(*n));
    }
  }

  if (const auto libcuda = value("GPUOP_SIM_LIBCUDA")) {
    if (*libcuda != "absent" && *libcuda != "present") {
      return InvalidArgument("GPUOP_SIM_LIBCUDA='" + *libcuda +
                             "': use absent (libcuda.so.1 cannot be loaded) or present");
    }
    out.libcuda_absent = *libcuda == "absent";
  }
  return out;
}

Result<ProcessEnv> ProcessEnvFromEnv() {
  return ParseProcessEnv([](const char* name) { return std::getenv(name); }, VisibilityFromEnv(),
                         [](const std::string& path) {
                           struct stat st;
                           return ::stat(path.c_str(), &st) == 0;
                         });
}

}  // namespace gpuop::sim

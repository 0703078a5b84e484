// The validator's driver-ready file (<validations dir>/driver-ready, written by
// `gpuop validator` once the node's driver works): where that driver really
// is. One ClusterPolicy serves nodes whose driver comes in a container
// (/run/nvidia/driver) and nodes with a driver on the host (labelled
// nvidia.com/gpu.deploy.driver=pre-installed), so NVIDIA_DRIVER_ROOT as
// rendered is right for only one kind. NVIDIA's toolkit, device plugin and
// MIG manager source this file for the node's truth; gpuop's toolkit and MIG
// manager read it (its device plugin gets the driver through the CDI spec).
//
// The format is NVIDIA's, shell-sourceable KEY=VALUE lines: IS_HOST_DRIVER,
// NVIDIA_DRIVER_ROOT, DRIVER_ROOT_CTR_PATH, NVIDIA_DEV_ROOT, DEV_ROOT_CTR_PATH
// (paths as the host sees them, and as the consuming container mounts them).
// Pure parser plus one thin reader; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuop::host {

inline constexpr const char* kValidationsDir = "/run/nvidia/validations";
inline constexpr const char* kDriverReadyFile = "driver-ready";

struct DriverReady {
  bool host_driver = false;
  std::string driver_root;  // as the host sees it: "/" or /run/nvidia/driver
  std::string dev_root;     // where /dev is, as the host sees it
};

// Unknown keys, comments and blank lines are skipped; a missing or relative
// NVIDIA_DRIVER_ROOT is an InvalidArgument (a dev root defaults to it).
Result<DriverReady> ParseDriverReady(std::string_view text);

// <read_root><validations_dir>/driver-ready; nullopt while the validator has
// not written it. A file that does not parse is an error naming it.
Result<std::optional<DriverReady>> ReadDriverReady(const std::string& read_root,
                                                   const std::string& validations_dir);

// The driver root to use on this node: driver-ready's once the validator
// wrote one that parses, else `configured`.
std::string NodeDriverRoot(const std::string& read_root, const std::string& configured);

}  // namespace gpuop::host

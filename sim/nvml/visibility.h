// Which simulated GPUs a process may see, as a container sees them.
//
// On a real node a process in a container sees only the GPUs whose device
// nodes (/dev/nvidia<minor>) were given to it: the NVIDIA runtime or a CDI
// spec adds exactly those, and the driver enumerates nothing else. The
// simulator models this when GPUOP_SIM_VISIBLE=devnodes: a GPU is visible only
// when <GPUOP_SIM_DEV_DIR, default /dev>/nvidia<minor> exists. Unset, every GPU
// is visible (the host's view). Both libnvml-sim.so and libcuda-sim.so apply
// this rule at initialisation; libcuda-sim.so then applies CUDA_VISIBLE_DEVICES
// on top, like the real CUDA driver.
//
// Pure functions, plus FromEnv helpers that read the environment and the file
// system; all thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/nvml/machine.h"

namespace gpuop::sim {

struct VisibilityConfig {
  bool devnodes = false;         // GPUOP_SIM_VISIBLE=devnodes
  std::string dev_dir = "/dev";  // GPUOP_SIM_DEV_DIR (for tests)
};

// GPUOP_SIM_VISIBLE and GPUOP_SIM_DEV_DIR.
VisibilityConfig VisibilityFromEnv();

// Indices of m.gpus this process sees, in machine order. `exists` answers
// whether a path exists.
std::vector<unsigned> VisibleGpus(const Machine& m, const VisibilityConfig& config,
                                  const std::function<bool(const std::string&)>& exists);
// The same with the environment and the real file system.
std::vector<unsigned> VisibleGpusFromEnv(const Machine& m);

// CUDA_VISIBLE_DEVICES over `visible` (the machine indices above): a comma-
// separated list of ordinals into `visible` or GPU UUIDs (a unique prefix of
// "GPU-..." is enough). As with the real driver, the list is cut at the first
// entry that names no device or repeats one, and an empty value hides every
// GPU. Returns machine indices in the order the list gives them.
std::vector<unsigned> ApplyCudaVisibleDevices(const Machine& m,
                                              const std::vector<unsigned>& visible,
                                              std::string_view value);

}  // namespace gpuop::sim

// The node checks of the validator, each a pure core (what the inputs mean)
// plus a thin adapter (files, NVML, the API server):
//
//   driver   the driver's NVML loads from the driver root (the host's, or the
//            driver container's once it wrote .driver-ctr-ready) and sees GPUs;
//   toolkit  NVML loads inside this container (the runtime injected it);
//   plugin   the node's capacity shows nvidia.com/gpu or nvidia.com/mig-*.
//
// The CUDA and plugin workload pods are in workload.h. Every error says which
// check failed, why, and what to do.
//
// Thread-safety: pure functions and stateless adapters; callers may run them
// from any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>

#include "base/status.h"
#include "kube/client.h"
#include "validator/options.h"

namespace gpuop::validator {

struct DriverInfo {
  bool host_driver = true;
  std::string driver_root;      // as the host names it: HOST_ROOT or DRIVER_INSTALL_DIR
  std::string dev_root;         // where the device nodes are, as the host names it
  std::string driver_root_ctr;  // NVIDIA's container paths: "/host" or "/driver-root"
  std::string dev_root_ctr;
  std::string nvml_path;  // the libnvidia-ml.so.1 loaded, on this machine
  std::string driver_version;
  unsigned gpus = 0;
};

// driver-ready's content, NVIDIA's shell-sourceable KEY=VALUE lines:
// IS_HOST_DRIVER, NVIDIA_DRIVER_ROOT, DRIVER_ROOT_CTR_PATH, NVIDIA_DEV_ROOT,
// DEV_ROOT_CTR_PATH.
std::string DriverReadyContent(const DriverInfo& d);

// libnvidia-ml.so.1 under `read_root` (a root on this machine) through its
// etc/ld.so.cache (this machine's architecture), else the standard library
// directories. NotFound names the root.
Result<std::string> FindNvmlLibrary(const std::string& read_root);

// The driver check, once. Host driver first (NVML under the host root), then
// the driver container: FailedPrecondition while .driver-ctr-ready is absent;
// then NVML from the driver root must initialise and count at least one GPU.
Result<DriverInfo> CheckDriver(const Options& o);

// The toolkit check, once: NVML (o.nvml_library) loads in this container and
// counts at least one GPU. Returns the GPU count.
Result<unsigned> CheckToolkit(const Options& o);

// How many devices the node advertises for the device plugin check:
// MIG_STRATEGY mixed counts nvidia.com/mig-* (and whole GPUs, nvidia.com/gpu),
// single and none count nvidia.com/gpu. Capacity, as NVIDIA reads it.
int64_t PluginDeviceCount(const nlohmann::json& node, const std::string& mig_strategy);
// The resource the plugin workload pod asks one of: the first nvidia.com/mig-*
// with capacity under mixed, else nvidia.com/gpu.
std::string PluginWorkloadResource(const nlohmann::json& node, const std::string& mig_strategy);
// The message of a node that has none yet.
std::string PluginNotReadyMessage(const std::string& node, const std::string& mig_strategy);

// The plugin check: watches the Node until PluginDeviceCount >= 1 or
// plugin_retries × sleep_interval_seconds pass (DeadlineExceeded with the
// message), or `stop`. Returns the count.
Result<int64_t> WaitForPluginResources(kube::Client& client, const Options& o,
                                       std::stop_token stop);

}  // namespace gpuop::validator

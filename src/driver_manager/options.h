// The driver manager's settings, read from k8s-driver-manager's environment
// names so the operator's rendering, NVIDIA's chart values and users'
// driver.manager.env keep their meaning.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuop::driver_manager {

struct Options {
  std::string node_name;                            // NODE_NAME (required)
  std::string operator_namespace = "gpu-operator";  // OPERATOR_NAMESPACE
  // This pod (POD_NAME, else HOSTNAME): waited on after a host driver is found.
  std::string pod_name;
  bool enable_gpu_pod_eviction = true;      // ENABLE_GPU_POD_EVICTION
  bool enable_auto_drain = true;            // ENABLE_AUTO_DRAIN
  bool drain_use_force = false;             // DRAIN_USE_FORCE: evict pods without a controller
  bool drain_delete_emptydir_data = false;  // DRAIN_DELETE_EMPTYDIR_DATA
  std::string drain_pod_selector;           // DRAIN_POD_SELECTOR_LABEL
  // DRAIN_TIMEOUT_SECONDS (a Go duration, "300s"): eviction and drain, each.
  // Upstream's 0 means "no limit"; here it means kDefaultWait (every wait is
  // bounded).
  std::chrono::seconds drain_timeout{0};
  // GPUOP_OPERAND_WAIT_TIMEOUT: how long the paused operands' pods get to
  // leave the node (upstream: a fixed 5 minutes).
  std::chrono::seconds operand_wait_timeout{300};
  // After labelling a host driver: how long to wait for this pod's deletion.
  std::chrono::seconds host_driver_wait{60};
  std::string custom_pause_label;                  // NODE_LABEL_FOR_GPU_POD_EVICTION
  bool force_reinstall = false;                    // FORCE_REINSTALL: ignore the digest
  std::string driver_config_digest;                // DRIVER_CONFIG_DIGEST
  std::string driver_root = "/run/nvidia/driver";  // NVIDIA_DRIVER_ROOT
  // Where the driver container keeps nvidia-driver.state and
  // nvidia-driver.pid (the chart mounts the host's /run/nvidia there).
  std::string run_dir = "/run/nvidia";
  std::string host_root = "/";  // GPUOP_HOST_ROOT (--host-root): the host's / mounted

  // DRAIN_TIMEOUT_SECONDS, with 0 replaced by the bound.
  std::chrono::seconds EffectiveDrainTimeout() const;
};

inline constexpr std::chrono::seconds kDefaultWait{300};

// Overlays the variables set in `env` on `base`. A malformed value is an
// InvalidArgument naming the variable and the expected form; a missing
// NODE_NAME too.
Result<Options> OptionsFromEnv(const std::map<std::string, std::string>& env, Options base = {});

// A Go duration in whole units ("300s", "5m", "1h30m", "1500ms", "0s") or a
// bare count of seconds, rounded up to whole seconds. `name` is the variable, for
// the error.
Result<std::chrono::seconds> ParseDurationSeconds(std::string_view name, std::string_view value);

// "true"/"false" as strconv.ParseBool reads them (1, t, T, TRUE, True, ...).
Result<bool> ParseBoolEnv(std::string_view name, std::string_view value);

}  // namespace gpuop::driver_manager

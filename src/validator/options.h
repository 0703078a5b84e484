// The validator's settings, with NVIDIA's environment names and defaults
// (cmd/nvidia-validator): COMPONENT, WITH_WAIT, WITH_WORKLOAD,
// SLEEP_INTERVAL_SECONDS, OUTPUT_DIR, MIG_STRATEGY, METRICS_PORT, HOST_ROOT,
// DRIVER_INSTALL_DIR, NODE_NAME, OPERATOR_NAMESPACE, VALIDATOR_IMAGE,
// VALIDATOR_IMAGE_PULL_POLICY, VALIDATOR_IMAGE_PULL_SECRETS,
// VALIDATOR_RUNTIME_CLASS, plus gpuop's GPUOP_VALIDATOR_REQUIRE_CUDA.
// The file names under OUTPUT_DIR are NVIDIA's, so NVIDIA's images that wait
// on them work unchanged.
//
// Two roots are kept apart: `read_root` is where this process sees the host
// (gpuop's --host-root, /host in the operator's pods); `host_root` is NVIDIA's
// HOST_ROOT, the host's root as the host names it ("/"), written into
// driver-ready for the consumers that source it.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "host/driver_ready.h"

namespace gpuop::validator {

// Files under OUTPUT_DIR.
inline constexpr const char* kDriverCtrReadyFile = ".driver-ctr-ready";
using host::kDriverReadyFile;  // read by the toolkit and MIG manager (host/driver_ready.h)
inline constexpr const char* kToolkitReadyFile = "toolkit-ready";
inline constexpr const char* kCudaReadyFile = "cuda-ready";
inline constexpr const char* kPluginReadyFile = "plugin-ready";
inline constexpr const char* kDefaultOutputDir = "/run/nvidia/validations";
inline constexpr const char* kDefaultDriverInstallDir = "/run/nvidia/driver";

// Names NVIDIA's workload pods and the DaemonSet they copy from carry.
inline constexpr const char* kValidatorDaemonSet = "nvidia-operator-validator";
inline constexpr const char* kValidatorServiceAccount = "nvidia-operator-validator";
inline constexpr const char* kCudaPodPrefix = "nvidia-cuda-validator-";
inline constexpr const char* kCudaPodApp = "nvidia-cuda-validator";
inline constexpr const char* kPluginPodPrefix = "nvidia-device-plugin-validator-";
inline constexpr const char* kPluginPodApp = "nvidia-device-plugin-validator";
inline constexpr const char* kGpuResource = "nvidia.com/gpu";
inline constexpr const char* kMigResourcePrefix = "nvidia.com/mig-";

enum class Component { kMain, kDriver, kToolkit, kCuda, kPlugin, kMetrics };
// "driver" → kDriver; "" → kMain. InvalidArgument names the known ones.
Result<Component> ParseComponent(std::string_view name);
std::string ComponentName(Component c);
// The file a component's check writes ("" for kMain and kMetrics).
std::string ReadyFile(Component c);

struct Options {
  Component component = Component::kMain;
  bool with_wait = false;
  bool with_workload = true;
  // GPUOP_DEVICE_PLUGIN=false: no device plugin on the node (DRA allocates its
  // GPUs), so the CUDA workload pod requests no nvidia.com/gpu and asks the
  // runtime for every GPU, as NVIDIA's CUDA pod always does.
  bool device_plugin = true;
  int sleep_interval_seconds = 5;
  std::string output_dir;  // "" → <read_root>/run/nvidia/validations
  std::string mig_strategy = "single";
  int metrics_port = 0;
  std::string read_root = "/";  // --host-root
  std::string host_root = "/";  // HOST_ROOT
  std::string driver_install_dir = kDefaultDriverInstallDir;
  // The NVML the runtime injected into this container (toolkit check).
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string node_name;
  std::string namespace_;
  std::string pod_name;  // POD_NAME, else HOSTNAME: this pod, for its image
  std::string validator_image;
  std::string validator_image_pull_policy;
  std::vector<std::string> validator_image_pull_secrets;
  std::string validator_runtime_class;
  std::string require_cuda;  // passed to `gpuop cuda vector-add --require-cuda`
  // Bounds (× sleep_interval_seconds), NVIDIA's: 60 for the CUDA pod, 30 for
  // the device plugin's resources.
  int cuda_retries = 60;
  int plugin_retries = 30;

  // OUTPUT_DIR as used.
  std::string OutputDir() const;
};

// Options from the environment (NVIDIA's names); anything not set keeps its
// default. A malformed value (WITH_WAIT=maybe) is an InvalidArgument naming
// the variable.
Result<Options> OptionsFromEnv(const std::map<std::string, std::string>& env, Options base = {});

// "true", "1", "yes" → true; "false", "0", "no", "" → false (Go's strconv.ParseBool and more).
Result<bool> ParseBoolValue(std::string_view name, std::string_view value);

}  // namespace gpuop::validator

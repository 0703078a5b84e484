// The device plugin's configuration: the config file format v1 of NVIDIA's
// k8s-device-plugin (api/config/v1: `version`, `flags`, `resources`,
// `sharing`, `imex`), its environment variables and gpuop's CLI flags, merged
// with upstream's precedence: CLI flag > environment > file > defaults.
//
//   GPUOP_ASSIGN_OR_RETURN(Config c, ParseConfig(text, "config file /etc/dp.yaml"));
//   GPUOP_RETURN_IF_ERROR(ApplyEnv(env, &c));
//   GPUOP_RETURN_IF_ERROR(ApplyOverrides(flags, &c));
//   GPUOP_RETURN_IF_ERROR(ValidateConfig(c));   // checks that span the layers
// or all at once with ResolveConfig.
//
// Parsing is strict where upstream is lax: an unknown field is an error naming
// its full path (`flags.plugin.deviceListStrategyy: unknown field`), so a typo
// never silently falls back to a default. Every error starts with the origin
// and names the fix. Pure functions of their inputs (no file or env access);
// Config is a plain value. Thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::deviceplugin {

// The longest extended resource name the kubelet accepts, prefix included.
inline constexpr size_t kMaxResourceNameLength = 63;

enum class MigStrategy { kNone, kSingle, kMixed };
enum class DeviceIdStrategy { kUuid, kIndex };
enum class SharedAllocationPolicy { kDistributed, kPacked };

// Which ways Allocate passes the device list to the runtime (any subset, at
// least one): "envvar", "volume-mounts", "cdi-annotations", "cdi-cri".
struct DeviceListStrategy {
  bool envvar = true;
  bool volume_mounts = false;
  bool cdi_annotations = false;
  bool cdi_cri = false;

  bool AnyCdi() const { return cdi_annotations || cdi_cri; }
  // Only CDI strategies: Allocate then sets no env and no mounts.
  bool AllCdi() const { return AnyCdi() && !envvar && !volume_mounts; }
  bool operator==(const DeviceListStrategy&) const = default;
};

// "envvar,cdi-cri" (flag and env form) or the list form of the config file.
Result<DeviceListStrategy> ParseDeviceListStrategy(std::string_view csv);
Result<DeviceListStrategy> ParseDeviceListStrategy(const std::vector<std::string>& names);
Result<MigStrategy> ParseMigStrategy(std::string_view s);
Result<DeviceIdStrategy> ParseDeviceIdStrategy(std::string_view s);
Result<SharedAllocationPolicy> ParseSharedAllocationPolicy(std::string_view s);
std::string_view MigStrategyName(MigStrategy s);                    // "none", "single", "mixed"
std::string DeviceListStrategyString(const DeviceListStrategy& s);  // "envvar,cdi-cri"

// Which devices of a resource a sharing entry replicates: all (the default),
// the first `count`, or a list of GPU indexes "i", MIG indexes "i:j" and
// GPU-/MIG- UUIDs.
struct ReplicaDevices {
  bool all = true;
  int count = 0;
  std::vector<std::string> list;
  bool operator==(const ReplicaDevices&) const = default;
};

struct ReplicatedResource {
  std::string name;    // fully qualified: "nvidia.com/gpu"
  std::string rename;  // fully qualified, empty: keep the name
  ReplicaDevices devices;
  int replicas = 0;  // >= 2
  bool operator==(const ReplicatedResource&) const = default;
};

struct Sharing {
  enum class Kind { kNone, kTimeSlicing, kMps };
  Kind kind = Kind::kNone;
  bool rename_by_default = false;
  // Time-slicing defaults to false, MPS to true (upstream keeps MPS's
  // historical behaviour unless the file says otherwise).
  bool fail_requests_greater_than_one = false;
  std::vector<ReplicatedResource> resources;  // non-empty unless kNone
};

struct Config {
  // flags
  MigStrategy mig_strategy = MigStrategy::kNone;
  bool fail_on_init_error = true;
  std::string nvidia_driver_root = "/";
  std::string nvidia_dev_root;  // empty: the driver root (see DevRoot)
  std::string mps_root;         // required with MPS sharing
  bool gdrcopy = false, gds = false, mofed = false;
  bool use_node_feature_api = false;
  std::string device_discovery_strategy = "auto";
  // flags.plugin
  bool pass_device_specs = false;
  DeviceListStrategy device_list;
  DeviceIdStrategy id_strategy = DeviceIdStrategy::kUuid;
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
  std::string nvidia_ctk_path = "/usr/bin/nvidia-ctk";
  std::string container_driver_root = "/driver-root";
  SharedAllocationPolicy shared_policy = SharedAllocationPolicy::kDistributed;
  // flags.gfd: gfd's settings where no flag or environment variable gives
  // them (gfd::CompleteFromConfigFile); the plugin ignores them. The defaults
  // are gfd's own; output_file is unset unless the file names one, as gfd's
  // default depends on --host-root and the NodeFeature API.
  struct Gfd {
    bool oneshot = false, no_timestamp = false;
    std::string sleep_interval = "60s";  // ParseDuration's grammar
    std::optional<std::string> output_file;
    std::string machine_type_file = "/sys/class/dmi/id/product_name";
  } gfd;
  Sharing sharing;
  struct Imex {
    std::vector<int> channel_ids;  // [] or [0]
    bool required = false;
  } imex;

  // gpuop: the CDI kind the toolkit writes to /var/run/cdi/nvidia.yaml; the
  // CDI strategies name devices "<cdi_kind>=<UUID>".
  std::string cdi_kind = "nvidia.com/gpu";
  // Control nodes passed with pass_device_specs (container paths); the adapter
  // drops those absent on the host (nvidia-modeset often is).
  std::vector<std::string> control_device_nodes = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                                   "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};
  // Things accepted but ignored, one line each, for the caller to log.
  std::vector<std::string> warnings;

  const std::string& DevRoot() const {
    return nvidia_dev_root.empty() ? nvidia_driver_root : nvidia_dev_root;
  }
};

// Parses a config file (YAML or JSON) over the defaults. `origin` starts every
// error ("config file /etc/dp/config.yaml").
Result<Config> ParseConfig(std::string_view text, std::string_view origin);

// MIG_STRATEGY, FAIL_ON_INIT_ERROR, NVIDIA_DRIVER_ROOT, NVIDIA_DEV_ROOT,
// PASS_DEVICE_SPECS, DEVICE_LIST_STRATEGY, DEVICE_ID_STRATEGY,
// CDI_ANNOTATION_PREFIX, CONTAINER_DRIVER_ROOT, MPS_ROOT, NVIDIA_CTK_PATH,
// GDRCOPY_ENABLED, GDS_ENABLED, MOFED_ENABLED,
// SHARED_DEVICES_ALLOCATION_POLICY, IMEX_CHANNEL_IDS, IMEX_REQUIRED. An empty
// value counts as unset. Booleans as Go's strconv.ParseBool (true/1/t/...).
Status ApplyEnv(const std::map<std::string, std::string>& env, Config* c);

// The CLI flags gpuop's `device-plugin` command takes; nullopt: not given.
struct ConfigOverrides {
  std::optional<std::string> mig_strategy;
  std::optional<std::string> device_list_strategy;
  std::optional<std::string> device_id_strategy;
  std::optional<bool> pass_device_specs;
};
Status ApplyOverrides(const ConfigOverrides& o, Config* c);

// Checks of the merged result: MPS sharing needs an MPS root and no
// mig-strategy mixed.
Status ValidateConfig(const Config& c);

// ParseConfig (when file_text is given; defaults otherwise), ApplyEnv,
// ApplyOverrides, ValidateConfig.
Result<Config> ResolveConfig(const std::optional<std::string>& file_text, std::string_view origin,
                             const std::map<std::string, std::string>& env,
                             const ConfigOverrides& overrides);

}  // namespace gpuop::deviceplugin

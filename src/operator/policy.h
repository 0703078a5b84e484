// Policy: a ClusterPolicy's spec read into what the operator acts on, with
// NVIDIA's defaults filled in for what is absent (the CRD defaults some of
// them too, with the same values, so an object stored before it did reads
// the same), and the spec fields gpuop accepts but does not act on listed
// for status.ignoredFields: what a user turned on or named, not the "off"
// and empty values NVIDIA's chart writes into every ClusterPolicy.
//
// Components gpuop implements run gpuop's own image (one binary in one image:
// OperatorEnv::gpuop_image, which the Helm chart sets to the operator's own
// image). Their repository/image/version fields are reported as ignored
// unless they name NVIDIA's image of that component, at any version (every
// Helm-rendered ClusterPolicy names those). The driver runs the configured
// driver image.
//
// Thread-safety: pure functions over values.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "operator/upgrade.h"

namespace gpuop::op {

using Json = nlohmann::json;

// The components, in dependency order (the order they are reconciled and
// reported in status.components).
enum class Component {
  kDriver,
  kContainerToolkit,
  kOperatorValidator,
  kDevicePlugin,
  kDraDriver,
  kDcgmExporter,
  kGpuFeatureDiscovery,
  kMigManager,
  kNodeStatusExporter,
};
inline constexpr Component kAllComponents[] = {
    Component::kDriver,         Component::kContainerToolkit, Component::kOperatorValidator,
    Component::kDevicePlugin,   Component::kDraDriver,        Component::kDcgmExporter,
    Component::kGpuFeatureDiscovery, Component::kMigManager,  Component::kNodeStatusExporter,
};

// "device-plugin": the status name and the suffix of nvidia.com/gpu.deploy.<name>.
std::string ComponentName(Component c);
// "devicePlugin": the ClusterPolicy spec key.
std::string ComponentSpecKey(Component c);
// "nvidia-device-plugin-daemonset": the DaemonSet (and ServiceAccount) name,
// as NVIDIA's operator names them, so dashboards and runbooks keep working.
std::string ComponentDaemonSetName(Component c);
// "device-plugin": the gpuop subcommand, or "" for the driver container.
std::string ComponentSubcommand(Component c);

// What the operator's own environment supplies.
// Who finds the GPU nodes: Node Feature Discovery (its pci-10de labels), or
// gpuop's own node-discovery DaemonSet. kAuto: gpuop's, unless some node
// shows NFD's annotations (nfd.node.kubernetes.io/...).
enum class NodeDiscovery { kAuto, kAlways, kNever };

struct OperatorEnv {
  std::string namespace_ = "gpu-operator";
  std::string gpuop_image;            // e.g. ghcr.io/gpuop/gpuop:0.1.0 (GPUOP_IMAGE)
  std::string driver_image_fallback;  // DRIVER_IMAGE, when the spec names none
  NodeDiscovery node_discovery = NodeDiscovery::kAuto;  // --node-discovery
  // Beyond NVIDIA (opt-in, --validation-taint): GPU nodes carry
  // kValidationTaintKey until their validator is Ready (node_labels.h).
  bool validation_taint = false;
};

struct ComponentSpec {
  Component component = Component::kDriver;
  bool enabled = true;
  std::string image;              // resolved: repo/image:tag or repo/image@sha256:...
  std::string image_pull_policy;  // "" : IfNotPresent
  std::vector<std::string> image_pull_secrets;
  Json resources = Json::object();
  std::vector<std::string> args;
  Json env = Json::array();  // [{name, value|valueFrom}]
  bool host_network = false;  // hostNetwork
};

// The settings of one component's section beyond those every section has,
// read once by ParsePolicy with NVIDIA's defaults. An empty string counts
// as unset (NVIDIA's chart writes "" for what it leaves unset); a value of
// the wrong type is an error that names the field.

// spec.driver.
struct DriverSettings {
  std::string kernel_module_type = "auto";  // kernelModuleType
  struct {
    int64_t initial_delay_seconds = 60;
    int64_t period_seconds = 10;
    int64_t timeout_seconds = 60;
    int64_t failure_threshold = 120;
  } startup_probe;  // startupProbe
  // manager: the init container that makes way for the driver (it runs
  // gpuop's image whatever manager.repository/image/version say).
  struct {
    std::string image_pull_policy = "IfNotPresent";
    std::vector<std::string> image_pull_secrets;
    Json env = Json::array();
  } manager;
};

// spec.dcgmExporter.
struct DcgmExporterSettings {
  bool host_pid = false;                               // hostPID
  std::map<std::string, std::string> pod_labels;       // podLabels
  std::map<std::string, std::string> pod_annotations;  // podAnnotations
  // service: the metrics Service's type and internalTrafficPolicy ("": the
  // cluster's default).
  std::string service_type;
  std::string service_internal_traffic_policy;
};

struct DaemonSetsSpec {
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  Json tolerations = Json::array();  // replaces the default toleration when set
  bool tolerations_set = false;
  std::string priority_class_name = "system-node-critical";
  std::string update_strategy = "RollingUpdate";
  Json max_unavailable = "1";  // int or percentage string
  Json pod_security_context;   // null when unset
};

struct Policy {
  std::vector<ComponentSpec> components;  // every Component, in order
  DaemonSetsSpec daemonsets;
  std::string mig_strategy = "single";  // none|single|mixed
  bool cdi_enabled = true;
  bool psa_enabled = false;
  std::string runtime_class = "nvidia";
  std::string default_runtime = "containerd";
  std::string host_root_fs = "/";
  std::string driver_install_dir = "/run/nvidia/driver";
  std::string kubelet_root_dir = "/var/lib/kubelet";
  std::string toolkit_install_dir = "/usr/local/nvidia";
  std::string device_plugin_config_name;     // ConfigMap of named configs; "" none
  std::string device_plugin_config_default;  // used without a node label
  std::string mig_manager_config_name = "default-mig-parted-config";
  std::string mig_manager_config_default = "all-disabled";
  std::string dcgm_exporter_config_name;  // ConfigMap with the counters CSV; "" built-in
  // draDriver.enabled (gpuop's key; NVIDIA has DRA only in its GPUCluster):
  // GPUs are allocated through DRA, so the device plugin is not deployed
  // even when devicePlugin.enabled says so (a GPU advertised both ways would
  // be handed out twice). docs/dra.md.
  bool dra_replaces_device_plugin = false;
  upgrade::UpgradePolicy driver_upgrade;  // spec.driver.upgradePolicy
  DriverSettings driver;
  DcgmExporterSettings dcgm_exporter;
  // spec.validator.<check>.env for the checks driver, toolkit, cuda and
  // plugin: each check's own variables, after the validator's.
  std::map<std::string, Json> validator_check_env;
  std::string device_plugin_mps_root;          // spec.devicePlugin.mps.root; "" none
  std::string mig_manager_gpu_clients_config;  // spec.migManager.gpuClientsConfig.name
  // spec paths set by the user that gpuop accepts but does not act on.
  std::vector<std::string> ignored_fields;

  const ComponentSpec& Get(Component c) const;
  bool Enabled(Component c) const { return Get(c).enabled; }
};

// Reads a ClusterPolicy object (the whole JSON). Errors name the field and
// the fix: an image that cannot be resolved, a bad mig.strategy, a setting
// of the wrong type.
Result<Policy> ParsePolicy(const Json& cluster_policy, const OperatorEnv& env);

// Which of several ClusterPolicies is active: the oldest creationTimestamp,
// the lower name on a tie (NVIDIA's rule). Returns its index; -1 for none.
int ActivePolicyIndex(const std::vector<Json>& cluster_policies);

}  // namespace gpuop::op

#include "operator/policy.h"

#include <algorithm>
#include <string_view>
#include <tuple>

#include "base/json_field.h"
#include "base/strings.h"

namespace gpuop::op {
namespace {

struct ComponentInfo {
  const char* name;
  const char* spec_key;
  const char* daemonset;
  const char* subcommand;
  bool default_enabled;
};

// NVIDIA's DaemonSet names, so `kubectl -n gpu-operator get ds` reads the same.
ComponentInfo Info(Component c) {
  switch (c) {
    case Component::kDriver:
      return {"driver", "driver", "nvidia-driver-daemonset", "", true};
    case Component::kContainerToolkit:
      return {"container-toolkit", "toolkit", "nvidia-container-toolkit-daemonset", "toolkit",
              true};
    case Component::kOperatorValidator:
      return {"operator-validator", "validator", "nvidia-operator-validator", "validator", true};
    case Component::kDevicePlugin:
      return {"device-plugin", "devicePlugin", "nvidia-device-plugin-daemonset", "device-plugin",
              true};
    case Component::kDraDriver:
      // The app label k8s-driver-manager looks for (it drains the DRA
      // plugin before a driver reload).
      return {"dra-driver", "draDriver", "nvidia-dra-driver-kubelet-plugin", "dra-plugin", false};
    case Component::kDcgmExporter:
      return {"dcgm-exporter", "dcgmExporter", "nvidia-dcgm-exporter", "exporter", true};
    case Component::kGpuFeatureDiscovery:
      return {"gpu-feature-discovery", "gfd", "gpu-feature-discovery", "gfd", true};
    case Component::kMigManager:
      return {"mig-manager", "migManager", "nvidia-mig-manager", "mig-manager", true};
    case Component::kNodeStatusExporter:
      return {"node-status-exporter", "nodeStatusExporter", "nvidia-node-status-exporter",
              "node-status-exporter", false};
  }
  return {"unknown", "unknown", "unknown", "", false};
}

// repository/image:version, repository/image@sha256:... for a digest, or the
// image verbatim when it is a full reference on its own.
std::string ResolveImage(const Json& section) {
  std::string repository = StringField(section, "repository");
  std::string image = StringField(section, "image");
  std::string version = StringField(section, "version");
  if (image.empty()) return "";
  if (repository.empty() && version.empty()) return image;
  std::string ref = repository.empty() ? image : repository + "/" + image;
  if (version.empty()) return ref;
  return ref + (StartsWith(version, "sha256:") ? "@" : ":") + version;
}

// The value at a dotted path under obj ("upgradePolicy.autoUpgrade"), or null.
const Json& FieldAt(const Json& obj, std::string_view path) {
  const Json* v = &obj;
  for (const std::string& key : Split(path, '.')) v = &Field(*v, key.c_str());
  return *v;
}

// Whether a field turns something on or names something: true, a non-empty
// string, list or map, or a number. false, "", [], {} and null are NVIDIA's
// chart's "not set" (it writes `configMapName: ""` and the like).
bool IsSet(const Json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  if (v.is_array() || v.is_object()) return !v.empty();
  return !v.is_null();
}

// Sections gpuop accepts but does not act on: reported when switched on.
constexpr const char* kIgnoredSections[] = {"dcgm", "gds", "gdrcopy", "psp"};
// Sandbox and vGPU components only matter with sandboxWorkloads.enabled.
constexpr const char* kSandboxSections[] = {
    "vfioManager", "sandboxDevicePlugin", "kataSandboxDevicePlugin",
    "vgpuManager", "vgpuDeviceManager",   "kataManager",
    "ccManager"};

// Fields of sections gpuop acts on that turn on or name something gpuop does
// not implement: reported when set (IsSet).
struct IgnoredField {
  const char* section;
  const char* path;
};
constexpr IgnoredField kIgnoredFields[] = {
    {"operator", "metrics.serviceMonitor.enabled"},
    {"driver", "useNvidiaDriverCRD"},
    {"driver", "usePrecompiled"},
    {"driver", "useOpenKernelModules"},
    {"driver", "secretEnv"},
    {"driver", "repoConfig.configMapName"},
    {"driver", "certConfig.name"},
    {"driver", "licensingConfig.configMapName"},
    {"driver", "licensingConfig.secretName"},
    {"driver", "kernelModuleConfig.name"},
    {"driver", "virtualTopology.config"},
    {"driver", "rdma.enabled"},
    {"driver", "livenessProbe"},
    {"driver", "readinessProbe"},
    {"dcgmExporter", "serviceMonitor.enabled"},
    {"dcgmExporter", "enablePodLabels"},
    {"dcgmExporter", "enablePodUID"},
    {"dcgmExporter", "podLabelAllowlistRegex"},
    {"dcgmExporter", "hpcJobMapping.enabled"},
    {"dcgmExporter", "annotations"},
    {"cdi", "nriPluginEnabled"},
};

// NVIDIA's image of a component gpuop runs with its own image. NVIDIA's
// chart names it in every ClusterPolicy it renders, so it is replaced
// without a word, whatever its version (the version only picks one of
// NVIDIA's builds of what gpuop replaces as a whole). Another repository or
// image (a mirror, a fork) is reported: that image will not run.
struct NvidiaImage {
  const char* repository;
  const char* image;
};
constexpr NvidiaImage kNvidiaDriverManagerImage = {"nvcr.io/nvidia/cloud-native",
                                                   "k8s-driver-manager"};

NvidiaImage NvidiaImageOf(Component c) {
  switch (c) {
    case Component::kContainerToolkit:
      return {"nvcr.io/nvidia/k8s", "container-toolkit"};
    case Component::kOperatorValidator:
    case Component::kNodeStatusExporter:
      return {"nvcr.io/nvidia", "gpu-operator"};
    case Component::kDevicePlugin:
    case Component::kGpuFeatureDiscovery:
      return {"nvcr.io/nvidia", "k8s-device-plugin"};
    case Component::kDcgmExporter:
      return {"nvcr.io/nvidia/k8s", "dcgm-exporter"};
    case Component::kMigManager:
      return {"nvcr.io/nvidia/cloud-native", "k8s-mig-manager"};
    case Component::kDraDriver:
      return {"nvcr.io/nvidia", "dra-driver-nvidia-gpu"};
    case Component::kDriver:
      break;
  }
  return {"", ""};
}

void AddImageFieldsUnlessNvidias(const Json& section, const std::string& path,
                                 const NvidiaImage& nvidia, std::vector<std::string>& ignored) {
  std::string repository = StringField(section, "repository");
  std::string image = StringField(section, "image");
  std::string version = StringField(section, "version");
  if (repository == nvidia.repository && image == nvidia.image) return;
  if (!repository.empty()) ignored.push_back(path + ".repository");
  if (!image.empty()) ignored.push_back(path + ".image");
  if (!version.empty()) ignored.push_back(path + ".version");
}

std::vector<std::string> IgnoredFields(const Json& spec) {
  std::vector<std::string> ignored;
  for (const char* section : kIgnoredSections) {
    const Json& s = Field(spec, section);
    if (BoolField(s, "enabled", false))
      ignored.push_back(std::string("spec.") + section + ".enabled");
  }
  const Json& sandbox = Field(spec, "sandboxWorkloads");
  if (BoolField(sandbox, "enabled", false)) {
    ignored.push_back("spec.sandboxWorkloads.enabled");
    for (const char* section : kSandboxSections) {
      if (BoolField(Field(spec, section), "enabled", false)) {
        ignored.push_back(std::string("spec.") + section + ".enabled");
      }
    }
  }
  for (const IgnoredField& f : kIgnoredFields) {
    if (IsSet(FieldAt(Field(spec, f.section), f.path))) {
      ignored.push_back(std::string("spec.") + f.section + "." + f.path);
    }
  }
  // gpuop's own components (and the driver manager) run gpuop's image,
  // whatever the spec names.
  AddImageFieldsUnlessNvidias(Field(Field(spec, "driver"), "manager"), "spec.driver.manager",
                              kNvidiaDriverManagerImage, ignored);
  for (Component c : kAllComponents) {
    if (c == Component::kDriver) continue;
    AddImageFieldsUnlessNvidias(Field(spec, Info(c).spec_key),
                                std::string("spec.") + Info(c).spec_key, NvidiaImageOf(c), ignored);
  }
  return ignored;
}

Result<ComponentSpec> ParseComponent(Component c, const Json& spec, const OperatorEnv& env) {
  ComponentInfo info = Info(c);
  const Json& section = Field(spec, info.spec_key);
  ComponentSpec out;
  out.component = c;
  // The validator gates every other component on a node: it cannot be off.
  out.enabled = c == Component::kOperatorValidator
                    ? true
                    : BoolField(section, "enabled", info.default_enabled);
  out.image_pull_policy = StringField(section, "imagePullPolicy", "IfNotPresent");
  if (const Json& secrets = Field(section, "imagePullSecrets"); secrets.is_array()) {
    for (const Json& s : secrets) {
      if (s.is_string()) out.image_pull_secrets.push_back(s.get<std::string>());
    }
  }
  if (const Json& r = Field(section, "resources"); r.is_object()) out.resources = r;
  if (const Json& args = Field(section, "args"); args.is_array()) {
    for (const Json& a : args) {
      if (a.is_string()) out.args.push_back(a.get<std::string>());
    }
  }
  if (const Json& e = Field(section, "env"); e.is_array()) out.env = e;
  GPUOP_RETURN_IF_ERROR(
      ReadBool(section, "hostNetwork", std::string("spec.") + info.spec_key, &out.host_network));

  if (c == Component::kDriver) {
    out.image = ResolveImage(section);
    if (out.image.empty()) out.image = env.driver_image_fallback;
    if (out.image.empty() && out.enabled) {
      return InvalidArgument(
          "spec.driver: no driver image: set spec.driver.repository, image and version, or "
          "DRIVER_IMAGE in the operator's environment (or spec.driver.enabled=false where nodes "
          "have a host driver)");
    }
  } else {
    out.image = env.gpuop_image;
    if (out.image.empty() && out.enabled) {
      return InvalidArgument(std::string("spec.") + info.spec_key +
                             ": the operator does not know gpuop's image: set GPUOP_IMAGE in "
                             "the operator's environment (the Helm chart does)");
    }
  }
  return out;
}

// A container's extra variables: [{name, value|valueFrom}] (render.cc
// keeps only the EnvVar fields of each).
Status ReadEnv(const Json& obj, const std::string& path, Json* out) {
  const Json& v = Field(obj, "env");
  if (v.is_null()) return Status::Ok();
  if (!v.is_array()) {
    return InvalidArgument(path + ".env: want a list of {name, value} variables, got " + v.dump());
  }
  *out = v;
  return Status::Ok();
}

// The component settings beyond the common fields (policy.h).
Status ReadComponentSettings(const Json& spec, Policy& p) {
  const Json& driver = Field(spec, "driver");
  GPUOP_RETURN_IF_ERROR(
      ReadNonEmptyString(driver, "kernelModuleType", "spec.driver", &p.driver.kernel_module_type));
  const Json& probe = Field(driver, "startupProbe");
  const std::string probe_path = "spec.driver.startupProbe";
  auto& sp = p.driver.startup_probe;
  GPUOP_RETURN_IF_ERROR(ReadWholeNumber(probe, "initialDelaySeconds", probe_path,
                                        &sp.initial_delay_seconds, "seconds"));
  GPUOP_RETURN_IF_ERROR(
      ReadWholeNumber(probe, "periodSeconds", probe_path, &sp.period_seconds, "seconds"));
  GPUOP_RETURN_IF_ERROR(
      ReadWholeNumber(probe, "timeoutSeconds", probe_path, &sp.timeout_seconds, "seconds"));
  GPUOP_RETURN_IF_ERROR(
      ReadWholeNumber(probe, "failureThreshold", probe_path, &sp.failure_threshold));
  const Json& manager = Field(driver, "manager");
  const std::string manager_path = "spec.driver.manager";
  GPUOP_RETURN_IF_ERROR(ReadNonEmptyString(manager, "imagePullPolicy", manager_path,
                                           &p.driver.manager.image_pull_policy));
  GPUOP_RETURN_IF_ERROR(ReadStringList(manager, "imagePullSecrets", manager_path,
                                       &p.driver.manager.image_pull_secrets));
  GPUOP_RETURN_IF_ERROR(ReadEnv(manager, manager_path, &p.driver.manager.env));

  const Json& dcgm = Field(spec, "dcgmExporter");
  const std::string dcgm_path = "spec.dcgmExporter";
  GPUOP_RETURN_IF_ERROR(ReadBool(dcgm, "hostPID", dcgm_path, &p.dcgm_exporter.host_pid));
  GPUOP_RETURN_IF_ERROR(ReadStringMap(dcgm, "podLabels", dcgm_path, &p.dcgm_exporter.pod_labels));
  GPUOP_RETURN_IF_ERROR(
      ReadStringMap(dcgm, "podAnnotations", dcgm_path, &p.dcgm_exporter.pod_annotations));
  const Json& service = Field(dcgm, "service");
  GPUOP_RETURN_IF_ERROR(
      ReadNonEmptyString(service, "type", dcgm_path + ".service", &p.dcgm_exporter.service_type));
  GPUOP_RETURN_IF_ERROR(ReadNonEmptyString(service, "internalTrafficPolicy", dcgm_path + ".service",
                                           &p.dcgm_exporter.service_internal_traffic_policy));

  const Json& validator = Field(spec, "validator");
  for (const char* check : {"driver", "toolkit", "cuda", "plugin"}) {
    Json env = Json::array();
    GPUOP_RETURN_IF_ERROR(
        ReadEnv(Field(validator, check), std::string("spec.validator.") + check, &env));
    if (!env.empty()) p.validator_check_env[check] = std::move(env);
  }
  GPUOP_RETURN_IF_ERROR(ReadNonEmptyString(Field(Field(spec, "devicePlugin"), "mps"), "root",
                                           "spec.devicePlugin.mps", &p.device_plugin_mps_root));
  GPUOP_RETURN_IF_ERROR(ReadNonEmptyString(Field(Field(spec, "migManager"), "gpuClientsConfig"),
                                           "name", "spec.migManager.gpuClientsConfig",
                                           &p.mig_manager_gpu_clients_config));
  return Status::Ok();
}

}  // namespace

std::string ComponentName(Component c) { return Info(c).name; }
std::string ComponentSpecKey(Component c) { return Info(c).spec_key; }
std::string ComponentDaemonSetName(Component c) { return Info(c).daemonset; }
std::string ComponentSubcommand(Component c) { return Info(c).subcommand; }

const ComponentSpec& Policy::Get(Component c) const {
  for (const ComponentSpec& s : components) {
    if (s.component == c) return s;
  }
  static const ComponentSpec kDisabled = [] {
    ComponentSpec s;
    s.enabled = false;
    return s;
  }();
  return kDisabled;
}

Result<Policy> ParsePolicy(const Json& cluster_policy, const OperatorEnv& env) {
  const Json& spec = Field(cluster_policy, "spec");
  Policy p;
  for (Component c : kAllComponents) {
    GPUOP_ASSIGN_OR_RETURN(ComponentSpec cs, ParseComponent(c, spec, env));
    p.components.push_back(std::move(cs));
  }
  for (ComponentSpec& cs : p.components) {
    if (cs.component == Component::kDevicePlugin && cs.enabled &&
        BoolField(Field(spec, "draDriver"), "enabled", false)) {
      cs.enabled = false;
      p.dra_replaces_device_plugin = true;
    }
  }

  const Json& ds = Field(spec, "daemonsets");
  p.daemonsets.labels = StringMap(Field(ds, "labels"));
  p.daemonsets.annotations = StringMap(Field(ds, "annotations"));
  if (const Json& t = Field(ds, "tolerations"); t.is_array()) {
    p.daemonsets.tolerations = t;
    p.daemonsets.tolerations_set = true;
  }
  p.daemonsets.priority_class_name =
      StringField(ds, "priorityClassName", p.daemonsets.priority_class_name);
  p.daemonsets.update_strategy = StringField(ds, "updateStrategy", p.daemonsets.update_strategy);
  if (p.daemonsets.update_strategy != "RollingUpdate" &&
      p.daemonsets.update_strategy != "OnDelete") {
    return InvalidArgument("spec.daemonsets.updateStrategy \"" + p.daemonsets.update_strategy +
                           "\": must be RollingUpdate or OnDelete");
  }
  if (const Json& mu = Field(Field(ds, "rollingUpdate"), "maxUnavailable");
      mu.is_string() || mu.is_number_integer()) {
    p.daemonsets.max_unavailable = mu;
  }
  if (const Json& psc = Field(ds, "podSecurityContext"); psc.is_object()) {
    p.daemonsets.pod_security_context = psc;
  }

  p.mig_strategy = StringField(Field(spec, "mig"), "strategy", p.mig_strategy);
  if (p.mig_strategy != "none" && p.mig_strategy != "single" && p.mig_strategy != "mixed") {
    return InvalidArgument("spec.mig.strategy \"" + p.mig_strategy +
                           "\": must be none, single or mixed");
  }
  p.cdi_enabled = BoolField(Field(spec, "cdi"), "enabled", p.cdi_enabled);
  p.psa_enabled = BoolField(Field(spec, "psa"), "enabled", p.psa_enabled);
  const Json& operator_spec = Field(spec, "operator");
  p.runtime_class = StringField(operator_spec, "runtimeClass", p.runtime_class);
  p.default_runtime = StringField(operator_spec, "defaultRuntime", p.default_runtime);
  const Json& host_paths = Field(spec, "hostPaths");
  p.host_root_fs = StringField(host_paths, "rootFS", p.host_root_fs);
  p.driver_install_dir = StringField(host_paths, "driverInstallDir", p.driver_install_dir);
  p.kubelet_root_dir = StringField(host_paths, "kubeletRootDir", p.kubelet_root_dir);
  p.toolkit_install_dir = StringField(Field(spec, "toolkit"), "installDir", p.toolkit_install_dir);

  const Json& dp_config = Field(Field(spec, "devicePlugin"), "config");
  p.device_plugin_config_name = StringField(dp_config, "name");
  p.device_plugin_config_default = StringField(dp_config, "default");
  const Json& mig_config = Field(Field(spec, "migManager"), "config");
  p.mig_manager_config_name = StringField(mig_config, "name", p.mig_manager_config_name);
  p.mig_manager_config_default = StringField(mig_config, "default", p.mig_manager_config_default);
  p.dcgm_exporter_config_name = StringField(Field(Field(spec, "dcgmExporter"), "config"), "name");

  auto upgrade_policy = upgrade::ParseUpgradePolicy(Field(Field(spec, "driver"), "upgradePolicy"));
  if (!upgrade_policy.ok()) return upgrade_policy.status();
  p.driver_upgrade = std::move(upgrade_policy).value();
  GPUOP_RETURN_IF_ERROR(ReadComponentSettings(spec, p));

  p.ignored_fields = IgnoredFields(spec);
  return p;
}

int ActivePolicyIndex(const std::vector<Json>& cluster_policies) {
  int best = -1;
  for (size_t i = 0; i < cluster_policies.size(); ++i) {
    const Json& meta = Field(cluster_policies[i], "metadata");
    // RFC 3339 timestamps in UTC compare as strings.
    auto key = std::make_tuple(StringField(meta, "creationTimestamp"), StringField(meta, "name"));
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const Json& best_meta = Field(cluster_policies[best], "metadata");
    auto best_key = std::make_tuple(StringField(best_meta, "creationTimestamp"),
                                    StringField(best_meta, "name"));
    if (key < best_key) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace gpuop::op

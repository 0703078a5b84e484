#include "operator/render.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <utility>

#include "base/json_field.h"
#include "base/strings.h"
#include "kube/object.h"
#include "operator/node_labels.h"

namespace gpuop::op {
namespace {

using kube::Resource;
namespace resources = kube::resources;

// ---------------------------------------------------------------------------
// Paths.

// /host<host_path>: where gpuop's containers see a host path.
std::string UnderHostRoot(std::string host_path) {
  while (host_path.size() > 1 && host_path.back() == '/') host_path.pop_back();
  if (host_path.empty() || host_path == "/") return kContainerHostRoot;
  return std::string(kContainerHostRoot) + host_path;
}

// The driver's root as the host sees it: the driver container's, or the host's.
std::string DriverRoot(const Policy& p) {
  return p.Enabled(Component::kDriver) ? p.driver_install_dir : "/";
}

// ---------------------------------------------------------------------------
// Metadata, RBAC and the hash.

Json StandardLabels(const std::string& component) {
  return Json{{kManagedByLabel, kManagedByValue},
              {kPartOfLabel, kManagedByValue},
              {kComponentLabel, component}};
}

Json Metadata(const RenderInput& in, const std::string& component, const std::string& name,
              bool namespaced) {
  Json meta{{"name", name}, {"labels", StandardLabels(component)}};
  if (namespaced) meta["namespace"] = in.env.namespace_;
  meta["ownerReferences"] = Json::array({kube::ControllerReference(in.owner)});
  return meta;
}

RenderedObject Finish(const Resource& resource, Json object) {
  std::string hash = ObjectHash(object);
  object["metadata"]["annotations"][kLastAppliedHashAnnotation] = hash;
  return {resource, std::move(object)};
}

struct Rule {
  std::string group;  // "" core
  std::vector<std::string> resources;
  std::vector<std::string> verbs;
};

struct Rbac {
  std::vector<Rule> cluster;     // ClusterRole
  std::vector<Rule> namespaced;  // Role in the operator's namespace
};

Json RulesJson(const std::vector<Rule>& rules) {
  Json out = Json::array();
  for (const Rule& r : rules) {
    out.push_back(Json{
        {"apiGroups", Json::array({r.group})}, {"resources", r.resources}, {"verbs", r.verbs}});
  }
  return out;
}

// Least privilege: exactly what each component's process asks the API for.
Rbac RbacFor(Component c) {
  const std::vector<std::string> kRead = {"get", "list", "watch"};
  const std::vector<std::string> kReadPatch = {"get", "list", "watch", "patch"};
  switch (c) {
    case Component::kDriver:
      // driver-manager: cordon/label its node, watch the pods on it (its own
      // included) and evict GPU pods anywhere, those holding gpu.nvidia.com
      // claims (any namespace) included; Events about its Node go to the
      // default namespace.
      return {.cluster = {{"", {"nodes"}, kReadPatch},
                          {"", {"pods"}, {"get", "list", "watch"}},
                          {"", {"pods/eviction"}, {"create"}},
                          {"resource.k8s.io", {"resourceclaims"}, {"get", "list"}},
                          {"", {"events"}, {"create", "patch"}}},
              .namespaced = {}};
    case Component::kContainerToolkit:
      // Its preStop: whether its own DaemonSet stays (node-cleanup).
      return {.cluster = {},
              .namespaced = {{"", {"pods"}, {"get"}}, {"apps", {"daemonsets"}, {"get"}}}};
    case Component::kDcgmExporter:
      return {};  // no API access: GPUs from NVML, pods from the kubelet's pod-resources
    case Component::kNodeStatusExporter:
      // Its node's allocatable GPUs (the device plugin's metric).
      return {.cluster = {{"", {"nodes"}, {"get"}}}, .namespaced = {}};
    case Component::kOperatorValidator:
      // Its node's capacity (plugin check, watched); the CUDA and plugin
      // workload pods it creates, watches and deletes in its namespace; the
      // DaemonSet whose owner and tolerations those pods copy.
      return {.cluster = {{"", {"nodes"}, kRead}},
              .namespaced = {{"", {"pods"}, {"get", "list", "watch", "create", "delete"}},
                             {"apps", {"daemonsets"}, {"get"}}}};
    case Component::kDevicePlugin:
      // Its node's device-plugin.config label (an informer); the named
      // configs are files (the ConfigMap mounted by the kubelet).
      return {.cluster = {{"", {"nodes"}, {"list", "watch"}}}, .namespaced = {}};
    case Component::kDraDriver:
      // The claims it prepares (any namespace); its node's ResourceSlices,
      // owned by its Node.
      return {.cluster = {{"resource.k8s.io", {"resourceclaims"}, {"get"}},
                          {"resource.k8s.io",
                           {"resourceslices"},
                           {"get", "list", "watch", "create", "update", "delete"}},
                          {"", {"nodes"}, {"get"}}},
              .namespaced = {}};
    case Component::kGpuFeatureDiscovery:
      // Its node's labels: read, then patched.
      return {.cluster = {{"", {"nodes"}, {"get", "patch"}}},
              .namespaced = {{"nfd.k8s-sigs.io",
                              {"nodefeatures"},
                              {"get", "list", "watch", "create", "update", "patch"}}}};
    case Component::kMigManager:
      // Events about a Node land in the "default" namespace, hence cluster-wide.
      return {.cluster = {{"", {"nodes"}, kReadPatch},
                          {"", {"pods"}, {"list", "watch"}},
                          {"", {"events"}, {"create", "patch"}}},
              .namespaced = {{"", {"pods"}, {"delete"}}}};  // its config: a mounted file
  }
  return {};
}

// ServiceAccount, ClusterRole + binding, Role + binding (when needed).
void AppendIdentity(const RenderInput& in, Component c, std::vector<RenderedObject>& out) {
  const std::string component = ComponentName(c);
  const std::string sa = ComponentDaemonSetName(c);
  const std::string role = "gpuop-" + component;
  const std::string rbac_api = "rbac.authorization.k8s.io/v1";
  Json subject{{"kind", "ServiceAccount"}, {"name", sa}, {"namespace", in.env.namespace_}};
  Rbac rbac = RbacFor(c);

  out.push_back(
      Finish(resources::kServiceAccounts, Json{{"apiVersion", "v1"},
                                               {"kind", "ServiceAccount"},
                                               {"metadata", Metadata(in, component, sa, true)}}));
  if (!rbac.cluster.empty()) {
    out.push_back(
        Finish(resources::kClusterRoles, Json{{"apiVersion", rbac_api},
                                              {"kind", "ClusterRole"},
                                              {"metadata", Metadata(in, component, role, false)},
                                              {"rules", RulesJson(rbac.cluster)}}));
    out.push_back(Finish(
        resources::kClusterRoleBindings,
        Json{{"apiVersion", rbac_api},
             {"kind", "ClusterRoleBinding"},
             {"metadata", Metadata(in, component, role, false)},
             {"roleRef",
              {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}}},
             {"subjects", Json::array({subject})}}));
  }
  if (!rbac.namespaced.empty()) {
    out.push_back(Finish(resources::kRoles, Json{{"apiVersion", rbac_api},
                                                 {"kind", "Role"},
                                                 {"metadata", Metadata(in, component, role, true)},
                                                 {"rules", RulesJson(rbac.namespaced)}}));
    out.push_back(
        Finish(resources::kRoleBindings,
               Json{{"apiVersion", rbac_api},
                    {"kind", "RoleBinding"},
                    {"metadata", Metadata(in, component, role, true)},
                    {"roleRef",
                     {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", role}}},
                    {"subjects", Json::array({subject})}}));
  }
}

// ---------------------------------------------------------------------------
// Containers: env, mounts.

Json EnvValue(const std::string& name, const std::string& value) {
  return Json{{"name", name}, {"value", value}};
}

Json EnvFromField(const std::string& name, const std::string& field_path) {
  return Json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", field_path}}}}}};
}

// Appends `extra` (spec env: [{name, value|valueFrom}]) after `env`; an extra
// entry replaces an earlier one of the same name. Only the EnvVar fields are
// kept, so a stray key in the spec cannot make the DaemonSet invalid.
void MergeEnv(Json& env, const Json& extra) {
  if (!extra.is_array()) return;
  for (const Json& e : extra) {
    const Json& name = Field(e, "name");
    if (!name.is_string() || name.get<std::string>().empty()) continue;
    Json var{{"name", name}};
    const Json& value = Field(e, "value");
    if (value.is_string()) {
      var["value"] = value;
    } else if (value.is_number() || value.is_boolean()) {
      var["value"] = value.dump();
    }
    if (const Json& from = Field(e, "valueFrom"); from.is_object() && !var.contains("value")) {
      var["valueFrom"] = from;
    }
    auto same = [&](const Json& x) { return x.is_object() && x.value("name", "") == name; };
    env.erase(std::remove_if(env.begin(), env.end(), same), env.end());
    env.push_back(std::move(var));
  }
}

struct HostMount {
  std::string volume;
  std::string host_path;
  std::string mount_path;
  bool read_only = false;
  std::string propagation;  // "" (None), HostToContainer, Bidirectional
  std::string type;         // hostPath type; "" no check
};

void AddVolume(Json& volumes, Json volume) {
  for (const Json& v : volumes) {
    if (v["name"] == volume["name"]) return;
  }
  volumes.push_back(std::move(volume));
}

void Mount(Json& container, const std::string& volume, const std::string& mount_path,
           bool read_only, const std::string& propagation = "") {
  Json m{{"name", volume}, {"mountPath", mount_path}};
  if (read_only) m["readOnly"] = true;
  if (!propagation.empty()) m["mountPropagation"] = propagation;
  container["volumeMounts"].push_back(std::move(m));
}

void AddHostMount(Json& volumes, Json& container, const HostMount& hm) {
  Json host_path{{"path", hm.host_path}};
  if (!hm.type.empty()) host_path["type"] = hm.type;
  AddVolume(volumes, Json{{"name", hm.volume}, {"hostPath", host_path}});
  Mount(container, hm.volume, hm.mount_path, hm.read_only, hm.propagation);
}

void AddConfigMapMount(Json& volumes, Json& container, const std::string& volume,
                       const std::string& config_map, const std::string& mount_path) {
  AddVolume(volumes, Json{{"name", volume}, {"configMap", {{"name", config_map}}}});
  Mount(container, volume, mount_path, true);
}

// The host directories of the scheme in render.h.
HostMount HostRoot(const Policy& p) {
  return {"host-root", p.host_root_fs, kContainerHostRoot, true, "HostToContainer", ""};
}
HostMount RunNvidia() {
  return {"run-nvidia", "/run/nvidia",     UnderHostRoot("/run/nvidia"),
          false,        "HostToContainer", "DirectoryOrCreate"};
}
HostMount Validations(bool read_only) {
  return {"validations",
          "/run/nvidia/validations",
          UnderHostRoot("/run/nvidia/validations"),
          read_only,
          "",
          "DirectoryOrCreate"};
}
HostMount Cdi(bool read_only) {
  return {"cdi", "/var/run/cdi", UnderHostRoot("/var/run/cdi"), read_only, "", "DirectoryOrCreate"};
}
HostMount HostSys() { return {"host-sys", "/sys", UnderHostRoot("/sys"), true, "", "Directory"}; }
// The kubelet's directories, mounted where gpuop looks by default.
HostMount Kubelet(const Policy& p, const std::string& volume, const std::string& sub,
                  bool read_only) {
  return {volume,
          p.kubelet_root_dir + "/" + sub,
          UnderHostRoot("/var/lib/kubelet/" + sub),
          read_only,
          "",
          ""};
}

struct RuntimeInfo {
  std::string flag;        // gpuop runtime configure --runtime
  std::string config_dir;  // what it writes
};

RuntimeInfo Runtime(const Policy& p) {
  if (p.default_runtime == "crio") return {"crio", "/etc/crio"};
  if (p.default_runtime == "docker") return {"docker", "/etc/docker"};
  return {"containerd", "/etc/containerd"};
}

// What a gpuop container may do beyond its mounts (docs/security.md lists
// each container's, and a test holds the rendering to that table).
enum class Privilege {
  // The kernel requires it: device nodes no runtime injected, kernel
  // modules, MIG changes, Bidirectional mounts.
  kPrivileged,
  // uid 0 with every capability dropped: still the owner of the root-owned
  // host paths and kubelet sockets it writes, nothing more.
  kRoot,
  // A non-root uid (the operator's, 65532): only reads the host.
  kNonRoot,
};

constexpr int64_t kNonRootUid = 65532;  // as the chart runs the operator

Json SecurityContext(Privilege privilege) {
  if (privilege == Privilege::kPrivileged) return Json{{"privileged", true}};
  Json sc{{"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"capabilities", {{"drop", Json::array({"ALL"})}}},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
  if (privilege == Privilege::kNonRoot) {
    sc["runAsNonRoot"] = true;
    sc["runAsUser"] = kNonRootUid;
    sc["runAsGroup"] = kNonRootUid;
  }
  return sc;
}

// A container running `gpuop --host-root /host <subcommand...>`. With
// `from_spec`, the spec's args, env and resources are applied (the
// component's main container); init containers get the component's defaults.
Json GpuopContainer(const std::string& name, const ComponentSpec& spec,
                    const std::vector<std::string>& subcommand, const Json& env_defaults,
                    Privilege privilege, bool from_spec) {
  Json command = Json::array({"gpuop", "--host-root", kContainerHostRoot});
  for (const std::string& s : subcommand) command.push_back(s);
  Json env = Json::array({EnvFromField("NODE_NAME", "spec.nodeName"),
                          EnvFromField("OPERATOR_NAMESPACE", "metadata.namespace")});
  MergeEnv(env, env_defaults);
  Json c{
      {"name", name},
      {"image", spec.image},
      {"imagePullPolicy", spec.image_pull_policy.empty() ? "IfNotPresent" : spec.image_pull_policy},
      {"command", command},
      {"volumeMounts", Json::array()}};
  if (from_spec) {
    if (!spec.args.empty()) c["args"] = spec.args;
    MergeEnv(env, spec.env);
  }
  c["env"] = std::move(env);
  if (from_spec) {
    Json res = Json::object();
    for (const char* key : {"limits", "requests"}) {
      if (const Json& v = Field(spec.resources, key); v.is_object() && !v.empty()) res[key] = v;
    }
    if (!res.empty()) c["resources"] = std::move(res);
  }
  c["securityContext"] = SecurityContext(privilege);
  return c;
}

// Drops empty lists the builders started with.
void Tidy(Json& pod_spec) {
  for (const char* list : {"containers", "initContainers"}) {
    if (!pod_spec.contains(list)) continue;
    for (Json& c : pod_spec[list]) {
      if (c.contains("volumeMounts") && c["volumeMounts"].empty()) c.erase("volumeMounts");
    }
    if (pod_spec[list].empty()) pod_spec.erase(list);
  }
  if (pod_spec.contains("volumes") && pod_spec["volumes"].empty()) pod_spec.erase("volumes");
}

// ---------------------------------------------------------------------------
// Pods and DaemonSets.

Json DefaultTolerations() {
  return Json::array(
      {Json{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
}

// The pod-level fields every component shares.
Json BasePodSpec(const RenderInput& in, const ComponentSpec& spec, bool gpu_consumer,
                 const std::vector<std::string>& extra_pull_secrets = {}) {
  const Policy& p = in.policy;
  Json tolerations = p.daemonsets.tolerations_set ? p.daemonsets.tolerations : DefaultTolerations();
  // The operands are what validates a node: they run under its validation taint.
  if (in.env.validation_taint) {
    tolerations.push_back(
        Json{{"key", kValidationTaintKey}, {"operator", "Exists"}, {"effect", "NoSchedule"}});
  }
  Json s{{"serviceAccountName", ComponentDaemonSetName(spec.component)},
         {"tolerations", std::move(tolerations)},
         {"containers", Json::array()},
         {"initContainers", Json::array()},
         {"volumes", Json::array()}};
  if (!p.daemonsets.priority_class_name.empty()) {
    s["priorityClassName"] = p.daemonsets.priority_class_name;
  }
  if (gpu_consumer && !p.runtime_class.empty()) s["runtimeClassName"] = p.runtime_class;
  std::vector<std::string> secrets = spec.image_pull_secrets;
  for (const std::string& x : extra_pull_secrets) {
    if (std::find(secrets.begin(), secrets.end(), x) == secrets.end()) secrets.push_back(x);
  }
  if (!secrets.empty()) {
    Json list = Json::array();
    for (const std::string& x : secrets) list.push_back(Json{{"name", x}});
    s["imagePullSecrets"] = std::move(list);
  }
  if (p.daemonsets.pod_security_context.is_object()) {
    s["securityContext"] = p.daemonsets.pod_security_context;
  }
  if (spec.host_network) {
    s["hostNetwork"] = true;
    s["dnsPolicy"] = "ClusterFirstWithHostNet";
  }
  return s;
}

// "1" → 1: DaemonSet maxUnavailable is an int or a percentage string, and
// the Helm chart writes the int as a string.
Json IntOrPercent(const Json& v) {
  if (v.is_string()) {
    if (auto n = ParseUint(v.get<std::string>()); n.has_value()) {
      return static_cast<int64_t>(*n);
    }
  }
  return v;
}

struct PodExtras {
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
};

Json DaemonSetObject(const RenderInput& in, Component c, const std::string& name,
                     Json node_selector, Json pod_spec, const PodExtras& extras = {}) {
  const Policy& p = in.policy;
  const std::string component = ComponentName(c);
  Json meta = Metadata(in, component, name, true);
  meta["labels"]["app"] = name;

  Json pod_labels = Json::object();
  for (const auto& [k, v] : p.daemonsets.labels) pod_labels[k] = v;
  for (const auto& [k, v] : extras.labels) pod_labels[k] = v;
  // gpuop's own labels and the selector are never overridden: NVIDIA's chart
  // puts app.kubernetes.io/managed-by: gpu-operator in daemonsets.labels, and
  // gpuop finds its pods (uninstall, status) by its own value.
  const Json own = StandardLabels(component);
  for (const auto& [k, v] : own.items()) pod_labels[k] = v;
  pod_labels["app"] = name;
  Json pod_meta{{"labels", pod_labels}};
  Json annotations = Json::object();
  for (const auto& [k, v] : p.daemonsets.annotations) annotations[k] = v;
  for (const auto& [k, v] : extras.annotations) annotations[k] = v;
  if (!annotations.empty()) pod_meta["annotations"] = std::move(annotations);

  pod_spec["nodeSelector"] = std::move(node_selector);
  Tidy(pod_spec);

  Json strategy;
  // The driver is replaced node by node by its upgrade controller, never rolled.
  if (c == Component::kDriver || p.daemonsets.update_strategy == "OnDelete") {
    strategy = {{"type", "OnDelete"}};
  } else {
    strategy = {
        {"type", "RollingUpdate"},
        {"rollingUpdate", {{"maxUnavailable", IntOrPercent(p.daemonsets.max_unavailable)}}}};
  }
  return Json{{"apiVersion", "apps/v1"},
              {"kind", "DaemonSet"},
              {"metadata", std::move(meta)},
              {"spec",
               {{"selector", {{"matchLabels", {{"app", name}}}}},
                {"updateStrategy", std::move(strategy)},
                {"template", {{"metadata", std::move(pod_meta)}, {"spec", std::move(pod_spec)}}}}}};
}

Json DeploySelector(Component c) { return Json{{DeployLabel(c), "true"}}; }

// type and internal_traffic_policy: "" the cluster's default.
Json ServiceObject(const RenderInput& in, Component c, const std::string& port_name, int port,
                   const std::string& type = "", const std::string& internal_traffic_policy = "") {
  const std::string name = ComponentDaemonSetName(c);
  Json meta = Metadata(in, ComponentName(c), name, true);
  meta["labels"]["app"] = name;
  Json spec{
      {"selector", {{"app", name}}},
      {"ports",
       Json::array({Json{
           {"name", port_name}, {"port", port}, {"targetPort", port}, {"protocol", "TCP"}}})}};
  if (!type.empty()) spec["type"] = type;
  if (!internal_traffic_policy.empty()) spec["internalTrafficPolicy"] = internal_traffic_policy;
  return Json{{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", meta}, {"spec", spec}};
}

// ---------------------------------------------------------------------------
// The components.

void RenderDriver(const RenderInput& in, std::vector<RenderedObject>& out) {
  const Policy& p = in.policy;
  const ComponentSpec& spec = p.Get(Component::kDriver);
  const auto& manager = p.driver.manager;
  const auto& drain = p.driver_upgrade.drain;

  for (const OsRelease& os : in.driver_os) {
    Json pod = BasePodSpec(in, spec, false, manager.image_pull_secrets);
    pod["hostPID"] = true;

    // k8s-driver-manager (gpuop driver-manager): makes way for the driver.
    // Its environment, upstream's names:
    //   NODE_NAME, OPERATOR_NAMESPACE,
    //   POD_NAME                           who and where it is
    //   NVIDIA_DRIVER_ROOT                 the driver root it unmounts
    //   ENABLE_GPU_POD_EVICTION=true       evict GPU pods before unloading
    //   ENABLE_AUTO_DRAIN, DRAIN_USE_FORCE, DRAIN_POD_SELECTOR_LABEL,
    //   DRAIN_TIMEOUT_SECONDS, DRAIN_DELETE_EMPTYDIR_DATA
    //                                      from driver.upgradePolicy.drain
    // then driver.manager.env.
    Json manager_env = Json::array(
        {EnvFromField("POD_NAME", "metadata.name"),
         EnvValue("NVIDIA_DRIVER_ROOT", p.driver_install_dir),
         EnvValue("ENABLE_GPU_POD_EVICTION", "true"),
         EnvValue("ENABLE_AUTO_DRAIN", drain.enable ? "true" : "false"),
         EnvValue("DRAIN_USE_FORCE", drain.force ? "true" : "false"),
         EnvValue("DRAIN_POD_SELECTOR_LABEL", drain.pod_selector),
         EnvValue("DRAIN_TIMEOUT_SECONDS", std::to_string(drain.timeout_seconds) + "s"),
         EnvValue("DRAIN_DELETE_EMPTYDIR_DATA", drain.delete_empty_dir ? "true" : "false")});
    MergeEnv(manager_env, manager.env);
    ComponentSpec manager_spec = spec;
    manager_spec.image = in.env.gpuop_image;
    manager_spec.image_pull_policy = manager.image_pull_policy;
    Json init =
        GpuopContainer("k8s-driver-manager", manager_spec, {"driver-manager", "uninstall_driver"},
                       manager_env, Privilege::kPrivileged, false);
    AddHostMount(pod["volumes"], init, HostRoot(p));
    HostMount run_nvidia = RunNvidia();
    run_nvidia.mount_path = "/run/nvidia";     // where NVIDIA's manager has it
    run_nvidia.propagation = "Bidirectional";  // it unmounts the driver root
    AddHostMount(pod["volumes"], init, run_nvidia);

    // NVIDIA's driver image, its own entrypoint, the paths it expects.
    Json env = Json::array({EnvFromField("NODE_NAME", "spec.nodeName"),
                            EnvValue("KERNEL_MODULE_TYPE", p.driver.kernel_module_type)});
    MergeEnv(env, spec.env);
    const auto& probe = p.driver.startup_probe;
    Json ctr{
        {"name", "nvidia-driver-ctr"},
        {"image", DriverImageForOs(spec.image, os)},
        {"imagePullPolicy",
         spec.image_pull_policy.empty() ? "IfNotPresent" : spec.image_pull_policy},
        {"env", env},
        {"securityContext", {{"privileged", true}}},
        // .driver-ctr-ready is the validator's signal that the driver is up.
        {"startupProbe",
         {{"exec",
           {{"command",
             {"sh", "-c",
              "nvidia-smi >/dev/null && mkdir -p /run/nvidia/validations && "
              "touch /run/nvidia/validations/.driver-ctr-ready"}}}},
          {"initialDelaySeconds", probe.initial_delay_seconds},
          {"periodSeconds", probe.period_seconds},
          {"timeoutSeconds", probe.timeout_seconds},
          {"failureThreshold", probe.failure_threshold}}},
        {"lifecycle",
         {{"preStop",
           {{"exec", {{"command", {"rm", "-f", "/run/nvidia/validations/.driver-ctr-ready"}}}}}}}},
        {"volumeMounts", Json::array()}};
    if (!spec.args.empty()) ctr["args"] = spec.args;
    Json res = Json::object();
    for (const char* key : {"limits", "requests"}) {
      if (const Json& v = Field(spec.resources, key); v.is_object() && !v.empty()) res[key] = v;
    }
    if (!res.empty()) ctr["resources"] = std::move(res);
    Json& vols = pod["volumes"];
    AddVolume(vols, Json{{"name", "run-nvidia"},
                         {"hostPath", {{"path", "/run/nvidia"}, {"type", "DirectoryOrCreate"}}}});
    Mount(ctr, "run-nvidia", "/run/nvidia", false, "Bidirectional");
    AddHostMount(vols, ctr, {"host-os-release", "/etc/os-release", "/host-etc/os-release", true});
    AddHostMount(vols, ctr, {"var-log", "/var/log", "/var/log"});
    AddHostMount(vols, ctr, {"dev-log", "/dev/log", "/dev/log"});
    AddHostMount(vols, ctr,
                 {"firmware-search-path", "/sys/module/firmware_class/parameters/path",
                  "/sys/module/firmware_class/parameters/path"});
    // DRIVER_CONFIG_DIGEST: what the driver's installation depends on (both
    // containers and the volumes), so a restart with an unchanged
    // configuration takes the driver's fast path, and a changed one reloads.
    const std::string digest = std::to_string(
        Fnv1a32(Json{{"manager", init}, {"driver", ctr}, {"volumes", pod["volumes"]}}.dump()));
    for (Json* c : {&init, &ctr}) {
      MergeEnv((*c)["env"], Json::array({EnvValue("DRIVER_CONFIG_DIGEST", digest)}));
    }
    pod["initContainers"].push_back(std::move(init));
    pod["containers"].push_back(std::move(ctr));

    Json selector = DeploySelector(Component::kDriver);
    if (!os.id.empty()) {
      selector[kOsIdLabel] = os.id;
      if (!os.version_id.empty()) selector[kOsVersionLabel] = os.version_id;
    }
    out.push_back(Finish(resources::kDaemonSets,
                         DaemonSetObject(in, Component::kDriver, DriverDaemonSetName(os),
                                         std::move(selector), std::move(pod))));
  }
}

void RenderToolkit(const RenderInput& in, std::vector<RenderedObject>& out) {
  const Policy& p = in.policy;
  const ComponentSpec& spec = p.Get(Component::kContainerToolkit);
  Json pod = BasePodSpec(in, spec, false);
  Json& vols = pod["volumes"];

  // Adds the runtime handler the RuntimeClass names (the runtime reads it at
  // its next restart; gpuop never restarts it).
  RuntimeInfo rt = Runtime(p);
  std::vector<std::string> configure = {"runtime", "configure",      "--runtime",
                                        rt.flag,   "--runtime-name", p.runtime_class};
  if (p.cdi_enabled) configure.push_back("--cdi-enabled");
  Json init =
      GpuopContainer("runtime-config", spec, configure, Json::array(), Privilege::kRoot, false);
  AddHostMount(vols, init, HostRoot(p));
  AddHostMount(vols, init,
               {"runtime-config", rt.config_dir, UnderHostRoot(rt.config_dir), false, "",
                "DirectoryOrCreate"});
  pod["initContainers"].push_back(std::move(init));

  Json env = Json::array({EnvValue("NVIDIA_DRIVER_ROOT", DriverRoot(p)),
                          EnvValue("GPUOP_TOOLKIT_INSTALL_DIR", p.toolkit_install_dir + "/toolkit"),
                          EnvFromField("POD_NAME", "metadata.name"),
                          EnvFromField("POD_NAMESPACE", "metadata.namespace")});
  Json ctr = GpuopContainer("nvidia-container-toolkit-ctr", spec, {"toolkit"}, env,
                            Privilege::kPrivileged, true);
  // On the way out for good (the DaemonSet gone: uninstall, toolkit turned
  // off), the runtime handler, CDI spec and hook leave the node with it; a
  // pod only being replaced leaves them (lifecycle/node_cleanup.h).
  ctr["lifecycle"] = {{"preStop",
                       {{"exec",
                         {{"command",
                           {"gpuop", "--host-root", kContainerHostRoot, "node-cleanup", "--runtime",
                            rt.flag, "--runtime-name", p.runtime_class}}}}}}};
  AddHostMount(vols, ctr, HostRoot(p));
  AddHostMount(vols, ctr, RunNvidia());
  AddHostMount(vols, ctr, Cdi(false));
  // Writable for the preStop's revert (the host root is mounted read-only).
  AddHostMount(vols, ctr,
               {"runtime-config", rt.config_dir, UnderHostRoot(rt.config_dir), false, "",
                "DirectoryOrCreate"});
  AddHostMount(vols, ctr,
               {"toolkit-install", p.toolkit_install_dir, UnderHostRoot(p.toolkit_install_dir),
                false, "", "DirectoryOrCreate"});
  pod["containers"].push_back(std::move(ctr));
  out.push_back(
      Finish(resources::kDaemonSets,
             DaemonSetObject(in, Component::kContainerToolkit,
                             ComponentDaemonSetName(Component::kContainerToolkit),
                             DeploySelector(Component::kContainerToolkit), std::move(pod))));
}

void RenderValidator(const RenderInput& in, std::vector<RenderedObject>& out) {
  const Policy& p = in.policy;
  const ComponentSpec& spec = p.Get(Component::kOperatorValidator);
  Json pod = BasePodSpec(in, spec, true);
  Json& vols = pod["volumes"];
  auto mounts = [&](Json& c) {
    AddHostMount(vols, c, HostRoot(p));
    AddHostMount(vols, c, RunNvidia());
    AddHostMount(
        vols, c,
        {"host-dev-char", "/dev/char", UnderHostRoot("/dev/char"), false, "", "Directory"});
  };
  Json base_env = Json::array(
      {EnvValue("NVIDIA_VISIBLE_DEVICES", "all"), EnvValue("NVIDIA_DRIVER_ROOT", DriverRoot(p))});

  // What the workload pods (cuda, plugin) run: the validator's own image
  // (gpuop's), its pull policy and secrets, and the runtime class.
  Json workload_env = Json::array(
      {EnvValue("VALIDATOR_IMAGE", spec.image),
       EnvValue("VALIDATOR_IMAGE_PULL_POLICY",
                spec.image_pull_policy.empty() ? "IfNotPresent" : spec.image_pull_policy),
       EnvValue("VALIDATOR_IMAGE_PULL_SECRETS", Join(spec.image_pull_secrets, ","))});
  if (!p.runtime_class.empty()) {
    workload_env.push_back(EnvValue("VALIDATOR_RUNTIME_CLASS", p.runtime_class));
  }

  // One init container per check, in NVIDIA's order, with NVIDIA's
  // settings: the driver check waits (WITH_WAIT=true) for the driver; the
  // others fail fast, so the kubelet restarts them with backoff and the
  // container's termination message (FallbackToLogsOnError) says why, which
  // the ClusterPolicy status repeats. validator.<check>.env comes last.
  std::vector<std::string> checks = {"driver", "toolkit", "cuda"};
  if (p.Enabled(Component::kDevicePlugin)) checks.push_back("plugin");
  for (const std::string& check : checks) {
    Json env = base_env;
    env.push_back(EnvValue("COMPONENT", check));
    env.push_back(EnvValue("WITH_WAIT", check == "driver" ? "true" : "false"));
    // The driver check reads the driver from the host root; asking the
    // runtime for GPUs before the driver is up would fail the container.
    if (check == "driver") MergeEnv(env, Json::array({EnvValue("NVIDIA_VISIBLE_DEVICES", "void")}));
    if (check == "cuda") {
      MergeEnv(env, workload_env);
      if (!p.Enabled(Component::kDevicePlugin)) {
        MergeEnv(env, Json::array({EnvValue("GPUOP_DEVICE_PLUGIN", "false")}));
      }
    }
    if (check == "plugin") {
      MergeEnv(env, workload_env);
      MergeEnv(env, Json::array({EnvValue("WITH_WORKLOAD", "false"),
                                 EnvValue("MIG_STRATEGY", p.mig_strategy)}));
    }
    MergeEnv(env, spec.env);
    if (auto it = p.validator_check_env.find(check); it != p.validator_check_env.end()) {
      MergeEnv(env, it->second);
    }
    // cuda and plugin only ask the API server (their workload pods get the
    // GPUs) and write their file: no device, no /dev/char.
    const bool api_only = check == "cuda" || check == "plugin";
    Json c = GpuopContainer(check + "-validation", spec, {"validator"}, env,
                            api_only ? Privilege::kRoot : Privilege::kPrivileged, false);
    c["terminationMessagePolicy"] = "FallbackToLogsOnError";
    if (api_only) {
      AddHostMount(vols, c, HostRoot(p));
      AddHostMount(vols, c, RunNvidia());
    } else {
      mounts(c);
    }
    pod["initContainers"].push_back(std::move(c));
  }
  // The main container holds the node's validations while it runs (no
  // COMPONENT); on the way out the *-ready files go, as NVIDIA's preStop
  // removes them (gpuop's image has no shell: the validator does it).
  Json ctr = GpuopContainer("nvidia-operator-validator", spec, {"validator"}, base_env,
                            Privilege::kPrivileged, true);
  ctr["lifecycle"] = {
      {"preStop",
       {{"exec",
         {{"command", {"gpuop", "--host-root", kContainerHostRoot, "validator", "--cleanup"}}}}}}};
  // Beyond NVIDIA, whose validator checks once: the driver is checked again
  // while the node runs, so a driver lost later shows as a validator that is
  // not Ready (and a ClusterPolicy that names the node), and recovers alone.
  // Three failures in a row, not one: a single exec probe that times out on a
  // busy node must not unvalidate (and, opted in, taint) the node.
  ctr["readinessProbe"] = {
      {"exec", {{"command", {"gpuop", "--host-root", kContainerHostRoot, "validator", "--probe"}}}},
      {"periodSeconds", 10},
      {"timeoutSeconds", 5},
      {"failureThreshold", 3}};
  mounts(ctr);
  pod["containers"].push_back(std::move(ctr));
  out.push_back(
      Finish(resources::kDaemonSets,
             DaemonSetObject(in, Component::kOperatorValidator,
                             ComponentDaemonSetName(Component::kOperatorValidator),
                             DeploySelector(Component::kOperatorValidator), std::move(pod))));
}

void RenderDevicePlugin(const RenderInput& in, std::vector<RenderedObject>& out) {
  const Policy& p = in.policy;
  const ComponentSpec& spec = p.Get(Component::kDevicePlugin);
  Json pod = BasePodSpec(in, spec, true);
  Json& vols = pod["volumes"];
  Json env = Json::array(
      {EnvValue("NVIDIA_VISIBLE_DEVICES", "all"), EnvValue("MIG_STRATEGY", p.mig_strategy),
       EnvValue("FAIL_ON_INIT_ERROR", "true"), EnvValue("NVIDIA_DRIVER_ROOT", DriverRoot(p)),
       EnvValue("PASS_DEVICE_SPECS", "true"),
       EnvValue("DEVICE_LIST_STRATEGY", p.cdi_enabled ? "cdi-annotations,cdi-cri" : "envvar"),
       EnvValue("DEVICE_ID_STRATEGY", "uuid")});
  // Named configs: the plugin picks one by its node's label (the names of
  // upstream's config-manager).
  if (!p.device_plugin_config_name.empty()) {
    env.push_back(EnvValue("CONFIG_FILE_SRCDIR", "/available-configs"));
    env.push_back(EnvValue("NODE_LABEL", "nvidia.com/device-plugin.config"));
    if (!p.device_plugin_config_default.empty()) {
      env.push_back(EnvValue("DEFAULT_CONFIG", p.device_plugin_config_default));
    }
  }
  const std::string& mps_root = p.device_plugin_mps_root;
  if (!mps_root.empty()) env.push_back(EnvValue("MPS_ROOT", mps_root));

  // Liveness: /healthz fails when NVML stops answering or a resource's gRPC
  // server is down, so the kubelet restarts a wedged plugin.
  constexpr int kHealthPort = 8082;
  Json ctr = GpuopContainer("nvidia-device-plugin", spec,
                            {"device-plugin", "--health-addr", ":" + std::to_string(kHealthPort)},
                            env, Privilege::kRoot, true);
  ctr["livenessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", kHealthPort}}},
                          {"initialDelaySeconds", 10},
                          {"periodSeconds", 10},
                          {"failureThreshold", 3}};
  // Beyond NVIDIA: Ready once it serves (health monitor watching, resources
  // served), so `kubectl rollout status` means the node can allocate GPUs.
  ctr["readinessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", kHealthPort}}},
                           {"periodSeconds", 5}};
  AddHostMount(vols, ctr, Kubelet(p, "device-plugins", "device-plugins", false));
  AddHostMount(vols, ctr, Cdi(true));
  AddHostMount(vols, ctr, HostSys());
  if (!mps_root.empty()) {
    AddHostMount(vols, ctr,
                 {"mps-root", mps_root, UnderHostRoot(mps_root), false, "", "DirectoryOrCreate"});
  }
  if (!p.device_plugin_config_name.empty()) {
    AddConfigMapMount(vols, ctr, "available-configs", p.device_plugin_config_name,
                      "/available-configs");
  }
  pod["containers"].push_back(std::move(ctr));
  out.push_back(Finish(resources::kDaemonSets,
                       DaemonSetObject(in, Component::kDevicePlugin,
                                       ComponentDaemonSetName(Component::kDevicePlugin),
                                       DeploySelector(Component::kDevicePlugin), std::move(pod))));
}

// The DeviceClasses NVIDIA's DRA driver installs, with its selectors, so claims
// written for it select the same devices (as its chart and gpu-operator's
// manifests/state-dra-driver define them). extendedResourceName (KEP-5004,
// alpha in 1.35) is left out.
Json DeviceClassObject(const RenderInput& in, const std::string& name, const std::string& type) {
  const std::string cel = std::string("device.driver == '") + kDraDriverName +
                          "' && device.attributes['" + kDraDriverName + "'].type == '" + type + "'";
  return Json{{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "DeviceClass"},
              {"metadata", Metadata(in, ComponentName(Component::kDraDriver), name, false)},
              {"spec", {{"selectors", Json::array({Json{{"cel", {{"expression", cel}}}}})}}}};
}

void RenderDraDriver(const RenderInput& in, std::vector<RenderedObject>& out) {
  const Policy& p = in.policy;
  const ComponentSpec& spec = p.Get(Component::kDraDriver);
  out.push_back(Finish(resources::kDeviceClasses, DeviceClassObject(in, "gpu.nvidia.com", "gpu")));
  out.push_back(Finish(resources::kDeviceClasses, DeviceClassObject(in, "mig.nvidia.com", "mig")));

  Json pod = BasePodSpec(in, spec, true);
  Json& vols = pod["volumes"];
  // Privileged with the MIG config capability, as NVIDIA's: a MIG device's
  // placement (its name and memorySlice capacities) is privileged in NVML.
  Json env = Json::array(
      {EnvValue("NVIDIA_VISIBLE_DEVICES", "all"), EnvValue("NVIDIA_MIG_CONFIG_DEVICES", "all"),
       EnvValue("NVIDIA_DRIVER_ROOT", DriverRoot(p)), EnvValue("CDI_ROOT", "/var/run/cdi")});
  constexpr int kHealthPort = 51516;  // NVIDIA's chart's GPU plugin health port
  Json ctr = GpuopContainer("gpus", spec,
                            {"dra-plugin", "--health-addr", ":" + std::to_string(kHealthPort)}, env,
                            Privilege::kPrivileged, true);
  // /healthz fails while the kubelet has not registered the plugin or a
  // prepare would fail, so a wedged plugin is restarted.
  ctr["livenessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", kHealthPort}}},
                          {"initialDelaySeconds", 10},
                          {"periodSeconds", 30},
                          {"failureThreshold", 3}};
  ctr["readinessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", kHealthPort}}},
                           {"periodSeconds", 5}};
  // The driver's files and device nodes for the per-claim CDI specs.
  AddHostMount(vols, ctr, HostRoot(p));
  AddHostMount(vols, ctr, Kubelet(p, "plugins", "plugins", false));
  AddHostMount(vols, ctr, Kubelet(p, "plugins-registry", "plugins_registry", false));
  AddHostMount(vols, ctr, Cdi(false));
  AddHostMount(vols, ctr, HostSys());
  pod["containers"].push_back(std::move(ctr));
  out.push_back(Finish(
      resources::kDaemonSets,
      DaemonSetObject(in, Component::kDraDriver, ComponentDaemonSetName(Component::kDraDriver),
                      DeploySelector(Component::kDraDriver), std::move(pod))));
}

void RenderDcgmExporter(const RenderInput& in, std::vector<RenderedObject>& out) {
  const Policy& p = in.policy;
  const ComponentSpec& spec = p.Get(Component::kDcgmExporter);
  constexpr int kPort = 9400;
  const DcgmExporterSettings& settings = p.dcgm_exporter;
  out.push_back(
      Finish(resources::kServices,
             ServiceObject(in, Component::kDcgmExporter, "gpu-metrics", kPort,
                           settings.service_type, settings.service_internal_traffic_policy)));

  Json pod = BasePodSpec(in, spec, true);
  if (settings.host_pid) pod["hostPID"] = true;
  Json& vols = pod["volumes"];
  Json env = Json::array({EnvValue("NVIDIA_VISIBLE_DEVICES", "all"),
                          EnvValue("DCGM_EXPORTER_LISTEN", ":" + std::to_string(kPort)),
                          EnvValue("DCGM_EXPORTER_KUBERNETES", "true")});
  if (!p.dcgm_exporter_config_name.empty()) {
    env.push_back(EnvValue("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/dcgm-metrics.csv"));
  }
  Json ctr =
      GpuopContainer("nvidia-dcgm-exporter", spec, {"exporter"}, env, Privilege::kRoot, true);
  ctr["ports"] = Json::array({Json{{"name", "metrics"}, {"containerPort", kPort}}});
  AddHostMount(vols, ctr, Kubelet(p, "pod-resources", "pod-resources", true));
  if (!p.dcgm_exporter_config_name.empty()) {
    AddConfigMapMount(vols, ctr, "metrics-config", p.dcgm_exporter_config_name,
                      "/etc/dcgm-exporter");
  }
  pod["containers"].push_back(std::move(ctr));
  PodExtras extras;
  extras.labels = settings.pod_labels;
  extras.annotations = settings.pod_annotations;
  out.push_back(
      Finish(resources::kDaemonSets,
             DaemonSetObject(in, Component::kDcgmExporter,
                             ComponentDaemonSetName(Component::kDcgmExporter),
                             DeploySelector(Component::kDcgmExporter), std::move(pod), extras)));
}

void RenderGfd(const RenderInput& in, std::vector<RenderedObject>& out) {
  const Policy& p = in.policy;
  const ComponentSpec& spec = p.Get(Component::kGpuFeatureDiscovery);
  Json pod = BasePodSpec(in, spec, true);
  Json& vols = pod["volumes"];
  Json env = Json::array({EnvValue("NVIDIA_VISIBLE_DEVICES", "all"),
                          EnvValue("MIG_STRATEGY", p.mig_strategy),
                          EnvValue("GFD_SLEEP_INTERVAL", "60s")});
  // Without NFD nobody reads a features file: gfd patches its node itself.
  if (in.node_discovery) env.push_back(EnvValue("GPUOP_GFD_DIRECT_LABELS", "true"));
  Json ctr = GpuopContainer("gpu-feature-discovery", spec, {"gfd"}, env, Privilege::kRoot, true);
  const std::string features = "/etc/kubernetes/node-feature-discovery/features.d";
  if (!in.node_discovery) {
    AddHostMount(
        vols, ctr,
        {"nfd-features", features, UnderHostRoot(features), false, "", "DirectoryOrCreate"});
  }
  AddHostMount(vols, ctr, HostSys());
  pod["containers"].push_back(std::move(ctr));
  out.push_back(
      Finish(resources::kDaemonSets,
             DaemonSetObject(in, Component::kGpuFeatureDiscovery,
                             ComponentDaemonSetName(Component::kGpuFeatureDiscovery),
                             DeploySelector(Component::kGpuFeatureDiscovery), std::move(pod))));
}

// mig-parted format (NVIDIA/mig-parted api/spec/v1). The per-model layouts
// (all-1g.10gb, all-balanced, ...) need no entry here: the MIG manager
// generates the ones a name asks for from the GPUs it finds (mig/manager.h).
constexpr const char* kDefaultMigConfig =
    "version: v1\n"
    "mig-configs:\n"
    "  all-disabled:\n"
    "    - devices: all\n"
    "      mig-enabled: false\n"
    "  all-enabled:\n"
    "    - devices: all\n"
    "      mig-enabled: true\n"
    "      mig-devices: {}\n";

void RenderMigManager(const RenderInput& in, std::vector<RenderedObject>& out) {
  const Policy& p = in.policy;
  const ComponentSpec& spec = p.Get(Component::kMigManager);
  const std::string component = ComponentName(Component::kMigManager);
  // A user-named ConfigMap is the user's: never created or changed here.
  if (p.mig_manager_config_name == kDefaultMigConfigMap) {
    out.push_back(Finish(resources::kConfigMaps,
                         Json{{"apiVersion", "v1"},
                              {"kind", "ConfigMap"},
                              {"metadata", Metadata(in, component, kDefaultMigConfigMap, true)},
                              {"data", {{"config.yaml", kDefaultMigConfig}}}}));
  }
  Json pod = BasePodSpec(in, spec, true);
  Json& vols = pod["volumes"];
  Json env = Json::array(
      {EnvValue("NVIDIA_VISIBLE_DEVICES", "all"),
       EnvValue("CONFIG_FILE", "/mig-parted-config/config.yaml"), EnvValue("WITH_REBOOT", "false"),
       EnvValue("CDI_ENABLED", p.cdi_enabled ? "true" : "false"),
       EnvValue("NVIDIA_DRIVER_ROOT", DriverRoot(p)),
       // where the GPU clients it pauses run
       EnvValue("DEFAULT_GPU_CLIENTS_NAMESPACE", in.env.namespace_),
       // the hook path of the CDI spec it regenerates
       EnvValue("GPUOP_TOOLKIT_INSTALL_DIR", p.toolkit_install_dir + "/toolkit")});
  const std::string& clients = p.mig_manager_gpu_clients_config;
  if (!clients.empty()) env.push_back(EnvValue("GPU_CLIENTS_FILE", "/gpu-clients/clients.yaml"));
  Json ctr = GpuopContainer("nvidia-mig-manager", spec, {"mig-manager"}, env,
                            Privilege::kPrivileged, true);
  AddHostMount(vols, ctr, HostRoot(p));
  AddHostMount(vols, ctr, RunNvidia());
  AddHostMount(vols, ctr, Cdi(false));
  AddHostMount(vols, ctr,
               {"mig-manager-state", "/etc/nvidia-mig-manager",
                UnderHostRoot("/etc/nvidia-mig-manager"), false, "", "DirectoryOrCreate"});
  AddConfigMapMount(vols, ctr, "mig-parted-config", p.mig_manager_config_name,
                    "/mig-parted-config");
  if (!clients.empty()) AddConfigMapMount(vols, ctr, "gpu-clients", clients, "/gpu-clients");
  pod["containers"].push_back(std::move(ctr));
  out.push_back(Finish(
      resources::kDaemonSets,
      DaemonSetObject(in, Component::kMigManager, ComponentDaemonSetName(Component::kMigManager),
                      DeploySelector(Component::kMigManager), std::move(pod))));
}

void RenderNodeStatusExporter(const RenderInput& in, std::vector<RenderedObject>& out) {
  const Policy& p = in.policy;
  const ComponentSpec& spec = p.Get(Component::kNodeStatusExporter);
  constexpr int kPort = 8000;
  out.push_back(Finish(resources::kServices,
                       ServiceObject(in, Component::kNodeStatusExporter, "metrics", kPort)));
  Json pod = BasePodSpec(in, spec, true);
  Json env = Json::array({EnvValue("NVIDIA_VISIBLE_DEVICES", "all")});
  Json ctr = GpuopContainer("nvidia-node-status-exporter", spec, {"node-status-exporter"}, env,
                            Privilege::kNonRoot, true);
  ctr["ports"] = Json::array({Json{{"name", "metrics"}, {"containerPort", kPort}}});
  // Read-only: its driver check finds NVML on the host or in the driver
  // container's root (/run/nvidia/driver, seen through HostToContainer), and
  // it counts the NVIDIA PCI functions in the host's sysfs.
  AddHostMount(pod["volumes"], ctr, HostRoot(p));
  AddHostMount(pod["volumes"], ctr, Validations(true));
  pod["containers"].push_back(std::move(ctr));
  out.push_back(
      Finish(resources::kDaemonSets,
             DaemonSetObject(in, Component::kNodeStatusExporter,
                             ComponentDaemonSetName(Component::kNodeStatusExporter),
                             DeploySelector(Component::kNodeStatusExporter), std::move(pod))));
}

bool MajorVersionOnly(const std::string& os_id) {
  return os_id == "rhel" || os_id == "rocky" || os_id == "ol";
}

}  // namespace

OsRelease NodeOsRelease(const std::map<std::string, std::string>& labels) {
  OsRelease os;
  if (auto it = labels.find(kOsIdLabel); it != labels.end()) os.id = it->second;
  if (auto it = labels.find(kOsVersionLabel); it != labels.end()) os.version_id = it->second;
  return os;
}

const kube::Resource& RuntimeClassResource() {
  static const kube::Resource kRuntimeClasses{"node.k8s.io", "v1", "runtimeclasses", "RuntimeClass",
                                              false};
  return kRuntimeClasses;
}

const std::vector<kube::Resource>& RenderedResourceTypes() {
  static const std::vector<kube::Resource> kTypes = {
      resources::kServiceAccounts, resources::kClusterRoles, resources::kClusterRoleBindings,
      resources::kRoles,           resources::kRoleBindings, resources::kConfigMaps,
      resources::kServices,        resources::kDaemonSets,   RuntimeClassResource(),
      resources::kDeviceClasses};
  return kTypes;
}

std::vector<RenderedObject> RenderComponent(Component c, const RenderInput& in) {
  std::vector<RenderedObject> out;
  if (!in.policy.Enabled(c)) return out;
  AppendIdentity(in, c, out);
  switch (c) {
    case Component::kDriver:
      RenderDriver(in, out);
      break;
    case Component::kContainerToolkit:
      RenderToolkit(in, out);
      break;
    case Component::kOperatorValidator:
      RenderValidator(in, out);
      break;
    case Component::kDevicePlugin:
      RenderDevicePlugin(in, out);
      break;
    case Component::kDraDriver:
      RenderDraDriver(in, out);
      break;
    case Component::kDcgmExporter:
      RenderDcgmExporter(in, out);
      break;
    case Component::kGpuFeatureDiscovery:
      RenderGfd(in, out);
      break;
    case Component::kMigManager:
      RenderMigManager(in, out);
      break;
    case Component::kNodeStatusExporter:
      RenderNodeStatusExporter(in, out);
      break;
  }
  return out;
}

std::vector<RenderedObject> RenderPrerequisites(const RenderInput& in) {
  std::vector<RenderedObject> out;
  const std::string& name = in.policy.runtime_class;
  if (name.empty()) return out;
  out.push_back(Finish(RuntimeClassResource(),
                       Json{{"apiVersion", "node.k8s.io/v1"},
                            {"kind", "RuntimeClass"},
                            {"metadata", Metadata(in, kPrerequisitesComponent, name, false)},
                            {"handler", name}}));
  return out;
}

std::vector<RenderedObject> RenderNodeDiscovery(const RenderInput& in) {
  std::vector<RenderedObject> out;
  if (!in.node_discovery) return out;
  const Policy& p = in.policy;
  const std::string component = kNodeDiscoveryComponent;
  const std::string name = kNodeDiscoveryName;
  const std::string rbac_api = "rbac.authorization.k8s.io/v1";
  out.push_back(
      Finish(resources::kServiceAccounts, Json{{"apiVersion", "v1"},
                                               {"kind", "ServiceAccount"},
                                               {"metadata", Metadata(in, component, name, true)}}));
  out.push_back(Finish(resources::kClusterRoles,
                       Json{{"apiVersion", rbac_api},
                            {"kind", "ClusterRole"},
                            {"metadata", Metadata(in, component, name, false)},
                            {"rules", RulesJson({{"", {"nodes"}, {"get", "patch"}}})}}));
  out.push_back(Finish(
      resources::kClusterRoleBindings,
      Json{{"apiVersion", rbac_api},
           {"kind", "ClusterRoleBinding"},
           {"metadata", Metadata(in, component, name, false)},
           {"roleRef",
            {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", name}}},
           {"subjects",
            Json::array({Json{
                {"kind", "ServiceAccount"}, {"name", name}, {"namespace", in.env.namespace_}}})}}));

  ComponentSpec spec;
  spec.image = in.env.gpuop_image;
  Json ctr = GpuopContainer("node-discovery", spec, {"node-discovery"}, Json::array(),
                            Privilege::kNonRoot, false);
  // A few MiB and no CPU to speak of: it reads sysfs once per backstop period.
  ctr["resources"] = {{"requests", {{"cpu", "5m"}, {"memory", "16Mi"}}},
                      {"limits", {{"memory", "64Mi"}}}};
  Json pod{{"serviceAccountName", name},
           {"tolerations", Json::array({Json{{"operator", "Exists"}}})},
           {"nodeSelector", {{"kubernetes.io/os", "linux"}}},
           {"volumes", Json::array()}};
  if (!p.daemonsets.priority_class_name.empty()) {
    pod["priorityClassName"] = p.daemonsets.priority_class_name;
  }
  AddHostMount(pod["volumes"], ctr, HostSys());
  // The OS labels (NFD's system-os_release.*) name the driver image's tag.
  AddHostMount(
      pod["volumes"], ctr,
      {"host-os-release", "/etc/os-release", UnderHostRoot("/etc/os-release"), true, "", "File"});
  pod["containers"] = Json::array({std::move(ctr)});

  Json meta = Metadata(in, component, name, true);
  meta["labels"]["app"] = name;
  Json pod_labels = StandardLabels(component);
  pod_labels["app"] = name;
  out.push_back(Finish(
      resources::kDaemonSets,
      Json{{"apiVersion", "apps/v1"},
           {"kind", "DaemonSet"},
           {"metadata", std::move(meta)},
           {"spec",
            {{"selector", {{"matchLabels", {{"app", name}}}}},
             {"updateStrategy",
              {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", "10%"}}}}},
             {"template", {{"metadata", {{"labels", pod_labels}}}, {"spec", std::move(pod)}}}}}}));
  return out;
}

std::map<std::string, std::string> NamespacePsaLabels(const Policy& policy) {
  std::map<std::string, std::string> labels;
  if (!policy.psa_enabled) return labels;
  for (const char* key : kPsaLabelKeys) labels[key] = "privileged";
  return labels;
}

namespace {

// Whether `manager`'s apply entry in managedFields owns any metadata label.
bool OwnsLabels(const Json& object, std::string_view manager) {
  const Json& fields = Field(Field(object, "metadata"), "managedFields");
  if (!fields.is_array()) return false;
  for (const Json& entry : fields) {
    if (!entry.is_object() || entry.value("manager", "") != manager ||
        entry.value("operation", "") != "Apply") {
      continue;
    }
    const Json& labels = Field(Field(Field(entry, "fieldsV1"), "f:metadata"), "f:labels");
    if (labels.is_object() && !labels.empty()) return true;
  }
  return false;
}

}  // namespace

std::optional<Json> PsaApplyConfig(const Json& ns,
                                   const std::map<std::string, std::string>& wanted) {
  Json config{
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kube::Name(ns)}}}};
  const bool owned = OwnsLabels(ns, kPsaFieldManager);
  if (wanted.empty()) {
    if (!owned) return std::nullopt;
    return config;
  }
  bool differs = !owned;
  for (const auto& [k, v] : wanted) differs = differs || kube::Label(ns, k) != v;
  if (!differs) return std::nullopt;
  config["metadata"]["labels"] = wanted;
  return config;
}

std::string ObjectHash(const Json& object) {
  Json copy = object;
  if (copy.is_object()) {
    auto meta = copy.find("metadata");
    if (meta != copy.end() && meta->is_object()) {
      auto annotations = meta->find("annotations");
      if (annotations != meta->end() && annotations->is_object()) {
        annotations->erase(kLastAppliedHashAnnotation);
        if (annotations->empty()) meta->erase(annotations);
      }
    }
  }
  // FNV-1a, 32 bits, over the dump with sorted keys (nlohmann::json's map).
  const uint32_t hash = Fnv1a32(copy.dump());
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", hash);
  return hex;
}

std::string DriverImageForOs(const std::string& image, const OsRelease& os) {
  if (os.id.empty() || image.find('@') != std::string::npos) return image;
  const size_t slash = image.rfind('/');
  const size_t colon = image.rfind(':');
  // No tag (a colon before the last '/' is a registry port).
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) return image;
  std::string version = os.version_id;
  if (MajorVersionOnly(os.id)) version = version.substr(0, version.find('.'));
  return image + "-" + os.id + version;
}

std::string DriverDaemonSetName(const OsRelease& os) {
  std::string name = ComponentDaemonSetName(Component::kDriver);
  if (os.id.empty()) return name;
  std::string suffix = ToLower(os.id + os.version_id);
  for (char& ch : suffix) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-';
    if (!ok) ch = '-';
  }
  return name + "-" + suffix;
}

}  // namespace gpuop::op

#include "doctor/doctor.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>

#include "base/json_field.h"
#include "base/strings.h"
#include "kube/gpu_pods.h"
#include "kube/object.h"
#include "mig/manager.h"
#include "operator/node_labels.h"
#include "operator/policy.h"
#include "operator/upgrade.h"

namespace gpuop::doctor {
namespace {

constexpr const char* kGpu = "nvidia.com/gpu";
constexpr const char* kGpuCountLabel = "nvidia.com/gpu.count";
constexpr std::string_view kMigResourcePrefix = "nvidia.com/mig-";

using Findings = std::vector<Finding>;

std::string Str(const Json& j) { return j.is_string() ? j.get<std::string>() : ""; }

std::string LabelOr(const Json& obj, std::string_view key, std::string fallback = "") {
  return kube::Label(obj, key).value_or(std::move(fallback));
}

// A whole-number quantity ("8"); nullopt when absent or not one.
std::optional<int64_t> Count(const std::optional<std::string>& q) {
  if (!q) return std::nullopt;
  auto n = ParseUint(*q);
  if (!n) return std::nullopt;
  return static_cast<int64_t>(*n);
}

std::string NodeRef(const Json& node) { return "node/" + kube::Name(node); }
std::string PodRef(const Json& pod) {
  return "pod/" + kube::Namespace(pod) + "/" + kube::Name(pod);
}

std::string Plural(int64_t n, const std::string& one) {
  return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
}

bool IsGpuPresent(const Json& node) { return LabelOr(node, op::kGpuPresentLabel) == "true"; }
bool OperandsOff(const Json& node) { return LabelOr(node, op::kDeployOperandsLabel) == "false"; }

// The node advertises MIG devices as their own resources (mig strategy mixed).
bool HasMigResources(const Json& node) {
  const Json& alloc = Field(Field(node, "status"), "allocatable");
  if (!alloc.is_object()) return false;
  for (auto it = alloc.begin(); it != alloc.end(); ++it) {
    if (StartsWith(it.key(), kMigResourcePrefix) && Count(Str(it.value())).value_or(0) > 0) {
      return true;
    }
  }
  return false;
}

// The GPUs a node should allocate: nvidia.com/gpu.count, or the device
// plugin's capacity where that says more (it keeps an unhealthy GPU there).
int64_t ExpectedGpus(const Json& node) {
  return std::max(Count(kube::Label(node, kGpuCountLabel)).value_or(0),
                  Count(kube::Capacity(node, kGpu)).value_or(0));
}

// The controlling owner's name (a pod's DaemonSet or ReplicaSet), or "".
std::string OwnerName(const Json& obj, std::string* kind = nullptr) {
  for (const kube::OwnerReference& o : kube::OwnerReferences(obj)) {
    if (!o.controller) continue;
    if (kind) *kind = o.kind;
    return o.name;
  }
  return "";
}

const Json* PodOfOn(const Snapshot& s, const std::string& daemonset, const std::string& node) {
  for (const Json& pod : s.operator_pods) {
    if (OwnerName(pod) == daemonset && kube::PodNodeName(pod) == node) return &pod;
  }
  return nullptr;
}

// ---- ClusterPolicy ----

void CheckClusterPolicy(const Snapshot& s, Findings& out) {
  const std::string install =
      "install the operator: helm install gpu-operator deploy/helm/gpu-operator -n " +
      s.namespace_ + " --create-namespace (docs/helm.md)";
  if (!s.crd_installed) {
    out.push_back({Severity::kBlocking, "customresourcedefinition/clusterpolicies.nvidia.com",
                   "the ClusterPolicy CRD is not installed",
                   "the GPU operator is not installed on this cluster", install});
    return;
  }
  std::vector<const Json*> active;
  for (const Json& cp : s.cluster_policies) {
    if (Str(Field(Field(cp, "status"), "state")) != "ignored") active.push_back(&cp);
  }
  if (active.empty()) {
    out.push_back({Severity::kBlocking, "clusterpolicy", "no ClusterPolicy",
                   "without one the operator deploys no component (the chart creates "
                   "cluster-policy unless its clusterPolicy is turned off)",
                   install + ", or kubectl apply -f deploy/samples/clusterpolicy.yaml"});
    return;
  }
  for (const Json* cp : active) {
    const std::string ref = "clusterpolicy/" + kube::Name(*cp);
    const std::string state = Str(Field(Field(*cp, "status"), "state"));
    auto ready = kube::FindCondition(*cp, "Ready");
    const std::string reason = ready ? ready->reason : "";
    const std::string message = ready ? ready->message : "";
    if (reason == "NoGPUNodes" || reason == "NFDLabelsMissing") {
      out.push_back({Severity::kBlocking, ref, "the operator finds no GPU node (" + reason + ")",
                     message,
                     "GPU nodes carry feature.node.kubernetes.io/pci-10de.present=true from node "
                     "discovery: check that NFD (or gpuop-node-discovery) runs on them"});
      continue;
    }
    if (state == "ready") continue;
    if (state.empty() && !ready) {
      out.push_back({Severity::kBlocking, ref, "the ClusterPolicy has no status",
                     "the operator has not reconciled it: it is not running, or watches another "
                     "namespace",
                     "kubectl get deploy -n " + s.namespace_ + "; kubectl logs -n " + s.namespace_ +
                         " deploy/gpu-operator"});
      continue;
    }
    // OperandNotReady sums up the component findings reported below.
    const bool operands = reason == "OperandNotReady";
    out.push_back({operands ? Severity::kDegraded : Severity::kBlocking, ref,
                   "ClusterPolicy is " + (state.empty() ? std::string("notReady") : state) +
                       (reason.empty() ? "" : " (" + reason + ")"),
                   message.empty() ? "its status gives no reason" : message,
                   operands ? "see the findings on the components' pods"
                            : "kubectl describe clusterpolicy " + kube::Name(*cp) +
                                  "; fix the field or resource the message names"});
  }
}

// ---- Conflicting device plugins ----

// A container of `ds` runs an NVIDIA device plugin (NVIDIA's image, or gpuop's).
std::string DevicePluginContainer(const Json& ds) {
  const Json& containers = Field(Field(Field(Field(ds, "spec"), "template"), "spec"), "containers");
  if (!containers.is_array()) return "";
  for (const Json& c : containers) {
    const std::string image = Str(Field(c, "image"));
    bool gpuop_plugin = false;
    for (const char* key : {"command", "args"}) {
      const Json& words = Field(c, key);
      if (!words.is_array()) continue;
      for (const Json& w : words) gpuop_plugin = gpuop_plugin || Str(w) == "device-plugin";
    }
    if (image.find("k8s-device-plugin") != std::string::npos ||
        image.find("nvidia-device-plugin") != std::string::npos ||
        (image.find("gpuop") != std::string::npos && gpuop_plugin)) {
      return Str(Field(c, "name")) + " (" + image + ")";
    }
  }
  return "";
}

void CheckConflictingPlugins(const Snapshot& s, Findings& out) {
  for (const Json& ds : s.daemonsets) {
    if (kube::Namespace(ds) == s.namespace_) continue;
    const std::string container = DevicePluginContainer(ds);
    if (container.empty()) continue;
    const Json& desired = Field(Field(ds, "status"), "desiredNumberScheduled");
    if (desired.is_number_integer() && desired.get<int64_t>() == 0) continue;  // runs nowhere
    out.push_back(
        {Severity::kBlocking, "daemonset/" + kube::Namespace(ds) + "/" + kube::Name(ds),
         "a second device plugin advertises nvidia.com/gpu",
         "its container " + container +
             " registers nvidia.com/gpu with the kubelet, as does the "
             "operator's " +
             op::ComponentDaemonSetName(op::Component::kDevicePlugin) + " in " + s.namespace_ +
             ": the kubelet keeps whichever registered last, so GPU "
             "health, MIG and sharing follow the wrong plugin",
         "delete it (kubectl delete daemonset -n " + kube::Namespace(ds) + " " + kube::Name(ds) +
             "), or keep one of the two off the GPU nodes (devicePlugin.enabled=false in the "
             "ClusterPolicy to keep yours)"});
  }
}

// ---- Nodes ----

void CheckUnlabelledGpuNodes(const Snapshot& s, Findings& out) {
  for (const Json& node : s.nodes) {
    const auto labels = kube::Labels(node);
    if (!op::IsGpuNode(labels) || IsGpuPresent(node) || OperandsOff(node)) continue;
    out.push_back({Severity::kBlocking, NodeRef(node),
                   "NVIDIA PCI hardware but no nvidia.com/gpu.present=true label",
                   "node discovery found an NVIDIA device (feature.node.kubernetes.io/pci-10de."
                   "present=true) but the operator has not labelled the node, so no GPU "
                   "component is scheduled there: the operator is not running or has no "
                   "ClusterPolicy",
                   "kubectl get pods -n " + s.namespace_ + "; kubectl logs -n " + s.namespace_ +
                       " deploy/gpu-operator"});
  }
}

// A GPU the device plugin took out, and why ("XID 79 (lost)").
struct Unhealthy {
  std::string unit;
  std::string reason;
};

// The fields of one log line, text (key=value, values quoted when needed) or JSON.
std::map<std::string, std::string> LogFields(const std::string& line) {
  std::map<std::string, std::string> out;
  if (StartsWith(line, "{")) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = Str(it.value());
    }
    return out;
  }
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t eq = line.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = line.substr(i, eq - i);
    std::string value;
    i = eq + 1;
    if (i < line.size() && line[i] == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        value += line[i];
      }
      ++i;
    } else {
      size_t end = line.find(' ', i);
      if (end == std::string::npos) end = line.size();
      value = line.substr(i, end - i);
      i = end;
    }
    out[key] = value;
  }
  return out;
}

// The units still unhealthy at the end of the device plugin's log.
std::vector<Unhealthy> UnhealthyFromLog(const std::string& log) {
  std::map<std::string, std::string> by_unit;  // unit -> reason; erased when healthy again
  for (const std::string& line : Split(log, '\n')) {
    if (line.find("device unhealthy") == std::string::npos &&
        line.find("device healthy again") == std::string::npos) {
      continue;
    }
    auto f = LogFields(line);
    // A line without a reason (an older plugin logged each change twice)
    // keeps the reason already seen.
    if (f["msg"] == "device unhealthy" && (!f["reason"].empty() || !by_unit.count(f["unit"]))) {
      by_unit[f["unit"]] = f["reason"];
    }
    if (f["msg"] == "device healthy again") by_unit.erase(f["unit"]);
  }
  std::vector<Unhealthy> out;
  for (auto& [unit, reason] : by_unit) out.push_back({unit, reason});
  return out;
}

// The fix for a GPU the device plugin took out, by its fault class (the
// device plugin's "(lost)", "(gpu-reset)", "(driver-reload)").
std::string FaultFix(const std::vector<Unhealthy>& gpus, const std::string& node) {
  const std::string drain = "kubectl drain " + node + " --ignore-daemonsets";
  bool lost = false, reload = false;
  for (const Unhealthy& u : gpus) {
    lost = lost || u.reason.find("(lost)") != std::string::npos;
    reload = reload || u.reason.find("(driver-reload)") != std::string::npos;
  }
  if (lost) {
    return "the GPU fell off the bus: " + drain + ", reboot the node, then kubectl uncordon " +
           node + "; if it happens again the GPU needs service";
  }
  if (reload) {
    return "reload the driver: " + drain +
           ", restart the node's driver pod (or reboot), then "
           "kubectl uncordon " +
           node;
  }
  return "reset the GPU once its pods are gone (" + drain +
         "; nvidia-smi -r -i <gpu>) or reboot "
         "the node; the device plugin advertises it again once it is healthy";
}

void CheckNodeGpus(const Snapshot& s, Findings& out) {
  const std::string plugin_ds = op::ComponentDaemonSetName(op::Component::kDevicePlugin);
  for (const Json& node : s.nodes) {
    if (!IsGpuPresent(node) || OperandsOff(node) || HasMigResources(node)) continue;
    const std::string name = kube::Name(node);
    const auto allocatable = Count(kube::Allocatable(node, kGpu));
    const auto capacity = Count(kube::Capacity(node, kGpu));
    const auto count = Count(kube::Label(node, kGpuCountLabel));
    const Json* plugin = PodOfOn(s, plugin_ds, name);
    const std::string plugin_label = LabelOr(node, op::DeployLabel(op::Component::kDevicePlugin));

    if (allocatable.value_or(0) == 0) {
      std::string cause;
      std::string fix;
      if (plugin_label == mig::kPausedForMigChange) {
        cause = "the MIG manager paused the device plugin for a MIG change (" +
                LabelOr(node, mig::kStateLabel, "no state") + ")";
        fix =
            "wait for nvidia.com/mig.config.state=success; if it stays, see the MIG findings "
            "and kubectl logs -n " +
            s.namespace_ + " -l app=nvidia-mig-manager";
      } else if (plugin == nullptr) {
        cause = "no device plugin pod runs on the node (DaemonSet " + plugin_ds + " in " +
                s.namespace_ + " selects " + op::DeployLabel(op::Component::kDevicePlugin) +
                "=true; the node has " + (plugin_label.empty() ? "no such label" : plugin_label) +
                ")";
        fix = "kubectl get daemonset -n " + s.namespace_ + " " + plugin_ds +
              "; check the node's taints against its tolerations and the ClusterPolicy's "
              "devicePlugin.enabled";
      } else if (!kube::IsPodReady(*plugin)) {
        cause = "its device plugin pod " + kube::Name(*plugin) + " is not Ready (see its finding)";
        fix = "kubectl describe pod -n " + s.namespace_ + " " + kube::Name(*plugin);
      } else {
        cause =
            "the device plugin runs but has not registered nvidia.com/gpu with the kubelet "
            "(or every GPU is unhealthy)";
        fix = "kubectl logs -n " + s.namespace_ + " " + kube::Name(*plugin) +
              "; a kubelet restart needs the plugin to register again, which it does by itself";
      }
      out.push_back({Severity::kBlocking, NodeRef(node),
                     "GPU node with no allocatable nvidia.com/gpu" +
                         (count ? " (nvidia.com/gpu.count " + std::to_string(*count) + ")" : ""),
                     cause, fix});
      continue;
    }

    const int64_t want = ExpectedGpus(node);
    if (*allocatable >= want) continue;
    const int64_t missing = want - *allocatable;
    std::vector<Unhealthy> gpus;
    if (plugin != nullptr) {
      if (auto log = s.pod_logs.find(kube::Name(*plugin)); log != s.pod_logs.end()) {
        gpus = UnhealthyFromLog(log->second);
      }
    }
    std::string cause;
    if (!gpus.empty()) {
      std::vector<std::string> which;
      for (const Unhealthy& u : gpus) which.push_back(u.unit + ": " + u.reason);
      cause = "the device plugin marked " + Plural(static_cast<int64_t>(gpus.size()), "GPU") +
              " unhealthy: " + Join(which, "; ");
    } else if (capacity && *capacity > *allocatable) {
      cause = "the device plugin reports " + Plural(*capacity - *allocatable, "GPU") +
              " unhealthy (an XID, an ECC error or a GPU that fell off the bus)" +
              (plugin ? "; kubectl logs -n " + s.namespace_ + " " + kube::Name(*plugin) +
                            " | grep unhealthy names it"
                      : "");
    } else {
      cause = "the device plugin sees only " + Plural(*allocatable, "GPU") +
              ": the others are lost to the driver (fell off the bus) or hidden by its config";
    }
    out.push_back({Severity::kDegraded, NodeRef(node),
                   std::to_string(missing) + " of " + Plural(want, "GPU") +
                       " not allocatable (allocatable nvidia.com/gpu " +
                       std::to_string(*allocatable) +
                       (count == want ? ", nvidia.com/gpu.count " : ", capacity ") +
                       std::to_string(want) + ")",
                   cause, FaultFix(gpus, name)});
  }
}

void CheckUpgrades(const Snapshot& s, Findings& out) {
  std::vector<std::string> waiting;
  for (const Json& node : s.nodes) {
    if (LabelOr(node, op::upgrade::kStateLabel) == "upgrade-required") {
      waiting.push_back(kube::Name(node));
    }
  }
  for (const Json& node : s.nodes) {
    if (LabelOr(node, op::upgrade::kStateLabel) != "upgrade-failed") continue;
    const std::string name = kube::Name(node);
    // The upgrade controller's last word on the node.
    std::string why;
    std::string last;
    for (const Json& e : s.node_events) {
      const Json& obj = Field(e, "involvedObject");
      if (Str(Field(obj, "name")) != name || Str(Field(e, "reason")) != op::upgrade::kEventReason) {
        continue;
      }
      std::string at = Str(Field(e, "lastTimestamp"));
      if (at.empty()) at = Str(Field(e, "eventTime"));
      if (why.empty() || at >= last) {
        why = Str(Field(e, "message"));
        last = at;
      }
    }
    if (why.empty()) why = "no Event left (kubectl describe node " + name + ")";
    std::string problem = "driver upgrade failed (" + std::string(op::upgrade::kStateLabel) +
                          "=upgrade-failed): the node stays cordoned and the rollout halts";
    if (!waiting.empty()) {
      problem += "; " + Plural(static_cast<int64_t>(waiting.size()), "node") + " wait behind it";
    }
    out.push_back({Severity::kBlocking, NodeRef(node), problem, why,
                   "fix the cause, then kubectl label node " + name + " " +
                       op::upgrade::kStateLabel +
                       "=upgrade-required --overwrite to try again "
                       "(docs/driver-upgrade.md)"});
  }
}

// ---- Operator pods ----

// The components without which a node's GPUs cannot be used.
bool BlocksGpus(const std::string& owner) {
  for (op::Component c : {op::Component::kDriver, op::Component::kContainerToolkit,
                          op::Component::kOperatorValidator, op::Component::kDevicePlugin}) {
    if (StartsWith(owner, op::ComponentDaemonSetName(c))) return true;
  }
  return false;
}

// The last non-empty line of a termination message, at most 300 characters.
std::string LastLine(const std::string& text) {
  std::string line;
  for (const std::string& l : Split(text, '\n')) {
    if (!Trim(l).empty()) line = std::string(Trim(l));
  }
  if (line.size() > 300) line = line.substr(0, 297) + "...";
  return line;
}

// "exit code 1: <message>" of a failed termination, "" for none.
std::string Failure(const Json& terminated) {
  if (!terminated.is_object() || terminated.value("exitCode", 0) == 0) return "";
  std::string why = "exit code " + std::to_string(terminated.value("exitCode", 0));
  std::string message = LastLine(Str(Field(terminated, "message")));
  if (message.empty()) message = Str(Field(terminated, "reason"));
  return message.empty() ? why : why + ": " + message;
}

struct ContainerTrouble {
  std::string container;
  bool init = false;
  std::string reason;  // CrashLoopBackOff, ImagePullBackOff, Error, NotReady
  std::string message;
};

bool IsPullError(const std::string& reason) {
  return reason == "ImagePullBackOff" || reason == "ErrImagePull" || reason == "InvalidImageName" ||
         reason == "ErrImageNeverPull";
}

// The first container that keeps the pod from being Ready: init containers
// in order (each waits for the one before), then the others.
std::optional<ContainerTrouble> Trouble(const Json& pod) {
  const Json& status = Field(pod, "status");
  for (const char* key : {"initContainerStatuses", "containerStatuses"}) {
    const bool init = std::string_view(key) == "initContainerStatuses";
    const Json& list = Field(status, key);
    if (!list.is_array()) continue;
    for (const Json& cs : list) {
      const Json& state = Field(cs, "state");
      const Json& waiting = Field(state, "waiting");
      const Json& terminated = Field(state, "terminated");
      ContainerTrouble t{Str(Field(cs, "name")), init, Str(Field(waiting, "reason")), ""};
      if (t.reason == "PodInitializing" || t.reason == "ContainerCreating") return std::nullopt;
      if (!t.reason.empty()) {
        std::string last = Failure(Field(Field(cs, "lastState"), "terminated"));
        t.message = IsPullError(t.reason) || last.empty() ? Str(Field(waiting, "message")) : last;
        return t;
      }
      if (!Failure(terminated).empty()) {
        t.reason = "Error";
        t.message = Failure(terminated);
        return t;
      }
      if (init && !(terminated.is_object() && terminated.value("exitCode", 1) == 0)) {
        t.reason = "Waiting";  // running or not started yet: the pod waits on it
        return t;
      }
      if (!init && !(Field(cs, "ready").is_boolean() && cs["ready"].get<bool>())) {
        t.reason = "NotReady";
        t.message = "its readiness probe fails";
        return t;
      }
    }
  }
  return std::nullopt;
}

std::string ValidatorCheck(const std::string& container) {
  constexpr std::string_view kSuffix = "-validation";
  if (!EndsWith(container, kSuffix)) return "";
  return container.substr(0, container.size() - kSuffix.size());
}

void CheckOperatorPods(const Snapshot& s, Findings& out) {
  for (const Json& pod : s.operator_pods) {
    if (kube::IsPodReady(pod) || kube::IsPodTerminal(pod) || kube::IsBeingDeleted(pod)) continue;
    std::string owner_kind;
    const std::string owner = OwnerName(pod, &owner_kind);
    const std::string node = kube::PodNodeName(pod);
    std::string where = owner.empty() ? "" : owner_kind + " " + owner;
    if (!node.empty()) where += (where.empty() ? "" : " ") + std::string("on node ") + node;
    if (!where.empty()) where += ": ";
    const Severity sev =
        owner_kind != "DaemonSet" || BlocksGpus(owner) ? Severity::kBlocking : Severity::kDegraded;
    const std::string ns = kube::Namespace(pod);
    const std::string name = kube::Name(pod);
    if (node.empty()) {
      auto scheduled = kube::FindCondition(pod, "PodScheduled");
      out.push_back(
          {sev, PodRef(pod), where + "not scheduled",
           scheduled && !scheduled->message.empty() ? scheduled->message : "no node was chosen yet",
           "kubectl describe pod -n " + ns + " " + name});
      continue;
    }
    auto t = Trouble(pod);
    if (!t) continue;  // starting: nothing has gone wrong yet
    const std::string ctr = (t->init ? "init container " : "container ") + t->container;
    const std::string check = ValidatorCheck(t->container);
    std::string problem = where + ctr + " ";
    std::string fix;
    if (IsPullError(t->reason)) {
      problem += "cannot pull its image (" + t->reason + ")";
      fix =
          "check the image (repository, image, version) and imagePullSecrets of this component "
          "in the ClusterPolicy, and that node " +
          node + " can reach the registry";
    } else if (t->reason == "Waiting" || t->reason == "NotReady") {
      problem += t->reason == "Waiting" ? "has not finished" : "is not Ready";
      if (t->reason == "Waiting" && !check.empty()) {
        t->message = "the validator retries the " + check + " check until it passes on the node";
      }
      fix = "kubectl describe pod -n " + ns + " " + name + "; kubectl logs -n " + ns + " " + name +
            " -c " + t->container;
    } else {
      problem += check.empty()
                     ? "fails (" + t->reason + ")"
                     : "fails: the " + check + " validation does not pass (" + t->reason + ")";
      fix = "kubectl logs -n " + ns + " " + name + " -c " + t->container + " --previous";
      if (check == "driver") fix += "; check the driver pod on node " + node + " first";
      if (check == "toolkit") fix += "; check the container-toolkit pod on node " + node + " first";
    }
    if (t->message.empty()) t->message = "no message: see the container's log";
    out.push_back({sev, PodRef(pod), problem, t->message, fix});
  }
}

// ---- MIG ----

void CheckMig(const Snapshot& s, Findings& out) {
  for (const Json& node : s.nodes) {
    const std::string name = kube::Name(node);
    const std::string config = LabelOr(node, mig::kConfigLabel);
    if (config.empty()) continue;
    if (LabelOr(node, mig::kStateLabel) == "failed") {
      std::string why = kube::Annotation(node, mig::kFailureAnnotation).value_or("");
      if (why.empty()) {
        why = "the MIG manager left no reason: kubectl logs -n " + s.namespace_ +
              " -l app=nvidia-mig-manager --field-selector spec.nodeName=" + name;
      }
      out.push_back({Severity::kDegraded, NodeRef(node),
                     "MIG config \"" + config + "\" failed (" + mig::kStateLabel +
                         "=failed); the previous layout stays",
                     why,
                     "fix the config in the MIG ConfigMap, or choose one that fits: kubectl label "
                     "node " +
                         name + " " + mig::kConfigLabel +
                         "=<config> --overwrite "
                         "(gpuop mig defaults lists those for these GPUs)"});
      continue;
    }
    if (config != "all-disabled" && IsGpuPresent(node) && !op::IsMigCapable(kube::Labels(node))) {
      out.push_back({Severity::kWarning, NodeRef(node),
                     "MIG config \"" + config + "\" on a node that is not MIG-capable",
                     "its GPUs (" + LabelOr(node, "nvidia.com/gpu.product", "unknown product") +
                         ") do not support MIG (" + op::kMigCapableLabel + "=" +
                         LabelOr(node, op::kMigCapableLabel, "<unset>") +
                         "): the MIG manager does not run there and the label does nothing",
                     "kubectl label node " + name + " " + mig::kConfigLabel + "-"});
    }
  }
}

// ---- Pending GPU pods ----

// A whole-number quantity written as a string ("2") or a number.
int64_t QuantityOf(const Json& q) {
  if (q.is_number_integer()) return q.get<int64_t>();
  return Count(Str(q)).value_or(0);
}

int64_t GpusRequested(const Json& pod) {
  int64_t n = 0;
  const Json& containers = Field(Field(pod, "spec"), "containers");
  if (!containers.is_array()) return 0;
  for (const Json& c : containers) {
    const Json& resources = Field(c, "resources");
    const Json& limit = Field(Field(resources, "limits"), kGpu);
    n += QuantityOf(limit.is_null() ? Field(Field(resources, "requests"), kGpu) : limit);
  }
  return n;
}

void CheckPendingPods(const Snapshot& s, Findings& out) {
  // Allocatable GPUs per node, the most first.
  std::vector<std::pair<int64_t, std::string>> nodes;
  for (const Json& node : s.nodes) {
    int64_t n = Count(kube::Allocatable(node, kGpu)).value_or(0);
    if (n > 0) nodes.push_back({n, kube::Name(node)});
  }
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::string> where;
  for (size_t i = 0; i < nodes.size() && i < 5; ++i) {
    where.push_back(nodes[i].second + " " + std::to_string(nodes[i].first));
  }
  if (nodes.size() > 5) where.push_back("and " + std::to_string(nodes.size() - 5) + " more");

  for (const Json& pod : s.pending_pods) {
    // The operator's own (the CUDA validator) have their finding from CheckOperatorPods.
    if (!kube::PodNodeName(pod).empty() || kube::Namespace(pod) == s.namespace_) continue;
    const int64_t want = GpusRequested(pod);
    if (want == 0) continue;
    auto scheduled = kube::FindCondition(pod, "PodScheduled");
    const std::string message = scheduled ? scheduled->message : "";
    if (message.find("Insufficient nvidia.com/gpu") == std::string::npos) continue;
    std::string cause;
    if (nodes.empty()) {
      cause = "no node has allocatable nvidia.com/gpu (see the node findings)";
    } else if (nodes.front().first < want) {
      cause = "no node has " + std::to_string(want) +
              " allocatable GPUs; allocatable nvidia.com/gpu: " + Join(where, ", ");
    } else {
      cause =
          "the nodes with enough GPUs have them taken by other pods (or the pod's selector "
          "and tolerations rule them out); allocatable nvidia.com/gpu: " +
          Join(where, ", ");
    }
    out.push_back({Severity::kDegraded, PodRef(pod),
                   "Pending: requests " + Plural(want, "GPU") + " and fits on no node",
                   cause + ". The scheduler: " + message,
                   "free GPUs (kubectl get pods -A -o wide on those nodes), ask for fewer, or add "
                   "GPU nodes; GPUs a node lost come back once its findings are fixed"});
  }
}

// ---- CUDA compatibility ----

struct CudaVersion {
  int major = 0;
  int minor = 0;
  auto operator<=>(const CudaVersion&) const = default;
  std::string Str() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// "12.4" or "12.4.1"; nullopt when not like that.
std::optional<CudaVersion> ParseCuda(std::string_view text) {
  auto parts = Split(std::string(text), '.');
  if (parts.size() < 2) return std::nullopt;
  auto major = ParseUint(parts[0]);
  auto minor = ParseUint(parts[1]);
  if (!major || !minor) return std::nullopt;
  return CudaVersion{static_cast<int>(*major), static_cast<int>(*minor)};
}

// The lowest driver branch whose CUDA version is at least the key: the driver
// each CUDA toolkit ships with, from NVIDIA's CUDA Toolkit Release Notes
// ("CUDA Toolkit and Corresponding Driver Versions"; docs.nvidia.com/deploy/
// cuda-compatibility gives the ranges, 12.x >= 525 and 13.x >= 580). The
// driver's reported CUDA version is what NVIDIA_REQUIRE_CUDA is checked
// against, so a minor needs its own branch. 12.7 was never released.
constexpr struct {
  CudaVersion cuda;
  int branch;
} kDriverBranches[] = {
    {{12, 0}, 525}, {{12, 1}, 530}, {{12, 2}, 535}, {{12, 3}, 545}, {{12, 4}, 550},
    {{12, 5}, 555}, {{12, 6}, 560}, {{12, 8}, 570}, {{12, 9}, 575}, {{13, 0}, 580},
};

// nullopt outside the table (CUDA 11, or newer than it knows).
std::optional<int> MinDriverBranch(const CudaVersion& v) {
  if (v < kDriverBranches[0].cuda) return std::nullopt;
  for (const auto& row : kDriverBranches) {
    if (row.cuda >= v) return row.branch;
  }
  return std::nullopt;
}

std::string EnvValue(const Json& container, std::string_view name) {
  const Json& env = Field(container, "env");
  if (!env.is_array()) return "";
  for (const Json& e : env) {
    if (Str(Field(e, "name")) == name) return Str(Field(e, "value"));
  }
  return "";
}

// What a container needs: NVIDIA_REQUIRE_CUDA's "cuda>=X.Y" term (the
// container toolkit refuses to start it on an older driver), else
// CUDA_VERSION (the CUDA the image was built with); the CUDA images set both.
struct CudaNeed {
  CudaVersion version;
  std::string from;  // the env variable
};

std::optional<CudaNeed> CudaNeeded(const Json& container) {
  // NVIDIA_DISABLE_REQUIRE turns the toolkit's check off, not CUDA's needs.
  const std::string disable = EnvValue(container, "NVIDIA_DISABLE_REQUIRE");
  const std::string require =
      disable == "true" || disable == "1" ? "" : EnvValue(container, "NVIDIA_REQUIRE_CUDA");
  for (const std::string& term : Split(require, ' ')) {
    if (!StartsWith(term, "cuda>=")) continue;
    if (auto v = ParseCuda(std::string_view(term).substr(6))) {
      return CudaNeed{*v, "NVIDIA_REQUIRE_CUDA"};
    }
  }
  if (auto v = ParseCuda(EnvValue(container, "CUDA_VERSION"))) return CudaNeed{*v, "CUDA_VERSION"};
  return std::nullopt;
}

// The CUDA version the node's driver supports, from feature discovery's
// labels (src/gfd/labels.h: cuda.runtime-version.*, the older cuda.runtime.*).
std::optional<CudaVersion> DriverCuda(const Json& node) {
  for (const char* prefix : {"nvidia.com/cuda.runtime-version.", "nvidia.com/cuda.runtime."}) {
    auto major = Count(kube::Label(node, std::string(prefix) + "major"));
    auto minor = Count(kube::Label(node, std::string(prefix) + "minor"));
    if (major && minor) return CudaVersion{static_cast<int>(*major), static_cast<int>(*minor)};
  }
  return std::nullopt;
}

void CheckCuda(const Snapshot& s, Findings& out) {
  std::map<std::string, const Json*> nodes;
  for (const Json& node : s.nodes) nodes[kube::Name(node)] = &node;
  for (const Json& pod : s.gpu_pods) {
    // The operator's own (the CUDA validator) have their finding from CheckOperatorPods.
    if (kube::Namespace(pod) == s.namespace_) continue;
    auto node = nodes.find(kube::PodNodeName(pod));
    if (node == nodes.end()) continue;
    auto have = DriverCuda(*node->second);
    if (!have) continue;
    const Json& containers = Field(Field(pod, "spec"), "containers");
    if (!containers.is_array()) continue;
    for (const Json& c : containers) {
      auto need = CudaNeeded(c);
      if (!need || need->version <= *have) continue;
      // Without NVIDIA_REQUIRE_CUDA a newer minor of the same major still
      // starts, under CUDA's minor version compatibility, with fewer features.
      const bool minor_compat = need->from == "CUDA_VERSION" && need->version.major == have->major;
      const std::string name = node->first;
      const std::string driver =
          LabelOr(*node->second, "nvidia.com/cuda.driver-version.full", "unknown version");
      auto branch = MinDriverBranch(need->version);
      const std::string upgrade =
          branch
              ? "upgrade the driver to the " + std::to_string(*branch) + " branch or later (CUDA " +
                    need->version.Str() + " needs driver >= " + std::to_string(*branch) +
                    "): set driver.version in the ClusterPolicy (helm "
                    "upgrade gpu-operator deploy/helm/gpu-operator -n " +
                    s.namespace_ + " --reuse-values --set driver.version=<a " +
                    std::to_string(*branch) + ".x release>; docs/driver-upgrade.md)"
              : "upgrade the driver to one that supports CUDA " + need->version.Str() +
                    " (NVIDIA's CUDA release notes list the minimum)";
      out.push_back(
          {minor_compat ? Severity::kWarning : Severity::kDegraded, PodRef(pod),
           "container " + Str(Field(c, "name")) + " needs CUDA " + need->version.Str() + " (" +
               need->from + ") but node " + name + "'s driver " + driver + " supports CUDA " +
               have->Str(),
           minor_compat ? "it runs under CUDA minor version compatibility: PTX JIT and features "
                          "newer than CUDA " +
                              have->Str() + " fail"
           : need->from == "NVIDIA_REQUIRE_CUDA"
               ? "the container toolkit refuses to start it (unsatisfied condition: cuda>=" +
                     need->version.Str() + ")"
               : "CUDA " + need->version.Str() + " does not run on a CUDA " +
                     std::to_string(have->major) + " driver",
           upgrade + "; or run an image built for CUDA " + have->Str() +
               " or older; or, on datacenter GPUs, keep the driver and add CUDA forward "
               "compatibility (the cuda-compat package of " +
               need->version.Str() + ") to the image"});
      break;  // one finding per pod
    }
  }
}

// ---- Container runtime and CDI ----

// What a runtime error says is missing on the node; "" for other errors.
std::string RuntimeFault(const std::string& message) {
  if (message.find("no runtime for \"nvidia\" is configured") != std::string::npos) {
    return "the container runtime has no \"nvidia\" runtime configured";
  }
  if (message.find("unresolvable CDI devices") != std::string::npos) {
    return "the CDI spec lacks a device a pod asks for (stale or missing)";
  }
  return "";
}

void CheckRuntime(const Snapshot& s, Findings& out) {
  struct Fault {
    std::string message;  // the first seen
    std::set<std::string> pods;
  };
  std::map<std::pair<std::string, std::string>, Fault> faults;  // (node, fault)
  auto add = [&](const Json& pod, const std::string& message) {
    const std::string fault = RuntimeFault(message);
    if (fault.empty()) return;
    Fault& f = faults[{kube::PodNodeName(pod), fault}];
    if (f.message.empty()) f.message = LastLine(message);
    f.pods.insert(PodRef(pod));
  };
  // A sandbox Event counts while its pod still waits for a sandbox: Pending
  // on a node, not PodReadyToStartContainers (an Event outlives its fault).
  std::map<std::string, const Json*> waiting;  // ns/name
  for (const Json& pod : s.pending_pods) {
    auto sandbox = kube::FindCondition(pod, "PodReadyToStartContainers");
    if (kube::PodNodeName(pod).empty() || (sandbox && sandbox->status == "True")) continue;
    waiting[kube::Namespace(pod) + "/" + kube::Name(pod)] = &pod;
  }
  for (const Json& e : s.sandbox_events) {
    const Json& obj = Field(e, "involvedObject");
    auto pod = waiting.find(Str(Field(obj, "namespace")) + "/" + Str(Field(obj, "name")));
    if (pod != waiting.end()) add(*pod->second, Str(Field(e, "message")));
  }
  // A container that cannot be created says why in its waiting state.
  for (const auto* list : {&s.pending_pods, &s.gpu_pods}) {
    for (const Json& pod : *list) {
      const Json& statuses = Field(Field(pod, "status"), "containerStatuses");
      if (kube::PodNodeName(pod).empty() || !statuses.is_array()) continue;
      for (const Json& cs : statuses) {
        add(pod, Str(Field(Field(Field(cs, "state"), "waiting"), "message")));
      }
    }
  }
  const std::string toolkit_ds = op::ComponentDaemonSetName(op::Component::kContainerToolkit);
  for (const auto& [key, f] : faults) {
    const auto& [node, fault] = key;
    std::vector<std::string> names(f.pods.begin(), f.pods.end());
    if (names.size() > 3) {
      names.resize(3);
      names.push_back("...");
    }
    const Json* toolkit = PodOfOn(s, toolkit_ds, node);
    const std::string fix =
        toolkit ? "the container toolkit writes both as it starts: kubectl delete pod -n " +
                      s.namespace_ + " " + kube::Name(*toolkit) +
                      " (its DaemonSet restarts it), then read why they were stale: kubectl "
                      "logs -n " +
                      s.namespace_ + " " + kube::Name(*toolkit)
                : "no container toolkit pod runs on the node, which writes the runtime config "
                  "and the CDI spec: kubectl get daemonset -n " +
                      s.namespace_ + " " + toolkit_ds +
                      "; check the ClusterPolicy's toolkit.enabled and the node's taints";
    out.push_back({Severity::kBlocking, "node/" + node,
                   fault + ": " + Plural(static_cast<int64_t>(f.pods.size()), "pod") +
                       " cannot start (" + Join(names, ", ") + ")",
                   f.message, fix});
  }
}

// ---- Monitoring ----

// The Service gpuop's operator (and NVIDIA's) creates for the exporter.
constexpr const char* kExporterServiceApp = "nvidia-dcgm-exporter";

void CheckMonitoring(const Snapshot& s, Findings& out) {
  if (!s.service_monitors) return;  // no Prometheus Operator: nothing to tell
  for (const Json& sm : *s.service_monitors) {
    const Json& match = Field(Field(Field(sm, "spec"), "selector"), "matchLabels");
    if (Str(Field(match, "app")) == kExporterServiceApp) return;
  }
  for (const Json& cp : s.cluster_policies) {
    const Json& enabled = Field(Field(Field(cp, "spec"), "dcgmExporter"), "enabled");
    if ((enabled.is_boolean() && !enabled.get<bool>()) ||
        Str(Field(Field(cp, "status"), "state")) == "ignored") {
      continue;
    }
    out.push_back(
        {Severity::kWarning, "clusterpolicy/" + kube::Name(cp),
         "the Prometheus Operator is installed but no ServiceMonitor scrapes the GPU exporter",
         "the API serves monitoring.coreos.com ServiceMonitors and dcgmExporter is enabled, but "
         "none selects the exporter's Service (app=" +
             std::string(kExporterServiceApp) + " in " + s.namespace_ +
             "): no GPU metrics reach Prometheus. gpuop's operator renders none itself "
             "(dcgmExporter.serviceMonitor.enabled is accepted, not acted on)",
         "kubectl apply -f deploy/monitoring/servicemonitor.yaml, its namespace set to " +
             s.namespace_ +
             " and its release label to what your Prometheus selects (docs/monitoring.md)"});
  }
}

}  // namespace

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kBlocking:
      return "blocking";
    case Severity::kDegraded:
      return "degraded";
    case Severity::kWarning:
      return "warning";
  }
  return "warning";
}

std::vector<Finding> Diagnose(const Snapshot& s) {
  Findings out;
  CheckClusterPolicy(s, out);
  CheckConflictingPlugins(s, out);
  CheckUnlabelledGpuNodes(s, out);
  CheckNodeGpus(s, out);
  CheckUpgrades(s, out);
  CheckOperatorPods(s, out);
  CheckMig(s, out);
  CheckPendingPods(s, out);
  CheckCuda(s, out);
  CheckRuntime(s, out);
  CheckMonitoring(s, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return a.severity < b.severity; });
  return out;
}

bool IsGpuWorkload(const Json& pod) {
  const Json& containers = Field(Field(pod, "spec"), "containers");
  if (!containers.is_array()) return false;
  for (const Json& c : containers) {
    if (kube::RequestsGpuResource(Field(c, "resources")) ||
        !EnvValue(c, "NVIDIA_REQUIRE_CUDA").empty() || !EnvValue(c, "CUDA_VERSION").empty()) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> DevicePluginPodsToRead(const Snapshot& s) {
  const std::string plugin_ds = op::ComponentDaemonSetName(op::Component::kDevicePlugin);
  std::vector<std::string> out;
  for (const Json& node : s.nodes) {
    if (!IsGpuPresent(node) || HasMigResources(node)) continue;
    const auto allocatable = Count(kube::Allocatable(node, kGpu)).value_or(0);
    if (allocatable == 0 || allocatable >= ExpectedGpus(node)) continue;
    if (const Json* pod = PodOfOn(s, plugin_ds, kube::Name(node))) out.push_back(kube::Name(*pod));
  }
  return out;
}

nlohmann::ordered_json FindingsJson(const std::vector<Finding>& findings) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Finding& f : findings) {
    out.push_back({{"severity", SeverityName(f.severity)},
                   {"object", f.object},
                   {"problem", f.problem},
                   {"cause", f.cause},
                   {"fix", f.fix}});
  }
  return out;
}

std::string FindingsText(const std::vector<Finding>& findings, const Snapshot& s) {
  std::string out;
  int64_t counts[3] = {0, 0, 0};
  for (const Finding& f : findings) {
    ++counts[static_cast<int>(f.severity)];
    out += std::string(SeverityName(f.severity)) + "  " + f.object + ": " + f.problem + "\n";
    out += "  cause: " + f.cause + "\n";
    out += "  fix:   " + f.fix + "\n\n";
  }
  if (findings.empty()) {
    int64_t gpu_nodes = 0, gpus = 0;
    for (const Json& node : s.nodes) {
      if (!IsGpuPresent(node)) continue;
      ++gpu_nodes;
      gpus += Count(kube::Allocatable(node, kGpu)).value_or(0);
    }
    return "healthy: the ClusterPolicy is ready; " + Plural(gpu_nodes, "GPU node") + ", " +
           std::to_string(gpus) + " nvidia.com/gpu allocatable\n";
  }
  std::vector<std::string> parts;
  for (Severity sev : {Severity::kBlocking, Severity::kDegraded, Severity::kWarning}) {
    if (counts[static_cast<int>(sev)] > 0) {
      parts.push_back(std::to_string(counts[static_cast<int>(sev)]) + " " + SeverityName(sev));
    }
  }
  return out + Plural(static_cast<int64_t>(findings.size()), "finding") + ": " + Join(parts, ", ") +
         "\n";
}

}  // namespace gpuop::doctor

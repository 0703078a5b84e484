// `gpuop doctor`: what is wrong with the GPU stack of a cluster, and how to
// fix it. The core is a pure function of a snapshot of the cluster (the JSON
// objects as the API server returns them) to findings, each naming the
// object, the problem, its cause and the fix, the most blocking first. The
// adapter (snapshot_reader.h) fills the snapshot; the CLI prints the findings.
//
// Checks, in the order they are reported within a severity:
//   - the ClusterPolicy: missing (or its CRD), or not ready (its Ready
//     condition's reason and message);
//   - DaemonSets outside the operator's namespace that run a device plugin
//     advertising nvidia.com/gpu next to the operator's;
//   - nodes with NVIDIA PCI hardware (discovery labels) not labelled
//     nvidia.com/gpu.present=true;
//   - GPU nodes without any allocatable nvidia.com/gpu, or with fewer than
//     nvidia.com/gpu.count (the device plugin's log names the unhealthy GPU
//     and its XID when the snapshot carries it);
//   - nodes in upgrade-failed (the upgrade controller's last Event);
//   - operator pods not Ready: image pulls, crash loops, failing init
//     containers (the validator's checks) with their termination message;
//   - MIG: mig.config.state=failed (the manager's failure annotation), a
//     config on a node that is not MIG-capable;
//   - Pending pods that request nvidia.com/gpu and fit nowhere;
//   - pods that need a newer CUDA than their node's driver supports
//     (NVIDIA_REQUIRE_CUDA or CUDA_VERSION against the gfd labels);
//   - nodes whose container runtime has no "nvidia" runtime or whose CDI spec
//     lacks a device a pod asks for (the pods' sandbox Events and statuses);
//   - the Prometheus Operator present but no ServiceMonitor for the exporter.
//
// Thread-safety: pure functions over values.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gpuop::doctor {

using Json = nlohmann::json;

struct Snapshot {
  std::string namespace_ = "gpu-operator";  // the operator's
  bool crd_installed = true;                // clusterpolicies.nvidia.com is served
  std::vector<Json> cluster_policies;
  std::vector<Json> nodes;
  std::vector<Json> operator_pods;  // every pod in namespace_
  std::vector<Json> daemonsets;     // every namespace
  std::vector<Json> pending_pods;   // status.phase=Pending, every namespace
  // Pods not Succeeded or Failed, bound to a node, that IsGpuWorkload; every namespace.
  std::vector<Json> gpu_pods;
  // Warning Events about Nodes (the upgrade controller's, the MIG manager's).
  std::vector<Json> node_events;
  // Warning Events FailedCreatePodSandBox about Pods (the runtime's error).
  std::vector<Json> sandbox_events;
  // Every ServiceMonitor (monitoring.coreos.com/v1); nullopt when the API
  // serves none (no Prometheus Operator) or they may not be read.
  std::optional<std::vector<Json>> service_monitors;
  // Pod name -> the tail of its log, for the pods DevicePluginPodsToRead names.
  std::map<std::string, std::string> pod_logs;
};

// How much a finding blocks: GPUs cannot be used at all (on a node or the
// cluster); fewer GPUs or features than wanted; worth a look.
enum class Severity { kBlocking, kDegraded, kWarning };
const char* SeverityName(Severity s);  // "blocking", "degraded", "warning"

struct Finding {
  Severity severity = Severity::kWarning;
  std::string object;  // kubectl's form: "node/h100-1", "pod/gpu-operator/<name>"
  std::string problem;
  std::string cause;
  std::string fix;
  bool operator==(const Finding&) const = default;
};

// Every finding, the most blocking first (stable within a severity).
std::vector<Finding> Diagnose(const Snapshot& snapshot);

// A pod the CUDA and runtime checks look at: it requests an NVIDIA GPU
// resource or a container sets NVIDIA_REQUIRE_CUDA or CUDA_VERSION.
bool IsGpuWorkload(const Json& pod);

// The device plugin pods (in the operator's namespace) on GPU nodes that
// allocate fewer GPUs than they have: their logs say which GPU went unhealthy.
std::vector<std::string> DevicePluginPodsToRead(const Snapshot& snapshot);

// [{severity, object, problem, cause, fix}, ...], the keys in that order.
nlohmann::ordered_json FindingsJson(const std::vector<Finding>& findings);
// For people: one block per finding and a summary line.
std::string FindingsText(const std::vector<Finding>& findings, const Snapshot& snapshot);

}  // namespace gpuop::doctor

#include "doctor/snapshot_reader.h"

#include "kube/object.h"
#include "kube/resource.h"

namespace gpuop::doctor {
namespace {

namespace res = kube::resources;

const kube::Resource kServiceMonitors{"monitoring.coreos.com", "v1", "servicemonitors",
                                      "ServiceMonitor", true};

// How far back the device plugin's log is read for "device unhealthy".
constexpr int kLogTailLines = 2000;

Status CannotRead(const std::string& what, const Status& s) {
  std::string fix;
  switch (s.code()) {
    case StatusCode::kPermissionDenied:
      fix =
          "the credentials may not read it: gpuop doctor needs get/list on nodes, pods, "
          "pods/log, daemonsets, events and clusterpolicies.nvidia.com (e.g. the view "
          "ClusterRole plus clusterpolicies; servicemonitors too, for the monitoring check), or "
          "pass --kubeconfig/--context of an admin";
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      fix =
          "the API server did not answer: check that --kubeconfig/--context (or $KUBECONFIG) "
          "name a reachable cluster";
      break;
    default:
      fix = "check --kubeconfig/--context (or $KUBECONFIG)";
  }
  return Status(s.code(), "cannot read the cluster (" + what + "): " + s.message() + "; " + fix);
}

Result<std::vector<Json>> ListAll(kube::Client& client, const kube::Resource& r,
                                  const std::string& ns, kube::ListOptions options = {}) {
  auto list = client.ListAll(r, ns, std::move(options));
  if (!list.ok()) return CannotRead("list " + r.QualifiedName(), list.status());
  return std::move(list->items);
}

}  // namespace

Result<Snapshot> ReadSnapshot(kube::Client& client, const std::string& operator_namespace) {
  Snapshot s;
  s.namespace_ = operator_namespace;
  // Nodes first: the request that fails when the cluster cannot be reached at all.
  GPUOP_ASSIGN_OR_RETURN(s.nodes, ListAll(client, res::kNodes, ""));
  auto policies = client.ListAll(res::kClusterPolicies, "");
  if (kube::IsNotFound(policies.status())) {
    s.crd_installed = false;
  } else if (!policies.ok()) {
    return CannotRead("list clusterpolicies.nvidia.com", policies.status());
  } else {
    s.cluster_policies = std::move(policies->items);
  }
  GPUOP_ASSIGN_OR_RETURN(s.operator_pods, ListAll(client, res::kPods, operator_namespace));
  GPUOP_ASSIGN_OR_RETURN(s.daemonsets, ListAll(client, res::kDaemonSets, ""));
  // One list of every pod: the Pending ones, and the bound GPU workloads.
  GPUOP_ASSIGN_OR_RETURN(std::vector<Json> pods, ListAll(client, res::kPods, ""));
  for (Json& pod : pods) {
    if (kube::IsPodTerminal(pod)) continue;
    const bool pending = kube::PodPhase(pod) == "Pending";
    const bool workload = !kube::PodNodeName(pod).empty() && IsGpuWorkload(pod);
    if (workload) s.gpu_pods.push_back(pod);
    if (pending) s.pending_pods.push_back(std::move(pod));
  }
  GPUOP_ASSIGN_OR_RETURN(s.node_events,
                         ListAll(client, res::kEvents, "",
                                 {.field_selector = "involvedObject.kind=Node,type=Warning"}));
  GPUOP_ASSIGN_OR_RETURN(
      s.sandbox_events,
      ListAll(client, res::kEvents, "",
              {.field_selector =
                   "involvedObject.kind=Pod,type=Warning,reason=FailedCreatePodSandBox"}));
  // Not served (no Prometheus Operator) or not readable: the check is skipped.
  if (auto monitors = client.ListAll(kServiceMonitors, ""); monitors.ok()) {
    s.service_monitors = std::move(monitors->items);
  }
  for (const std::string& pod : DevicePluginPodsToRead(s)) {
    auto log = client.Raw("GET", res::kPods.Path(operator_namespace, pod, "log") +
                                     "?tailLines=" + std::to_string(kLogTailLines));
    if (log.ok()) s.pod_logs[pod] = std::move(log).value();
  }
  return s;
}

}  // namespace gpuop::doctor

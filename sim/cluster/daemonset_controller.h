// DaemonSetController: the cluster simulator's DaemonSet controller, after
// kube-controller-manager's (pkg/controller/daemon), talking to the API only
// through the kube client and informers.
//
// For each DaemonSet it keeps one pod on every node that should run it:
//   - which nodes: spec.template.spec.nodeName (when set), nodeSelector and
//     required node affinity, and the node's NoSchedule/NoExecute taints
//     against the template's tolerations plus the ones kube adds to every
//     daemon pod (not-ready and unreachable NoExecute; disk-, memory- and
//     pid-pressure and unschedulable NoSchedule; network-unavailable for
//     hostNetwork pods). A node whose NoExecute taints are tolerated keeps a
//     pod it already has;
//   - pods are created unbound, with required node affinity on
//     matchFields metadata.name = <node> (as kube does since 1.12), so the
//     scheduler binds them; labelled controller-revision-hash and
//     pod-template-generation, owned by the DaemonSet (controller: true);
//   - pods on nodes that should not run them, or on nodes that are gone, are
//     deleted; Failed pods are deleted and so replaced; extra pods on a node
//     are deleted, the oldest kept;
//   - the template history is kept as ControllerRevisions <ds>-<hash>
//     (revisionHistoryLimit, default 10, unused ones pruned);
//   - RollingUpdate (maxUnavailable, int or percent of the desired count,
//     rounded up; maxSurge 0) deletes old pods within that budget, kube's
//     order and rules; OnDelete replaces nothing by itself;
//   - status: desiredNumberScheduled, currentNumberScheduled,
//     numberMisscheduled, numberReady, numberAvailable, numberUnavailable,
//     updatedNumberScheduled, observedGeneration (and collisionCount), computed
//     as kube computes them.
// Dependents of a deleted DaemonSet go with the API server's garbage collector
// (the emulator has one), as on a real cluster.
//
// Pure decisions (NodeShouldRun, DaemonPodFor, ComputeDaemonSetStatus,
// RollingUpdateDeletions) are exposed for tests; the class is the adapter.
//
// Thread-safety: the functions are pure; Start, Stop and WaitForSync may be
// called from any thread. REQUIRES: the client outlives the controller.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/informer.h"
#include "sim/cluster/controller_common.h"

namespace gpuop::simcluster {

inline constexpr std::string_view kControllerRevisionHashLabel = "controller-revision-hash";
inline constexpr std::string_view kPodTemplateGenerationLabel = "pod-template-generation";

struct ShouldRun {
  bool should_run = false;       // a pod belongs there
  bool should_continue = false;  // a pod already there may stay
};
ShouldRun NodeShouldRun(const Json& ds, const Json& node);

// The template's tolerations plus the ones kube adds to every daemon pod.
Json DaemonPodTolerations(const Json& pod_spec);
// The pod the DaemonSet puts on `node` (no name: generateName "<ds>-").
Json DaemonPodFor(const Json& ds, const std::string& node, const std::string& hash);
// The node a daemon pod is for: spec.nodeName, or before binding the
// matchFields metadata.name of its required node affinity.
std::string DaemonPodTargetNode(const Json& pod);
// The template generation kube labels pods with.
int64_t TemplateGeneration(const Json& ds);

// Pods per node name (only the DaemonSet's own).
using NodePods = std::map<std::string, std::vector<const Json*>>;

// The status kube's updateDaemonSetStatus writes (no observedGeneration).
Json ComputeDaemonSetStatus(const Json& ds, const std::vector<const Json*>& nodes,
                            const NodePods& pods, const std::string& hash,
                            std::chrono::system_clock::time_point now);
// The old pods a RollingUpdate deletes now (names), kube's rules with maxSurge 0.
std::vector<const Json*> RollingUpdateDeletions(const Json& ds,
                                                const std::vector<const Json*>& nodes,
                                                const NodePods& pods, const std::string& hash,
                                                std::chrono::system_clock::time_point now);

struct DaemonSetControllerOptions {
  int workers = 2;
};

class DaemonSetController {
 public:
  static Result<std::unique_ptr<DaemonSetController>> Start(
      kube::Client& client, DaemonSetControllerOptions options = {});
  ~DaemonSetController();  // Stop()
  DaemonSetController(const DaemonSetController&) = delete;
  DaemonSetController& operator=(const DaemonSetController&) = delete;

  void Stop();
  bool WaitForSync(std::chrono::milliseconds timeout);

 private:
  DaemonSetController(kube::Client& client, DaemonSetControllerOptions options);
  kube::ReconcileResult Reconcile(const std::string& key);
  // The current revision's hash (creating the ControllerRevision if needed).
  Result<std::string> SyncHistory(const Json& ds, const std::vector<kube::ObjectPtr>& pods);
  Status DeletePod(const std::string& ds_key, const Json& pod, const std::string& why);

  kube::Client& client_;
  const DaemonSetControllerOptions options_;
  std::unique_ptr<kube::SharedInformerFactory> factory_;
  kube::Informer* daemonsets_ = nullptr;
  kube::Informer* pods_ = nullptr;
  kube::Informer* nodes_ = nullptr;
  kube::Informer* revisions_ = nullptr;
  std::unique_ptr<kube::Controller> controller_;
  kube::Informer::HandlerId node_handler_ = 0;
  Expectations expectations_;
  std::jthread thread_;
};

}  // namespace gpuop::simcluster

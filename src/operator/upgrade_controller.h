// UpgradeController: the driver upgrade controller, the adapter around the
// pure core in upgrade.h. One key ("driver-upgrade"), one worker: a pass
// reads every node, the driver DaemonSets, their ControllerRevisions and
// pods and the validator pods from informer caches, lists the workload pods
// of the nodes whose state needs them (field selector spec.nodeName=<node>),
// and, for a node evicting GPU pods, the ResourceClaims gpu.nvidia.com
// allocated (none where resource.k8s.io/v1 is not served), asks
// PlanUpgrade what to do and does it: driver pod deletes, policy/v1
// Evictions (a 429 is a PodDisruptionBudget: retried next pass until
// podDeletion.timeoutSeconds), one merge patch per node (state label,
// annotations, cordon), Events with reason GPUDriverUpgrade on the Node.
//
// Passes are triggered by changes of nodes, driver pods, DaemonSets,
// ControllerRevisions, validator pods and the ClusterPolicy, and by the
// plan's own deadlines (requeue-after); there is no periodic poll. All
// upgrade state lives on the nodes, so a restart resumes in any state.
//
// While autoUpgrade is on (and the driver enabled) every node with a driver
// pod carries nvidia.com/gpu-driver-upgrade-enabled=true, which tells the
// driver manager to leave eviction and drain to this controller; while it
// is off, the state labels and the controller's annotations are removed.
//
// Thread-safety: Setup, then Run from one thread; Enqueue from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "operator/upgrade.h"

namespace gpuop::op {

// The gpu_operator_driver_auto_upgrade_enabled and
// gpu_operator_nodes_upgrades_* gauges.
struct UpgradeMetrics {
  std::atomic<int64_t> auto_upgrade_enabled{0};
  std::atomic<int64_t> in_progress{0};
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> available{0};
  std::atomic<int64_t> pending{0};
};

// What the ClusterPolicy says about upgrades.
struct UpgradeConfig {
  enum class Mode {
    kOff,   // no ClusterPolicy, driver disabled, or autoUpgrade false: remove the labels
    kHold,  // the ClusterPolicy does not parse: change nothing until it is fixed
    kOn,
  };
  Mode mode = Mode::kOff;
  upgrade::UpgradePolicy policy;
};

struct UpgradeControllerOptions {
  std::string namespace_ = "gpu-operator";  // where the driver and validator pods run
  std::function<UpgradeConfig()> config;    // read at every pass
  const Clock* clock = nullptr;             // its Now(); null: RealClock()
};

class UpgradeController {
 public:
  static constexpr const char* kKey = "driver-upgrade";

  UpgradeController(kube::Client& client, UpgradeControllerOptions options,
                    kube::EventRecorder* events, UpgradeMetrics* metrics);
  ~UpgradeController();
  UpgradeController(const UpgradeController&) = delete;
  UpgradeController& operator=(const UpgradeController&) = delete;

  // Gets its informers from `factory` (driver pods, DaemonSets,
  // ControllerRevisions and validator pods in the namespace) and watches
  // `nodes`, which must keep labels, the upgrade annotations,
  // spec.unschedulable and the Ready condition. Makes no request.
  void Setup(kube::SharedInformerFactory& factory, kube::Informer& nodes);
  // Runs the controller until `stop` (the informers are started by their owner).
  Status Run(std::stop_token stop);
  // A ClusterPolicy change.
  void Enqueue();

 private:
  kube::ReconcileResult Reconcile();
  kube::ReconcileResult Disable();
  Status Apply(const upgrade::NodeAction& action, const kube::Json& node,
               std::optional<bool> enabled_annotation);

  kube::Client& client_;
  const UpgradeControllerOptions options_;
  kube::EventRecorder* events_;
  UpgradeMetrics* metrics_;

  kube::Informer* nodes_ = nullptr;
  kube::Informer* driver_pods_ = nullptr;
  kube::Informer* daemonsets_ = nullptr;
  kube::Informer* revisions_ = nullptr;
  kube::Informer* validator_pods_ = nullptr;
  kube::Informer::HandlerId node_handler_ = 0;
  std::unique_ptr<kube::Controller> controller_;
};

}  // namespace gpuop::op

// Operator: the ClusterPolicy controller and the node-labelling controller,
// wired to informers. The adapters around the pure cores (policy.h,
// node_labels.h, render.h, status.h): they read caches, write only
// differences, and report the truth in the ClusterPolicy's status.
//
//   ClusterPolicy controller (one key): on a change to a ClusterPolicy, to an
//   object the operator owns, or to the set of GPU nodes, it renders every
//   enabled component, applies (server-side apply, field manager
//   "gpuop-operator") the objects whose nvidia.com/last-applied-hash differs
//   from the cached one, deletes owned objects no longer wanted, and writes
//   the status when it changed. No ClusterPolicy: everything owned goes.
//
//   Driver upgrade controller (upgrade_controller.h): replaces the driver
//   pods node by node when the driver DaemonSets change.
//
//   Node controller (key: node name): on a node's label change, or on any
//   ClusterPolicy change, one merge patch of exactly the labels that differ
//   from what PlanNodeLabels wants; nothing when nothing differs.
//
// Event-driven: no periodic polling; failed passes are retried with the
// work queue's per-key backoff. An idle cluster sees no writes.
//
// Thread-safety: Setup, then Run (or RunCaches and RunControllers, each on a
// thread of its own); Ready, DescribeCaches and the metrics accessors from
// any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <stop_token>
#include <string>

#include "base/mutex.h"
#include "base/status.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "operator/policy.h"
#include "operator/upgrade_controller.h"

namespace gpuop::op {

struct OperatorOptions {
  OperatorEnv env;
  std::string field_manager = "gpuop-operator";
  // Create or upgrade the ClusterPolicy CRD at start (Helm never upgrades CRDs).
  bool install_crd = true;
  int node_workers = 4;
};

// The gpu_operator_* metrics (NVIDIA's names).
struct OperatorMetrics {
  std::atomic<int64_t> gpu_nodes_total{0};
  // 1 ready, 0 notReady, -1 reconcile failed, -2 no ClusterPolicy (NVIDIA's values).
  std::atomic<int64_t> reconciliation_status{-2};
  std::atomic<int64_t> reconciliation_total{0};
  std::atomic<int64_t> reconciliation_failed_total{0};
  std::atomic<int64_t> reconciliation_last_success_ts_seconds{0};
  std::atomic<int64_t> reconciliation_has_nfd_labels{0};
  std::atomic<int64_t> node_label_patches_total{0};
  std::atomic<int64_t> object_writes_total{0};
  UpgradeMetrics upgrade;  // the driver upgrade controller's

  // Prometheus text exposition (version 0.0.4).
  std::string Exposition() const;
};

inline constexpr const char* kCrdName = "clusterpolicies.nvidia.com";
// Bumped with every change of the CRD's schema (deploy/helm/gpu-operator/crds).
inline constexpr const char* kCrdVersionAnnotation = "gpuop.io/crd-version";

// Creates the ClusterPolicy CRD built into this binary, or upgrades the one
// installed when its kCrdVersionAnnotation is older (NVIDIA's counts as 0);
// a newer one is left alone. With `wait`, also waits (up to `wait`) until the
// CRD is Established. The one path for a CRD upgrade: the operator at start
// and `gpuop crd apply` (Helm's pre-upgrade hook) both run it.
Status EnsureClusterPolicyCrd(kube::Client& client, const std::string& field_manager,
                              std::chrono::seconds wait = std::chrono::seconds(0));

class Operator {
 public:
  Operator(kube::Client& client, OperatorOptions options, kube::EventRecorder* events);
  ~Operator();
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // Installs or upgrades the CRD (install_crd), creates the informers and the
  // controllers. Makes requests only for the CRD.
  Status Setup();
  // Fills the informer caches and keeps them current until `stop`: every
  // replica runs it, so a follower that takes over acts at once.
  Status RunCaches(std::stop_token stop);
  // Runs the controllers until `stop`: the leader only, while RunCaches runs.
  Status RunControllers(std::stop_token stop);
  // Both, until `stop` (tests, and a process without leader election).
  Status Run(std::stop_token stop);
  // True once the caches have synced (readiness).
  bool Ready() const { return ready_.load(); }
  const OperatorMetrics& metrics() const { return metrics_; }
  // Every informer cache as kube::Informer::Describe() gives it (an empty
  // array before Setup): for /debug/informers, to check the caches against
  // the server. REQUIRES: not concurrent with Setup.
  Json DescribeCaches() const;

 private:
  kube::ReconcileResult ReconcilePolicy(const std::string& key);
  kube::ReconcileResult ReconcileNode(const std::string& name);
  // The opt-in validation taint of one node (node_labels.h).
  Status SyncValidationTaint(const Json& node, bool policy_active);
  // Applies the namespace's pod-security labels as kPsaFieldManager (none:
  // removes those gpuop set); writes only when something differs.
  Status SyncPsaLabels(const std::map<std::string, std::string>& wanted);
  Status Cleanup();
  // The parsed active policy (cached by resourceVersion); null without one
  // or when it does not parse.
  std::shared_ptr<const Policy> ActivePolicy();
  void EnqueueAllNodes();
  // What the active ClusterPolicy says about driver upgrades.
  UpgradeConfig DriverUpgradeConfig();

  kube::Client& client_;
  const OperatorOptions options_;
  kube::EventRecorder* events_;
  OperatorMetrics metrics_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> awaiting_namespace_{false};  // its wait was logged

  std::unique_ptr<kube::SharedInformerFactory> factory_;
  std::unique_ptr<kube::Informer> nodes_;  // metadata-only cache
  kube::Informer* policies_ = nullptr;
  std::vector<kube::Informer*> owned_;  // one per RenderedResourceTypes()
  kube::Informer* daemonsets_ = nullptr;
  kube::Informer* validator_pods_ = nullptr;  // app=nvidia-operator-validator
  std::unique_ptr<kube::Controller> policy_controller_;
  std::unique_ptr<kube::Controller> node_controller_;
  std::unique_ptr<UpgradeController> upgrade_controller_;

  Mutex policy_mu_;
  std::string policy_version_ GPUOP_GUARDED_BY(policy_mu_);
  std::shared_ptr<const Policy> policy_ GPUOP_GUARDED_BY(policy_mu_);
};

}  // namespace gpuop::op

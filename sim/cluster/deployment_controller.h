// DeploymentController and ReplicaSetController: the cluster simulator's
// apps/v1 Deployment and ReplicaSet controllers, after kube-controller-
// manager's, talking to the API only through the kube client and informers.
//
// Deployment -> ReplicaSets:
//   - the new ReplicaSet is <deployment>-<pod-template-hash>, its selector and
//     template labelled pod-template-hash, owned by the Deployment, annotated
//     deployment.kubernetes.io/revision (also written on the Deployment),
//     desired-replicas and max-replicas;
//   - RollingUpdate: maxSurge (rounded up) and maxUnavailable (rounded down;
//     both 0 means maxUnavailable 1), defaults 25%: the new ReplicaSet grows
//     within replicas + maxSurge, old ones shrink (unavailable pods first)
//     while replicas - maxUnavailable stay available; Recreate: old
//     ReplicaSets to 0, and once their pods are gone the new one to replicas;
//   - scaling goes through the same steps; old ReplicaSets without pods
//     beyond revisionHistoryLimit (default 10) are deleted;
//   - status: replicas, updatedReplicas, readyReplicas, availableReplicas,
//     unavailableReplicas, observedGeneration and the Available and
//     Progressing conditions with kube's reasons and messages (no progress
//     deadline).
// ReplicaSet -> Pods: keeps spec.replicas active pods (created from the
// template with generateName <rs>-, owned by it; extra ones deleted in kube's
// order: unbound, pending, not ready, newest first) and writes replicas,
// fullyLabeledReplicas, readyReplicas, availableReplicas and
// observedGeneration.
//
// RolloutStep is the pure core of a rollout.
//
// Thread-safety: RolloutStep is pure; Start, Stop and WaitForSync may be called
// from any thread. REQUIRES: the client outlives the controllers.
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

inline constexpr std::string_view kPodTemplateHashLabel = "pod-template-hash";
inline constexpr std::string_view kRevisionAnnotation = "deployment.kubernetes.io/revision";

// A ReplicaSet as a rollout sees it; oldest first among the old ones.
struct ReplicaSetState {
  std::string name;
  int64_t replicas = 0;   // spec.replicas
  int64_t available = 0;  // status.availableReplicas
  int64_t pods = 0;       // status.replicas
};

// The spec.replicas to write now (ReplicaSet name -> replicas; only changes).
std::map<std::string, int64_t> RolloutStep(const Json& deployment, const ReplicaSetState& fresh,
                                           const std::vector<ReplicaSetState>& old);

class ReplicaSetController {
 public:
  static Result<std::unique_ptr<ReplicaSetController>> Start(kube::Client& client, int workers = 2);
  ~ReplicaSetController();  // Stop()
  ReplicaSetController(const ReplicaSetController&) = delete;
  ReplicaSetController& operator=(const ReplicaSetController&) = delete;
  void Stop();
  bool WaitForSync(std::chrono::milliseconds timeout);

 private:
  explicit ReplicaSetController(kube::Client& client) : client_(client) {}
  kube::ReconcileResult Reconcile(const std::string& key);

  kube::Client& client_;
  std::unique_ptr<kube::SharedInformerFactory> factory_;
  kube::Informer* replicasets_ = nullptr;
  kube::Informer* pods_ = nullptr;
  std::unique_ptr<kube::Controller> controller_;
  Expectations expectations_;
  std::jthread thread_;
};

class DeploymentController {
 public:
  static Result<std::unique_ptr<DeploymentController>> Start(kube::Client& client, int workers = 2);
  ~DeploymentController();  // Stop()
  DeploymentController(const DeploymentController&) = delete;
  DeploymentController& operator=(const DeploymentController&) = delete;
  void Stop();
  bool WaitForSync(std::chrono::milliseconds timeout);

 private:
  explicit DeploymentController(kube::Client& client) : client_(client) {}
  kube::ReconcileResult Reconcile(const std::string& key);

  kube::Client& client_;
  std::unique_ptr<kube::SharedInformerFactory> factory_;
  kube::Informer* deployments_ = nullptr;
  kube::Informer* replicasets_ = nullptr;
  std::unique_ptr<kube::Controller> controller_;
  Expectations expectations_;
  std::jthread thread_;
};

}  // namespace gpuop::simcluster

// Scheduler: the cluster simulator's kube-scheduler. It binds pending pods
// (spec.nodeName empty, spec.schedulerName "default-scheduler" or unset) to a
// node with a pods/binding POST, exactly as kube-scheduler does, so it works
// against the API emulator and a real API server alike.
//
// The core (ScheduleOne) is a pure function of the pod and the nodes with what
// is already bound to them. It filters in kube-scheduler's plugin order and
// with its reasons:
//   NodeUnschedulable  spec.unschedulable without a toleration of
//                      node.kubernetes.io/unschedulable:NoSchedule
//   TaintToleration    NoSchedule/NoExecute taints; a node whose Ready
//                      condition is not True counts as tainted
//                      node.kubernetes.io/not-ready:NoSchedule (what the node
//                      lifecycle controller would add)
//   NodeAffinity       spec.nodeSelector and required node affinity
//   NodeResourcesFit   pods, cpu, memory, ephemeral-storage and extended
//                      resources (nvidia.com/gpu, nvidia.com/mig-*) against
//                      status.allocatable minus the requests of the pods bound
//                      there
//   DynamicResources   the pod's ResourceClaims (spec.resourceClaims): an
//                      allocated claim pins the pod to the nodes of its
//                      allocation ("resourceclaim not available on the
//                      node"); unallocated ones must all be allocatable on
//                      the node from its ResourceSlices (dra_allocator.h;
//                      "cannot allocate all claims")
// and scores the feasible nodes by least allocated cpu and memory, ties broken
// by node name. A pod that fits nowhere gets PodScheduled=False, reason
// Unschedulable, with kube-scheduler's message, e.g.
//   0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't
//   match Pod's node affinity/selector. preemption: 0/3 nodes are available: 1
//   No preemption victims found for incoming pod, 2 Preemption is not helpful
//   for scheduling.
// and a FailedScheduling Event; it is tried again whenever a node changes in a
// way that matters (labels, taints, allocatable, readiness) or a pod leaves a
// node. No preemption is done.
//
// The adapter (Scheduler) keeps pods and nodes in informers and schedules one
// pod at a time on one worker; pods it bound are "assumed" on their node until
// the informer shows the binding, so two pods never take the same resources.
//
// For DRA it also does what kube-controller-manager's resourceclaim
// controller does, since the simulator runs none: a pod's claim entry naming
// a ResourceClaimTemplate gets a claim made from it (generateName
// <pod>-<entry>-, owned by the pod, annotation resource.kubernetes.io/
// pod-claim-name) recorded in the pod's status.resourceClaimStatuses. Before
// the pods/binding it writes each claim's status (the allocation, and the pod
// added to reservedFor) through resourceclaims/status; a claim shared by
// pods is allocated once and reserved for each. When a reserving pod is gone
// or finished it leaves reservedFor; a claim nobody reserves any more is
// deallocated, and deleted when it was made for a pod that is gone or done.
// Written claims are assumed like pods until the informer shows them, so two
// claims never take one device.
//
// Thread-safety: ScheduleOne is pure. Scheduler::Start, Stop and stats may be
// called from any thread. REQUIRES: the client outlives the Scheduler.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "sim/cluster/controller_common.h"
#include "sim/cluster/dra_allocator.h"

namespace gpuop::simcluster {

// The resource.k8s.io/v1 collections the scheduler reads and writes.
using kube::resources::kDeviceClasses;
using kube::resources::kResourceClaims;
using kube::resources::kResourceClaimTemplates;
using kube::resources::kResourceSlices;

// What the DynamicResources filter reads, for a pod with spec.resourceClaims.
struct DraState {
  std::vector<const Json*> claims;  // the pod's ResourceClaims, in spec order
  // Non-empty: why the claims cannot be used at all (a claim missing or being
  // deleted); no node is tried, as with a PreFilter failure.
  std::string unusable;
  DeviceClasses classes;
  std::map<std::string, std::vector<const Json*>> slices;  // by spec.nodeName
  std::set<DeviceRef> in_use;                              // held by other claims
  DraAllocator* allocator = nullptr;                       // REQUIRES: set
};

// A node as the scheduler sees it: the object and what is bound to it.
struct NodeUsage {
  const Json* node = nullptr;
  ResourceList requested;  // summed PodRequests of the pods bound there
  int64_t pods = 0;        // pods bound there (not Succeeded/Failed)
};

struct ScheduleResult {
  std::string node;     // the chosen node; "" when none fits
  std::string message;  // when none fits: kube-scheduler's FitError message
  // With DRA: status.allocation per DraState::claims entry on the chosen node
  // (null for claims already allocated); when none fits, the allocator's
  // explanation for the first node it refused (for logs).
  std::vector<Json> allocations;
  std::string dra_detail;
};

// Decides where `pod` goes. `nodes` in any order; `dra` for pods with claims.
ScheduleResult ScheduleOne(const Json& pod, const std::vector<NodeUsage>& nodes,
                           DraState* dra = nullptr);

// The reasons one node rejects `pod` (empty: it fits), whether removing pods
// could help (false: only resources were missing), and the node's claim
// allocations when it fits.
struct FilterResult {
  std::vector<std::string> reasons;
  bool unresolvable = false;
  std::vector<Json> allocations;
  std::string dra_detail;
};
FilterResult FilterNode(const Json& pod, const NodeUsage& node, DraState* dra = nullptr);

struct SchedulerOptions {
  std::string scheduler_name = "default-scheduler";
};

struct SchedulerStats {
  uint64_t bound = 0;
  uint64_t unschedulable = 0;  // attempts that found no node
  uint64_t bind_errors = 0;
};

class Scheduler {
 public:
  // Builds the informers and starts scheduling on a thread of its own.
  static Result<std::unique_ptr<Scheduler>> Start(kube::Client& client,
                                                  SchedulerOptions options = {});
  ~Scheduler();  // Stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Stops and joins the thread. Idempotent.
  void Stop();
  // True once the informers have synced and pods are being scheduled.
  bool WaitForSync(std::chrono::milliseconds timeout);
  SchedulerStats stats() const;

 private:
  Scheduler(kube::Client& client, SchedulerOptions options);
  kube::ReconcileResult Reconcile(const std::string& key);
  std::vector<NodeUsage> Usage(std::vector<kube::ObjectPtr>* keep);
  void EnqueuePending();
  Status MarkUnschedulable(const Json& pod, const std::string& message);

  // DRA: the pod's claims (templates turned into claims first) and what the
  // allocator reads; `keep` holds the cache objects `dra` points into.
  Status PrepareDra(const Json& pod, DraState* dra, std::vector<kube::ObjectPtr>* keep);
  Result<std::string> ClaimFromTemplate(const Json& pod, const Json& entry,
                                        std::vector<kube::ObjectPtr>* keep);
  kube::ObjectPtr Claim(const std::string& key);  // the assumed one when the cache lags
  Status ReserveClaims(const Json& pod, const DraState& dra, const std::vector<Json>& allocations);
  kube::ReconcileResult ReconcileClaim(const std::string& key);
  void EnqueueClaimsOf(const Json& pod);

  kube::Client& client_;
  const SchedulerOptions options_;
  std::unique_ptr<kube::SharedInformerFactory> factory_;
  kube::Informer* pods_ = nullptr;
  kube::Informer* nodes_ = nullptr;
  kube::Informer* claims_ = nullptr;
  kube::Informer* classes_ = nullptr;
  kube::Informer* slices_ = nullptr;
  std::unique_ptr<kube::Controller> controller_;
  std::unique_ptr<kube::EventRecorder> events_;
  kube::Informer::HandlerId pod_handler_ = 0, node_handler_ = 0, claim_handler_ = 0,
                            class_handler_ = 0, slice_handler_ = 0;
  DraAllocator allocator_;  // the worker thread's

  struct Assumed {
    std::string node;
    ResourceList requests;
  };
  mutable std::mutex mu_;
  std::map<std::string, Assumed> assumed_;  // GUARDED_BY(mu_): bound, cache not caught up
  // GUARDED_BY(mu_): claim statuses written, cache not caught up (by key)
  std::map<std::string, kube::ObjectPtr> assumed_claims_;
  // GUARDED_BY(mu_): claims made from templates, by "<pod uid>/<entry>", until
  // the pod goes (its status may lag behind in the cache)
  std::map<std::string, std::string> template_claims_;

  std::atomic<uint64_t> bound_{0}, unschedulable_{0}, bind_errors_{0};
  std::jthread thread_;
};

}  // namespace gpuop::simcluster

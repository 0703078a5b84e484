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

namespace gpuop::simcluster {

// A node as the scheduler sees it: the object and what is bound to it.
struct NodeUsage {
  const Json* node = nullptr;
  ResourceList requested;  // summed PodRequests of the pods bound there
  int64_t pods = 0;        // pods bound there (not Succeeded/Failed)
};

struct ScheduleResult {
  std::string node;     // the chosen node; "" when none fits
  std::string message;  // when none fits: kube-scheduler's FitError message
};

// Decides where `pod` goes. `nodes` in any order.
ScheduleResult ScheduleOne(const Json& pod, const std::vector<NodeUsage>& nodes);

// The reasons one node rejects `pod` (empty: it fits), and whether removing
// pods could help (false: only resources were missing).
struct FilterResult {
  std::vector<std::string> reasons;
  bool unresolvable = false;
};
FilterResult FilterNode(const Json& pod, const NodeUsage& node);

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

  kube::Client& client_;
  const SchedulerOptions options_;
  std::unique_ptr<kube::SharedInformerFactory> factory_;
  kube::Informer* pods_ = nullptr;
  kube::Informer* nodes_ = nullptr;
  std::unique_ptr<kube::Controller> controller_;
  std::unique_ptr<kube::EventRecorder> events_;
  kube::Informer::HandlerId pod_handler_ = 0, node_handler_ = 0;

  struct Assumed {
    std::string node;
    ResourceList requests;
  };
  mutable std::mutex mu_;
  std::map<std::string, Assumed> assumed_;  // GUARDED_BY(mu_): bound, cache not caught up

  std::atomic<uint64_t> bound_{0}, unschedulable_{0}, bind_errors_{0};
  std::jthread thread_;
};

}  // namespace gpuop::simcluster

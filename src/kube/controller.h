// Controller: a level-based reconcile loop, controller-runtime style. Event
// handlers on informers turn object events into keys on a WorkQueue; worker
// threads take one key at a time and call reconcile(key), which reads the
// current state from informer caches (never the event) and acts on it.
//
// The requeue policy lives here and nowhere else:
//   - reconcile returns an error (or throws: the exception is caught, logged
//     and counted as an error)  -> AddRateLimited(key): per-key backoff;
//   - requeue_after > 0                                   -> Forget + AddAfter;
//   - requeue (without requeue_after)                     -> AddRateLimited;
//   - success                                             -> Forget.
// The queue guarantees that a key is never reconciled by two workers at once.
//
// Run waits until every informer the controller watches (or was told to wait
// for) has synced, then runs `workers` threads until stop; on stop the queue
// shuts down and Run returns once the running reconciles have finished.
//
// Thread-safety: Watch, RequireSynced and Enqueue may be called from any
// thread; Run once. REQUIRES: informers passed to Watch outlive the
// controller (the destructor removes its handlers from them).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "kube/informer.h"
#include "kube/workqueue.h"

namespace gpuop::kube {

struct ReconcileResult {
  Status status;
  bool requeue = false;
  std::chrono::milliseconds requeue_after{0};

  static ReconcileResult Ok() { return {}; }
  static ReconcileResult Error(Status s) { return {std::move(s)}; }
  static ReconcileResult RequeueAfter(std::chrono::milliseconds after) {
    return {Status::Ok(), false, after};
  }
};

using ReconcileFunc = std::function<ReconcileResult(const std::string& key)>;
// The keys an object event enqueues (e.g. a pod's event enqueues its node).
using MapFunc = std::function<std::vector<std::string>(const Json& obj)>;

// Counters, for tests and a reconcile_total{result} metric.
struct ControllerStats {
  uint64_t reconciles = 0;     // reconcile calls
  uint64_t errors = 0;         // errors, exceptions included
  uint64_t exceptions = 0;     // exceptions caught
  uint64_t requeue_after = 0;  // successes with requeue_after
};

class Controller {
 public:
  Controller(std::string name, WorkQueueOptions queue_options, int workers,
             ReconcileFunc reconcile);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  const std::string& name() const { return name_; }

  // Enqueues the keys `map` gives for every add, update (old and new object)
  // and delete of `informer`; no map: the object's own key. Objects already
  // cached are enqueued at once. Also waits for the informer's sync in Run.
  void Watch(Informer& informer, MapFunc map = nullptr);
  // Run also waits for this informer's sync (a cache reconcile reads but
  // whose events do not enqueue anything).
  void RequireSynced(const Informer& informer);
  void Enqueue(const std::string& key) { queue_.Add(key); }

  // Waits for the informers' sync, then reconciles with `workers` threads
  // until `stop`. Returns OK after stop; Aborted when stop came before sync.
  Status Run(std::stop_token stop);

  // One step of a worker: takes a key (blocking), reconciles it, applies the
  // requeue policy, marks it done. False when the queue has shut down.
  // Public so benches and tests can drive the loop on their own thread.
  bool ProcessNextItem();

  WorkQueue& queue() { return queue_; }
  ControllerStats stats() const;

 private:
  ReconcileResult SafeReconcile(const std::string& key);

  const std::string name_;
  const int workers_;
  const ReconcileFunc reconcile_;
  WorkQueue queue_;

  Mutex mu_;
  std::vector<std::pair<Informer*, Informer::HandlerId>> handlers_ GPUOP_GUARDED_BY(mu_);
  std::vector<const Informer*> sync_on_ GPUOP_GUARDED_BY(mu_);

  std::atomic<uint64_t> reconciles_{0}, errors_{0}, exceptions_{0}, requeue_after_{0};
};

}  // namespace gpuop::kube

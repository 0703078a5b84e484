// WorkQueue: the queue of keys ("ns/name") between informers and a
// controller's reconcile workers, with client-go's workqueue semantics:
//
//   - a set, not a list: a key added while it waits is not queued twice;
//   - a key handed out by Get is "processing" until Done; added meanwhile, it
//     is queued again at Done, so two workers never hold the same key;
//   - AddAfter(key, delay): queued once the delay has passed (the earliest
//     pending delay of a key wins);
//   - AddRateLimited(key): AddAfter with the key's backoff from ItemRateLimiter
//     (per-key exponential, plus an optional overall token bucket); Forget
//     resets it once the key succeeds.
//
// Delayed keys need no thread of their own: waiting Get calls wake at the
// earliest due time and move due keys into the queue.
//
// ShutDown: adds are ignored from then on, Get returns nullopt at once (keys
// still queued are dropped) and every waiter wakes. ShutDownWithDrain also
// waits until every key handed out has been marked Done.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "kube/rate_limiter.h"

namespace gpuop::kube {

struct RateLimiterOptions {
  // Per-key backoff: base_delay * 2^(failures so far), capped at max_delay
  // (controller-runtime's default: 5 ms to 1000 s).
  std::chrono::milliseconds base_delay{5};
  std::chrono::milliseconds max_delay{std::chrono::seconds(1000)};
  // Overall token bucket over all keys (controller-runtime uses 10 qps, burst
  // 100): the delay is the larger of the two. qps <= 0: no overall limit.
  double qps = 0;
  int burst = 100;
};

// How long a failing key waits before its next try.
// Thread-safety: every method may be called from any thread.
class ItemRateLimiter {
 public:
  explicit ItemRateLimiter(RateLimiterOptions options = {}, const Clock* clock = nullptr);
  // The delay before the key's next try; counts one more failure.
  std::chrono::milliseconds When(const std::string& key);
  // The key succeeded: its next failure starts from base_delay again.
  void Forget(const std::string& key);
  // Failures counted since the last Forget.
  int NumRequeues(const std::string& key) const;

 private:
  const RateLimiterOptions options_;
  TokenBucket bucket_;
  mutable Mutex mu_;
  std::unordered_map<std::string, int> failures_ GPUOP_GUARDED_BY(mu_);
};

struct WorkQueueOptions {
  std::string name;  // for logs
  RateLimiterOptions rate_limiter;
  // Delays and the rate limiter's bucket run on it; null: RealClock(). Tests
  // pass a FakeClock. It must outlive the queue.
  const Clock* clock = nullptr;
};

class WorkQueue {
 public:
  explicit WorkQueue(WorkQueueOptions options = {});
  ~WorkQueue();  // ShutDown()
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  const std::string& name() const { return options_.name; }

  void Add(const std::string& key);
  // Adds `key` after `delay` (at once when delay <= 0).
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  // AddAfter with the rate limiter's delay for the key.
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;

  // Blocks until a key is ready (it is then processing until Done) or the
  // queue shuts down (nullopt).
  std::optional<std::string> Get();
  // Get without blocking: nullopt when nothing is ready now.
  std::optional<std::string> TryGet();
  // The worker is finished with `key`; re-queues it if it was added meanwhile.
  void Done(const std::string& key);

  // Keys ready to be handed out (not counting delayed or processing keys).
  // Not const: it first moves delayed keys that are due into the queue.
  size_t Len();
  // Keys waiting for their delay (after moving those now due).
  size_t DelayedLen();

  void ShutDown();
  void ShutDownWithDrain();
  bool ShuttingDown() const;

 private:
  struct Delayed {
    Clock::SteadyTime ready;
    uint64_t seq;  // FIFO among equal times
    std::string key;
    bool operator>(const Delayed& o) const {
      return ready != o.ready ? ready > o.ready : seq > o.seq;
    }
  };

  void AddLocked(const std::string& key) GPUOP_REQUIRES(mu_);
  void PromoteDueLocked(Clock::SteadyTime now) GPUOP_REQUIRES(mu_);
  std::optional<std::string> PopLocked() GPUOP_REQUIRES(mu_);

  const WorkQueueOptions options_;
  const Clock& clock_;
  ItemRateLimiter limiter_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_ GPUOP_GUARDED_BY(mu_);
  std::unordered_set<std::string> dirty_ GPUOP_GUARDED_BY(mu_);  // queued, or to re-queue at Done
  std::unordered_set<std::string> processing_ GPUOP_GUARDED_BY(mu_);
  // Delayed keys: a heap by due time, and each key's earliest due time (heap
  // entries that no longer match it are stale and skipped).
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<>> delayed_ GPUOP_GUARDED_BY(mu_);
  std::unordered_map<std::string, Clock::SteadyTime> waiting_ GPUOP_GUARDED_BY(mu_);
  uint64_t seq_ GPUOP_GUARDED_BY(mu_) = 0;
  bool shutting_down_ GPUOP_GUARDED_BY(mu_) = false;
};

}  // namespace gpuop::kube

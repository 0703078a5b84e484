#include "kube/workqueue.h"

#include <algorithm>

#include "base/backoff.h"
#include "base/log.h"

namespace gpuop::kube {

// --- ItemRateLimiter ---

ItemRateLimiter::ItemRateLimiter(RateLimiterOptions options, const Clock* clock)
    : options_(options), bucket_(options.qps, options.burst, clock) {}

std::chrono::milliseconds ItemRateLimiter::When(const std::string& key) {
  int failures = 0;
  {
    MutexLock lock(mu_);
    failures = failures_[key]++;
  }
  // base * 2^(failures before this one), capped.
  auto delay = ExponentialDelay(failures + 1, options_.base_delay, options_.max_delay);
  if (!bucket_.unlimited()) {
    auto overall = std::chrono::ceil<std::chrono::milliseconds>(bucket_.Reserve());
    delay = std::max(delay, overall);
  }
  return delay;
}

void ItemRateLimiter::Forget(const std::string& key) {
  MutexLock lock(mu_);
  failures_.erase(key);
}

int ItemRateLimiter::NumRequeues(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

// --- WorkQueue ---

WorkQueue::WorkQueue(WorkQueueOptions options)
    : options_(std::move(options)),
      clock_(ClockOrReal(options_.clock)),
      limiter_(options_.rate_limiter, options_.clock) {}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_) return;
  if (!dirty_.insert(key).second) return;  // already queued (or to re-queue at Done)
  if (processing_.count(key) > 0) return;  // Done re-queues it
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  MutexLock lock(mu_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  if (delay <= std::chrono::milliseconds::zero()) {
    Add(key);
    return;
  }
  MutexLock lock(mu_);
  if (shutting_down_) return;
  const Clock::SteadyTime ready = clock_.SteadyNow() + delay;
  auto [it, inserted] = waiting_.try_emplace(key, ready);
  if (!inserted) {
    if (it->second <= ready) return;  // an earlier add of this key stands
    it->second = ready;
  }
  const bool earliest = delayed_.empty() || ready < delayed_.top().ready;
  delayed_.push({ready, seq_++, key});
  // Waiters sleep until the earliest due time; a new earliest one moves it.
  if (earliest) cv_.notify_all();
}

void WorkQueue::AddRateLimited(const std::string& key) { AddAfter(key, limiter_.When(key)); }

void WorkQueue::Forget(const std::string& key) { limiter_.Forget(key); }

int WorkQueue::NumRequeues(const std::string& key) const { return limiter_.NumRequeues(key); }

void WorkQueue::PromoteDueLocked(Clock::SteadyTime now) {
  while (!delayed_.empty() && delayed_.top().ready <= now) {
    Delayed due = delayed_.top();
    delayed_.pop();
    auto it = waiting_.find(due.key);
    if (it == waiting_.end() || it->second != due.ready) continue;  // stale entry
    waiting_.erase(it);
    AddLocked(due.key);
  }
}

std::optional<std::string> WorkQueue::PopLocked() {
  if (shutting_down_ || queue_.empty()) return std::nullopt;
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  dirty_.erase(key);
  processing_.insert(key);
  return key;
}

std::optional<std::string> WorkQueue::Get() {
  MutexLock lock(mu_);
  while (true) {
    PromoteDueLocked(clock_.SteadyNow());
    if (shutting_down_) return std::nullopt;
    if (!queue_.empty()) return PopLocked();
    if (delayed_.empty()) {
      cv_.wait(lock.native());
    } else {
      // A copy: wait_until keeps reading its argument while the lock is
      // released, and another thread's AddAfter may reallocate the heap.
      const auto next = delayed_.top().ready;
      clock_.WaitUntil(lock.native(), cv_, next);
    }
  }
}

std::optional<std::string> WorkQueue::TryGet() {
  MutexLock lock(mu_);
  PromoteDueLocked(clock_.SteadyNow());
  return PopLocked();
}

void WorkQueue::Done(const std::string& key) {
  MutexLock lock(mu_);
  processing_.erase(key);
  if (dirty_.count(key) > 0 && !shutting_down_) {
    queue_.push_back(key);
    cv_.notify_one();
  }
  if (shutting_down_) cv_.notify_all();  // ShutDownWithDrain waits for processing_ to empty
}

size_t WorkQueue::Len() {
  MutexLock lock(mu_);
  PromoteDueLocked(clock_.SteadyNow());
  return queue_.size();
}

size_t WorkQueue::DelayedLen() {
  MutexLock lock(mu_);
  PromoteDueLocked(clock_.SteadyNow());
  return waiting_.size();
}

void WorkQueue::ShutDown() {
  MutexLock lock(mu_);
  if (!shutting_down_) {
    LogDebug("work queue shutting down",
             {{"queue", options_.name}, {"queued", queue_.size()}, {"delayed", waiting_.size()}});
  }
  shutting_down_ = true;
  cv_.notify_all();
}

void WorkQueue::ShutDownWithDrain() {
  ShutDown();
  MutexLock lock(mu_);
  cv_.wait(lock.native(), [this]() GPUOP_REQUIRES(mu_) { return processing_.empty(); });
}

bool WorkQueue::ShuttingDown() const {
  MutexLock lock(mu_);
  return shutting_down_;
}

}  // namespace gpuop::kube

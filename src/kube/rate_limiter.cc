#include "kube/rate_limiter.h"

#include <algorithm>
#include <condition_variable>
#include <thread>

namespace gpuop::kube {

TokenBucket::TokenBucket(double qps, int burst, NowFn now)
    : qps_(qps),
      burst_(std::max(1, burst)),
      now_(now ? std::move(now) : NowFn([] { return Clock::now(); })),
      tokens_(burst_),
      last_(now_()) {}

std::chrono::nanoseconds TokenBucket::Reserve() {
  if (unlimited()) return std::chrono::nanoseconds(0);
  std::lock_guard lock(mu_);
  Clock::time_point now = now_();
  if (now > last_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  // The deficit is paid back at qps tokens a second.
  return std::chrono::nanoseconds(static_cast<int64_t>(-tokens_ / qps_ * 1e9));
}

bool TokenBucket::Wait(std::stop_token stop) {
  std::chrono::nanoseconds wait = Reserve();
  if (wait.count() <= 0) return !stop.stop_requested();
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  // Nothing notifies cv: only a stop request ends the wait early.
  cv.wait_for(lock, stop, wait, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace gpuop::kube

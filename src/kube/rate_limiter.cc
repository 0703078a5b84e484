#include "kube/rate_limiter.h"

#include <algorithm>

namespace gpuop::kube {

TokenBucket::TokenBucket(double qps, int burst, const Clock* clock)
    : qps_(qps),
      burst_(std::max(1, burst)),
      clock_(ClockOrReal(clock)),
      tokens_(burst_),
      last_(clock_.SteadyNow()) {}

std::chrono::nanoseconds TokenBucket::Reserve() {
  if (unlimited()) return std::chrono::nanoseconds(0);
  MutexLock lock(mu_);
  const Clock::SteadyTime now = clock_.SteadyNow();
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
  const std::chrono::nanoseconds wait = Reserve();
  if (wait.count() <= 0) return !stop.stop_requested();
  return clock_.SleepFor(wait, std::move(stop));
}

}  // namespace gpuop::kube

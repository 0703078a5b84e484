// TokenBucket: the client-side rate limit in front of every API request, like
// client-go's token-bucket limiter (rest.Config QPS and Burst).
//
// The bucket holds up to `burst` tokens and refills at `qps` tokens a second;
// each request takes one, waiting for it when the bucket is empty. Waiters are
// served in arrival order: each reservation moves the time the next token is
// free, so a burst of callers is spread out at exactly `qps`. qps <= 0 means
// no limit.
//
// The clock is injectable (base/clock.h) so tests check the arithmetic and
// the waits without sleeping.
// Thread-safety: every method may be called from any thread at once.
#pragma once

#include <chrono>
#include <mutex>
#include <stop_token>

#include "base/clock.h"
#include "base/mutex.h"

namespace gpuop::kube {

class TokenBucket {
 public:
  // The bucket starts full. burst < 1 is treated as 1. `clock` (default:
  // RealClock()) must outlive the bucket.
  TokenBucket(double qps, int burst, const Clock* clock = nullptr);

  // Takes a token and returns how long the caller must wait before using it
  // (zero when one was free). The token is the caller's even if it then
  // decides not to wait.
  std::chrono::nanoseconds Reserve();

  // Reserve() and sleep for it. Returns false (having waited less) when
  // `stop` is requested meanwhile.
  bool Wait(std::stop_token stop = {});

  bool unlimited() const { return qps_ <= 0; }

 private:
  const double qps_;
  const double burst_;
  const Clock& clock_;
  Mutex mu_;
  double tokens_ GPUOP_GUARDED_BY(mu_);           // may go negative: reserved ahead
  Clock::SteadyTime last_ GPUOP_GUARDED_BY(mu_);  // when tokens_ was last brought up to date
};

}  // namespace gpuop::kube

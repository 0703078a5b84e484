// TokenBucket: the client-side rate limit in front of every API request, like
// client-go's token-bucket limiter (rest.Config QPS and Burst).
//
// The bucket holds up to `burst` tokens and refills at `qps` tokens a second;
// each request takes one, waiting for it when the bucket is empty. Waiters are
// served in arrival order: each reservation moves the time the next token is
// free, so a burst of callers is spread out at exactly `qps`. qps <= 0 means
// no limit.
//
// The clock is injectable so tests can check the arithmetic without sleeping.
// Thread-safety: every method may be called from any thread at once.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <stop_token>

namespace gpuop::kube {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  using NowFn = std::function<Clock::time_point()>;

  // The bucket starts full. burst < 1 is treated as 1.
  TokenBucket(double qps, int burst, NowFn now = {});

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
  const NowFn now_;
  std::mutex mu_;
  double tokens_;           // GUARDED_BY(mu_); may go negative: reserved ahead
  Clock::time_point last_;  // GUARDED_BY(mu_): when tokens_ was last brought up to date
};

}  // namespace gpuop::kube

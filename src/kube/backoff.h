// Retry delays: exponential backoff with full jitter (AWS architecture blog's
// "full jitter": a uniform draw between zero and the exponential cap), so
// many clients failing at once do not retry in lock-step.
//
// Thread-safety: BackoffDelay is a pure function; Backoff holds its own random
// generator behind a mutex and may be used from any thread.
#pragma once

#include <chrono>
#include <mutex>
#include <random>

namespace gpuop::kube {

// The delay before retry number `retry` (1 for the first retry):
// uniform01 * min(max, initial * 2^(retry-1)). uniform01 is in [0, 1).
std::chrono::milliseconds BackoffDelay(int retry, std::chrono::milliseconds initial,
                                       std::chrono::milliseconds max, double uniform01);

class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
          uint64_t seed = std::random_device{}());
  std::chrono::milliseconds Delay(int retry);
  // A uniform draw in [0, 1), for other jitter (watch timeouts).
  double Uniform();

 private:
  const std::chrono::milliseconds initial_;
  const std::chrono::milliseconds max_;
  std::mutex mu_;
  std::mt19937_64 rng_;  // GUARDED_BY(mu_)
};

}  // namespace gpuop::kube

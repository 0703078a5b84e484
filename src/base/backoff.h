// Retry delays, computed in one place:
//   - ExponentialDelay: initial * 2^(retry-1), capped at max. Deterministic:
//     a failing work-queue key, the device plugin's kubelet registration, the
//     toolkit's wait for a driver.
//   - BackoffDelay: the same scaled by a uniform draw ("full jitter", as in
//     the AWS architecture blog), so many clients failing at once do not
//     retry in lock-step: API requests, informer relists.
//   - Backoff: BackoffDelay with its own random generator.
//
// Thread-safety: the functions are pure; Backoff holds its generator behind a
// mutex and may be used from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>

#include "base/mutex.h"

namespace gpuop {

// The delay before retry number `retry` (1 for the first; lower counts as 1):
// min(max, initial * 2^(retry-1)). Large retry counts saturate at max.
std::chrono::milliseconds ExponentialDelay(int retry, std::chrono::milliseconds initial,
                                           std::chrono::milliseconds max);

// uniform01 * ExponentialDelay(retry, initial, max); uniform01 is clamped to [0, 1].
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
  Mutex mu_;
  std::mt19937_64 rng_ GPUOP_GUARDED_BY(mu_);
};

}  // namespace gpuop

#include "kube/backoff.h"

#include <algorithm>
#include <cmath>

namespace gpuop::kube {

std::chrono::milliseconds BackoffDelay(int retry, std::chrono::milliseconds initial,
                                       std::chrono::milliseconds max, double uniform01) {
  // Doubling past 2^30 overflows nothing here (double), and the cap applies anyway.
  double cap = static_cast<double>(initial.count()) * std::pow(2.0, std::clamp(retry - 1, 0, 30));
  cap = std::min(cap, static_cast<double>(max.count()));
  double u = std::clamp(uniform01, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(cap * u));
}

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, uint64_t seed)
    : initial_(initial), max_(max), rng_(seed) {}

std::chrono::milliseconds Backoff::Delay(int retry) {
  return BackoffDelay(retry, initial_, max_, Uniform());
}

double Backoff::Uniform() {
  std::lock_guard lock(mu_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

}  // namespace gpuop::kube

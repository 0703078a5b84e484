#include "base/backoff.h"

#include <algorithm>
#include <cmath>

namespace gpuop {
namespace {

// In floating point: a doubling past int64 saturates at the cap instead of
// overflowing.
double CappedExponential(int retry, std::chrono::milliseconds initial,
                         std::chrono::milliseconds max) {
  const double grown =
      static_cast<double>(initial.count()) * std::pow(2.0, std::clamp(retry - 1, 0, 62));
  return std::min(grown, static_cast<double>(max.count()));
}

}  // namespace

std::chrono::milliseconds ExponentialDelay(int retry, std::chrono::milliseconds initial,
                                           std::chrono::milliseconds max) {
  return std::chrono::milliseconds(static_cast<int64_t>(CappedExponential(retry, initial, max)));
}

std::chrono::milliseconds BackoffDelay(int retry, std::chrono::milliseconds initial,
                                       std::chrono::milliseconds max, double uniform01) {
  const double u = std::clamp(uniform01, 0.0, 1.0);
  return std::chrono::milliseconds(
      static_cast<int64_t>(CappedExponential(retry, initial, max) * u));
}

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, uint64_t seed)
    : initial_(initial), max_(max), rng_(seed) {}

std::chrono::milliseconds Backoff::Delay(int retry) {
  return BackoffDelay(retry, initial_, max_, Uniform());
}

double Backoff::Uniform() {
  MutexLock lock(mu_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

}  // namespace gpuop

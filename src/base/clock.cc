#include "base/clock.h"

#include <algorithm>

namespace gpuop {

bool Clock::SleepFor(std::chrono::nanoseconds d, std::stop_token stop) const {
  return SleepUntil(
      SteadyNow() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d),
      std::move(stop));
}

bool Clock::SleepUntil(SteadyTime deadline, std::stop_token stop) const {
  std::mutex m;
  std::condition_variable cv;
  std::stop_callback wake(stop, [&] {
    std::lock_guard lock(m);
    cv.notify_all();
  });
  std::unique_lock lock(m);
  while (!stop.stop_requested() && SteadyNow() < deadline) WaitUntil(lock, cv, deadline);
  return !stop.stop_requested();
}

void WaitForStop(std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait(lock, stop, [] { return false; });
}

namespace {

class SystemClocks final : public Clock {
 public:
  WallTime Now() const override { return std::chrono::system_clock::now(); }
  SteadyTime SteadyNow() const override { return std::chrono::steady_clock::now(); }
  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 SteadyTime deadline) const override {
    cv.wait_until(lock, deadline);
  }
};

}  // namespace

const Clock& RealClock() {
  static const SystemClocks clock;
  return clock;
}

FakeClock::FakeClock(WallTime start) : wall_start_(start) {}

Clock::WallTime FakeClock::Now() const {
  MutexLock lock(mu_);
  return wall_start_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(elapsed_);
}

Clock::SteadyTime FakeClock::SteadyNow() const {
  MutexLock lock(mu_);
  return steady_start_ + elapsed_;
}

void FakeClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          SteadyTime deadline) const {
  {
    MutexLock g(mu_);
    if (steady_start_ + elapsed_ >= deadline) return;
    waiting_.push_back(&cv);
  }
  // Advance notifies `cv`. One that lands between the registration above and
  // the wait below would be lost, so the wait is also bounded in real time: the
  // caller re-checks its condition (and this clock) a few milliseconds later.
  cv.wait_for(lock, std::chrono::milliseconds(5));
  MutexLock g(mu_);
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &cv));
}

void FakeClock::Advance(std::chrono::nanoseconds d) {
  MutexLock lock(mu_);
  if (d > std::chrono::nanoseconds::zero()) elapsed_ += d;
  // Under mu_: a waiter deregisters under mu_ before its condition variable
  // can go away.
  for (std::condition_variable* cv : waiting_) cv->notify_all();
}

size_t FakeClock::waiters() const {
  MutexLock lock(mu_);
  return waiting_.size();
}

int64_t UnixMillis(Clock::WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

int64_t NowUnixMillis() { return UnixMillis(RealClock().Now()); }

}  // namespace gpuop

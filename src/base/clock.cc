#include "base/clock.h"

#include <algorithm>
#include <thread>

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
  WaitUntil(lock, cv, stop, deadline, [] { return false; });
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
    waiting_.push_back({&lock, &cv, lock.mutex(), advances_});
  }
  // Advance notifies `cv` only while it holds cv's mutex, which this thread
  // holds from before the registration above until the wait releases it: the
  // notification cannot fall in between and be lost.
  cv.wait(lock);
  MutexLock g(mu_);
  waiting_.erase(std::find_if(waiting_.begin(), waiting_.end(),
                              [&](const Waiter& w) { return w.lock == &lock; }));
}

void FakeClock::Advance(std::chrono::nanoseconds d) {
  uint64_t advance = 0;
  {
    MutexLock lock(mu_);
    if (d > std::chrono::nanoseconds::zero()) elapsed_ += d;
    advance = ++advances_;
  }
  // A waiter holds its own mutex when it takes mu_ to register, so blocking on
  // that mutex while holding mu_ could deadlock: try it, and where it is busy
  // (its thread is on the way into or out of the wait) let go of mu_ and try
  // again. mu_ is held while notifying, so a waiter's condition variable
  // outlives the notification (a waiter deregisters under mu_).
  while (true) {
    bool all_woken = true;
    {
      MutexLock lock(mu_);
      for (Waiter& w : waiting_) {
        if (w.woken_by >= advance) continue;
        if (!w.mu->try_lock()) {
          all_woken = false;
          continue;
        }
        w.cv->notify_all();
        w.mu->unlock();
        w.woken_by = advance;
      }
    }
    if (all_woken) return;
    std::this_thread::yield();
  }
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

// Clock: the one seam between gpuop's code and time. Components read the time
// and wait for deadlines through a Clock: production code passes RealClock(),
// tests a FakeClock they move by hand, so a test of a ten-minute timeout
// neither takes ten minutes nor sleeps and hopes.
//
// Two kinds of time, as in the standard library:
//   - Now(): the wall clock, for timestamps other processes read (Events,
//     Lease times, Unix milliseconds in state files);
//   - SteadyNow(): the monotonic clock, for deadlines and intervals, which
//     must not jump when NTP steps the wall clock.
//
// WaitUntil is a condition variable's wait_until on this clock's steady time:
// it returns when notified, spuriously, or once SteadyNow() reaches the
// deadline. Callers re-check their condition, as with any condition variable;
// the overload that takes the condition and a stop_token does so for them.
//
// Thread-safety: every method may be called from any thread at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <vector>

#include "base/mutex.h"

namespace gpuop {

class Clock {
 public:
  using WallTime = std::chrono::system_clock::time_point;
  using SteadyTime = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual WallTime Now() const = 0;
  virtual SteadyTime SteadyNow() const = 0;
  // Waits on `cv`, whose mutex `lock` holds, until notified or until
  // SteadyNow() >= deadline.
  virtual void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         SteadyTime deadline) const = 0;

  // Waits on `cv` until `done()` holds, `stop` is requested or SteadyNow()
  // reaches `deadline`; returns done(). `lock` holds cv's mutex. The caller
  // notifies `cv` whenever done() may turn true, and on stop (a
  // std::stop_callback), as for any condition variable.
  // (done() runs with `lock` held, which the thread-safety analysis cannot
  // see through a std::unique_lock: callers annotate done() with
  // GPUOP_REQUIRES, and the analysis checks its body there.)
  template <typename Done>
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 const std::stop_token& stop, SteadyTime deadline,
                 Done done) const GPUOP_NO_THREAD_SAFETY_ANALYSIS {
    while (!done() && !stop.stop_requested() && SteadyNow() < deadline) {
      WaitUntil(lock, cv, deadline);
    }
    return done();
  }

  // Sleeps for `d` of this clock's time, or until its steady time reaches
  // `deadline`. Returns false, having slept less, when `stop` is requested
  // meanwhile (or was already).
  bool SleepFor(std::chrono::nanoseconds d, std::stop_token stop = {}) const;
  bool SleepUntil(SteadyTime deadline, std::stop_token stop = {}) const;
};

// Blocks until `stop` is requested: a component's main thread once its own
// threads are running.
void WaitForStop(std::stop_token stop);

// The process's clocks: std::chrono::system_clock and steady_clock.
const Clock& RealClock();

// `clock`, or RealClock() where it is null: for options structs whose clock
// field tests set and production leaves empty.
inline const Clock& ClockOrReal(const Clock* clock) { return clock ? *clock : RealClock(); }

// A clock that moves only when a test moves it. Both of its times start at a
// fixed point and move together; waiters wake at each Advance, and otherwise
// only when their own condition variable is notified: no real-time polling.
class FakeClock final : public Clock {
 public:
  // Wall time starts at `start` (default: 2026-01-01T00:00:00Z, a whole second).
  explicit FakeClock(WallTime start = WallTime(std::chrono::seconds(1767225600)));
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  WallTime Now() const override;
  SteadyTime SteadyNow() const override;
  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 SteadyTime deadline) const override;
  using Clock::WaitUntil;

  // Moves both times forward by `d` (negative is ignored) and wakes every
  // thread waiting on this clock.
  void Advance(std::chrono::nanoseconds d);
  // Threads inside WaitUntil or SleepFor now: a test waits for the code under
  // test to block on the clock before it advances.
  size_t waiters() const;

 private:
  const WallTime wall_start_;
  const SteadyTime steady_start_{std::chrono::hours(1)};
  mutable Mutex mu_;
  // A thread inside WaitUntil: its lock (which tells threads that share a
  // condition variable apart), condition variable and mutex, and the last
  // Advance (by count) that woke it.
  struct Waiter {
    const std::unique_lock<std::mutex>* lock;
    std::condition_variable* cv;
    std::mutex* mu;
    uint64_t woken_by;
  };
  std::chrono::nanoseconds elapsed_ GPUOP_GUARDED_BY(mu_){0};
  uint64_t advances_ GPUOP_GUARDED_BY(mu_) = 0;
  mutable std::vector<Waiter> waiting_ GPUOP_GUARDED_BY(mu_);
};

// Milliseconds since the Unix epoch: the unit of every timestamp the
// simulator and the logs write.
int64_t UnixMillis(Clock::WallTime t);
int64_t NowUnixMillis();

}  // namespace gpuop

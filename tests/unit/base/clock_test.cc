// The clock seam (src/base/clock.h): the real clock sleeps and stops early on
// request; the fake clock moves only when advanced, wakes its sleepers then
// and not before, and counts them; Unix milliseconds.
#include "base/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/testing/wait.h"

namespace gpuop {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using testing::WaitFor;

TEST(ClockTest, RealClockSleepsAtLeastTheDuration) {
  const Clock& clock = RealClock();
  const auto start = clock.SteadyNow();
  EXPECT_TRUE(clock.SleepFor(milliseconds(20)));
  EXPECT_GE(clock.SteadyNow() - start, milliseconds(20));
}

TEST(ClockTest, AStopRequestEndsASleep) {
  std::stop_source stopped;
  stopped.request_stop();
  EXPECT_FALSE(RealClock().SleepFor(minutes(10), stopped.get_token()));

  std::stop_source later;
  std::atomic<int> result{-1};
  std::thread sleeper([&] { result = RealClock().SleepFor(minutes(10), later.get_token()); });
  later.request_stop();
  sleeper.join();
  EXPECT_EQ(result.load(), 0);
}

TEST(ClockTest, WaitForStopReturnsOnTheRequest) {
  std::stop_source source;
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    WaitForStop(source.get_token());
    returned = true;
  });
  source.request_stop();
  waiter.join();
  EXPECT_TRUE(returned.load());
}

TEST(FakeClockTest, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  EXPECT_EQ(UnixMillis(clock.Now()), 1767225600000);  // 2026-01-01T00:00:00Z
  const auto wall = clock.Now();
  const auto steady = clock.SteadyNow();
  clock.Advance(minutes(3));
  EXPECT_EQ(clock.Now() - wall, minutes(3));
  EXPECT_EQ(clock.SteadyNow() - steady, minutes(3));
  clock.Advance(-minutes(1));  // time does not go back
  EXPECT_EQ(clock.SteadyNow() - steady, minutes(3));
}

TEST(FakeClockTest, ASleeperWakesOnlyOnceItsTimeHasCome) {
  FakeClock clock;
  std::atomic<int> result{-1};
  std::thread sleeper([&] { result = clock.SleepFor(minutes(10)); });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  clock.Advance(minutes(9));
  // Still asleep: it re-registers after each wake that is too early.
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  EXPECT_EQ(result.load(), -1);
  clock.Advance(minutes(1));
  sleeper.join();
  EXPECT_EQ(result.load(), 1);
  EXPECT_EQ(clock.waiters(), 0u);
}

TEST(FakeClockTest, AStopRequestEndsAFakeSleep) {
  FakeClock clock;
  std::stop_source source;
  std::atomic<int> result{-1};
  std::thread sleeper([&] { result = clock.SleepFor(minutes(10), source.get_token()); });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  clock.Advance(minutes(9));
  source.request_stop();
  sleeper.join();
  // Stopped, not timed out: nine of its ten minutes had passed.
  EXPECT_EQ(result.load(), 0);
}

TEST(FakeClockTest, WaitUntilReturnsAtOnceForAPastDeadline) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  clock.WaitUntil(lock, cv, clock.SteadyNow());
  EXPECT_EQ(clock.waiters(), 0u);
}

TEST(FakeClockTest, OneAdvanceWakesEveryThreadOnASharedConditionVariable) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> done{0};
  auto wait_ten_minutes = [&] {
    std::unique_lock lock(mu);
    const auto deadline = clock.SteadyNow() + minutes(10);
    clock.WaitUntil(lock, cv, std::stop_token{}, deadline, [] { return false; });
    ++done;
  };
  std::thread a(wait_ten_minutes), b(wait_ten_minutes);
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 2; }));
  clock.Advance(minutes(10));
  a.join();
  b.join();
  EXPECT_EQ(done.load(), 2);
  EXPECT_EQ(clock.waiters(), 0u);
}

TEST(FakeClockTest, WaitUntilWithAConditionEndsWhenItHoldsBeforeTheDeadline) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    result = clock.WaitUntil(lock, cv, std::stop_token{}, clock.SteadyNow() + minutes(10),
                             [&] { return ready; });
  });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  clock.Advance(minutes(5));  // too early: it waits on
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  EXPECT_EQ(result.load(), -1);
  {
    std::lock_guard lock(mu);
    ready = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_EQ(result.load(), 1);
}

TEST(ClockTest, UnixMillis) {
  EXPECT_EQ(UnixMillis(Clock::WallTime(std::chrono::seconds(1))), 1000);
  const int64_t now = NowUnixMillis();
  EXPECT_GT(now, 1767225600000);  // later than 2026-01-01
}

}  // namespace
}  // namespace gpuop

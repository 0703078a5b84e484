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

TEST(ClockTest, UnixMillis) {
  EXPECT_EQ(UnixMillis(Clock::WallTime(std::chrono::seconds(1))), 1000);
  const int64_t now = NowUnixMillis();
  EXPECT_GT(now, 1767225600000);  // later than 2026-01-01
}

}  // namespace
}  // namespace gpuop

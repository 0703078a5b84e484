// WorkQueue and ItemRateLimiter (src/kube/workqueue.h): de-duplication, one
// worker per key at a time, delayed adds, per-key exponential backoff with
// Forget, the overall token bucket, and shutdown. Delays run on a fake clock.
#include "kube/workqueue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <thread>

#include "base/clock.h"
#include "tests/testing/wait.h"

namespace gpuop::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::WaitFor;

constexpr auto kDeadline = seconds(20);

WorkQueueOptions OnClock(const FakeClock& clock) {
  WorkQueueOptions options;
  options.clock = &clock;
  return options;
}

TEST(WorkQueueTest, AddsAreDeduplicated) {
  WorkQueue queue;
  queue.Add("a");
  queue.Add("b");
  queue.Add("a");
  queue.Add("a");
  EXPECT_EQ(queue.Len(), 2u);
  EXPECT_EQ(queue.Get(), "a");
  EXPECT_EQ(queue.Get(), "b");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
  queue.Done("a");
  queue.Done("b");
  EXPECT_EQ(queue.Len(), 0u);
}

TEST(WorkQueueTest, KeyAddedWhileProcessingIsRequeuedAtDone) {
  WorkQueue queue;
  queue.Add("a");
  ASSERT_EQ(queue.Get(), "a");
  queue.Add("a");
  queue.Add("a");
  // Not handed to a second worker while the first holds it.
  EXPECT_EQ(queue.Len(), 0u);
  EXPECT_EQ(queue.TryGet(), std::nullopt);
  queue.Done("a");
  EXPECT_EQ(queue.Len(), 1u);
  EXPECT_EQ(queue.Get(), "a");
  queue.Done("a");
  EXPECT_EQ(queue.Len(), 0u);
}

TEST(WorkQueueTest, WorkersNeverHoldTheSameKeyAtOnce) {
  WorkQueue queue;
  constexpr int kKeys = 5;
  constexpr int kAdds = 4000;
  std::map<std::string, std::atomic<int>> in_flight;
  std::map<std::string, std::atomic<int>> processed;
  for (int i = 0; i < kKeys; ++i) {
    in_flight["k" + std::to_string(i)] = 0;
    processed["k" + std::to_string(i)] = 0;
  }
  std::atomic<int> overlaps{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = queue.Get()) {
        if (in_flight.at(*key).fetch_add(1) != 0) ++overlaps;
        std::this_thread::yield();
        in_flight.at(*key).fetch_sub(1);
        ++processed.at(*key);
        queue.Done(*key);
      }
    });
  }
  for (int i = 0; i < kAdds; ++i) queue.Add("k" + std::to_string(i % kKeys));
  ASSERT_TRUE(WaitFor([&] { return queue.Len() == 0; }));
  queue.ShutDownWithDrain();
  for (auto& t : workers) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  int total = 0;
  for (auto& [key, n] : processed) {
    EXPECT_GE(n.load(), 1) << key;
    total += n.load();
  }
  EXPECT_LE(total, kAdds);  // one processing per add at most (de-duplication)
}

TEST(WorkQueueTest, AddAfterHandsKeysOutInDueOrder) {
  FakeClock clock;
  WorkQueue queue(OnClock(clock));
  queue.AddAfter("late", milliseconds(300));
  queue.AddAfter("early", milliseconds(30));
  queue.Add("now");
  queue.AddAfter("also-now", milliseconds(0));
  EXPECT_EQ(queue.DelayedLen(), 2u);
  EXPECT_EQ(queue.Get(), "now");
  EXPECT_EQ(queue.Get(), "also-now");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
  clock.Advance(milliseconds(29));
  EXPECT_EQ(queue.TryGet(), std::nullopt);
  clock.Advance(milliseconds(1));
  EXPECT_EQ(queue.TryGet(), "early");
  clock.Advance(milliseconds(270));
  EXPECT_EQ(queue.TryGet(), "late");
  EXPECT_EQ(queue.DelayedLen(), 0u);
}

TEST(WorkQueueTest, GetWaitsForTheDueTime) {
  FakeClock clock;
  WorkQueue queue(OnClock(clock));
  queue.AddAfter("k", std::chrono::minutes(5));
  auto got = std::async(std::launch::async, [&] { return queue.Get(); });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  clock.Advance(std::chrono::minutes(4));
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  EXPECT_EQ(got.wait_for(milliseconds(0)), std::future_status::timeout);
  clock.Advance(std::chrono::minutes(1));
  ASSERT_EQ(got.wait_for(kDeadline), std::future_status::ready);
  EXPECT_EQ(got.get(), "k");
}

TEST(WorkQueueTest, EarlierAddAfterWinsOverALaterOne) {
  FakeClock clock;
  WorkQueue queue(OnClock(clock));
  queue.AddAfter("k", std::chrono::hours(1));
  queue.AddAfter("k", milliseconds(10));
  queue.AddAfter("k", std::chrono::hours(2));  // later than the pending one: ignored
  EXPECT_EQ(queue.DelayedLen(), 1u);
  clock.Advance(milliseconds(10));
  EXPECT_EQ(queue.TryGet(), "k");
  EXPECT_EQ(queue.DelayedLen(), 0u);
  queue.Done("k");
  clock.Advance(std::chrono::hours(3));  // the hour-long adds left nothing behind
  EXPECT_EQ(queue.TryGet(), std::nullopt);
}

TEST(WorkQueueTest, DelayedKeyIsDeduplicatedWithAQueuedOne) {
  FakeClock clock;
  WorkQueue queue(OnClock(clock));
  queue.Add("k");
  queue.AddAfter("k", milliseconds(5));
  clock.Advance(milliseconds(5));
  EXPECT_EQ(queue.DelayedLen(), 0u);
  EXPECT_EQ(queue.Len(), 1u);
  EXPECT_EQ(queue.Get(), "k");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
}

TEST(ItemRateLimiterTest, PerKeyBackoffDoublesUpToTheCapAndForgetResets) {
  RateLimiterOptions options;
  options.base_delay = milliseconds(5);
  options.max_delay = milliseconds(30);
  ItemRateLimiter limiter(options);
  EXPECT_EQ(limiter.When("a"), milliseconds(5));
  EXPECT_EQ(limiter.When("a"), milliseconds(10));
  EXPECT_EQ(limiter.When("a"), milliseconds(20));
  EXPECT_EQ(limiter.When("a"), milliseconds(30));
  EXPECT_EQ(limiter.When("a"), milliseconds(30));
  EXPECT_EQ(limiter.NumRequeues("a"), 5);
  EXPECT_EQ(limiter.When("b"), milliseconds(5));  // keys are independent
  limiter.Forget("a");
  EXPECT_EQ(limiter.NumRequeues("a"), 0);
  EXPECT_EQ(limiter.When("a"), milliseconds(5));

  // The default caps at 1000 s and never overflows.
  ItemRateLimiter defaults;
  std::chrono::milliseconds last{0};
  for (int i = 0; i < 100; ++i) last = defaults.When("x");
  EXPECT_EQ(last, seconds(1000));
}

TEST(ItemRateLimiterTest, OverallTokenBucketSpreadsABurst) {
  RateLimiterOptions options;
  options.base_delay = milliseconds(1);
  options.qps = 10;
  options.burst = 2;
  FakeClock clock;
  ItemRateLimiter limiter(options, &clock);
  EXPECT_EQ(limiter.When("a"), milliseconds(1));
  EXPECT_EQ(limiter.When("b"), milliseconds(1));
  // The bucket is empty: the third waits 1/qps, whatever its own backoff.
  EXPECT_EQ(limiter.When("c"), milliseconds(100));
  clock.Advance(milliseconds(100));
  EXPECT_EQ(limiter.When("d"), milliseconds(100));
}

TEST(WorkQueueTest, AddRateLimitedBacksOffUntilForgotten) {
  FakeClock clock;
  WorkQueueOptions options = OnClock(clock);
  options.rate_limiter.base_delay = milliseconds(1);
  WorkQueue queue(options);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    queue.AddRateLimited("k");
    EXPECT_EQ(queue.NumRequeues("k"), attempt);
    const milliseconds backoff(1 << (attempt - 1));  // 1, 2, 4 ms
    clock.Advance(backoff - milliseconds(1));
    EXPECT_EQ(queue.TryGet(), std::nullopt) << attempt;
    clock.Advance(milliseconds(1));
    EXPECT_EQ(queue.TryGet(), "k") << attempt;
    queue.Done("k");
  }
  queue.Forget("k");
  EXPECT_EQ(queue.NumRequeues("k"), 0);
}

TEST(WorkQueueTest, ShutDownWakesBlockedGetters) {
  WorkQueue queue;
  auto blocked = std::async(std::launch::async, [&] { return queue.Get(); });
  auto delayed_waiter = std::async(std::launch::async, [&] {
    queue.AddAfter("far", std::chrono::hours(1));
    return queue.Get();
  });
  ASSERT_TRUE(WaitFor([&] { return queue.DelayedLen() == 1; }));
  queue.ShutDown();
  ASSERT_EQ(blocked.wait_for(kDeadline), std::future_status::ready);
  EXPECT_EQ(blocked.get(), std::nullopt);
  ASSERT_EQ(delayed_waiter.wait_for(kDeadline), std::future_status::ready);
  EXPECT_EQ(delayed_waiter.get(), std::nullopt);
  EXPECT_TRUE(queue.ShuttingDown());
  queue.Add("ignored");
  EXPECT_EQ(queue.Len(), 0u);
  EXPECT_EQ(queue.Get(), std::nullopt);
}

TEST(WorkQueueTest, ShutDownWithDrainWaitsForKeysInProcess) {
  WorkQueue queue;
  queue.Add("a");
  ASSERT_EQ(queue.Get(), "a");
  std::atomic<bool> drained{false};
  std::thread drainer([&] {
    queue.ShutDownWithDrain();
    drained = true;
  });
  ASSERT_TRUE(WaitFor([&] { return queue.ShuttingDown(); }));
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(drained.load());  // "a" is still being processed
  queue.Done("a");
  ASSERT_TRUE(WaitFor([&] { return drained.load(); }));
  drainer.join();
}

}  // namespace
}  // namespace gpuop::kube

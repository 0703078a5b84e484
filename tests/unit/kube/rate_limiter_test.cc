// The client's token bucket (src/kube/rate_limiter.h) on a fake clock: the
// burst is free, then tokens come at qps, queued callers are spread out, a
// long idle refills no more than the burst, qps <= 0 is unlimited, and a
// stop request cuts a wait short.
#include "kube/rate_limiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "base/clock.h"
#include "tests/testing/wait.h"

namespace gpuop::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST(RateLimiterTokenBucketTest, BurstIsFreeThenTokensComeAtQps) {
  FakeClock clock;
  TokenBucket bucket(10, 3, &clock);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bucket.Reserve(), nanoseconds(0)) << i;
  // Queued callers each wait one more token's time: 100 ms apart at 10 qps.
  EXPECT_EQ(bucket.Reserve(), milliseconds(100));
  EXPECT_EQ(bucket.Reserve(), milliseconds(200));
  clock.Advance(milliseconds(200));  // both reservations are now paid
  EXPECT_EQ(bucket.Reserve(), milliseconds(100));
}

TEST(RateLimiterTokenBucketTest, IdleRefillsUpToTheBurstOnly) {
  FakeClock clock;
  TokenBucket bucket(2, 2, &clock);
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  clock.Advance(std::chrono::hours(1));
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), milliseconds(500));
}

TEST(RateLimiterTokenBucketTest, NonPositiveQpsIsUnlimited) {
  FakeClock clock;
  TokenBucket bucket(0, 1, &clock);
  EXPECT_TRUE(bucket.unlimited());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_TRUE(bucket.Wait());
  // A burst below one still lets one request through.
  TokenBucket tiny(1, 0, &clock);
  EXPECT_EQ(tiny.Reserve(), nanoseconds(0));
  EXPECT_EQ(tiny.Reserve(), std::chrono::seconds(1));
}

TEST(RateLimiterTokenBucketTest, WaitSleepsOnTheClockUntilTheToken) {
  FakeClock clock;
  TokenBucket bucket(1.0 / 60, 1, &clock);  // one token a minute
  EXPECT_TRUE(bucket.Wait());
  auto waited = std::async(std::launch::async, [&] { return bucket.Wait(); });
  ASSERT_TRUE(testing::WaitFor([&] { return clock.waiters() == 1; }));
  EXPECT_EQ(waited.wait_for(milliseconds(0)), std::future_status::timeout);
  clock.Advance(std::chrono::minutes(1));
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_TRUE(waited.get());
}

TEST(RateLimiterTokenBucketTest, StopCutsAWaitShort) {
  FakeClock clock;  // never advanced: the second Wait would block for ever
  TokenBucket bucket(1.0 / 3600, 1, &clock);
  EXPECT_TRUE(bucket.Wait());
  std::stop_source stop;
  auto waited = std::async(std::launch::async, [&] { return bucket.Wait(stop.get_token()); });
  ASSERT_TRUE(testing::WaitFor([&] { return clock.waiters() == 1; }));
  stop.request_stop();
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_FALSE(waited.get());
}

}  // namespace
}  // namespace gpuop::kube

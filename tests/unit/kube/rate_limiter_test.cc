// The client's token bucket (src/kube/rate_limiter.h) on a fake clock: the
// burst is free, then tokens come at qps, queued callers are spread out, a
// long idle refills no more than the burst, qps <= 0 is unlimited, and a
// stop request cuts a wait short.
#include "kube/rate_limiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace gpuop::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

class FakeClock {
 public:
  TokenBucket::NowFn fn() {
    return [this] { return now_; };
  }
  void Advance(nanoseconds d) { now_ += d; }

 private:
  TokenBucket::Clock::time_point now_{};
};

TEST(RateLimiterTokenBucketTest, BurstIsFreeThenTokensComeAtQps) {
  FakeClock clock;
  TokenBucket bucket(10, 3, clock.fn());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bucket.Reserve(), nanoseconds(0)) << i;
  // Queued callers each wait one more token's time: 100 ms apart at 10 qps.
  EXPECT_EQ(bucket.Reserve(), milliseconds(100));
  EXPECT_EQ(bucket.Reserve(), milliseconds(200));
  clock.Advance(milliseconds(200));  // both reservations are now paid
  EXPECT_EQ(bucket.Reserve(), milliseconds(100));
}

TEST(RateLimiterTokenBucketTest, IdleRefillsUpToTheBurstOnly) {
  FakeClock clock;
  TokenBucket bucket(2, 2, clock.fn());
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  clock.Advance(std::chrono::hours(1));
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), milliseconds(500));
}

TEST(RateLimiterTokenBucketTest, NonPositiveQpsIsUnlimited) {
  FakeClock clock;
  TokenBucket bucket(0, 1, clock.fn());
  EXPECT_TRUE(bucket.unlimited());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_TRUE(bucket.Wait());
  // A burst below one still lets one request through.
  TokenBucket tiny(1, 0, clock.fn());
  EXPECT_EQ(tiny.Reserve(), nanoseconds(0));
  EXPECT_EQ(tiny.Reserve(), std::chrono::seconds(1));
}

TEST(RateLimiterTokenBucketTest, StopCutsAWaitShort) {
  // Real clock: one token an hour, so the second Wait would block for an hour.
  TokenBucket bucket(1.0 / 3600, 1);
  EXPECT_TRUE(bucket.Wait());
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(20));
    stop.request_stop();
  });
  EXPECT_FALSE(bucket.Wait(stop.get_token()));
  stopper.join();
}

}  // namespace
}  // namespace gpuop::kube

// Retry delays (src/base/backoff.h): exponential growth from the initial
// delay, capped at the maximum, with and without the full-jitter draw, and a
// seeded Backoff that stays within those bounds.
#include "base/backoff.h"

#include <gtest/gtest.h>

namespace gpuop {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesUpToTheCap) {
  const milliseconds initial(100), max(1000);
  // With the largest draw the delay is the cap itself.
  EXPECT_EQ(BackoffDelay(1, initial, max, 0.999999), milliseconds(99));
  EXPECT_EQ(BackoffDelay(1, initial, max, 1.0), milliseconds(100));
  EXPECT_EQ(BackoffDelay(2, initial, max, 1.0), milliseconds(200));
  EXPECT_EQ(BackoffDelay(3, initial, max, 1.0), milliseconds(400));
  EXPECT_EQ(BackoffDelay(4, initial, max, 1.0), milliseconds(800));
  EXPECT_EQ(BackoffDelay(5, initial, max, 1.0), milliseconds(1000));
  EXPECT_EQ(BackoffDelay(500, initial, max, 1.0), milliseconds(1000));  // no overflow
}

TEST(BackoffTest, ExponentialDelayHasNoJitter) {
  const milliseconds initial(5), max(1000000);
  EXPECT_EQ(ExponentialDelay(1, initial, max), milliseconds(5));
  EXPECT_EQ(ExponentialDelay(2, initial, max), milliseconds(10));
  EXPECT_EQ(ExponentialDelay(11, initial, max), milliseconds(5120));
  EXPECT_EQ(ExponentialDelay(0, initial, max), milliseconds(5));  // below 1 counts as 1
  EXPECT_EQ(ExponentialDelay(40, initial, max), max);             // past 2^30 still capped
  EXPECT_EQ(ExponentialDelay(1000, initial, max), max);
}

TEST(BackoffTest, FullJitterScalesTheCap) {
  const milliseconds initial(100), max(10000);
  EXPECT_EQ(BackoffDelay(3, initial, max, 0.0), milliseconds(0));
  EXPECT_EQ(BackoffDelay(3, initial, max, 0.5), milliseconds(200));
  EXPECT_EQ(BackoffDelay(3, initial, max, 0.25), milliseconds(100));
  // Out-of-range draws are clamped.
  EXPECT_EQ(BackoffDelay(1, initial, max, -3), milliseconds(0));
  EXPECT_EQ(BackoffDelay(1, initial, max, 7), milliseconds(100));
  EXPECT_EQ(BackoffDelay(0, initial, max, 1.0), milliseconds(100));
}

TEST(BackoffTest, DrawsStayWithinBoundsAndVary) {
  Backoff b(milliseconds(100), milliseconds(800), /*seed=*/42);
  bool varied = false;
  milliseconds first = b.Delay(4);
  for (int i = 0; i < 200; ++i) {
    milliseconds d = b.Delay(4);
    ASSERT_GE(d.count(), 0);
    ASSERT_LE(d.count(), 800);
    varied = varied || d != first;
    double u = b.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
  EXPECT_TRUE(varied);
}

}  // namespace
}  // namespace gpuop

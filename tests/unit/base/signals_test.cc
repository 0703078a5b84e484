#include "base/signals.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

namespace gpuop {
namespace {

// ctest runs each case in its own process, so no thread that leaves SIGTERM
// unblocked exists to take the process-directed signal below.
TEST(StopOnSignalTest, ASignalRequestsStop) {
  StopSignals signals;
  StopOnSignal stop(signals);
  EXPECT_FALSE(stop.token().stop_requested());
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!stop.token().stop_requested() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(stop.token().stop_requested());
}

// A run that ends by itself ends the wait: the destructor returns at once.
TEST(StopOnSignalTest, TheEndOfTheRunEndsTheWait) {
  StopSignals signals;
  std::stop_token token;
  const auto start = std::chrono::steady_clock::now();
  {
    StopOnSignal stop(signals);
    token = stop.token();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(token.stop_requested());
}

}  // namespace
}  // namespace gpuop

// Waiting on state that has no notification of its own (a counter, a file, a
// label on the API server): poll a condition until it holds or a generous
// deadline passes. Tests assert on the result, never on the time taken.
#pragma once

#include <chrono>
#include <thread>

namespace gpuop::testing {

// Checks `cond` every `poll` until it holds or `timeout` passes; the last
// check is made at the deadline, so a condition that became true just then
// still counts.
template <typename Cond>
bool WaitFor(Cond&& cond, std::chrono::milliseconds timeout = std::chrono::seconds(30),
             std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(poll);
  }
  return cond();
}

}  // namespace gpuop::testing

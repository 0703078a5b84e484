// StopSignals: how a long-running command learns it should stop (SIGTERM from
// the kubelet, SIGINT from a terminal) or reload (SIGHUP). The signals are
// blocked and read from a signalfd, so no handler runs at an arbitrary point
// of some thread and the wait can also end on a std::stop_token: the process
// stops for a signal or because one of its own components failed.
//
// Construct it on the main thread before any other thread starts: threads
// inherit the blocked set, and a signal not blocked everywhere may be
// delivered to a thread that kills the process with its default action.
#pragma once

#include <chrono>
#include <csignal>
#include <stop_token>
#include <thread>

#include "base/memory.h"

namespace gpuop {

class StopSignals {
 public:
  // `hangup`: SIGHUP too, for commands that reload on it (Wait returns it).
  explicit StopSignals(bool hangup = false);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The next signal, or 0 once `stop` is requested. A component waits here
  // once it has started, so its idle time does IdleUpkeep's work
  // (base/memory.h): the executable's start-up pages out, then free heap goes
  // back every kHeapScavengePeriod.
  int Wait(std::stop_token stop = {});
  // The next signal within `timeout`, else 0.
  int WaitFor(std::chrono::milliseconds timeout);

 private:
  // poll()s the signalfd (and the stop eventfd) for at most `timeout_ms`
  // (-1: no limit); the signal, else 0.
  int Poll(int timeout_ms);

  sigset_t set_;
  int signal_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd a stop request writes to
  IdleUpkeep upkeep_;  // what this process does while Wait sees nothing
};

// For a command that runs one thing to its end (a validation, the driver
// pod's init step): while it lives, a stop signal requests stop on token().
// Its destructor stops the wait and joins it.
class StopOnSignal {
 public:
  explicit StopOnSignal(StopSignals& signals);
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  std::stop_token token() const { return stop_.get_token(); }

 private:
  std::stop_source stop_, finished_;
  std::jthread waiter_;
};

}  // namespace gpuop

#include "base/signals.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "base/log.h"
#include "base/memory.h"

namespace gpuop {

StopSignals::StopSignals(bool hangup) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  if (hangup) sigaddset(&set_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  signal_fd_ = signalfd(-1, &set_, SFD_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  // Neither fails short of the process running out of descriptors at its
  // very start; Poll then falls back to sigtimedwait.
  if (signal_fd_ < 0 || stop_fd_ < 0) LogWarn("signalfd or eventfd failed", {{"errno", errno}});
}

StopSignals::~StopSignals() {
  if (signal_fd_ >= 0) close(signal_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

int StopSignals::Poll(int timeout_ms) {
  if (signal_fd_ < 0 || stop_fd_ < 0) {
    timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    const int sig = sigtimedwait(&set_, nullptr, timeout_ms < 0 ? nullptr : &ts);
    return sig > 0 ? sig : 0;
  }
  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  while (true) {
    const int n = poll(fds, 2, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (fds[1].revents & POLLIN) {
      uint64_t count = 0;  // read, so that the next wait blocks again
      (void)!read(stop_fd_, &count, sizeof count);
    }
    if (n <= 0 || (fds[0].revents & POLLIN) == 0) return 0;  // timed out or stopped
    signalfd_siginfo info{};
    if (read(signal_fd_, &info, sizeof info) != sizeof info) continue;
    return static_cast<int>(info.ssi_signo);
  }
}

int StopSignals::WaitFor(std::chrono::milliseconds timeout) {
  return Poll(static_cast<int>(timeout.count()));
}

int StopSignals::Wait(std::stop_token stop) {
  std::stop_callback wake(stop, [this] {
    const uint64_t one = 1;
    if (stop_fd_ >= 0) (void)!write(stop_fd_, &one, sizeof one);
  });
  while (!stop.stop_requested()) {
    const int wait_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(upkeep_.NextWait()).count());
    if (int sig = Poll(wait_ms); sig != 0) return sig;
    if (!stop.stop_requested()) upkeep_.OnIdle();
  }
  return 0;
}

StopOnSignal::StopOnSignal(StopSignals& signals)
    : waiter_([this, &signals] {
        if (signals.Wait(finished_.get_token()) != 0) stop_.request_stop();
      }) {}

StopOnSignal::~StopOnSignal() {
  finished_.request_stop();
  waiter_.join();
}

}  // namespace gpuop

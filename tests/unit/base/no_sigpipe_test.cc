#include "base/no_sigpipe.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace gpuop {
namespace {

bool SigpipePending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

bool SigpipeBlocked() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

TEST(ScopedNoSigpipeTest, AWriteToAGonePeerFailsInsteadOfEndingTheProcess) {
  signal(SIGPIPE, SIG_DFL);  // the default action: the process ends
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  close(fds[1]);
  {
    ScopedNoSigpipe guard;
    EXPECT_TRUE(SigpipeBlocked());
    // Without the guard this write raises SIGPIPE and the test binary dies.
    EXPECT_EQ(write(fds[0], "x", 1), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_EQ(write(fds[0], "y", 1), -1);  // twice: still one signal, taken below
  }
  EXPECT_FALSE(SigpipePending());
  EXPECT_FALSE(SigpipeBlocked());  // the mask is what it was
  close(fds[0]);
}

TEST(ScopedNoSigpipeTest, KeepsAMaskThatAlreadyBlockedIt) {
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  { ScopedNoSigpipe guard; }
  EXPECT_TRUE(SigpipeBlocked());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace
}  // namespace gpuop

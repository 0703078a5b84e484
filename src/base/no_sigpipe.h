// ScopedNoSigpipe: while it lives, a write to a socket or pipe whose peer
// has gone fails with EPIPE in this thread instead of ending the process.
//
// For code that writes through a library it cannot give MSG_NOSIGNAL to
// (OpenSSL's socket BIO uses write(2)): a server closing a kept-alive
// connection just as a request leaves raises SIGPIPE, whose default action
// ends the process. SIGPIPE is blocked in this thread, and one raised
// meanwhile is taken before the old mask comes back, so it is never
// delivered. The process's signal dispositions are not touched.
//
// Thread-safety: per thread (it changes the calling thread's signal mask);
// do not hold one across a point where the thread runs unrelated code.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace gpuop {

class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedNoSigpipe() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      timespec zero{};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedNoSigpipe(const ScopedNoSigpipe&) = delete;
  ScopedNoSigpipe& operator=(const ScopedNoSigpipe&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

}  // namespace gpuop

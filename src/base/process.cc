#include "base/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

namespace gpuop {
namespace {

// The child's side of SpawnChild, before `in_child`: every signal this
// process handles goes back to its default (an ignored one stays ignored,
// as across exec), then the caller's mask.
void ResetSignalsInChild(const sigset_t& caller_mask) {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old = {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) ::sigaction(sig, &dfl, nullptr);
  }
  ::sigprocmask(SIG_SETMASK, &caller_mask, nullptr);
}

}  // namespace

Result<pid_t> SpawnChild(const std::function<void()>& in_child) {
  sigset_t all, caller_mask;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &caller_mask);
  pid_t pid = ::vfork();
  if (pid == 0) {
    ResetSignalsInChild(caller_mask);
    in_child();
    ::_exit(127);  // in_child must not return; if it does, the child ends here
  }
  const int err = errno;
  ::pthread_sigmask(SIG_SETMASK, &caller_mask, nullptr);
  if (pid < 0) return Internal("vfork: " + ErrnoText(err));
  return pid;
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv, const std::string& root) {
  const bool chrooted = !root.empty() && root != "/";
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Internal("pipe: " + ErrnoText(errno));
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  // Inside `root`, the system PATH, not this process's: the paths are made
  // before the child starts (it must not allocate).
  std::vector<std::string> candidates;
  if (chrooted && !argv.empty()) {
    if (argv[0].find('/') != std::string::npos) {
      candidates.push_back(argv[0]);
    } else {
      for (const char* dir :
           {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
        candidates.push_back(std::string(dir) + "/" + argv[0]);
      }
    }
  }
  Result<pid_t> child = SpawnChild([&] {
    ::dup2(pipefd[1], STDOUT_FILENO);
    ::dup2(pipefd[1], STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    if (chrooted) {
      if (::chroot(root.c_str()) != 0 || ::chdir("/") != 0) {
        const char msg[] = "cannot enter the root directory\n";
        (void)!::write(STDERR_FILENO, msg, sizeof(msg) - 1);
        ::_exit(127);
      }
      for (const std::string& c : candidates) ::execv(c.c_str(), cargv.data());
    } else {
      ::execvp(cargv[0], cargv.data());
    }
    const char msg[] = "exec failed\n";
    (void)!::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  });
  ::close(pipefd[1]);
  if (!child.ok()) {
    ::close(pipefd[0]);
    return child.status();
  }
  const pid_t pid = *child;
  CommandResult r;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(pipefd[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return Internal("waitpid: " + ErrnoText(errno));
  }
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return r;
}

}  // namespace gpuop

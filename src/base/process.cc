#include "base/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuop {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

Result<CommandResult> RunCommand(const std::vector<std::string>& argv, const std::string& root) {
  const bool chrooted = !root.empty() && root != "/";
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Internal("pipe: " + ErrnoText(errno));
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  // Inside `root`, the system PATH, not this process's: the paths are made
  // before fork (the child of a threaded process must not allocate).
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
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return Internal("fork: " + ErrnoText(err));
  }
  if (pid == 0) {
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
  }
  ::close(pipefd[1]);
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

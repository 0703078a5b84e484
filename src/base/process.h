// Running a helper program (ldconfig, nvidia-smi, chroot ... reboot) and
// collecting what it printed.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpuop {

struct CommandResult {
  int status = 0;      // exit status, or 128 + signal
  std::string output;  // stdout and stderr together
};

// Runs argv (argv[0] looked up in PATH when it has no slash), stdin from
// /dev/null, and waits for it. An error only when it cannot be started;
// a non-zero exit is a result. With `root` (not "" or "/"), it runs inside
// that directory as `chroot ROOT argv...` would (chroot(2), then chdir /,
// PATH the usual system one), for images without a chroot binary; a root it
// cannot enter ends the command with status 127 and says why.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::string& root = "");

// Starts a child process that runs `in_child` and returns its pid. The child
// shares this process's memory until it execs (vfork): a fork of a large,
// threaded process copies its page tables and then pays a copy-on-write
// fault for every page any thread writes while the child lives: in the
// simulator (700 MB resident under ASan, a podman call every few seconds)
// about 15% of its CPU. So `in_child` must end in exec or _exit and
// may only make system calls on memory made before (no allocation, no
// locks, no return). Signals stay blocked until it runs with the handlers
// reset to their defaults, so no handler of this process runs in it; the
// signal mask it execs with is the caller's. An error when no child could
// be made.
Result<pid_t> SpawnChild(const std::function<void()>& in_child);

}  // namespace gpuop

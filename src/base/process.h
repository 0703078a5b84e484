// Running a helper program (ldconfig, nvidia-smi, chroot ... reboot) and
// collecting what it printed.
#pragma once

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

}  // namespace gpuop

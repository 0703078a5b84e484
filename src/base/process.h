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
// a non-zero exit is a result.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv);

}  // namespace gpuop

// The node actions the MIG manager cannot do through NVML, as the DaemonSet
// runs them: a GPU reset (ManagerOptions::gpu_reset) and a reboot
// (ManagerOptions::reboot), each a command line given by flag or
// environment.
//
// A command line is split at spaces (no quoting); in each word, {index} and
// {bus_id} are replaced by the GPU's. "chroot ROOT CMD..." runs CMD with ROOT
// as its root directory without a chroot binary (gpuop's image has none).
// A command that cannot start or exits non-zero is an error carrying its
// output.
//
// Thread-safety: the returned functions may run on any thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpuop::mig {

// `command_line` as argv, with {index} and {bus_id} filled in.
std::vector<std::string> ExpandCommand(const std::string& command_line, unsigned gpu,
                                       const std::string& bus_id);

std::function<Status(unsigned gpu, const std::string& bus_id)> GpuResetCommand(
    std::string command_line);
std::function<Status()> RebootCommand(std::string command_line);

}  // namespace gpuop::mig

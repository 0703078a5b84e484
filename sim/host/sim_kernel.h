// A simulated node's kernel modules: host::KernelModules over the simulator's
// shared GPU state (sim/nvml/state.h), so the driver manager and the driver
// container stand-in load, inspect and unload "the driver" of a simulated node
// the way they do a real kernel's.
//
// The model: the driver is the modules nvidia, nvidia_uvm and nvidia_modeset,
// loaded together at one version (SimState::driver_version). nvidia_uvm's
// users are the live processes holding a CUDA context on any GPU (each holds a
// lock file in <state dir>/holders while alive, so a process killed in any
// container stops counting, as the kernel drops a dead process's references);
// nvidia's users are the other two. Unloading a module with users is refused
// (FailedPrecondition), as rmmod refuses.
//
// Thread-safety: thread-safe (the state store is).
#pragma once

#include <memory>

#include "host/kernel_modules.h"
#include "sim/nvml/state.h"

namespace gpuop::sim {

std::unique_ptr<host::KernelModules> SimKernelModules(std::shared_ptr<StateStore> store);

// The simulated node of this process's environment (GPUOP_SIM_MACHINE,
// GPUOP_SIM_STATE, GPUOP_SIM_SEED; the state must be shared). The error says
// which variable is missing.
Result<std::unique_ptr<host::KernelModules>> SimKernelModulesFromEnv();

}  // namespace gpuop::sim

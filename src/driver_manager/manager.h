// `gpuop driver-manager uninstall_driver`: makes way for a driver (re)load on
// this node, as NVIDIA's k8s-driver-manager does in the driver pod's init
// container, with gpuop's differences:
//
//   1. A driver installed on the host (NVML under the host root initialises):
//      label nvidia.com/gpu.deploy.driver=pre-installed, wait (bounded) for
//      this pod's deletion, fail.
//   2. No nvidia module loaded, or the loaded one has this config's digest
//      (and not FORCE_REINSTALL): restore labels a crashed run paused, undo a
//      cordon it made, succeed. Nothing is paused or evicted.
//   3. Pause the operands (deploy labels), wait (bounded) for their pods to
//      leave the node.
//   4. Cordon (marked as gpuop's), evict the GPU pods (gpu.nvidia.com DRA
//      claims included) through policy/v1 Eviction, all or nothing, retrying
//      PodDisruptionBudget refusals until DRAIN_TIMEOUT; drain the node
//      instead when that fails and auto-drain is on. The upgrade
//      controller's annotation turns both off.
//   5. Fail if a live pod on the node still uses a gpu.nvidia.com claim;
//      pause the DRA driver; wait for its kubelet plugin to leave.
//   6. Unload the modules (kNvidiaModulesUnloadOrder); a refusal names the
//      pods and processes holding the GPUs. Delete the stale pidfile.
//   7. Restore the labels; uncordon only if this manager cordoned.
//
// Every step is a log line and an Event on the Node (reasons
// GPUDriverManager*). Any failure restores the labels, undoes gpuop's own
// cordon, records a Warning Event and returns an error saying what to do.
// Safe to re-run after a crash at any point: paused labels stay paused and
// are restored, gpuop's cordon is recognised by its annotation.
//
// Thread-safety: one run at a time per node; the dependencies are thread-safe.
#pragma once

#include <stop_token>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "driver_manager/options.h"
#include "host/kernel_modules.h"
#include "kube/client.h"
#include "kube/event_recorder.h"

namespace gpuop::driver_manager {

// Event reasons, for `kubectl get events --field-selector reason=...`.
inline constexpr const char* kReasonHostDriver = "GPUDriverManagerHostDriver";
inline constexpr const char* kReasonNoDriver = "GPUDriverManagerNoDriverLoaded";
inline constexpr const char* kReasonDriverCurrent = "GPUDriverManagerDriverCurrent";
inline constexpr const char* kReasonOperandsPaused = "GPUDriverManagerOperandsPaused";
inline constexpr const char* kReasonOperandsGone = "GPUDriverManagerOperandsGone";
inline constexpr const char* kReasonOperandsTimeout = "GPUDriverManagerOperandsTimeout";
inline constexpr const char* kReasonCordoned = "GPUDriverManagerCordoned";
inline constexpr const char* kReasonGpuPodsEvicted = "GPUDriverManagerGPUPodsEvicted";
inline constexpr const char* kReasonEvictionFailed = "GPUDriverManagerEvictionFailed";
inline constexpr const char* kReasonDrained = "GPUDriverManagerDrained";
inline constexpr const char* kReasonDrainFailed = "GPUDriverManagerDrainFailed";
inline constexpr const char* kReasonDraClaimsHeld = "GPUDriverManagerDRAClaimsHeld";
inline constexpr const char* kReasonUnloadFailed = "GPUDriverManagerUnloadFailed";
inline constexpr const char* kReasonUnloaded = "GPUDriverManagerDriverUnloaded";
inline constexpr const char* kReasonFailed = "GPUDriverManagerFailed";

// The files the driver container keeps in Options::run_dir.
inline constexpr const char* kDriverStateFile = "nvidia-driver.state";
inline constexpr const char* kDriverPidFile = "nvidia-driver.pid";

struct Dependencies {
  kube::Client& client;
  host::KernelModules& kernel;
  kube::EventRecorder& events;
  const Clock* clock = nullptr;  // the drain and eviction deadlines; null: RealClock()
};

// The whole flow. OK: the driver container may (re)load the driver. An error
// (FailedPrecondition for a host driver, DeadlineExceeded for a wait that
// ran out, ...) carries the message for the person who has to act.
Status UninstallDriver(const Options& o, Dependencies deps, std::stop_token stop = {});

// Whether a driver installed on the host answers: libnvidia-ml.so.1 found
// through `host_root`'s ld.so.cache (or standard directories) and nvmlInit
// succeeds.
bool HostDriverInstalled(const std::string& host_root);

// "pid 4242 (python3)" for each process under `proc_root`/proc with a
// /dev/nvidia* file open.
std::vector<std::string> ProcessesHoldingGpus(const std::string& proc_root = "/");

}  // namespace gpuop::driver_manager

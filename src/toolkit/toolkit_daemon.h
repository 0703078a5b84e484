// `gpuop toolkit`: the node DaemonSet that installs the gpuop binary for the
// container runtime's hooks and keeps the node's CDI spec current.
//
// ToolkitDaemon is the thin loop around ToolkitCore (toolkit_core.h): it
// wakes on inotify events (driver ld.so.cache and library directories, nvidia
// device nodes, the trigger file), on RequestRegenerate (SIGHUP), and on the
// core's timer; opens NVML afresh at each wake-up (so a driver reload is
// seen), reads the fingerprint, and when the core says so generates the spec
// (GenerateCdiSpec), validates it and writes it atomically, then writes the
// ready file and the status file. What it writes, all under --host-root:
//   <install-dir>/gpuop                      this executable (atomic copy)
//   <cdi-output>                             the CDI spec (atomic; unchanged
//                                            bytes are not rewritten)
//   <validations-dir>/toolkit-ready          after the first good spec
//   <status-file>                            JSON: phase, last error, ...
// It never removes any of them.
//
// Threads: Run() is called on one thread (a std::jthread) and returns when its
// stop_token is stopped; RequestRegenerate() may be called from any thread.
// RunToolkit() is the whole process: it blocks SIGTERM/SIGINT/SIGHUP, runs
// the loop on a jthread and turns the signals into stop and regenerate.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "base/status.h"
#include "toolkit/toolkit_core.h"

namespace gpuop::toolkit {

struct ToolkitOptions {
  // Host paths below are joined to host_root, as everywhere in gpuop.
  std::string host_root = "/";
  // The NVML library to load for a driver root, asked again on every
  // attempt: a driver container may set up the driver root after the
  // toolkit started, and the validator may say the driver is elsewhere.
  std::function<std::string(const std::string& driver_root)> nvml_lib = [](const std::string&) {
    return std::string("libnvidia-ml.so.1");
  };
  std::string cdi_output = "/var/run/cdi/nvidia.yaml";  // .json: JSON, else YAML
  // As the host sees it (NVIDIA_DRIVER_ROOT, NVIDIA_DEV_ROOT; an empty dev
  // root is the driver root). Once the validator has written driver-ready
  // in validations_dir, its roots win: a node with a host driver under a
  // ClusterPolicy that deploys driver containers (host/driver_ready.h).
  std::string driver_root = "/";
  std::string dev_root;
  std::string install_dir = "/usr/local/nvidia/toolkit";  // empty: do not install
  std::string hook_path;  // as the host sees it; empty: <install_dir>/gpuop
  std::string validations_dir = "/run/nvidia/validations";
  std::string trigger_file = "/run/nvidia/toolkit/regenerate";
  std::string status_file = "/run/nvidia/toolkit/status.json";
  std::string self_exe = "/proc/self/exe";  // what is installed
  ToolkitTiming timing;
};

// InvalidArgument when a path is not absolute or an interval is not positive.
Status ValidateToolkitOptions(const ToolkitOptions& options);

// The effective hook path: options.hook_path, else <install_dir>/gpuop.
std::string EffectiveHookPath(const ToolkitOptions& options);

// The status file's JSON for `report`.
std::string ToolkitStatusJson(const ToolkitReport& report, const std::string& spec_path);

class ToolkitDaemon {
 public:
  explicit ToolkitDaemon(ToolkitOptions options);
  ~ToolkitDaemon();
  ToolkitDaemon(const ToolkitDaemon&) = delete;
  ToolkitDaemon& operator=(const ToolkitDaemon&) = delete;

  // Runs until `stop` is requested. Fails only when the loop cannot be set up
  // at all (no inotify, no eventfd); NVML and generation failures are handled
  // inside and never end it.
  Status Run(std::stop_token stop);

  // Asks for a regeneration as soon as possible (SIGHUP). Thread-safe.
  void RequestRegenerate();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process: see the file comment. Returns the exit code (0 on SIGTERM).
int RunToolkit(const ToolkitOptions& options);

}  // namespace gpuop::toolkit

// The simulator's stand-in for NVIDIA's driver container image, and the
// images that carry it.
//
// A driver image here is gpuop's image plus a driver installation of one
// version (the simulated libraries, tools and firmware, laid out as a driver
// install lays them out) and busybox for the probes NVIDIA's pod spec runs
// (`sh`, `nvidia-smi`). Its entrypoint, `gpuop sim driver-container init`,
// keeps the driver container's contract (the nvidia-driver script of
// NVIDIA/gpu-driver-container):
//   - one instance per node (a non-blocking flock on
//     /run/nvidia/nvidia-driver.pid), `.driver-daemons-status` NotReady
//     until the driver is up, then Ready;
//   - fast path: the same version loaded with the same DRIVER_CONFIG_DIGEST
//     (/run/nvidia/nvidia-driver.state): no reload;
//   - else unload whatever driver is loaded, refusing ("driver is in use",
//     exit 1) while a process holds it, "build" (a version built to fail
//     fails here, as a kernel module that does not compile), set up the
//     driver root at /run/nvidia/driver (with its /dev, as the real
//     container's rbind of its root has), load the simulated kernel driver of
//     the image's version (NVML then reports it), write the digest;
//   - on SIGTERM: unload and take the root down; when the driver is still in
//     use, wait for SIGKILL and leave everything for the next driver manager.
//
// Thread-safety: functions; not for concurrent use on one node.
#pragma once

#include <string>

#include "base/status.h"
#include "host/kernel_modules.h"
#include "sim/nvml/state.h"

namespace gpuop::sim {

// Where the image carries its driver installation.
inline constexpr const char* kDriverTreeInImage = "/gpuop-sim-driver";

struct DriverContainerOptions {
  std::string version;                  // DRIVER_VERSION, baked into the image
  std::string config_digest;            // DRIVER_CONFIG_DIGEST, from the pod spec
  std::string fail;                     // GPUOP_SIM_DRIVER_FAIL: "" or "build"
  std::string run_dir = "/run/nvidia";  // the host's /run/nvidia
  std::string driver_tree = kDriverTreeInImage;
  std::string dev_dir = "/dev";  // the node's device nodes (a privileged container's /dev)
};

// Loads the driver (the init steps above). FailedPrecondition when the loaded
// driver is in use, Internal for a build failure; the message says what to do.
Status StartDriver(const DriverContainerOptions& o, StateStore& store, host::KernelModules& kernel);

// Unloads the driver and clears the driver root. FailedPrecondition when a
// module is in use (nothing is cleared then).
Status StopDriver(const DriverContainerOptions& o, host::KernelModules& kernel);

struct DriverImageOptions {
  std::string image;     // "nvcr.io/nvidia/driver:550.127.05-ubuntu22.04"
  std::string base;      // gpuop's image: "localhost/gpuop:<version>"
  std::string fail;      // "" or "build"
  std::string nvml_sim;  // libnvml-sim.so, libcuda-sim.so to install
  std::string cuda_sim;
  std::string busybox;  // a static busybox to copy in
};

// The driver version a driver image's tag names: "550.127.05-ubuntu22.04" →
// "550.127.05"; also a digest-free tag without an OS suffix.
Result<std::string> DriverVersionFromImage(const std::string& image);

// Builds the image with podman into the local store. Returns its name.
Result<std::string> BuildDriverImage(const DriverImageOptions& o);

}  // namespace gpuop::sim

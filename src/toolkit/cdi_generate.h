// GenerateCdiSpec: "the CDI spec for this host, now".
//
// The one entry point that `gpuop cdi generate` and `gpuop toolkit` share. It
// reads the GPUs from NVML (an open nvml::Client) and the driver's files from
// the host root (cdi_discover.h), builds the spec with the pure core
// (cdi_build.h), and returns it, ready to be rendered (cdi_spec.h ToYaml /
// ToJson) and written with WriteFileAtomic. Nothing is written here.
//
// Paths: gpuop READS host_root + driver_root + path (libraries, binaries,
// firmware, ld.so.cache) and host_root + dev_root + path (device nodes,
// mig-minors); the spec SAYS hostPath = driver_root + path (dev_root + path for
// device nodes) and containerPath = path, because the container runtime that
// reads the spec runs on the host, where host_root is "/".
//
// Errors are one clear line naming the problem and the fix (no /dev/nvidiactl,
// no driver libraries for the running version, a corrupt ld.so.cache, an NVML
// failure); a spec is never returned with an empty device list or a device
// without edits. Thread-safe: no shared state (the Client is thread-safe).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "nvml/client.h"
#include "toolkit/cdi_spec.h"

namespace gpuop::toolkit {

// How devices are named in the spec; several strategies may be combined, each
// adds one name per device.
enum class DeviceNameStrategy {
  kIndex,      // "0", MIG "0:1"
  kUuid,       // "GPU-...", "MIG-..."
  kTypeIndex,  // "gpu0", MIG "mig0:1"
};

// "index,uuid,type-index" → strategies, in order, without duplicates.
// InvalidArgument naming the bad entry and the accepted values.
Result<std::vector<DeviceNameStrategy>> ParseDeviceNameStrategies(const std::string& csv);

struct CdiGenerateOptions {
  std::string host_root = "/";    // where the host's file system is mounted here
  std::string driver_root = "/";  // the driver's root as the host sees it
  std::string dev_root;           // device root as the host sees it; empty: driver_root
  std::string vendor = "nvidia.com";
  std::string device_class = "gpu";  // kind = vendor + "/" + device_class
  std::vector<DeviceNameStrategy> name_strategies = {DeviceNameStrategy::kIndex,
                                                     DeviceNameStrategy::kUuid};
  bool no_all_device = false;
  bool additional_gids = false;  // see CdiBuildOptions::additional_gids
  // Absolute path of the gpuop binary as the container runtime (on the host)
  // sees it; hooks run `<hook_path> cdi hook <name> ...`. Required.
  std::string hook_path;
};

// The spec for the host as it is now (see the file comment). cdiVersion is the
// minimum version the spec's features need.
Result<cdi::Spec> GenerateCdiSpec(const nvml::Client& client, const CdiGenerateOptions& options);

}  // namespace gpuop::toolkit

// The adapter that gathers CdiInputs (cdi_build.h) from NVML and the host
// root: device nodes and their stat, DRI nodes by PCI bus, MIG capability
// minors, and the driver's libraries, binaries, firmware and sockets.
//
// It decides nothing about the spec; it only reads. A node that is absent is
// simply left out (BuildSpec reports what is missing with context); an
// unreadable or corrupt file (ld.so.cache, mig-minors) is an error naming it.
// Thread-safe: no shared state.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "nvml/client.h"
#include "nvml/device.h"
#include "toolkit/cdi_build.h"

namespace gpuop::toolkit {

// Where to read: files are read at host_root + driver_root + path and device
// nodes at host_root + dev_root + path.
struct CdiHostRoots {
  std::string host_root = "/";
  std::string driver_root = "/";
  std::string dev_root = "/";
};

// Everything but NVML: the GPUs and driver version are given.
Result<CdiInputs> DiscoverCdiInputs(const std::vector<nvml::Gpu>& gpus,
                                    const std::string& driver_version, const CdiHostRoots& roots);

// Reads the GPUs and the driver version from NVML, then DiscoverCdiInputs.
Result<CdiInputs> DiscoverCdiInputs(const nvml::Client& client, const CdiHostRoots& roots);

// NVML's "00000000:18:00.0" → sysfs "0000:18:00.0" (4-digit domain, lower
// case). InvalidArgument when it is not domain:bus:device.function.
Result<std::string> SysfsBusId(const std::string& nvml_bus_id);

}  // namespace gpuop::toolkit

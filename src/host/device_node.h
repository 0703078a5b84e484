// Device nodes as the host shows them: what stat(2) says about /dev/nvidia0
// and friends under a host root (type, major, minor, permission bits, owner).
//
// The CDI spec carries these numbers so that a runtime creates the node in the
// container exactly as it is on the host. StatDeviceNode is a thin adapter over
// stat(2); DeviceNodeInfo is a plain value. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/status.h"

namespace gpuop::host {

struct DeviceNodeInfo {
  char type = 'c';  // 'c' character, 'b' block
  uint32_t major = 0, minor = 0;
  uint32_t mode = 0;  // permission bits only (07777)
  uint32_t uid = 0, gid = 0;

  // True when everyone may read and write the node (mode o+rw).
  bool WorldReadWrite() const { return (mode & 0006) == 0006; }
  bool operator==(const DeviceNodeInfo&) const = default;
};

// stat(2) of `path` (a full path on this machine, host root included),
// following symlinks as a runtime does. NotFound when absent; InvalidArgument
// when it exists but is no character or block device.
Result<DeviceNodeInfo> StatDeviceNode(const std::string& path);

}  // namespace gpuop::host

// GPU health as the ResourceSlices' taints want it: the health monitor's open
// faults are per unit (a GPU or a MIG device); a taint is per GPU (a MIG
// device's fault taints every device of its GPU) and carries when the GPU
// was first seen unhealthy, kept while it stays so.
//
// Thread-safety: a GpuHealthTracker is used by one thread (the publisher).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dra/devices.h"
#include "nvml/device.h"

namespace gpuop::dra {

// One unit's open fault.
struct UnitFault {
  std::optional<uint64_t> xid;  // an XID (or double-bit ECC) fault
  bool lost = false;            // the GPU fell off the bus (no XID)
};

class GpuHealthTracker {
 public:
  // The health of each GPU of `gpus` with a fault in `faults` (by GPU or MIG
  // UUID; units not on these GPUs are ignored). `now` (RFC 3339) becomes the
  // `since` of a GPU that was healthy at the last update.
  std::map<std::string, GpuHealthState> Update(const std::vector<nvml::Gpu>& gpus,
                                               const std::map<std::string, UnitFault>& faults,
                                               const std::string& now);

 private:
  std::map<std::string, std::string> since_;  // GPU UUID → first seen unhealthy
};

}  // namespace gpuop::dra

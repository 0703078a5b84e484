// GetPreferredAllocation's choice: which of the available devices a container
// should get, given the devices the kubelet insists on.
//
// Whole GPUs get a topology-aware best effort: the set with the highest total
// pairwise Topology::Score (NVLinks first, then PCIe closeness), as NVIDIA's
// go-gpuallocator does. Shared devices (time-slicing/MPS replicas) and MIG
// devices are spread or packed over their units instead (upstream's
// sharedDevicesAllocationPolicy: distributed, the default, or packed).
//
// Pure: no I/O; the same inputs always give the same answer (ties go to the
// lowest GPU index, then the lowest device ID). Safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "deviceplugin/topology.h"

namespace gpuop::deviceplugin {

// One device the kubelet may hand out, as this core needs to see it.
struct DeviceRef {
  std::string id;       // the kubelet's device ID ("GPU-…", "MIG-…", "GPU-…::3", "0", "0:1")
  unsigned gpu = 0;     // NVML index of the GPU it is on
  std::string unit;     // what replicas share: the GPU or MIG UUID (empty: the id itself)
  bool shared = false;  // a replica of a shared unit, or a MIG device
  unsigned replicas = 1;  // how many devices the unit is advertised as (replicas per unit)
};

enum class SharedPolicy {
  kDistributed,  // units with the fewest replicas taken first (spreads load)
  kPacked,       // units with the most replicas taken first (keeps units free)
};

// Parses "distributed" / "packed" (upstream's sharedDevicesAllocationPolicy).
Result<SharedPolicy> ParseSharedPolicy(const std::string& s);

// The IDs to prefer, `size` of them, all of `must_include` among them, sorted
// by (GPU index, ID). Whole GPUs are chosen by topology when no available
// device is shared; otherwise by `policy`, counting a unit's taken replicas as
// `replicas` minus its available devices. Errors (InvalidArgument) for size
// < 1 or below the must-include count, a must-include ID that is not
// available, or fewer available devices than `size`.
Result<std::vector<std::string>> PreferredAllocation(const Topology& topo,
                                                     const std::vector<DeviceRef>& available,
                                                     const std::vector<std::string>& must_include,
                                                     int size, SharedPolicy policy);

}  // namespace gpuop::deviceplugin

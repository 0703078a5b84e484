// DraAllocator: the structured-parameters allocator of kube-scheduler's
// DynamicResources plugin, for the subset the cluster simulator serves. Pure:
// it reads ResourceClaims, DeviceClasses and one node's ResourceSlices
// (resource.k8s.io/v1 JSON) and answers with the claims' status.allocation, or
// why none fits. The scheduler adapter does the API reads and writes.
//
// What it allocates:
//   - requests with `exactly`: deviceClassName, the class's and the request's
//     CEL selectors (cel.h), allocationMode ExactCount (count, default 1) or
//     All (every matching device on the node, none of them in use);
//   - constraints with matchAttribute, across the requests they name (all of
//     the claim's when none);
//   - devices whose NoSchedule/NoExecute taints the request tolerates
//     (exactly.tolerations), none in use by another claim, none twice;
//   - from each pool of the node only the slices of its highest generation.
// Refused with a message (never silently ignored): firstAvailable,
// adminAccess, capacity requests, distinctAttribute, unknown allocation modes.
// The search is kube's: requests in order, devices in slice order,
// backtracking when a constraint fails later.
//
// The allocation is status.allocation as kube-scheduler writes it:
// devices.results[{request, driver, pool, device}], devices.config (the
// class's config per request, source FromClass, then the claim's, FromClaim),
// nodeSelector matching the node by metadata.name.
//
// Thread-safety: one thread at a time (selectors are cached after parsing).
#pragma once

#include <compare>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/object.h"
#include "sim/cluster/cel.h"

namespace gpuop::simcluster {

// One allocatable device.
struct DeviceRef {
  std::string driver, pool, device;
  auto operator<=>(const DeviceRef&) const = default;
};

// The devices an allocated claim holds (empty when it is not allocated).
std::vector<DeviceRef> AllocatedDevices(const kube::Json& claim);

// DeviceClass objects by name.
using DeviceClasses = std::map<std::string, const kube::Json*>;

class DraAllocator {
 public:
  // What does not depend on the node: every unallocated claim's requests name
  // an existing DeviceClass, use only what the simulator supports, and their
  // selectors (and the classes') parse. The message names the claim and the fix.
  Status Check(const std::vector<const kube::Json*>& claims, const DeviceClasses& classes);

  // Allocates every claim without status.allocation on `node`, from `slices`
  // (the node's ResourceSlices, any pool or generation), leaving out devices
  // in `in_use`. Returns status.allocation per claim, in the claims' order
  // (null for claims already allocated); FailedPrecondition saying why when
  // the devices do not fit.
  Result<std::vector<kube::Json>> Allocate(const std::vector<const kube::Json*>& claims,
                                           const DeviceClasses& classes, const std::string& node,
                                           const std::vector<const kube::Json*>& slices,
                                           const std::set<DeviceRef>& in_use);

 private:
  Result<const CelSelector*> Selector(const std::string& expression);

  std::map<std::string, CelSelector> selectors_;  // by expression
};

}  // namespace gpuop::simcluster

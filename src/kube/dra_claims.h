// DRA ResourceClaims as the driver upgrade reads them: which claims a pod
// uses, and which claims a DRA driver allocated. The operator's upgrade
// controller and the driver manager both count a pod holding a GPU through
// a gpu.nvidia.com claim as a GPU pod (facts/driver.md §2.4).
//
// Thread-safety: pure functions over values; ListClaimsAllocatedBy uses the
// (thread-safe) client.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kube/client.h"

namespace gpuop::kube {

// The driver name of NVIDIA's GPU DRA driver, which gpuop's dra-plugin
// publishes and the operator's DeviceClasses select.
inline constexpr char kGpuDraDriver[] = "gpu.nvidia.com";

// "ns/name" of the ResourceClaims `pod` uses: spec.resourceClaims[].
// resourceClaimName, or for a claim made from a template, the claim its
// status.resourceClaimStatuses entry names (none until one was made).
std::vector<std::string> PodClaimKeys(const Json& pod);

// Whether `claim`'s status.allocation.devices.results name `driver`.
bool IsAllocatedByDriver(const Json& claim, std::string_view driver);

// Whether `pod` uses one of `claims` ("ns/name").
bool UsesAnyClaim(const Json& pod, const std::set<std::string>& claims);

// "ns/name" of the ResourceClaims in every namespace allocated by `driver`.
// A cluster without resource.k8s.io/v1 (404 on the list) has none.
Result<std::set<std::string>> ListClaimsAllocatedBy(Client& client, std::string_view driver);

}  // namespace gpuop::kube

// GPU pods as the driver upgrade reads them: a pod that requests an nvidia.com
// GPU or MIG resource, or holds a ResourceClaim a DRA driver allocated (which
// claims a pod uses, which claims gpu.nvidia.com allocated). The operator's
// upgrade controller and the driver manager both decide with these which pods
// to evict.
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

// Whether container `resources` (limits or requests) name nvidia.com/gpu* or
// nvidia.com/mig-*: the device plugin's resources.
bool RequestsGpuResource(const Json& resources);

// A regular container of `pod` requests a GPU resource (init containers do
// not count: they ran to completion), or `pod` uses one of `gpu_claims`
// ("ns/name" of the claims gpu.nvidia.com allocated; ListClaimsAllocatedBy).
bool IsGpuPod(const Json& pod, const std::set<std::string>& gpu_claims);

// Whether `pod` uses one of `claims` ("ns/name").
bool UsesAnyClaim(const Json& pod, const std::set<std::string>& claims);

// "ns/name" of the ResourceClaims in every namespace allocated by `driver`.
// A cluster without resource.k8s.io/v1 (404 on the list) has none.
Result<std::set<std::string>> ListClaimsAllocatedBy(Client& client, std::string_view driver);

}  // namespace gpuop::kube

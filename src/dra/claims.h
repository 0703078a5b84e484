// What a ResourceClaim (resource.k8s.io/v1) asks of this node's driver, and
// which of the node's GPUs and MIG devices that is.
//
// The kubelet sends only a claim's namespace, name and UID; the plugin reads
// the claim from the API server and ParseClaim checks it is the same object
// (a claim deleted and recreated under the same name has a new UID) and that
// the scheduler allocated it, then keeps the allocation results of driver
// gpu.nvidia.com in this node's pool. ResolveDevice maps a device name
// (names.h) onto the GPUs NVML reports now.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kubelet/dra_types.h"
#include "nvml/device.h"

namespace gpuop::dra {

// One allocation result for this driver and pool.
struct AllocatedDevice {
  std::string request;  // as allocated: "req" or "req/sub"
  std::string pool, device;
  bool admin_access = false;
  bool operator==(const AllocatedDevice&) const = default;
};

// The request name the kubelet is told: "req/sub" → "req".
std::string ReportedRequestName(std::string_view request);

struct ClaimAllocation {
  std::string ns, name, uid;
  std::vector<AllocatedDevice> devices;  // in allocation order
  // status.allocation.devices.config as allocated (an array; may be empty),
  // read by config.h.
  nlohmann::json config = nlohmann::json::array();
};

// "<ns>/<name>", as errors name a claim.
std::string ClaimRef(const kubelet::DraClaim& claim);

// Checks `claim` (the object read from the API server) against what the
// kubelet sent and keeps the results of driver gpu.nvidia.com in pool
// `pool` (the node name); other drivers' and pools' results are ignored.
// FailedPrecondition when the UID differs ("claim <ns>/<name> was replaced")
// or the claim is not allocated; InvalidArgument for a malformed object.
Result<ClaimAllocation> ParseClaim(const nlohmann::json& claim, const kubelet::DraClaim& expected,
                                   std::string_view pool);

enum class DeviceType { kGpu, kMig };

// A published device name resolved against the node's GPUs.
struct ResolvedDevice {
  std::string name;  // "gpu-0", "gpu-0-mig-1g10gb-19-0"
  DeviceType type = DeviceType::kGpu;
  unsigned gpu_index = 0;
  int gpu_minor = -1;
  std::string gpu_uuid;  // the GPU, or a MIG device's parent
  std::string mig_uuid;  // MIG only
  unsigned gi_id = 0, ci_id = 0;
  bool operator==(const ResolvedDevice&) const = default;
};

// NotFound naming the device and what the node has when no GPU (MIG off) or
// MIG device carries `name`: the layout changed since the allocation.
Result<ResolvedDevice> ResolveDevice(const std::vector<nvml::Gpu>& gpus, std::string_view name);

}  // namespace gpuop::dra

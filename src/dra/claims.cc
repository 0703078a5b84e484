#include "dra/claims.h"

#include "dra/names.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;

// The string at `key` of object `o`; "" when absent or not a string.
std::string StringAt(const Json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

const Json* ObjectAt(const Json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it != o.end() && it->is_object() ? &*it : nullptr;
}

}  // namespace

std::string ReportedRequestName(std::string_view request) {
  return std::string(request.substr(0, request.find('/')));
}

std::string ClaimRef(const kubelet::DraClaim& claim) { return claim.ns + "/" + claim.name; }

Result<ClaimAllocation> ParseClaim(const Json& claim, const kubelet::DraClaim& expected,
                                   std::string_view pool) {
  const std::string ref = "claim " + ClaimRef(expected);
  const Json* meta = ObjectAt(claim, "metadata");
  if (meta == nullptr) {
    return InvalidArgument(ref + ": the object read from the API server has no metadata");
  }
  const std::string uid = StringAt(*meta, "uid");
  if (uid != expected.uid) {
    return FailedPrecondition(ref + " was replaced: UID " + uid + " in the API server, " +
                              expected.uid +
                              " from the kubelet; the pod must be recreated to use the new claim");
  }
  const Json* status = ObjectAt(claim, "status");
  const Json* allocation = status ? ObjectAt(*status, "allocation") : nullptr;
  if (allocation == nullptr) {
    return FailedPrecondition(ref +
                              " is not allocated (status.allocation is unset): the scheduler "
                              "allocates a claim before the kubelet prepares it");
  }

  ClaimAllocation out;
  out.ns = expected.ns;
  out.name = expected.name;
  out.uid = uid;
  const Json* devices = ObjectAt(*allocation, "devices");
  if (devices == nullptr) return out;
  if (auto it = devices->find("results"); it != devices->end()) {
    if (!it->is_array()) {
      return InvalidArgument(ref + ": status.allocation.devices.results is not a list");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& r = (*it)[i];
      if (StringAt(r, "driver") != kDriverName || StringAt(r, "pool") != pool) continue;
      AllocatedDevice d{StringAt(r, "request"), StringAt(r, "pool"), StringAt(r, "device")};
      if (d.request.empty() || d.device.empty()) {
        return InvalidArgument(ref + ": status.allocation.devices.results[" + std::to_string(i) +
                               "] has no request or device name");
      }
      auto admin = r.find("adminAccess");
      d.admin_access = admin != r.end() && admin->is_boolean() && admin->get<bool>();
      out.devices.push_back(std::move(d));
    }
  }
  if (auto it = devices->find("config"); it != devices->end()) {
    if (!it->is_array()) {
      return InvalidArgument(ref + ": status.allocation.devices.config is not a list");
    }
    out.config = *it;
  }
  return out;
}

Result<ResolvedDevice> ResolveDevice(const std::vector<nvml::Gpu>& gpus, std::string_view name) {
  std::string have;
  for (const nvml::Gpu& gpu : gpus) {
    ResolvedDevice d;
    d.gpu_index = gpu.index;
    d.gpu_minor = gpu.minor;
    d.gpu_uuid = gpu.uuid;
    if (!gpu.mig_enabled) {
      d.name = GpuDeviceName(gpu);
      if (d.name == name) return d;
      have += (have.empty() ? "" : ", ") + d.name;
      continue;
    }
    for (const nvml::MigDevice& mig : gpu.mig_devices) {
      d.name = MigDeviceName(gpu, mig);
      if (d.name == name) {
        d.type = DeviceType::kMig;
        d.mig_uuid = mig.uuid;
        d.gi_id = mig.gi_id;
        d.ci_id = mig.ci_id;
        return d;
      }
      have += (have.empty() ? "" : ", ") + d.name;
    }
  }
  return NotFound("device " + std::string(name) +
                  " is not on this node now (the GPU or its MIG layout changed since the claim "
                  "was allocated; delete the claim so the scheduler allocates it again); the node "
                  "has: " +
                  (have.empty() ? "no devices" : have));
}

}  // namespace gpuop::dra

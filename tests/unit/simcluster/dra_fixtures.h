// Shared by the simulated scheduler's DRA tests: NVIDIA's DeviceClasses as the
// operator renders them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpuop::simcluster::testing {

// DeviceClass `name` selecting gpu.nvidia.com devices of `type` (gpu, mig),
// with an optional spec.config.
inline nlohmann::json DeviceClass(const std::string& name, const std::string& type,
                                  nlohmann::json config = nullptr) {
  const std::string cel =
      "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '" +
      type + "'";
  nlohmann::json c = {{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "DeviceClass"},
                      {"metadata", {{"name", name}}},
                      {"spec", {{"selectors", {{{"cel", {{"expression", cel}}}}}}}}};
  if (!config.is_null()) c["spec"]["config"] = std::move(config);
  return c;
}

}  // namespace gpuop::simcluster::testing

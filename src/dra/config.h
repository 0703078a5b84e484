// The opaque device parameters of NVIDIA's GPU DRA driver
// (resource.nvidia.com/v1beta1) and which one applies to each allocated device.
//
// ParseAllocationConfigs reads status.allocation.devices.config: entries of
// other drivers are skipped; ours are decoded strictly (an unknown field, a
// wrong type or value is an error naming the entry and field), so a claim
// written for NVIDIA's driver means the same here or fails clearly.
//
// Kinds: GpuConfig (whole GPUs) and MigDeviceConfig (MIG devices), each with
// an optional sharing{strategy, ...}. gpuop applies TimeSlicing to whole GPUs
// (timeSlicingConfig.interval Default|Short|Medium|Long). MPS needs a
// per-claim MPS control daemon, which gpuop does not run: it is refused with
// an error saying so. VfioDeviceConfig (passthrough) is refused likewise.
//
// SelectConfig applies NVIDIA's precedence: built-in defaults < FromClass <
// FromClaim; scanning from the highest, an entry that names the result's
// request (or its parent request, for "req/sub") wins, and is an error when
// its kind does not fit the device type; an entry naming no request wins only
// when its kind fits.
//
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "dra/claims.h"

namespace gpuop::dra {

inline constexpr char kConfigApiVersion[] = "resource.nvidia.com/v1beta1";

// nvidia-smi compute-policy --set-timeslice values.
enum class TimeSliceInterval { kDefault = 0, kShort = 1, kMedium = 2, kLong = 3 };

std::string_view TimeSliceIntervalName(TimeSliceInterval interval);

// One decoded GpuConfig or MigDeviceConfig.
struct DeviceConfig {
  DeviceType kind = DeviceType::kGpu;  // GpuConfig or MigDeviceConfig
  // Set by sharing.strategy TimeSlicing (GpuConfig only).
  std::optional<TimeSliceInterval> time_slice;
  bool operator==(const DeviceConfig&) const = default;
};

// The built-in default of a device type: no sharing applied.
DeviceConfig DefaultConfig(DeviceType type);

// Decodes an opaque parameters object strictly. `where` names the entry in
// errors ("status.allocation.devices.config[1]"): "<where>.opaque.parameters...".
Result<DeviceConfig> DecodeDeviceConfig(const nlohmann::json& parameters, const std::string& where);

enum class ConfigSource { kFromClass, kFromClaim };

struct ConfigEntry {
  ConfigSource source = ConfigSource::kFromClaim;
  std::vector<std::string> requests;  // empty: every request
  DeviceConfig config;
};

// Our entries of status.allocation.devices.config, lowest precedence first
// (FromClass before FromClaim, each in listed order). Errors name the entry
// ("status.allocation.devices.config[1].opaque.parameters.kind: ..."); the
// caller adds the claim.
Result<std::vector<ConfigEntry>> ParseAllocationConfigs(const nlohmann::json& config);

// The config of one allocated device of type `type` (see the file comment).
Result<DeviceConfig> SelectConfig(const std::vector<ConfigEntry>& entries,
                                  const AllocatedDevice& device, DeviceType type);

}  // namespace gpuop::dra

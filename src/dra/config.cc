#include "dra/config.h"

#include <algorithm>
#include <initializer_list>

#include "base/strings.h"
#include "dra/names.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kMpsRefused =
    "sharing strategy MPS is not supported by gpuop: MPS needs a per-claim MPS control daemon, "
    "which gpuop does not run; use strategy TimeSlicing to share a whole GPU, or MIG devices "
    "(mig.nvidia.com) to partition one";

std::string_view KindName(DeviceType t) {
  return t == DeviceType::kGpu ? "GpuConfig" : "MigDeviceConfig";
}

std::string_view DeviceTypeName(DeviceType t) { return t == DeviceType::kGpu ? "gpu" : "mig"; }

// InvalidArgument for the first key of `o` outside `known`.
Status CheckKnownFields(const Json& o, std::initializer_list<std::string_view> known,
                        const std::string& where) {
  for (const auto& [key, value] : o.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return InvalidArgument(where + "." + key + ": unknown field (known: " + list + ")");
    }
  }
  return Status::Ok();
}

// The member `key` of `o`: nullptr when absent or null (Go's decoder leaves a
// null pointer field unset); InvalidArgument when it is not an object.
Result<const Json*> OptionalObject(const Json& o, const char* key, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return static_cast<const Json*>(nullptr);
  if (!it->is_object()) return InvalidArgument(where + "." + key + ": must be an object");
  return &*it;
}

Result<std::string> RequiredString(const Json& o, const char* key, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return InvalidArgument(where + "." + key + ": missing");
  if (!it->is_string()) return InvalidArgument(where + "." + key + ": must be a string");
  return it->get<std::string>();
}

Result<TimeSliceInterval> DecodeTimeSlicing(const Json* tsc, const std::string& where) {
  if (tsc == nullptr) return TimeSliceInterval::kDefault;
  GPUOP_RETURN_IF_ERROR(CheckKnownFields(*tsc, {"interval"}, where));
  auto it = tsc->find("interval");
  if (it == tsc->end() || it->is_null()) return TimeSliceInterval::kDefault;
  if (it->is_string()) {
    for (auto i : {TimeSliceInterval::kDefault, TimeSliceInterval::kShort,
                   TimeSliceInterval::kMedium, TimeSliceInterval::kLong}) {
      if (*it == TimeSliceIntervalName(i)) return i;
    }
  }
  return InvalidArgument(where + ".interval: " + Excerpt(it->dump()) +
                         " is not a time slice interval; use Default, Short, Medium or Long");
}

Status DecodeSharing(const Json& sharing, DeviceType kind, DeviceConfig& out,
                     const std::string& where) {
  if (kind == DeviceType::kGpu) {
    GPUOP_RETURN_IF_ERROR(
        CheckKnownFields(sharing, {"strategy", "timeSlicingConfig", "mpsConfig"}, where));
  } else {
    GPUOP_RETURN_IF_ERROR(CheckKnownFields(sharing, {"strategy", "mpsConfig"}, where));
  }
  GPUOP_ASSIGN_OR_RETURN(std::string strategy, RequiredString(sharing, "strategy", where));
  GPUOP_ASSIGN_OR_RETURN(const Json* tsc, OptionalObject(sharing, "timeSlicingConfig", where));
  GPUOP_ASSIGN_OR_RETURN(const Json* mps, OptionalObject(sharing, "mpsConfig", where));
  if (strategy == "MPS") return NotSupported(where + ": " + std::string(kMpsRefused));
  if (strategy != "TimeSlicing") {
    return InvalidArgument(where + ".strategy: \"" + Excerpt(strategy) +
                           "\" is not a sharing strategy; use TimeSlicing (or MPS, which gpuop "
                           "does not support)");
  }
  if (kind == DeviceType::kMig) {
    return NotSupported(where +
                        ": strategy TimeSlicing is set per whole GPU (nvidia-smi compute-policy), "
                        "not per MIG device; remove sharing from the MigDeviceConfig, or claim a "
                        "whole GPU (gpu.nvidia.com) with a GpuConfig");
  }
  if (mps != nullptr) {
    return InvalidArgument(where + ".mpsConfig: only valid with strategy MPS; remove it");
  }
  GPUOP_ASSIGN_OR_RETURN(TimeSliceInterval interval,
                         DecodeTimeSlicing(tsc, where + ".timeSlicingConfig"));
  out.time_slice = interval;
  return Status::Ok();
}

// The string member `key` of object `o`; "" when absent or of another type.
std::string StringMember(const Json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

bool NamesRequest(const ConfigEntry& e, const AllocatedDevice& d) {
  const std::string parent = ReportedRequestName(d.request);
  return std::any_of(e.requests.begin(), e.requests.end(),
                     [&](const std::string& r) { return r == d.request || r == parent; });
}

}  // namespace

std::string_view TimeSliceIntervalName(TimeSliceInterval interval) {
  switch (interval) {
    case TimeSliceInterval::kDefault:
      return "Default";
    case TimeSliceInterval::kShort:
      return "Short";
    case TimeSliceInterval::kMedium:
      return "Medium";
    case TimeSliceInterval::kLong:
      return "Long";
  }
  return "Default";
}

DeviceConfig DefaultConfig(DeviceType type) { return DeviceConfig{type, std::nullopt}; }

Result<DeviceConfig> DecodeDeviceConfig(const Json& parameters, const std::string& where) {
  const std::string at = where + ".opaque.parameters";
  if (!parameters.is_object()) return InvalidArgument(at + " must be an object");
  GPUOP_ASSIGN_OR_RETURN(std::string api_version, RequiredString(parameters, "apiVersion", at));
  GPUOP_ASSIGN_OR_RETURN(std::string kind, RequiredString(parameters, "kind", at));
  if (api_version != kConfigApiVersion) {
    return InvalidArgument(at + ".apiVersion: \"" + Excerpt(api_version) + "\" is not " +
                           kConfigApiVersion + " (the one version gpuop reads)");
  }
  DeviceConfig out;
  if (kind == "GpuConfig") {
    out.kind = DeviceType::kGpu;
  } else if (kind == "MigDeviceConfig") {
    out.kind = DeviceType::kMig;
  } else if (kind == "VfioDeviceConfig") {
    return NotSupported(at + ": VfioDeviceConfig (GPU passthrough) is not supported by gpuop");
  } else {
    return InvalidArgument(at + ".kind: \"" + Excerpt(kind) + "\" is not a kind of " +
                           kConfigApiVersion + "; use GpuConfig or MigDeviceConfig");
  }
  GPUOP_RETURN_IF_ERROR(CheckKnownFields(parameters, {"apiVersion", "kind", "sharing"}, at));
  GPUOP_ASSIGN_OR_RETURN(const Json* sharing, OptionalObject(parameters, "sharing", at));
  if (sharing != nullptr) {
    GPUOP_RETURN_IF_ERROR(DecodeSharing(*sharing, out.kind, out, at + ".sharing"));
  }
  return out;
}

Result<std::vector<ConfigEntry>> ParseAllocationConfigs(const Json& config) {
  std::vector<ConfigEntry> from_class, from_claim;
  if (config.is_null()) return from_class;
  if (!config.is_array()) {
    return InvalidArgument("status.allocation.devices.config is not a list");
  }
  for (size_t i = 0; i < config.size(); ++i) {
    const Json& c = config[i];
    const std::string where = "status.allocation.devices.config[" + std::to_string(i) + "]";
    if (!c.is_object()) return InvalidArgument(where + " is not an object");
    auto opaque = c.find("opaque");
    if (opaque == c.end() || !opaque->is_object()) {
      return InvalidArgument(where + " has no opaque configuration (the only kind there is)");
    }
    if (StringMember(*opaque, "driver") != kDriverName) continue;
    ConfigEntry e;
    const std::string source = StringMember(c, "source");
    if (source == "FromClass") {
      e.source = ConfigSource::kFromClass;
    } else if (source == "FromClaim") {
      e.source = ConfigSource::kFromClaim;
    } else {
      return InvalidArgument(where + ".source: \"" + Excerpt(source) +
                             "\" is not FromClass or FromClaim");
    }
    if (auto r = c.find("requests"); r != c.end() && !r->is_null()) {
      if (!r->is_array()) return InvalidArgument(where + ".requests is not a list");
      for (const Json& name : *r) {
        if (!name.is_string()) return InvalidArgument(where + ".requests holds a non-string");
        e.requests.push_back(name.get<std::string>());
      }
    }
    auto params = opaque->find("parameters");
    if (params == opaque->end()) return InvalidArgument(where + ": opaque.parameters is missing");
    GPUOP_ASSIGN_OR_RETURN(e.config, DecodeDeviceConfig(*params, where));
    (e.source == ConfigSource::kFromClass ? from_class : from_claim).push_back(std::move(e));
  }
  from_class.insert(from_class.end(), std::make_move_iterator(from_claim.begin()),
                    std::make_move_iterator(from_claim.end()));
  return from_class;
}

Result<DeviceConfig> SelectConfig(const std::vector<ConfigEntry>& entries,
                                  const AllocatedDevice& device, DeviceType type) {
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->requests.empty()) {
      if (it->config.kind == type) return it->config;
      continue;
    }
    if (!NamesRequest(*it, device)) continue;
    if (it->config.kind != type) {
      return InvalidArgument("a " + std::string(KindName(it->config.kind)) + " names request \"" +
                             device.request + "\", but its device " + device.device +
                             " is of type " + std::string(DeviceTypeName(type)) + "; use a " +
                             std::string(KindName(type)) + " for this request");
    }
    return it->config;
  }
  return DefaultConfig(type);
}

}  // namespace gpuop::dra

// The mig-parted config file (`version: v1`, `mig-configs: {...}`): the
// declarative MIG layouts that `gpuop mig apply` and the MIG manager follow, in
// NVIDIA's format so existing files and ConfigMaps work unchanged
// (NVIDIA/mig-parted api/spec/v1). Parsing is strict: an unknown field, a wrong
// type or a malformed profile name is an error naming the file and the line.
//
// All types are plain values; the functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::mig {

// A PCI id filter: "0xDDDDVVVV" (device << 16 | vendor, as NVML's
// pciDeviceId), optionally ":0xSSSSssss" for the subsystem id.
struct DeviceFilter {
  uint32_t device_id = 0;
  std::optional<uint32_t> subsystem_id;
  bool Matches(uint32_t pci_device_id, uint32_t pci_subsystem_id) const;
  std::string ToString() const;  // "0x233010DE" or "0x233010DE:0x16C110DE"
  bool operator==(const DeviceFilter&) const = default;
};

// A MIG device profile name: "<G>g.<GB>gb[+me]" or "<C>c.<G>g.<GB>gb[+me]".
struct ProfileName {
  unsigned ci_slices = 0;  // C (== G for a compute instance spanning the GI)
  unsigned gi_slices = 0;  // G
  unsigned memory_gb = 0;  // GB
  std::string suffix;      // "", "+me", "+me.all", "+gfx", "-me"
  // The GPU instance profile: "2g.20gb", "1g.10gb+me".
  std::string GiName() const;
  // The canonical MIG device name: "1c.2g.20gb", or "2g.20gb" when C == G.
  std::string ToString() const;
  bool operator==(const ProfileName&) const = default;
};

// Parses a profile name; an error says what is wrong with it.
Result<ProfileName> ParseProfileName(std::string_view name);

// One entry of a named config: which GPUs it covers and what they get.
struct ConfigEntry {
  bool all_devices = false;
  std::vector<unsigned> devices;      // when !all_devices
  std::vector<DeviceFilter> filters;  // empty: any model
  bool mig_enabled = false;
  std::map<std::string, unsigned> mig_devices;  // canonical profile name -> count
  int line = 0;                                 // 1-based line in the file (0: built, not parsed)

  // Whether this entry covers GPU `index` with these PCI ids.
  bool Covers(unsigned index, uint32_t pci_device_id, uint32_t pci_subsystem_id) const;
  bool operator==(const ConfigEntry& o) const {
    return all_devices == o.all_devices && devices == o.devices && filters == o.filters &&
           mig_enabled == o.mig_enabled && mig_devices == o.mig_devices;
  }
};

struct ConfigFile {
  std::map<std::string, std::vector<ConfigEntry>> configs;  // config name -> entries
  std::string origin;                                       // file name, for messages

  // The entries of config `name`; NotFound listing the names there are.
  Result<std::vector<ConfigEntry>> Select(const std::string& name) const;
};

// Parses and validates a config file. `origin` names it in errors
// ("/etc/mig.yaml:12: ...").
Result<ConfigFile> ParseConfig(std::string_view yaml, const std::string& origin);

// Writes `file` as v1 YAML that ParseConfig reads back to the same value.
std::string SerializeConfig(const ConfigFile& file);

}  // namespace gpuop::mig

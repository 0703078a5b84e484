// Node GPU detection from PCI devices: the pure core of `gpuop node-discovery`.
//
// The operator recognises a GPU node by the labels Node Feature Discovery's
// PCI source sets (operator/node_labels.h). gpuop node-discovery sets the same
// keys itself, so clusters without NFD need no NFD worker on every node. The
// labels follow NFD's rules for NVIDIA (vendor 0x10de) devices:
//
//   - feature.node.kubernetes.io/pci-<class>_10de.present=true: NFD's default
//     configuration (deviceLabelFields [class, vendor], deviceClassWhitelist
//     [03, 0b40, 12]); <class> is the first 4 hex digits of the 24-bit class
//     code, lower case: 0x030200 (3D controller: A100, H100, L40S...) gives
//     pci-0302_10de, 0x030000 (VGA: GeForce, RTX workstation) pci-0300_10de;
//   - feature.node.kubernetes.io/pci-10de.present=true: the GPU Operator
//     chart's NFD configuration (deviceLabelFields [vendor],
//     deviceClassWhitelist [02, 0200, 0207, 0300, 0302]).
//
// Classes outside both lists give no label, as with NFD: an NVSwitch (bridge,
// 0x0680) alone does not make a GPU node.
//
// The labels it manages are exactly the keys it can produce; removal (no
// NVIDIA device any more) touches those keys and never any other label.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::discovery {

using Labels = std::map<std::string, std::string>;
// label key → new value, or nullopt to remove it.
using LabelChanges = std::map<std::string, std::optional<std::string>>;

inline constexpr uint16_t kNvidiaVendor = 0x10de;
inline constexpr const char* kPciLabelPrefix = "feature.node.kubernetes.io/pci-";
inline constexpr const char* kNvidiaPresentLabel = "feature.node.kubernetes.io/pci-10de.present";

// One function of a PCI device, as sysfs shows it under
// /sys/bus/pci/devices/<address>/.
struct PciDevice {
  std::string address;      // "0000:18:00.0"
  uint16_t vendor = 0;      // the vendor file: "0x10de"
  uint32_t class_code = 0;  // the class file: "0x030200" (class, subclass, prog-if)
};

// The content of a sysfs vendor file ("0x10de\n") → 0x10de.
Result<uint16_t> ParsePciVendor(std::string_view content);
// The content of a sysfs class file ("0x030200\n") → 0x030200.
Result<uint32_t> ParsePciClass(std::string_view content);

// "feature.node.kubernetes.io/pci-0302_10de.present" for class 0x030200.
std::string ClassVendorLabel(uint32_t class_code, uint16_t vendor);

// The labels NFD would set for the NVIDIA devices among `devices`, all "true".
// Empty when there is none.
Labels NvidiaPciLabels(const std::vector<PciDevice>& devices);

// True for a key node discovery manages: one NvidiaPciLabels can produce (for
// some device), or a system label (discovery/system.h).
bool IsManagedLabel(std::string_view key);

// What turns the node's `current` labels into ones carrying exactly `wanted`
// among the managed keys: sets what differs, removes managed keys no longer
// wanted, leaves every other label alone. Empty when nothing differs.
LabelChanges PlanLabelChanges(const Labels& current, const Labels& wanted);

// {"metadata":{"labels":{key: value|null}}}: a JSON merge patch.
nlohmann::json LabelPatch(const LabelChanges& changes);

}  // namespace gpuop::discovery

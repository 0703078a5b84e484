// The ResourceSlices (resource.k8s.io/v1) that publish a node's DRA devices,
// shaped as the Kubernetes DRA helper shapes them for NVIDIA's driver
// (k8s.io/dynamic-resource-allocation): one pool named after the node, devices
// sorted by name and split over as many slices as the per-slice limit needs,
// each slice owned by the Node so that deleting the Node deletes them.
//
// Pure and thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dra/devices.h"

namespace gpuop::dra {

// resource.k8s.io/v1 ResourceSliceSpec.devices limits: 128 devices, or 64 when
// any device of the slice has taints.
inline constexpr size_t kMaxDevicesPerSlice = 128;
inline constexpr size_t kMaxTaintedDevicesPerSlice = 64;

// One device as a ResourceSlice's spec.devices[] entry.
nlohmann::json DeviceJson(const Device& device);

// The slices of the node's pool at `generation`. No name: each has
// metadata.generateName "<node>-gpu.nvidia.com-". A node without devices
// still gets one (empty) slice, so consumers see the pool and that it is
// empty. `devices` need not be sorted.
std::vector<nlohmann::json> BuildSlices(const std::vector<Device>& devices,
                                        const std::string& node_name, const std::string& node_uid,
                                        int64_t generation);

// The last write of a pool: the slices sent and the slices the server
// stored. A server may drop fields it does not serve (taints while the
// DRADeviceTaints feature gate is off), so what it holds can differ from what
// was sent for good.
struct PoolWrite {
  std::vector<nlohmann::json> sent;
  std::vector<nlohmann::json> stored;
};

// True when `published` (what the API server holds for this node and driver)
// already says what `desired` says: the same number of slices, one complete
// generation (every slice at one generation, resourceSliceCount matching), and
// the same devices in the same slices. Quantities compare by value ("1Ki" ==
// "1024"), and taints by key, value and effect (a still-present fault keeps
// its first timeAdded). Generations and object metadata are not compared: an
// unchanged node keeps its generation. With `last`, it is also true when
// `desired` is what was last sent and `published` is still what the server
// made of it (so dropped fields do not cause a write on every check).
bool SlicesUpToDate(const std::vector<nlohmann::json>& published,
                    const std::vector<nlohmann::json>& desired, const PoolWrite* last = nullptr);

// The integer value of a resource.Quantity string without a fraction ("5Gi",
// "4k", "1024"); nullopt for anything else.
std::optional<int64_t> QuantityValue(const std::string& quantity);

}  // namespace gpuop::dra

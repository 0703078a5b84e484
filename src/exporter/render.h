// Rendering: one collection (every GPU and MIG GPU instance read once) into
// the Prometheus text exposition, with dcgm-exporter's metric names and label
// set, in this order:
//
//   gpu, UUID, pci_bus_id, device ("nvidia<minor>"), modelName,
//   [GPU_I_PROFILE, GPU_I_ID]            MIG GPU instances only
//   hostname,
//   [<label-type fields>]                e.g. DCGM_FI_DRIVER_VERSION, in file order
//   [container, namespace, pod]          when a pod holds the device
//
// A device shared by several containers gets one series per container. A
// field a device does not report is left out for that device only and counted
// in gpuop_exporter_field_unsupported{field}. A GPU that cannot be read keeps
// its labels in gpuop_exporter_gpu_healthy 0 (and its last XID).
//
// Pure and thread-safe; the output buffer is reused by the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exporter/attribution.h"
#include "exporter/counters.h"
#include "exporter/fields.h"
#include "nvml/device.h"

namespace gpuop::exporter {

// One collection's data.
struct Collection {
  struct Device {
    size_t gpu = 0;                  // position in `gpus`
    std::optional<size_t> mig;       // position in gpus[gpu].mig_devices: a GI
    std::optional<Reading> reading;  // nullopt: the read failed
  };
  nvml::SystemInfo system;
  std::vector<nvml::Gpu> gpus;  // identity; the last known one for a GPU that is lost
  std::vector<bool> healthy;    // per entry of `gpus`
  std::vector<Device> devices;  // each GPU, then its GPU instances
  PodMap pods;
};

// The exporter's own counters, rendered after the GPU metrics.
struct SelfStats {
  uint64_t collections = 0;
  uint64_t collection_errors = 0;
  double last_collection_seconds = 0;
  bool kubernetes = false;
  uint64_t pod_resources_errors = 0;
};

// Renders into `*out` (cleared first; its capacity is kept).
void RenderMetrics(const std::vector<Counter>& counters, const std::string& hostname,
                   const Collection& collection, const SelfStats& self, std::string* out);

// Appends `value` as Prometheus writes numbers (shortest round-trip form).
void AppendNumber(double value, std::string* out);
// Appends `value` escaped for a label value (\\, \", \n).
void AppendLabelValue(std::string_view value, std::string* out);

}  // namespace gpuop::exporter

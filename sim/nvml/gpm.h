// Simulated work and what NVML's GPU Performance Monitoring (GPM) reads of it.
//
// A GPU, and each MIG GPU instance, accounts the time it was busy: a CUDA
// kernel (libcuda-sim.so) keeps its GPU busy for kKernelBusyWindowMs, and
// `gpuop sim gpu load` for as long as asked, on a GPU or one GPU instance.
// Busy intervals are merged, so the account is the length of their union and
// never goes back. A GPM sample records (time, busy ms); the metrics between
// two samples follow the busy share of the time between them, so an idle GPU
// reads zero activity and a busy one reads its work's mix of pipes.
//
// Everything here is pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "sim/nvml/machine.h"

namespace gpuop::sim {

// The busy time of a GPU or GPU instance.
struct BusyTime {
  uint64_t accounted_ms = 0;  // the union of busy intervals, up to busy_until
  int64_t busy_until_unix_ms = 0;
  bool operator==(const BusyTime&) const = default;
};

// Marks [from_ms, to_ms) busy (Unix milliseconds). An empty interval is ignored.
void AddBusy(BusyTime& busy, int64_t from_ms, int64_t to_ms);
// Busy milliseconds up to `now_ms` (the part of the account still ahead of
// `now_ms` does not count yet).
uint64_t BusyMsAt(const BusyTime& busy, int64_t now_ms);

// GPM exists on Hopper and newer (nvmlGpmQueryDeviceSupport).
bool GpmSupported(const GpuModel& model);

// The value of GPM metric `metric_id` (nvmlGpmMetricId_t) for a device that
// was busy `busy_share` (0..1) of the time between two samples: activities in
// percent, traffic in MiB/s. nullopt where NVML answers NOT_SUPPORTED: a metric
// the simulator does not model, PCIe and NVLink traffic of a MIG GPU instance,
// NVLink traffic of a GPU without NVLink.
std::optional<double> GpmMetricValue(unsigned metric_id, double busy_share, const GpuModel& model,
                                     bool mig);

}  // namespace gpuop::sim

// Simulated telemetry: deterministic values that move over time, so that the
// exporter, health checks and dashboards have something plausible to show.
//
// Every value is a pure function of (model, GPU index, seconds since the shared
// state was created): two processes reading the same GPU at the same time see
// the same numbers, and tests can evaluate any instant without a clock. The
// load is a smooth periodic curve with a phase per GPU; counters (energy,
// NVLink bytes) are analytic integrals of their rates, so they never go back.
// Pure and thread-safe.
#pragma once

#include <cstdint>

#include "sim/nvml/machine.h"

namespace gpuop::sim {

struct Telemetry {
  double load = 0;  // 0..1, what everything else derives from
  unsigned gpu_temp_c = 0;
  unsigned memory_temp_c = 0;
  unsigned gpu_util = 0;  // percent
  unsigned memory_util = 0;
  unsigned encoder_util = 0;
  unsigned decoder_util = 0;
  unsigned power_mw = 0;
  uint64_t energy_mj = 0;  // since the state was created; monotonic
  unsigned sm_clock_mhz = 0;
  unsigned mem_clock_mhz = 0;
  unsigned video_clock_mhz = 0;
  uint64_t fb_total_bytes = 0;
  uint64_t fb_reserved_bytes = 0;  // the driver's own share, never free
  uint64_t fb_used_bytes = 0;      // used by applications (excludes reserved)
  uint64_t fb_free_bytes = 0;
  unsigned pcie_tx_kbps = 0;  // KB/s
  unsigned pcie_rx_kbps = 0;
  uint64_t nvlink_tx_kib = 0;  // per active link; monotonic
  uint64_t nvlink_rx_kib = 0;
  uint64_t clock_event_reasons = 0;  // nvmlClocksEventReason* bits
};

// REQUIRES: seconds >= 0.
Telemetry SampleTelemetry(const GpuModel& model, unsigned gpu_index, double seconds);

// The idle power draw, the floor of the power curve.
unsigned IdlePowerMw(const GpuModel& model);

}  // namespace gpuop::sim

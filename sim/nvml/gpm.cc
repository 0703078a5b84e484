#include "sim/nvml/gpm.h"

#include <algorithm>

namespace gpuop::sim {
namespace {

// What the simulated work keeps busy, as a share of its busy time: a
// mixed-precision training step (tensor cores mostly HMMA, some FP32, a
// little FP64 and integer work, memory-bound phases).
struct Mix {
  unsigned metric_id;  // nvmlGpmMetricId_t
  double percent_when_busy;
};
constexpr Mix kActivity[] = {
    {1, 100.0},  // GRAPHICS_UTIL: the engine is active whenever work runs
    {2, 96.0},   // SM_UTIL
    {3, 55.0},   // SM_OCCUPANCY
    {4, 18.0},   // INTEGER_UTIL
    {5, 72.0},   // ANY_TENSOR_UTIL
    {6, 3.0},    // DFMA_TENSOR_UTIL
    {7, 65.0},   // HMMA_TENSOR_UTIL
    {9, 4.0},    // IMMA_TENSOR_UTIL
    {10, 58.0},  // DRAM_BW_UTIL
    {11, 2.0},   // FP64_UTIL
    {12, 35.0},  // FP32_UTIL
    {13, 12.0},  // FP16_UTIL
};

// Traffic in MiB/s: a small idle floor (the driver's own traffic) plus a
// share that follows the work.
constexpr unsigned kPcieTx = 20, kPcieRx = 21, kNvLinkRx = 60, kNvLinkTx = 61;
constexpr double kPcieIdleMiBs = 12, kPcieTxBusyMiBs = 9000, kPcieRxBusyMiBs = 14000;
constexpr double kNvLinkBusyMiBsPerLink = 10000;

}  // namespace

void AddBusy(BusyTime& busy, int64_t from_ms, int64_t to_ms) {
  const int64_t start = std::max(from_ms, busy.busy_until_unix_ms);
  if (to_ms <= start) return;
  busy.accounted_ms += static_cast<uint64_t>(to_ms - start);
  busy.busy_until_unix_ms = to_ms;
}

uint64_t BusyMsAt(const BusyTime& busy, int64_t now_ms) {
  const int64_t ahead = std::max<int64_t>(0, busy.busy_until_unix_ms - now_ms);
  return busy.accounted_ms - std::min<uint64_t>(busy.accounted_ms, static_cast<uint64_t>(ahead));
}

bool GpmSupported(const GpuModel& model) {
  constexpr unsigned kHopper = 9;  // NVML_DEVICE_ARCH_HOPPER; Blackwell and Rubin follow
  return model.architecture >= kHopper && model.architecture != 0xffffffffu;
}

std::optional<double> GpmMetricValue(unsigned metric_id, double busy_share, const GpuModel& model,
                                     bool mig) {
  const double f = std::clamp(busy_share, 0.0, 1.0);
  for (const Mix& m : kActivity) {
    if (m.metric_id == metric_id) return m.percent_when_busy * f;
  }
  if (mig) return std::nullopt;  // traffic is the whole GPU's
  switch (metric_id) {
    case kPcieTx:
      return kPcieIdleMiBs + kPcieTxBusyMiBs * f;
    case kPcieRx:
      return kPcieIdleMiBs + kPcieRxBusyMiBs * f;
    case kNvLinkTx:
    case kNvLinkRx:
      if (model.nvlinks == 0) return std::nullopt;
      return kNvLinkBusyMiBsPerLink * model.nvlinks * f * (metric_id == kNvLinkRx ? 0.97 : 1.0);
    default:
      return std::nullopt;
  }
}

}  // namespace gpuop::sim

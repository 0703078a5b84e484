#include "sim/nvml/telemetry.h"

#include <algorithm>
#include <cmath>

namespace gpuop::sim {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kPeriodS = 180.0;  // one load cycle every three minutes
constexpr double kOmega = 2 * kPi / kPeriodS;

// load(t) = kMean + kAmp * sin(ωt + φ): stays inside [0.05, 0.95].
constexpr double kMean = 0.5, kAmp = 0.45;
constexpr uint64_t kClockEventGpuIdle = 0x1, kClockEventSwPowerCap = 0x4;

double Phase(unsigned gpu_index) { return 0.9 * gpu_index; }

// ∫0^t (a + b·sin(ωs+φ)) ds, which is monotonic in t when a ≥ b ≥ 0.
double IntegralOfCurve(double a, double b, double phi, double t) {
  return a * t + (b / kOmega) * (std::cos(phi) - std::cos(kOmega * t + phi));
}

}  // namespace

unsigned IdlePowerMw(const GpuModel& model) {
  return static_cast<unsigned>(model.power_limit_w * 1000.0 * 0.12);
}

Telemetry SampleTelemetry(const GpuModel& model, unsigned gpu_index, double seconds) {
  Telemetry t;
  const double phi = Phase(gpu_index);
  const double s = std::max(0.0, seconds);
  const double wave = std::sin(kOmega * s + phi);
  t.load = kMean + kAmp * wave;

  t.gpu_util = static_cast<unsigned>(std::lround(t.load * 100));
  t.memory_util = static_cast<unsigned>(std::lround(t.load * 60));
  t.encoder_util = model.encoders ? static_cast<unsigned>(std::lround(t.load * 20)) : 0;
  t.decoder_util = static_cast<unsigned>(std::lround(t.load * 15));
  t.gpu_temp_c = static_cast<unsigned>(std::lround(32 + 45 * t.load));
  t.memory_temp_c = t.gpu_temp_c + 6;

  // Power follows the load from idle up to 90% of the limit: P = a + b·sin.
  const double idle_w = IdlePowerMw(model) / 1000.0;
  const double span_w = model.power_limit_w * 0.9 - idle_w;
  const double pa = idle_w + span_w * kMean, pb = span_w * kAmp;
  t.power_mw = static_cast<unsigned>(std::lround((pa + pb * wave) * 1000));
  t.energy_mj = static_cast<uint64_t>(IntegralOfCurve(pa, pb, phi, s) * 1000);

  const double busy = std::min(1.0, t.load * 1.25);
  const unsigned idle_clock = 210;
  t.sm_clock_mhz = idle_clock + static_cast<unsigned>((model.max_sm_clock_mhz - idle_clock) * busy);
  t.mem_clock_mhz = model.max_mem_clock_mhz;
  t.video_clock_mhz = t.sm_clock_mhz * 9 / 10;

  t.fb_total_bytes = model.memory_mib << 20;
  // The driver keeps roughly 1% of the frame buffer for itself.
  t.fb_reserved_bytes = (model.memory_mib / 100) << 20;
  const uint64_t usable = t.fb_total_bytes - t.fb_reserved_bytes;
  t.fb_used_bytes = static_cast<uint64_t>(usable * (0.05 + 0.7 * t.load)) & ~uint64_t{0xFFFFF};
  t.fb_free_bytes = usable - t.fb_used_bytes;

  t.pcie_tx_kbps = static_cast<unsigned>(200000 + 6000000 * t.load);
  t.pcie_rx_kbps = static_cast<unsigned>(300000 + 9000000 * t.load);

  if (model.nvlinks > 0) {
    // KiB/s per link: a floor of traffic plus a share that follows the load.
    const double ra = 1e6 + 8e6 * kMean, rb = 8e6 * kAmp;
    const double kib = IntegralOfCurve(ra, rb, phi, s);
    t.nvlink_tx_kib = static_cast<uint64_t>(kib);
    t.nvlink_rx_kib = static_cast<uint64_t>(kib * 0.97);
  }

  if (t.load < 0.2) t.clock_event_reasons |= kClockEventGpuIdle;
  if (t.power_mw > model.power_limit_w * 1000 * 0.85)
    t.clock_event_reasons |= kClockEventSwPowerCap;
  return t;
}

}  // namespace gpuop::sim

#include "sim/nvml/telemetry.h"

#include <gtest/gtest.h>

namespace gpuop::sim {
namespace {

TEST(TelemetryTest, ValuesStayInRange) {
  for (const auto& m : BuiltinModels()) {
    for (unsigned gpu = 0; gpu < 8; ++gpu) {
      for (double t = 0; t < 400; t += 3.7) {
        SCOPED_TRACE(m.key + " gpu " + std::to_string(gpu) + " t " + std::to_string(t));
        Telemetry s = SampleTelemetry(m, gpu, t);
        EXPECT_GE(s.load, 0.0);
        EXPECT_LE(s.load, 1.0);
        EXPECT_LE(s.gpu_util, 100u);
        EXPECT_LE(s.memory_util, 100u);
        EXPECT_LE(s.encoder_util, 100u);
        EXPECT_LE(s.decoder_util, 100u);
        EXPECT_GE(s.gpu_temp_c, 25u);
        EXPECT_LE(s.gpu_temp_c, 90u);
        EXPECT_GT(s.memory_temp_c, s.gpu_temp_c);
        EXPECT_GE(s.power_mw, IdlePowerMw(m));
        EXPECT_LE(s.power_mw, m.power_limit_w * 1000);
        EXPECT_LE(s.sm_clock_mhz, m.max_sm_clock_mhz);
        EXPECT_GT(s.sm_clock_mhz, 0u);
        EXPECT_LE(s.mem_clock_mhz, m.max_mem_clock_mhz);
        EXPECT_EQ(s.fb_total_bytes, m.memory_mib << 20);
        EXPECT_EQ(s.fb_used_bytes + s.fb_free_bytes + s.fb_reserved_bytes, s.fb_total_bytes);
        EXPECT_GT(s.pcie_tx_kbps, 0u);
        if (m.nvlinks == 0) {
          EXPECT_EQ(s.nvlink_tx_kib, 0u);
        }
        if (s.load < 0.2) {
          EXPECT_TRUE(s.clock_event_reasons & 0x1);
        }
        if (s.load >= 0.2) {
          EXPECT_FALSE(s.clock_event_reasons & 0x1);
        }
      }
    }
  }
}

TEST(TelemetryTest, CountersAreMonotonic) {
  GpuModel h = FindModel("h100-80gb").value();
  for (unsigned gpu = 0; gpu < 8; ++gpu) {
    Telemetry prev = SampleTelemetry(h, gpu, 0);
    EXPECT_EQ(prev.energy_mj, 0u);
    for (double t = 0.001; t < 1000; t = t * 1.3 + 0.01) {
      Telemetry s = SampleTelemetry(h, gpu, t);
      EXPECT_GE(s.energy_mj, prev.energy_mj) << t;
      EXPECT_GE(s.nvlink_tx_kib, prev.nvlink_tx_kib) << t;
      EXPECT_GE(s.nvlink_rx_kib, prev.nvlink_rx_kib) << t;
      prev = s;
    }
    // Energy is the integral of power: over a whole minute it is between idle and limit.
    Telemetry a = SampleTelemetry(h, gpu, 100), b = SampleTelemetry(h, gpu, 160);
    EXPECT_GT(b.energy_mj - a.energy_mj, 60ull * IdlePowerMw(h));
    EXPECT_LT(b.energy_mj - a.energy_mj, 60ull * h.power_limit_w * 1000);
  }
}

TEST(TelemetryTest, MovesOverTimeAndDiffersByGpu) {
  GpuModel a = FindModel("a100-40gb").value();
  EXPECT_NE(SampleTelemetry(a, 0, 0).power_mw, SampleTelemetry(a, 0, 45).power_mw);
  EXPECT_NE(SampleTelemetry(a, 0, 10).gpu_util, SampleTelemetry(a, 3, 10).gpu_util);
  // Deterministic: the same instant gives the same values.
  EXPECT_EQ(SampleTelemetry(a, 2, 77.5).energy_mj, SampleTelemetry(a, 2, 77.5).energy_mj);
  // Somewhere in a period the GPU idles and somewhere it is busy.
  bool idle = false, busy = false;
  for (double t = 0; t < 180; t += 1) {
    Telemetry s = SampleTelemetry(a, 0, t);
    idle = idle || (s.clock_event_reasons & 0x1);
    busy = busy || s.gpu_util > 80;
  }
  EXPECT_TRUE(idle);
  EXPECT_TRUE(busy);
}

}  // namespace
}  // namespace gpuop::sim

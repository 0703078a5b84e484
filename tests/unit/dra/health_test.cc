// dra/health.h: the health monitor's per-unit faults folded onto GPUs for
// the slices' taints, with the time each GPU was first seen unhealthy.
#include "dra/health.h"

#include <gtest/gtest.h>

namespace gpuop::dra {
namespace {

std::vector<nvml::Gpu> TwoGpusOneWithMig() {
  nvml::Gpu a;
  a.uuid = "GPU-a";
  nvml::MigDevice m1, m2;
  m1.uuid = "MIG-a1";
  m2.uuid = "MIG-a2";
  a.mig_devices = {m1, m2};
  nvml::Gpu b;
  b.uuid = "GPU-b";
  return {a, b};
}

TEST(GpuHealthTrackerTest, AMigDeviceFaultTaintsItsGpu) {
  GpuHealthTracker t;
  auto h = t.Update(TwoGpusOneWithMig(), {{"MIG-a2", {43, false}}}, "2026-12-04T10:00:00Z");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h.at("GPU-a").xid, std::optional<uint64_t>(43));
  EXPECT_FALSE(h.at("GPU-a").lost);
  EXPECT_EQ(h.at("GPU-a").since, "2026-12-04T10:00:00Z");
}

TEST(GpuHealthTrackerTest, TheFirstXidWinsAndLostIsOnlyWithoutOne) {
  GpuHealthTracker t;
  auto h = t.Update(TwoGpusOneWithMig(),
                    {{"MIG-a1", {79, false}}, {"MIG-a2", {43, false}}, {"GPU-b", {{}, true}}},
                    "2026-12-04T10:00:00Z");
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h.at("GPU-a").xid, std::optional<uint64_t>(79));  // MIG-a1 sorts first
  EXPECT_TRUE(h.at("GPU-b").lost);
  EXPECT_FALSE(h.at("GPU-b").xid);
}

TEST(GpuHealthTrackerTest, SinceIsKeptWhileUnhealthyAndForgottenOnceHealed) {
  GpuHealthTracker t;
  const auto gpus = TwoGpusOneWithMig();
  t.Update(gpus, {{"GPU-b", {48, false}}}, "2026-12-04T10:00:00Z");
  auto h = t.Update(gpus, {{"GPU-b", {48, false}}, {"GPU-a", {94, false}}}, "2026-12-04T10:05:00Z");
  EXPECT_EQ(h.at("GPU-b").since, "2026-12-04T10:00:00Z");
  EXPECT_EQ(h.at("GPU-a").since, "2026-12-04T10:05:00Z");
  EXPECT_TRUE(t.Update(gpus, {}, "2026-12-04T10:10:00Z").empty());
  h = t.Update(gpus, {{"GPU-b", {48, false}}}, "2026-12-04T10:15:00Z");
  EXPECT_EQ(h.at("GPU-b").since, "2026-12-04T10:15:00Z");  // a new episode
}

TEST(GpuHealthTrackerTest, UnitsOfOtherGpusAreIgnored) {
  GpuHealthTracker t;
  EXPECT_TRUE(t.Update(TwoGpusOneWithMig(), {{"MIG-gone", {43, false}}}, "now").empty());
}

}  // namespace
}  // namespace gpuop::dra

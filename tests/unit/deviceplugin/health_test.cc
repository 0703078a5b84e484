// The health policy (DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS), XID
// classification, and the HealthTracker's way into and out of Unhealthy.
#include "deviceplugin/health.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuop::deviceplugin {
namespace {

HealthPolicy Policy(const std::string& disable = "", const std::string& enable = "") {
  auto p = ParseHealthPolicy(disable, enable);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : HealthPolicy{};
}

TEST(DpHealthPolicyTest, DefaultIgnoresUpstreamsApplicationXids) {
  HealthPolicy p = Policy();
  for (uint64_t x : {13, 31, 43, 45, 68, 109}) EXPECT_FALSE(p.Counts(x)) << x;
  for (uint64_t x : {48, 79, 94, 999}) EXPECT_TRUE(p.Counts(x)) << x;
  EXPECT_TRUE(p.Active());
}

TEST(DpHealthPolicyTest, DisableListsAndAll) {
  HealthPolicy p = Policy("48, 79");
  EXPECT_FALSE(p.Counts(48));
  EXPECT_FALSE(p.Counts(79));
  EXPECT_FALSE(p.Counts(13));
  EXPECT_TRUE(p.Counts(74));
  for (const char* all : {"all", "xids", "ALL", "48,xids"}) {
    HealthPolicy q = Policy(all);
    EXPECT_FALSE(q.Counts(74)) << all;
    EXPECT_FALSE(q.Active()) << all;
  }
}

TEST(DpHealthPolicyTest, EnableWinsOverDisable) {
  HealthPolicy p = Policy("all", "48");
  EXPECT_TRUE(p.Active());
  EXPECT_TRUE(p.Counts(48));
  EXPECT_FALSE(p.Counts(79));
  HealthPolicy q = Policy("", "13");
  EXPECT_TRUE(q.Counts(13));  // even an always-ignored one
  EXPECT_FALSE(q.Counts(31));
  HealthPolicy r = Policy("", "all");
  EXPECT_TRUE(r.Counts(31));
}

TEST(DpHealthPolicyTest, RejectsGarbageNamingTheVariable) {
  auto p = ParseHealthPolicy("48,foo", "");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("DP_DISABLE_HEALTHCHECKS=\"48,foo\": \"foo\" is not an XID"),
            std::string::npos)
      << p.status().message();
  auto q = ParseHealthPolicy("", "-1");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("DP_ENABLE_HEALTHCHECKS"), std::string::npos);
}

TEST(DpHealthPolicyTest, ClassifiesXids) {
  EXPECT_EQ(ClassifyXid(13), FaultClass::kApplication);
  EXPECT_EQ(ClassifyXid(94), FaultClass::kApplication);
  EXPECT_EQ(ClassifyXid(48), FaultClass::kGpuReset);
  EXPECT_EQ(ClassifyXid(74), FaultClass::kGpuReset);
  EXPECT_EQ(ClassifyXid(12345), FaultClass::kGpuReset);
  EXPECT_EQ(ClassifyXid(64), FaultClass::kDriverReload);
  EXPECT_EQ(ClassifyXid(79), FaultClass::kLost);
  EXPECT_STREQ(FaultClassName(FaultClass::kGpuReset), "gpu-reset");
}

// Two GPUs; GPU 1 has MIG devices (GI 1/CI 0 and GI 2/CI 0).
std::vector<nvml::Gpu> Gpus() {
  nvml::Gpu a;
  a.index = 0;
  a.uuid = "GPU-a";
  nvml::Gpu b;
  b.index = 1;
  b.uuid = "GPU-b";
  nvml::MigDevice m1;
  m1.uuid = "MIG-1";
  m1.gi_id = 1;
  nvml::MigDevice m2;
  m2.uuid = "MIG-2";
  m2.gi_id = 2;
  b.mig_devices = {m1, m2};
  return {a, b};
}

nvml::Event Xid(unsigned gpu, const std::string& uuid, uint64_t xid) {
  nvml::Event e;
  e.gpu = gpu;
  e.uuid = uuid;
  e.type = nvml::kEventXid;
  e.xid = xid;
  return e;
}

nvml::GpuHealth Answers(nvml::RecoveryAction action = nvml::RecoveryAction::kNone,
                        uint64_t dbe = 0) {
  nvml::GpuHealth h;
  h.responds = true;
  h.recovery_action = action;
  h.ecc_dbe_volatile = dbe;
  h.remapped_rows_pending = false;
  return h;
}

nvml::GpuHealth Silent() {
  nvml::GpuHealth h;
  h.error = "nvmlDeviceGetName: GPU is lost";
  return h;
}

TEST(DpHealthTrackerTest, IgnoredAndCorrectableEventsChangeNothing) {
  HealthTracker t(Policy(), Gpus());
  EXPECT_TRUE(t.OnEvent(Xid(0, "GPU-a", 13)).empty());
  nvml::Event sbe = Xid(0, "GPU-a", 0);
  sbe.type = nvml::kEventSingleBitEcc;
  EXPECT_TRUE(t.OnEvent(sbe).empty());
  EXPECT_TRUE(t.FaultedGpus().empty());
  EXPECT_TRUE(t.Healthy("GPU-a"));
}

// What a DRA slice's taints are made from: the first open fault per unit,
// with its XID when one raised it.
TEST(DpHealthTrackerTest, OpenFaultsSayWhyAndWhichXid) {
  HealthTracker t(Policy(), Gpus());
  EXPECT_TRUE(t.OpenFaults().empty());
  t.OnEvent(Xid(0, "GPU-a", 79));
  t.OnEvent(Xid(0, "GPU-a", 48));
  t.OnProbe(1, Silent());
  auto faults = t.OpenFaults();
  ASSERT_EQ(faults.size(), 4u);  // GPU-a; GPU-b and its two MIG devices
  EXPECT_EQ(faults["GPU-a"].xid, std::optional<uint64_t>(79));
  EXPECT_EQ(faults["GPU-a"].cls, FaultClass::kLost);
  EXPECT_EQ(faults["MIG-1"].cls, FaultClass::kLost);
  EXPECT_EQ(faults["MIG-1"].xid, std::nullopt);
  EXPECT_NE(faults["MIG-1"].reason.find("GPU does not answer NVML"), std::string::npos);
}

TEST(DpHealthTrackerTest, ResetClassNeedsEvidenceOfAReset) {
  HealthTracker t(Policy(), Gpus());
  auto c = t.OnEvent(Xid(0, "GPU-a", 48));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0], (HealthChange{"GPU-a", false, "XID 48 (gpu-reset)"}));
  EXPECT_EQ(t.FaultedGpus(), (std::vector<unsigned>{0}));
  // A second fault on an unhealthy unit is no change.
  EXPECT_TRUE(t.OnEvent(Xid(0, "GPU-a", 74)).empty());
  // The driver posts "reset": still unhealthy.
  EXPECT_TRUE(t.OnProbe(0, Answers(nvml::RecoveryAction::kGpuReset)).empty());
  // After the reset the action is gone: both faults clear.
  c = t.OnProbe(0, Answers());
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].healthy);
  EXPECT_EQ(c[0].unit, "GPU-a");
  EXPECT_TRUE(t.Healthy("GPU-a"));
  EXPECT_TRUE(t.FaultedGpus().empty());
}

TEST(DpHealthTrackerTest, WithoutEvidenceAResetFaultStays) {
  HealthTracker t(Policy(), Gpus());
  t.OnEvent(Xid(0, "GPU-a", 119));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(t.OnProbe(0, Answers()).empty());
  EXPECT_FALSE(t.Healthy("GPU-a"));
  // A driver reload is evidence for every fault.
  t.OnDriverReloaded();
  EXPECT_EQ(t.OnProbe(0, Answers()).size(), 1u);
}

TEST(DpHealthTrackerTest, DoubleBitEccClearsWhenTheVolatileCounterDoes) {
  HealthTracker t(Policy(), Gpus());
  nvml::Event dbe = Xid(1, "GPU-b", 0);
  dbe.type = nvml::kEventDoubleBitEcc;
  auto c = t.OnEvent(dbe);
  ASSERT_EQ(c.size(), 3u);  // the GPU and both MIG devices
  nvml::GpuHealth h = Answers();
  h.recovery_action.reset();  // an older driver: no recovery action field
  h.ecc_dbe_volatile = 1;
  EXPECT_TRUE(t.OnProbe(1, h).empty());
  h.ecc_dbe_volatile = 0;
  EXPECT_EQ(t.OnProbe(1, h).size(), 3u);
  // Disabling XID 48 mutes double-bit events too.
  HealthTracker muted(Policy("48"), Gpus());
  EXPECT_TRUE(muted.OnEvent(dbe).empty());
}

TEST(DpHealthTrackerTest, LostGpuComesBackWhenItAnswers) {
  HealthTracker t(Policy(), Gpus());
  auto c = t.OnEvent(Xid(0, "GPU-a", 79));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].reason, "XID 79 (lost)");
  EXPECT_TRUE(t.OnProbe(0, Silent()).empty());
  EXPECT_EQ(t.OnProbe(0, Answers()).size(), 1u);
  EXPECT_TRUE(t.Healthy("GPU-a"));
}

TEST(DpHealthTrackerTest, ASilentProbeMarksTheWholeGpuLost) {
  HealthTracker t(Policy(), Gpus());
  // MIG device 2 faults; then the GPU stops answering.
  nvml::Event e = Xid(1, "GPU-b", 48);
  e.gi_id = 2;
  e.ci_id = 0;
  EXPECT_EQ(t.OnEvent(e), (std::vector<HealthChange>{{"MIG-2", false, "XID 48 (gpu-reset)"}}));
  auto c = t.OnProbe(1, Silent());
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].unit, "GPU-b");
  EXPECT_EQ(c[1].unit, "MIG-1");
  EXPECT_NE(c[0].reason.find("GPU is lost"), std::string::npos);
  // Back after a reset: every unit.
  EXPECT_EQ(t.OnProbe(1, Answers()).size(), 3u);
  EXPECT_TRUE(t.Healthy("GPU-a"));
}

TEST(DpHealthTrackerTest, MigXidHitsOnlyThatMigDevice) {
  HealthTracker t(Policy(), Gpus());
  nvml::Event e = Xid(1, "GPU-b", 48);
  e.gi_id = 1;
  e.ci_id = 0;
  auto c = t.OnEvent(e);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].unit, "MIG-1");
  EXPECT_TRUE(t.Healthy("GPU-b"));
  EXPECT_TRUE(t.Healthy("MIG-2"));
  // An instance that no MIG device has: the whole GPU.
  e.gi_id = 9;
  EXPECT_EQ(t.OnEvent(e).size(), 2u);  // GPU-b and MIG-2 (MIG-1 already unhealthy)
}

TEST(DpHealthTrackerTest, UnknownDeviceMarksEverything) {
  HealthTracker t(Policy(), Gpus());
  auto c = t.OnEvent(Xid(5, "GPU-zzz", 48));
  EXPECT_EQ(c.size(), 4u);
  EXPECT_NE(c[0].reason.find("unknown device GPU-zzz"), std::string::npos);
  // By index when the event has no UUID.
  HealthTracker u(Policy(), Gpus());
  EXPECT_EQ(u.OnEvent(Xid(0, "", 48)).size(), 1u);
}

TEST(DpHealthTrackerTest, ApplicationFaultsNeedTwoCleanProbes) {
  HealthTracker t(Policy("", "13"), Gpus());
  ASSERT_EQ(t.OnEvent(Xid(0, "GPU-a", 13)).size(), 1u);
  EXPECT_TRUE(t.OnProbe(0, Answers()).empty());
  EXPECT_EQ(t.OnProbe(0, Answers()).size(), 1u);
}

TEST(DpHealthTrackerTest, WaitErrorMarksAllUntilProbesAnswer) {
  HealthTracker t(Policy(), Gpus());
  auto c = t.OnWaitError("Unknown Error");
  EXPECT_EQ(c.size(), 4u);
  EXPECT_EQ(t.FaultedGpus(), (std::vector<unsigned>{0, 1}));
  EXPECT_TRUE(t.OnProbe(0, Answers()).empty());
  EXPECT_EQ(t.OnProbe(0, Answers()).size(), 1u);
  // A pending recovery action keeps GPU 1 down.
  EXPECT_TRUE(t.OnProbe(1, Answers(nvml::RecoveryAction::kNodeReboot)).empty());
  EXPECT_TRUE(t.OnProbe(1, Answers(nvml::RecoveryAction::kNodeReboot)).empty());
  auto snap = t.Snapshot();
  EXPECT_TRUE(snap["GPU-a"]);
  EXPECT_FALSE(snap["MIG-1"]);
}

TEST(DpHealthTrackerTest, DriverReloadClassWaitsForTheDriver) {
  HealthTracker t(Policy(), Gpus());
  t.OnEvent(Xid(0, "GPU-a", 64));
  EXPECT_TRUE(t.OnProbe(0, Answers()).empty());
  EXPECT_TRUE(t.OnProbe(0, Answers(nvml::RecoveryAction::kNodeReboot)).empty());
  EXPECT_EQ(t.OnProbe(0, Answers()).size(), 1u);  // the driver cleared it: reloaded
}

}  // namespace
}  // namespace gpuop::deviceplugin

#include "toolkit/toolkit_core.h"

#include <gtest/gtest.h>

namespace gpuop::toolkit {
namespace {

using namespace std::chrono_literals;
using Clock = ToolkitCore::Clock;

nvml::Gpu MakeGpu(unsigned index, bool mig, std::vector<unsigned> gis = {}) {
  nvml::Gpu g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.minor = static_cast<int>(index);
  g.pci.bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  g.mig_enabled = mig;
  for (unsigned j = 0; j < gis.size(); ++j) {
    nvml::MigDevice m;
    m.index = j;
    m.uuid = "MIG-" + std::to_string(index) + "-" + std::to_string(gis[j]);
    m.gi_id = gis[j];
    m.ci_id = 0;
    m.profile = "1g.10gb";
    g.mig_devices.push_back(m);
  }
  return g;
}

Fingerprint Fp(std::vector<nvml::Gpu> gpus, std::string driver = "570.1") {
  nvml::SystemInfo s;
  s.driver_version = std::move(driver);
  return FingerprintOf(s, gpus);
}

TEST(FingerprintTest, CapturesWhatTheSpecDependsOn) {
  Fingerprint a = Fp({MakeGpu(0, true, {1, 2}), MakeGpu(1, false)});
  EXPECT_EQ(a.Summary(), "driver=570.1 gpus=2 mig-devices=2");
  EXPECT_EQ(a, Fp({MakeGpu(0, true, {1, 2}), MakeGpu(1, false)}));
  EXPECT_NE(a, Fp({MakeGpu(0, true, {1, 2}), MakeGpu(1, false)}, "570.2"));  // driver
  EXPECT_NE(a, Fp({MakeGpu(0, true, {1, 3}), MakeGpu(1, false)}));           // a GI id
  EXPECT_NE(a, Fp({MakeGpu(0, true, {1}), MakeGpu(1, false)}));              // a MIG device gone
  nvml::Gpu moved = MakeGpu(1, false);
  moved.minor = 7;
  EXPECT_NE(a, Fp({MakeGpu(0, true, {1, 2}), moved}));       // a device minor
  EXPECT_NE(a, Fp({MakeGpu(0, false), MakeGpu(1, false)}));  // MIG mode
}

TEST(FingerprintTest, DiffNamesTheChangedDevices) {
  auto d = DiffFingerprints(Fp({MakeGpu(0, true, {1})}), Fp({MakeGpu(0, true, {1, 2})}));
  EXPECT_FALSE(d.driver_changed);
  ASSERT_EQ(d.added.size(), 1u);
  EXPECT_TRUE(d.removed.empty());
  EXPECT_EQ(d.ToString(), "+1 -0 devices: +mig MIG-0-2");
  EXPECT_TRUE(DiffFingerprints(Fp({}), Fp({})).empty());
  EXPECT_EQ(DiffFingerprints(Fp({}, "1"), Fp({}, "2")).ToString(), "driver changed");
}

TEST(WatchEventTest, OnlyRelevantFilesTrigger) {
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kDriverEtc, "ld.so.cache", "regenerate"),
            kTriggerFileChange);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kDriverEtc, "hosts", "regenerate"), kTriggerNone);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kDriverLib, "libnvidia-ml.so.570.1", "regenerate"),
            kTriggerFileChange);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kDriverLib, "libcuda.so.1", "regenerate"),
            kTriggerFileChange);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kDriverLib, "libssl.so.3", "regenerate"), kTriggerNone);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kDev, "nvidia3", "regenerate"), kTriggerFileChange);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kDev, "tty0", "regenerate"), kTriggerNone);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kDevCaps, "nvidia-cap21", "regenerate"),
            kTriggerFileChange);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kTriggerDir, "regenerate", "regenerate"),
            kTriggerRequestFile);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kTriggerDir, "status.json.tmp.1.2", "regenerate"),
            kTriggerNone);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kValidations, "driver-ready", "regenerate"),
            kTriggerDriverReady);
  EXPECT_EQ(ClassifyWatchEvent(WatchKind::kValidations, "toolkit-ready", "regenerate"),
            kTriggerNone);
}

class CoreTest : public ::testing::Test {
 protected:
  ToolkitTiming timing_{.check_interval = 5s, .resync = 300s, .retry_min = 1s, .retry_max = 8s};
  ToolkitCore core_{timing_};
  Clock::time_point t0_ = Clock::time_point{} + 1000h;
  Fingerprint fp_ = Fp({MakeGpu(0, false), MakeGpu(1, false)});
  Status unavailable_{StatusCode::kUnavailable, "NVIDIA driver is not loaded"};
};

TEST_F(CoreTest, GeneratesAtStartThenOnlyOnChange) {
  auto d = core_.Decide(kTriggerTick, fp_, t0_);
  EXPECT_TRUE(d.regenerate);
  EXPECT_EQ(d.reason, "start");
  core_.Generated(fp_, Status::Ok(), t0_);
  EXPECT_EQ(core_.report().phase, ToolkitPhase::kReady);
  EXPECT_EQ(core_.report().generations, 1u);
  EXPECT_EQ(core_.NextWake(), t0_ + 5s);

  d = core_.Decide(kTriggerTick, fp_, t0_ + 5s);
  EXPECT_FALSE(d.regenerate);
  EXPECT_EQ(core_.NextWake(), t0_ + 10s);

  Fingerprint mig = Fp({MakeGpu(0, true, {1, 2}), MakeGpu(1, false)});
  d = core_.Decide(kTriggerTick, mig, t0_ + 10s);
  EXPECT_TRUE(d.regenerate);
  EXPECT_EQ(d.reason, "layout-changed");
  EXPECT_EQ(d.diff.added.size(), 3u);    // GPU 0 with mig=on, two MIG devices
  EXPECT_EQ(d.diff.removed.size(), 1u);  // GPU 0 with mig=off
}

TEST_F(CoreTest, ExplicitTriggersRegenerateEvenWithoutChange) {
  core_.Decide(kTriggerTick, fp_, t0_);
  core_.Generated(fp_, Status::Ok(), t0_);
  EXPECT_EQ(core_.Decide(kTriggerSighup, fp_, t0_ + 1s).reason, "sighup");
  EXPECT_EQ(core_.Decide(kTriggerRequestFile, fp_, t0_ + 1s).reason, "trigger-file");
  EXPECT_EQ(core_.Decide(kTriggerFileChange, fp_, t0_ + 1s).reason, "file-change");
  EXPECT_EQ(core_.Decide(kTriggerSighup | kTriggerFileChange, fp_, t0_ + 1s).reason, "sighup");
  // driver-ready alone (written again, or removed at uninstall) is no reason:
  // the daemon adds kTriggerFileChange when the driver root really moved.
  EXPECT_FALSE(core_.Decide(kTriggerDriverReady, fp_, t0_ + 1s).regenerate);
}

TEST_F(CoreTest, ResyncIsABackstop) {
  core_.Decide(kTriggerTick, fp_, t0_);
  core_.Generated(fp_, Status::Ok(), t0_);
  EXPECT_FALSE(core_.Decide(kTriggerTick, fp_, t0_ + 299s).regenerate);
  EXPECT_EQ(core_.NextWake(), t0_ + 300s);  // the resync is sooner than the next check
  auto d = core_.Decide(kTriggerTick, fp_, t0_ + 300s);
  EXPECT_TRUE(d.regenerate);
  EXPECT_EQ(d.reason, "resync");
}

TEST_F(CoreTest, WaitsForTheDriverWithBackoffAndLogsOnce) {
  auto d = core_.Decide(kTriggerTick, unavailable_, t0_);
  EXPECT_FALSE(d.regenerate);
  EXPECT_TRUE(d.log_unavailable);
  EXPECT_EQ(core_.report().phase, ToolkitPhase::kWaitingForDriver);
  EXPECT_EQ(core_.report().last_error, "NVIDIA driver is not loaded");
  EXPECT_EQ(core_.NextWake(), t0_ + 1s);
  d = core_.Decide(kTriggerTick, unavailable_, t0_ + 1s);
  EXPECT_FALSE(d.log_unavailable);
  EXPECT_EQ(core_.NextWake(), t0_ + 3s);
  core_.Decide(kTriggerTick, unavailable_, t0_ + 3s);
  EXPECT_EQ(core_.NextWake(), t0_ + 7s);
  core_.Decide(kTriggerTick, unavailable_, t0_ + 7s);
  core_.Decide(kTriggerTick, unavailable_, t0_ + 15s);
  EXPECT_EQ(core_.NextWake(), t0_ + 23s);  // capped at retry_max
  EXPECT_EQ(core_.report().failures, 5u);

  d = core_.Decide(kTriggerTick, fp_, t0_ + 23s);
  EXPECT_TRUE(d.regenerate);
  EXPECT_EQ(d.reason, "start");
  core_.Generated(fp_, Status::Ok(), t0_ + 23s);
  EXPECT_EQ(core_.report().phase, ToolkitPhase::kReady);
  EXPECT_EQ(core_.report().failures, 0u);
  EXPECT_EQ(core_.report().last_error, "");
}

TEST_F(CoreTest, DriverReloadRegeneratesWhenNvmlComesBack) {
  core_.Decide(kTriggerTick, fp_, t0_);
  core_.Generated(fp_, Status::Ok(), t0_);
  auto d = core_.Decide(kTriggerFileChange, unavailable_, t0_ + 1s);
  EXPECT_FALSE(d.regenerate);
  EXPECT_TRUE(d.log_unavailable);
  EXPECT_EQ(core_.report().phase, ToolkitPhase::kWaitingForDriver);
  EXPECT_TRUE(core_.has_spec());  // the spec on disk stays
  d = core_.Decide(kTriggerTick, fp_, t0_ + 2s);
  EXPECT_TRUE(d.regenerate);
  EXPECT_EQ(d.reason, "driver-back");
  EXPECT_EQ(core_.report().phase, ToolkitPhase::kReady);
  // A second outage is logged again.
  EXPECT_TRUE(core_.Decide(kTriggerTick, unavailable_, t0_ + 3s).log_unavailable);
}

TEST_F(CoreTest, AFailedRegenerationKeepsTheLastGoodSpecAndRetriesWithBackoff) {
  core_.Decide(kTriggerTick, fp_, t0_);
  core_.Generated(fp_, Status::Ok(), t0_);
  Fingerprint mig = Fp({MakeGpu(0, true, {1}), MakeGpu(1, false)});
  ASSERT_TRUE(core_.Decide(kTriggerTick, mig, t0_ + 5s).regenerate);
  core_.Generated(mig, NotFound("no /dev/nvidia-caps/nvidia-cap21"), t0_ + 5s);
  EXPECT_EQ(core_.report().phase, ToolkitPhase::kDegraded);
  EXPECT_EQ(core_.report().last_error, "no /dev/nvidia-caps/nvidia-cap21");
  EXPECT_EQ(core_.report().fingerprint, fp_.Summary());  // still the good one
  EXPECT_EQ(core_.report().generations, 1u);
  EXPECT_EQ(core_.NextWake(), t0_ + 6s);

  // Same layout before the retry time: no attempt; at it: a retry.
  EXPECT_FALSE(core_.Decide(kTriggerTick, mig, t0_ + 5500ms).regenerate);
  auto d = core_.Decide(kTriggerTick, mig, t0_ + 6s);
  EXPECT_EQ(d.reason, "retry");
  core_.Generated(mig, NotFound("still"), t0_ + 6s);
  EXPECT_EQ(core_.NextWake(), t0_ + 8s);  // doubled
  // A new layout or an explicit trigger retries at once.
  EXPECT_EQ(core_.Decide(kTriggerRequestFile, mig, t0_ + 6500ms).reason, "trigger-file");
  core_.Generated(mig, Status::Ok(), t0_ + 6500ms);
  EXPECT_EQ(core_.report().phase, ToolkitPhase::kReady);
  EXPECT_EQ(core_.report().generations, 2u);
}

TEST_F(CoreTest, FailureBeforeAnyGoodSpecStaysStarting) {
  core_.Decide(kTriggerTick, fp_, t0_);
  core_.Generated(fp_, FailedPrecondition("no /dev/nvidiactl"), t0_);
  EXPECT_EQ(core_.report().phase, ToolkitPhase::kStarting);
  EXPECT_FALSE(core_.has_spec());
  EXPECT_EQ(core_.Decide(kTriggerTick, fp_, t0_ + 1s).reason, "retry");
}

TEST(PhaseNameTest, Names) {
  EXPECT_EQ(ToolkitPhaseName(ToolkitPhase::kWaitingForDriver), "waiting-for-driver");
  EXPECT_EQ(ToolkitPhaseName(ToolkitPhase::kDegraded), "degraded");
}

}  // namespace
}  // namespace gpuop::toolkit

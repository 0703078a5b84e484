// nvml::Client on what a current driver and an unprivileged container do
// (issue 21), against the GPU simulator: profile indices past the old
// NVML_GPU_INSTANCE_PROFILE_COUNT, values a driver or process may not read
// (no libcuda, deprecated calls), MIG devices described without MIG
// privilege, a GPU the process may not open, and the activation outcome of a
// MIG mode change on a busy GPU.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/log.h"
#include "nvml/client.h"
#include "sim/nvml/state.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/sim_node.h"

namespace gpuop::nvml {
namespace {

using testing::ScopedEnv;

// The simulated node's driver replaced by `version` (a driver container's reload).
void ReloadDriver(sim::StateStore& store, const std::string& version) {
  ASSERT_TRUE(sim::SetDriverLoaded(store, false).ok());
  Status s = sim::LoadDriver(store, version);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

std::vector<std::string> Names(const std::vector<GiProfile>& profiles) {
  std::vector<std::string> out;
  for (const auto& p : profiles) out.push_back(p.name);
  return out;
}

TEST(NvmlDegradationTest, CudaVersionIsAbsentWithoutLibcuda) {
  testing::SimNode node("dgx-h100", "no-libcuda");
  ScopedEnv env("GPUOP_SIM_LIBCUDA", "absent");
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto sys = c->System();
  ASSERT_TRUE(sys.ok()) << sys.status().ToString();
  EXPECT_FALSE(sys->driver_version.empty());
  EXPECT_EQ(sys->cuda_driver_version, 0);
  EXPECT_EQ(sys->cuda_version, "");
}

TEST(NvmlDegradationTest, DeprecatedTemperatureIsAbsentNotAFailedReading) {
  testing::SimNode node("dgx-h100", "deprecated");
  // A driver without the versioned call whose unversioned one answers DEPRECATED.
  ReloadDriver(node.store(), "550.54.15");
  ScopedEnv env("GPUOP_SIM_DEPRECATED", "nvmlDeviceGetTemperature");
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto t = c->ReadTelemetry(0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->gpu_temp_c.has_value());
  EXPECT_TRUE(t->power_w.has_value());  // the rest of the reading is there
}

TEST(NvmlDegradationTest, TemperatureComesFromTheVersionedCall) {
  testing::SimNode node("dgx-h100", "temperature-v");
  // A driver that dropped the unversioned call still reports the temperature.
  ScopedEnv env("GPUOP_SIM_DEPRECATED", "nvmlDeviceGetTemperature");
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto t = c->ReadTelemetry(0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(t->gpu_temp_c.has_value());
  EXPECT_GT(*t->gpu_temp_c, 0u);
}

TEST(NvmlDegradationTest, OlderDriverWithoutVersionedTemperatureFallsBack) {
  testing::SimNode node("dgx-h100", "old-driver");
  ReloadDriver(node.store(), "550.54.15");
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto t = c->ReadTelemetry(0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(t->gpu_temp_c.has_value());
  EXPECT_GT(*t->gpu_temp_c, 0u);
}

TEST(NvmlDegradationTest, ProfilesPastTheOldCountAreListedWithNvidiasNames) {
  testing::SimNode node("rtx-pro-6000", "new-kinds");
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 0, true, {}).ok());
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto profiles = c->GiProfiles(0);
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  std::vector<std::string> names = Names(*profiles);
  for (const char* want : {"1g.24gb", "1g.24gb+me", "1g.24gb+gfx", "1g.24gb-me", "1g.24gb+me.all",
                           "2g.48gb+gfx", "2g.48gb-me", "2g.48gb+me.all", "4g.96gb+gfx"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end())
        << want << " missing from " << ::testing::PrintToString(names);
  }
  // NOT_SUPPORTED indices (5, 6, 8, 9 on this board) are skipped, not the end.
  EXPECT_EQ(profiles->size(), 11u);
}

TEST(NvmlDegradationTest, OlderDriverKnowsFewerProfileIndices) {
  testing::SimNode node("rtx-pro-6000", "old-kinds");
  ReloadDriver(node.store(), "570.86.10");  // +gfx, not -me/+me.all
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 0, true, {}).ok());
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto profiles = c->GiProfiles(0);
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  std::vector<std::string> names = Names(*profiles);
  EXPECT_NE(std::find(names.begin(), names.end(), "1g.24gb+gfx"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "1g.24gb-me"), names.end());
}

// MIG devices read by a privileged process, then by one without MIG
// privilege: the same devices, profiles and ids, only the placement unknown.
TEST(NvmlDegradationTest, UnprivilegedProcessDescribesMigDevices) {
  testing::SimNode node("dgx-h100", "unprivileged");
  Status layout =
      sim::SetMigLayout(node.store(), 0, true, {"1g.10gb", "1g.10gb+me", "2g.20gb", "3g.40gb"});
  ASSERT_TRUE(layout.ok()) << layout.ToString();
  std::vector<MigDevice> privileged;
  {
    auto c = node.OpenNvmlOrFail();
    ASSERT_NE(c, nullptr);
    auto g = c->GpuByIndex(0);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    privileged = g->mig_devices;
  }
  ASSERT_EQ(privileged.size(), 4u);

  ScopedEnv env("GPUOP_SIM_MIG_PRIVILEGED", "0");
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto gpus = c->Gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 8u);
  const std::vector<MigDevice>& migs = (*gpus)[0].mig_devices;
  ASSERT_EQ(migs.size(), privileged.size());
  for (size_t i = 0; i < migs.size(); ++i) {
    SCOPED_TRACE(privileged[i].profile);
    EXPECT_EQ(migs[i].uuid, privileged[i].uuid);
    EXPECT_EQ(migs[i].profile, privileged[i].profile);
    EXPECT_EQ(migs[i].gi_profile_id, privileged[i].gi_profile_id);
    EXPECT_EQ(migs[i].ci_profile_id, privileged[i].ci_profile_id);
    EXPECT_TRUE(privileged[i].placement.has_value());
    EXPECT_FALSE(migs[i].placement.has_value());
  }

  // Profiles are listed, without placements.
  auto profiles = c->GiProfiles(0);
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  ASSERT_FALSE(profiles->empty());
  for (const auto& p : *profiles) EXPECT_TRUE(p.placements.empty()) << p.name;

  // Managing MIG still fails, saying how to get the privilege.
  Status destroyed = c->DestroyGpuInstance(0, migs[0].gi_id);
  ASSERT_FALSE(destroyed.ok());
  EXPECT_EQ(destroyed.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(destroyed.message().find("/dev/nvidia-caps/nvidia-cap1"), std::string::npos)
      << destroyed.message();
  EXPECT_NE(destroyed.message().find("NVIDIA_MIG_CONFIG_DEVICES=all"), std::string::npos);
  auto instances = c->GpuInstances(0);
  ASSERT_FALSE(instances.ok());
  EXPECT_EQ(instances.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(instances.status().message().find("MIG management privilege"), std::string::npos)
      << instances.status().message();
}

// An unprivileged reader tells the profile variants of one size apart (the
// attributes show no graphics; the device name does).
TEST(NvmlDegradationTest, UnprivilegedProcessNamesTheNewProfileKinds) {
  testing::SimNode node("rtx-pro-6000", "unprivileged-kinds");
  ASSERT_TRUE(
      sim::SetMigLayout(node.store(), 0, true, {"1g.24gb+gfx", "1g.24gb-me", "2g.48gb+me.all"})
          .ok());
  ScopedEnv env("GPUOP_SIM_MIG_PRIVILEGED", "0");
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto g = c->GpuByIndex(0);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::vector<std::string> profiles;
  for (const auto& m : g->mig_devices) profiles.push_back(m.profile);
  std::sort(profiles.begin(), profiles.end());
  EXPECT_EQ(profiles, (std::vector<std::string>{"1g.24gb+gfx", "1g.24gb-me", "2g.48gb+me.all"}));
}

TEST(NvmlDegradationTest, GpuThatMayNotBeOpenedIsSkippedWithAWarning) {
  testing::SimNode node("dgx-h100", "deny");
  ScopedEnv env("GPUOP_SIM_DENY_GPUS", "2,5");
  testing::TempDir logs("nvml-log");
  const std::string log_path = logs.path() + "/log";
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  SetLogFd(fd);
  auto c = node.OpenNvmlOrFail();
  auto gpus = c ? c->Gpus() : Result<std::vector<Gpu>>(Internal("no client"));
  SetLogFd(2);
  ::close(fd);
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  std::vector<unsigned> indices;
  for (const auto& g : *gpus) indices.push_back(g.index);
  EXPECT_EQ(indices, (std::vector<unsigned>{0, 1, 3, 4, 6, 7}));

  auto log = ReadFile(log_path);
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("gpu=2"), std::string::npos) << *log;
  EXPECT_NE(log->find("gpu=5"), std::string::npos) << *log;
  EXPECT_NE(log->find("Insufficient Permissions"), std::string::npos) << *log;

  // The GPU itself answers PermissionDenied, naming it.
  auto denied = c->GpuByIndex(2);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(SkippableGpuError(denied.status()));
}

TEST(NvmlDegradationTest, EveryGpuDeniedIsAnError) {
  testing::SimNode node("dgx-h100", "deny-all");
  ScopedEnv env("GPUOP_SIM_DENY_GPUS", "0,1,2,3,4,5,6,7");
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto gpus = c->Gpus();
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(gpus.status().message().find("GPU 0"), std::string::npos);
}

TEST(NvmlDegradationTest, MigModeChangeOnABusyGpuNamesItsProcesses) {
  testing::SimNode node("dgx-h100", "busy");
  const uint32_t pid = static_cast<uint32_t>(::getpid());  // a pid whose comm is readable
  ASSERT_TRUE(node.store()
                  .Update([&](sim::SimState& s) {
                    s.gpus[3].processes.push_back({pid, uint64_t{512} << 20});
                    return Status::Ok();
                  })
                  .ok());
  auto c = node.OpenNvmlOrFail();
  ASSERT_NE(c, nullptr);
  auto change = c->SetMigMode(3, true);
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_EQ(change->activation, MigActivation::kInUse);
  EXPECT_FALSE(change->reset_required);
  EXPECT_FALSE(change->current);
  ASSERT_EQ(change->processes.size(), 1u);
  EXPECT_EQ(change->processes[0].pid, pid);
  EXPECT_EQ(change->processes[0].used_mib, 512u);
  auto comm = ReadFile("/proc/self/comm");
  ASSERT_TRUE(comm.ok());
  EXPECT_EQ(change->processes[0].name + "\n", *comm);
  EXPECT_EQ(DescribeProcesses(change->processes),
            std::to_string(pid) + " (" + change->processes[0].name + ")");

  // An idle GPU's change waits for a reset, as before.
  auto idle = c->SetMigMode(4, true);
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();
  EXPECT_EQ(idle->activation, MigActivation::kResetRequired);
  EXPECT_TRUE(idle->reset_required);
  EXPECT_TRUE(idle->processes.empty());
}

}  // namespace
}  // namespace gpuop::nvml

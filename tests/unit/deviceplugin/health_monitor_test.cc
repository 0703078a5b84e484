// HealthMonitor end to end: the GPU simulator (libnvml-sim.so through a real
// nvml::Client) gets faults injected the way `gpuop sim gpu ...` does, and the
// monitor's callback must follow: unhealthy on the fault, healthy again after
// the reset that clears it.
#include "deviceplugin/health_monitor.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sim/nvml/state.h"

namespace gpuop::deviceplugin {
namespace {

const std::string kSim = std::string(GPUOP_BINARY_DIR) + "/lib/libnvml-sim.so";

class DpHealthMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuop-dphealth-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("GPUOP_SIM_MACHINE", "dgx-a100", 1);
    setenv("GPUOP_SIM_STATE", (dir_ + "/state").c_str(), 1);
    setenv("GPUOP_SIM_SEED", dir_.c_str(), 1);
    auto store = sim::OpenStateFromEnv(true);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  void TearDown() override {
    monitor_.reset();  // Stop() joins
    client_.reset();
    store_.reset();
    unsetenv("GPUOP_SIM_MACHINE");
    unsetenv("GPUOP_SIM_STATE");
    unsetenv("GPUOP_SIM_SEED");
    std::filesystem::remove_all(dir_);
  }

  void Start(HealthPolicy policy = {}) {
    if (policy.disabled.empty()) policy = ParseHealthPolicy("", "").value();
    auto c = nvml::Client::Open(kSim);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    auto gpus = client_->Gpus();
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    gpus_ = *gpus;
    HealthMonitorOptions opts;
    opts.probe_interval = std::chrono::milliseconds(50);
    opts.wait_slice = std::chrono::milliseconds(20);
    auto m = HealthMonitor::Start(
        *client_, gpus_, policy,
        [this](const std::map<std::string, bool>& changed) {
          std::lock_guard<std::mutex> lock(mu_);
          history_.push_back(changed);
          for (const auto& [unit, healthy] : changed) health_[unit] = healthy;
          cv_.notify_all();
        },
        opts);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    monitor_ = std::move(m).value();
  }

  // Waits (generously) until the callback has said `unit` is `healthy`.
  bool WaitFor(const std::string& unit, bool healthy) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] {
      auto it = health_.find(unit);
      return it != health_.end() && it->second == healthy;
    });
  }

  std::vector<std::map<std::string, bool>> History() {
    std::lock_guard<std::mutex> lock(mu_);
    return history_;
  }

  std::string dir_;
  std::unique_ptr<sim::StateStore> store_;
  std::unique_ptr<nvml::Client> client_;
  std::vector<nvml::Gpu> gpus_;
  std::unique_ptr<HealthMonitor> monitor_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, bool> health_;
  std::vector<std::map<std::string, bool>> history_;
};

TEST_F(DpHealthMonitorTest, Xid48ThenResetComesBack) {
  Start();
  const std::string uuid = gpus_[2].uuid;
  ASSERT_TRUE(sim::InjectXid(*store_, 2, 48, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(WaitFor(uuid, false));
  EXPECT_FALSE(monitor_->Snapshot().at(uuid));
  EXPECT_TRUE(monitor_->Snapshot().at(gpus_[3].uuid));
  ASSERT_TRUE(sim::ResetGpu(*store_, 2).ok());
  ASSERT_TRUE(WaitFor(uuid, true));
  EXPECT_TRUE(monitor_->Snapshot().at(uuid));
  // Only GPU 2 ever changed.
  for (const auto& changed : History()) {
    ASSERT_EQ(changed.size(), 1u);
    EXPECT_EQ(changed.begin()->first, uuid);
  }
}

TEST_F(DpHealthMonitorTest, LostGpuComesBackAfterReset) {
  Start();
  const std::string uuid = gpus_[5].uuid;
  ASSERT_TRUE(sim::MarkGpuLost(*store_, 5).ok());
  ASSERT_TRUE(WaitFor(uuid, false));
  // Probes keep finding it lost: no flapping back.
  auto h = client_->ReadHealth(5);
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->responds);
  EXPECT_FALSE(monitor_->Snapshot().at(uuid));
  ASSERT_TRUE(sim::ResetGpu(*store_, 5).ok());
  ASSERT_TRUE(WaitFor(uuid, true));
}

TEST_F(DpHealthMonitorTest, DoubleBitEccNeedsTheReset) {
  Start();
  const std::string uuid = gpus_[0].uuid;
  ASSERT_TRUE(sim::InjectEcc(*store_, 0, /*double_bit=*/false).ok());
  ASSERT_TRUE(sim::InjectEcc(*store_, 0, /*double_bit=*/true).ok());
  ASSERT_TRUE(WaitFor(uuid, false));
  ASSERT_TRUE(sim::ResetGpu(*store_, 0).ok());
  ASSERT_TRUE(WaitFor(uuid, true));
}

TEST_F(DpHealthMonitorTest, IgnoredXidChangesNothing) {
  Start();
  ASSERT_TRUE(sim::InjectXid(*store_, 0, 13, std::nullopt, std::nullopt).ok());
  // A marker after it: once GPU 1's change is seen, XID 13 was handled too.
  ASSERT_TRUE(sim::InjectXid(*store_, 1, 79, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(WaitFor(gpus_[1].uuid, false));
  for (const auto& changed : History()) EXPECT_EQ(changed.count(gpus_[0].uuid), 0u);
  EXPECT_TRUE(monitor_->Snapshot().at(gpus_[0].uuid));
}

TEST_F(DpHealthMonitorTest, MigXidMarksOnlyThatMigDevice) {
  ASSERT_TRUE(sim::SetMigLayout(*store_, 1, true, {"3g.20gb", "3g.20gb"}).ok());
  Start();
  ASSERT_EQ(gpus_[1].mig_devices.size(), 2u);
  const nvml::MigDevice& hit = gpus_[1].mig_devices[1];
  const nvml::MigDevice& other = gpus_[1].mig_devices[0];
  ASSERT_TRUE(sim::InjectXid(*store_, 1, 48, hit.gi_id, hit.ci_id).ok());
  ASSERT_TRUE(WaitFor(hit.uuid, false));
  auto snap = monitor_->Snapshot();
  EXPECT_TRUE(snap.at(other.uuid));
  EXPECT_TRUE(snap.at(gpus_[1].uuid));
  for (const auto& changed : History()) {
    EXPECT_EQ(changed.count(other.uuid), 0u);
    EXPECT_EQ(changed.count(gpus_[1].uuid), 0u);
  }
}

TEST_F(DpHealthMonitorTest, DisabledXidIsMuted) {
  Start(ParseHealthPolicy("48", "").value());
  ASSERT_TRUE(sim::InjectXid(*store_, 4, 48, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(sim::InjectXid(*store_, 6, 74, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(WaitFor(gpus_[6].uuid, false));
  EXPECT_TRUE(monitor_->Snapshot().at(gpus_[4].uuid));
}

TEST_F(DpHealthMonitorTest, StopsPromptly) {
  Start();
  // A hang here would hit the test timeout; no wall-time assertion.
  monitor_->Stop();
  monitor_->Stop();  // idempotent
  EXPECT_EQ(monitor_->Snapshot().size(), 8u);
}

}  // namespace
}  // namespace gpuop::deviceplugin

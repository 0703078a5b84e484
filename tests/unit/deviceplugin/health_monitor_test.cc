// HealthMonitor end to end: the GPU simulator (libnvml-sim.so through a real
// nvml::Client) gets faults injected the way `gpuop sim gpu ...` does, and the
// monitor's callback must follow: unhealthy on the fault, healthy again after
// the reset that clears it.
#include "deviceplugin/health_monitor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"

namespace gpuop::deviceplugin {
namespace {

class DpHealthMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(sim_.Boot("dgx-a100", sim_.dir())); }

  void TearDown() override {
    monitor_.reset();  // Stop() joins
    client_.reset();
  }

  void Start(HealthPolicy policy = {}) {
    if (policy.disabled.empty()) policy = ParseHealthPolicy("", "").value();
    client_ = sim_.OpenNvmlOrFail();
    ASSERT_NE(client_, nullptr);
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

  testing::SimNode sim_;
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
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 2, 48, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(WaitFor(uuid, false));
  EXPECT_FALSE(monitor_->Snapshot().at(uuid));
  EXPECT_TRUE(monitor_->Snapshot().at(gpus_[3].uuid));
  ASSERT_TRUE(sim::ResetGpu(sim_.store(), 2).ok());
  ASSERT_TRUE(WaitFor(uuid, true));
  EXPECT_TRUE(monitor_->Snapshot().at(uuid));
  // Only GPU 2 ever changed.
  for (const auto& changed : History()) {
    ASSERT_EQ(changed.size(), 1u);
    EXPECT_EQ(changed.begin()->first, uuid);
  }
}

// XID 32 posts no recovery action, so nothing a probe sees clears it: only
// the plugin telling the monitor that the driver was reloaded.
TEST_F(DpHealthMonitorTest, FaultWithoutEvidenceClearsAfterADriverReload) {
  Start();
  const std::string uuid = gpus_[1].uuid;
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 1, 32, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(WaitFor(uuid, false));
  monitor_->OnDriverReloaded();
  ASSERT_TRUE(WaitFor(uuid, true));
  EXPECT_TRUE(monitor_->Snapshot().at(uuid));
}

TEST_F(DpHealthMonitorTest, LostGpuComesBackAfterReset) {
  Start();
  const std::string uuid = gpus_[5].uuid;
  ASSERT_TRUE(sim::MarkGpuLost(sim_.store(), 5).ok());
  ASSERT_TRUE(WaitFor(uuid, false));
  // Probes keep finding it lost: no flapping back.
  auto h = client_->ReadHealth(5);
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->responds);
  EXPECT_FALSE(monitor_->Snapshot().at(uuid));
  ASSERT_TRUE(sim::ResetGpu(sim_.store(), 5).ok());
  ASSERT_TRUE(WaitFor(uuid, true));
}

TEST_F(DpHealthMonitorTest, DoubleBitEccNeedsTheReset) {
  Start();
  const std::string uuid = gpus_[0].uuid;
  ASSERT_TRUE(sim::InjectEcc(sim_.store(), 0, /*double_bit=*/false).ok());
  ASSERT_TRUE(sim::InjectEcc(sim_.store(), 0, /*double_bit=*/true).ok());
  ASSERT_TRUE(WaitFor(uuid, false));
  ASSERT_TRUE(sim::ResetGpu(sim_.store(), 0).ok());
  ASSERT_TRUE(WaitFor(uuid, true));
}

TEST_F(DpHealthMonitorTest, IgnoredXidChangesNothing) {
  Start();
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 0, 13, std::nullopt, std::nullopt).ok());
  // A marker after it: once GPU 1's change is seen, XID 13 was handled too.
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 1, 79, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(WaitFor(gpus_[1].uuid, false));
  for (const auto& changed : History()) EXPECT_EQ(changed.count(gpus_[0].uuid), 0u);
  EXPECT_TRUE(monitor_->Snapshot().at(gpus_[0].uuid));
}

TEST_F(DpHealthMonitorTest, MigXidMarksOnlyThatMigDevice) {
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 1, true, {"3g.20gb", "3g.20gb"}).ok());
  Start();
  ASSERT_EQ(gpus_[1].mig_devices.size(), 2u);
  const nvml::MigDevice& hit = gpus_[1].mig_devices[1];
  const nvml::MigDevice& other = gpus_[1].mig_devices[0];
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 1, 48, hit.gi_id, hit.ci_id).ok());
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
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 4, 48, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 6, 74, std::nullopt, std::nullopt).ok());
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

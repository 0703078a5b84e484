// GPM profiling metrics through the real C ABI: nvml::GpmSampler against the
// GPU simulator (libnvml-sim.so), whose GPM counters follow the simulated
// work (`gpuop sim gpu load`, CUDA kernels). The simulator counts the sample
// buffers a process holds, so the sampler is held to freeing what it takes.
#include "nvml/gpm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "base/clock.h"
#include "nvml/client.h"
#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"

namespace gpuop::nvml {
namespace {

class GpmTest : public ::testing::Test {
 protected:
  void Boot(const std::string& machine) {
    ASSERT_TRUE(node_.Boot(machine, "gpm-test"));
    client_ = node_.OpenNvmlOrFail();
    ASSERT_NE(client_, nullptr);
    sampler_ = client_->NewGpmSampler();
  }
  // Two reads of the device 100 ms apart: the second's metrics.
  GpmMetrics Between(unsigned gpu, std::optional<unsigned> gi = {}) {
    auto first = sampler_->Read(gpu, gi);
    EXPECT_TRUE(first.ok()) << first.status().ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto second = sampler_->Read(gpu, gi);
    EXPECT_TRUE(second.ok()) << second.status().ToString();
    if (!second.ok() || !*second) {
      ADD_FAILURE() << "no metrics on the second read";
      return {};
    }
    return **second;
  }
  void TearDown() override {
    sampler_.reset();
    client_.reset();
  }

  testing::SimNode node_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<GpmSampler> sampler_;
};

TEST_F(GpmTest, FirstReadHasNothingToCompareThenEveryReadHasMetrics) {
  Boot("dgx-h100");
  auto supported = sampler_->Supported(0);
  ASSERT_TRUE(supported.ok()) << supported.status().ToString();
  EXPECT_TRUE(*supported);
  auto first = sampler_->Read(0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->has_value()) << "one sample has nothing to compare with";
  auto second = sampler_->Read(0);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_TRUE(second->has_value());
  const GpmMetrics& m = **second;
  for (auto v : {m.graphics_util, m.sm_util, m.sm_occupancy, m.any_tensor_util, m.dram_bw_util,
                 m.fp16_util, m.fp32_util, m.fp64_util, m.pcie_tx_mib_s, m.pcie_rx_mib_s,
                 m.nvlink_tx_mib_s, m.nvlink_rx_mib_s}) {
    EXPECT_TRUE(v.has_value());
  }
}

TEST_F(GpmTest, BusyGpuReadsHigherActivityThanIdleOne) {
  Boot("dgx-h100");
  ASSERT_TRUE(sim::AddLoad(node_.store(), 3, std::nullopt, NowUnixMillis(), 60000).ok());
  GpmMetrics busy = Between(3);
  GpmMetrics idle = Between(4);
  ASSERT_TRUE(busy.sm_util && idle.sm_util && busy.any_tensor_util && idle.any_tensor_util);
  EXPECT_GT(*busy.sm_util, 50);
  EXPECT_LE(*busy.sm_util, 100);
  EXPECT_GT(*busy.any_tensor_util, 50);
  EXPECT_EQ(*idle.sm_util, 0) << "an idle GPU's SMs did nothing";
  EXPECT_EQ(*idle.any_tensor_util, 0);
  EXPECT_GT(*busy.pcie_rx_mib_s, *idle.pcie_rx_mib_s);
  EXPECT_GT(*busy.nvlink_tx_mib_s, *idle.nvlink_tx_mib_s);
}

TEST_F(GpmTest, MigGpuInstancesAreReadThroughTheirGpu) {
  Boot("dgx-h100");
  ASSERT_TRUE(sim::SetMigLayout(node_.store(), 2, true, {"1g.10gb", "3g.40gb"}).ok());
  auto gpu = client_->GpuByIndex(2);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  ASSERT_EQ(gpu->mig_devices.size(), 2u);
  const unsigned busy_gi = gpu->mig_devices[0].gi_id, idle_gi = gpu->mig_devices[1].gi_id;
  ASSERT_TRUE(sim::AddLoad(node_.store(), 2, busy_gi, NowUnixMillis(), 60000).ok());

  GpmMetrics busy = Between(2, busy_gi);
  GpmMetrics idle = Between(2, idle_gi);
  ASSERT_TRUE(busy.sm_util && idle.sm_util);
  EXPECT_GT(*busy.sm_util, 50);
  EXPECT_EQ(*idle.sm_util, 0);
  EXPECT_FALSE(busy.pcie_tx_mib_s.has_value()) << "PCIe traffic is the whole GPU's";

  auto missing = sampler_->Read(2, 99);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("GPU 2 GPU instance 99"), std::string::npos)
      << missing.status().ToString();
}

TEST_F(GpmTest, AmpereHasNoGpm) {
  Boot("dgx-a100");
  auto supported = sampler_->Supported(0);
  ASSERT_TRUE(supported.ok()) << supported.status().ToString();
  EXPECT_FALSE(*supported);
  auto read = sampler_->Read(0);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(read.status().message().find("Hopper"), std::string::npos);
  EXPECT_EQ(sampler_->held_samples(), 0u);
}

TEST_F(GpmTest, SamplesAreReusedSweptAndFreed) {
  Boot("dgx-h100");
  const int before = testing::SimGpmSamples();
  ASSERT_GE(before, 0) << "the simulator counts its GPM samples";
  ASSERT_TRUE(sim::SetMigLayout(node_.store(), 1, true, {"1g.10gb", "1g.10gb"}).ok());
  auto gpu = client_->GpuByIndex(1);
  ASSERT_TRUE(gpu.ok());
  ASSERT_EQ(gpu->mig_devices.size(), 2u);
  for (int round = 0; round < 200; ++round) {
    for (unsigned g = 0; g < 8; ++g) ASSERT_TRUE(sampler_->Read(g).ok());
    for (const MigDevice& m : gpu->mig_devices) ASSERT_TRUE(sampler_->Read(1, m.gi_id).ok());
    sampler_->Sweep();
    ASSERT_EQ(sampler_->held_samples(), 2u * 10) << "round " << round;
    ASSERT_EQ(testing::SimGpmSamples(), before + 20) << "round " << round;
  }
  // The MIG instances go: their buffers are freed at the next sweep.
  for (unsigned g = 0; g < 8; ++g) ASSERT_TRUE(sampler_->Read(g).ok());
  sampler_->Sweep();
  EXPECT_EQ(sampler_->held_samples(), 16u);
  EXPECT_EQ(testing::SimGpmSamples(), before + 16);
  sampler_.reset();
  EXPECT_EQ(testing::SimGpmSamples(), before) << "the sampler frees every buffer it took";
}

}  // namespace
}  // namespace gpuop::nvml

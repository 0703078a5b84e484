// Topology scores, and ReadTopology over the simulator's machines through a
// real nvml::Client.
#include "deviceplugin/topology.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/testing/sim_env.h"

namespace gpuop::deviceplugin {
namespace {

using nvml::TopologyLevel;

TEST(DpTopologyTest, NvLinksOutweighEveryPcieLevel) {
  Topology t(4);
  t.SetLevel(0, 1, TopologyLevel::kSystem);
  t.SetNvLinks(0, 1, 1);
  t.SetLevel(2, 3, TopologyLevel::kInternal);
  EXPECT_GT(t.Score(0, 1), t.Score(2, 3));
  EXPECT_EQ(t.Score(1, 0), t.Score(0, 1));
  EXPECT_EQ(t.Score(0, 0), 0);
  // PCIe levels in order, closest highest.
  int prev = 1000;
  for (TopologyLevel l :
       {TopologyLevel::kInternal, TopologyLevel::kSingle, TopologyLevel::kMultiple,
        TopologyLevel::kHostBridge, TopologyLevel::kNode, TopologyLevel::kSystem}) {
    t.SetLevel(2, 3, l);
    EXPECT_LT(t.Score(2, 3), prev);
    EXPECT_GT(t.Score(2, 3), 0);
    prev = t.Score(2, 3);
  }
  // More links, higher score; indices outside the topology are far apart.
  t.SetNvLinks(2, 3, 12);
  EXPECT_GT(t.Score(2, 3), t.Score(0, 1));
  EXPECT_EQ(t.Level(0, 9), TopologyLevel::kSystem);
  EXPECT_EQ(t.NvLinks(9, 0), 0u);
  t.SetNvLinks(5, 6, 2);  // grows
  EXPECT_EQ(t.size(), 7u);
  EXPECT_EQ(t.NvLinks(6, 5), 2u);
}

class DpTopologySimTest : public ::testing::Test {
 protected:
  Topology Read(const std::string& machine) {
    client_.reset();
    sim_.Point(machine, sim_.dir(), machine);
    client_ = sim_.OpenNvmlOrFail();
    if (!client_) return Topology();
    auto gpus = client_->Gpus();
    EXPECT_TRUE(gpus.ok());
    auto t = ReadTopology(*client_, *gpus);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : Topology();
  }
  testing::SimEnv sim_;
  std::unique_ptr<nvml::Client> client_;
};

TEST_F(DpTopologySimTest, H100NvlMachine) {
  Topology t = Read("h100-nvl-8");
  ASSERT_EQ(t.size(), 8u);
  EXPECT_TRUE(t.notes.empty());
  for (unsigned a = 0; a < 8; ++a) {
    EXPECT_EQ(t.NumaNode(a), a < 4 ? 0 : 1);
    for (unsigned b = 0; b < 8; ++b) {
      if (a == b) continue;
      EXPECT_EQ(t.NvLinks(a, b), (a ^ 1u) == b ? 12u : 0u) << a << "-" << b;
      EXPECT_EQ(t.Level(a, b), (a < 4) == (b < 4) ? TopologyLevel::kNode : TopologyLevel::kSystem);
    }
  }
  EXPECT_GT(t.Score(6, 7), t.Score(5, 6));
}

TEST_F(DpTopologySimTest, DgxA100AllMeetThroughNvSwitch) {
  Topology t = Read("dgx-a100");
  ASSERT_EQ(t.size(), 8u);
  for (unsigned b = 1; b < 8; ++b) EXPECT_EQ(t.NvLinks(0, b), 12u) << b;
  EXPECT_EQ(t.Level(0, 1), TopologyLevel::kSingle);
  EXPECT_EQ(t.Level(0, 2), TopologyLevel::kNode);
  EXPECT_EQ(t.Level(0, 4), TopologyLevel::kSystem);
  // Same links everywhere: PCIe decides.
  EXPECT_GT(t.Score(0, 1), t.Score(0, 2));
  EXPECT_GT(t.Score(0, 2), t.Score(0, 4));
}

TEST_F(DpTopologySimTest, PcieOnlyMachine) {
  Topology t = Read("l40s-4");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t.NvLinks(0, 1), 0u);
  EXPECT_EQ(t.Level(0, 1), TopologyLevel::kSingle);
  EXPECT_EQ(t.Level(1, 2), TopologyLevel::kSystem);  // 0-1 on node 0, 2-3 on node 1
  EXPECT_TRUE(t.notes.empty());
}

}  // namespace
}  // namespace gpuop::deviceplugin

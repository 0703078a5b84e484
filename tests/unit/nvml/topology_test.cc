// The topology and health-probe calls of nvml::Client, against the GPU
// simulator (libnvml-sim.so) loaded as the driver's NVML would be.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "nvml/client.h"
#include "tests/testing/sim_env.h"

namespace gpuop::nvml {
namespace {

class TopologyNvmlTest : public ::testing::Test {
 protected:
  Client& Open(const std::string& machine) {
    client_.reset();
    sim_.Point(machine, sim_.dir(), machine);
    client_ = sim_.OpenNvmlOrFail();
    return *client_;
  }

  testing::SimEnv sim_;
  std::unique_ptr<Client> client_;
};

TEST_F(TopologyNvmlTest, DgxH100MeetsOnSwitchesAndNvSwitch) {
  Client& c = Open("dgx-h100");
  ASSERT_NE(client_, nullptr);
  EXPECT_EQ(c.CommonAncestor(0, 1).value(), TopologyLevel::kSingle);
  EXPECT_EQ(c.CommonAncestor(0, 2).value(), TopologyLevel::kNode);
  EXPECT_EQ(c.CommonAncestor(3, 4).value(), TopologyLevel::kSystem);
  EXPECT_EQ(c.CommonAncestor(5, 4).value(), TopologyLevel::kSingle);
  EXPECT_STREQ(TopologyLevelName(*c.CommonAncestor(0, 7)), "SYS");

  auto links = c.NvLinks(0);
  ASSERT_TRUE(links.ok()) << links.status().ToString();
  ASSERT_EQ(links->size(), 18u);
  for (const NvLink& l : *links) {
    EXPECT_EQ(l.remote, NvLink::Remote::kSwitch) << l.link;
    EXPECT_FALSE(l.remote_gpu.has_value());
  }
  // Every GPU reaches every other through the switches, over all 18 links.
  auto peers = c.NvLinkPeers(2);
  ASSERT_TRUE(peers.ok()) << peers.status().ToString();
  ASSERT_EQ(peers->size(), 7u);
  for (const NvLinkPeer& p : *peers) {
    EXPECT_NE(p.gpu, 2u);
    EXPECT_EQ(p.links, 18u);
    EXPECT_TRUE(p.via_switch);
  }
}

TEST_F(TopologyNvmlTest, H100NvlPairsAreBridged) {
  Client& c = Open("h100-nvl-8");
  ASSERT_NE(client_, nullptr);
  // Each card on its own root port: NODE within a socket, SYS across.
  EXPECT_EQ(c.CommonAncestor(0, 1).value(), TopologyLevel::kNode);
  EXPECT_EQ(c.CommonAncestor(2, 3).value(), TopologyLevel::kNode);
  EXPECT_EQ(c.CommonAncestor(3, 4).value(), TopologyLevel::kSystem);

  auto gpus = c.Gpus();
  ASSERT_TRUE(gpus.ok());
  auto links = c.NvLinks(2);
  ASSERT_TRUE(links.ok()) << links.status().ToString();
  ASSERT_EQ(links->size(), 12u);
  for (const NvLink& l : *links) {
    EXPECT_EQ(l.remote, NvLink::Remote::kGpu);
    EXPECT_EQ(l.remote_gpu, 3u);
    EXPECT_EQ(l.remote_bus_id, (*gpus)[3].pci.bus_id);
  }
  auto peers = c.NvLinkPeers(5);
  ASSERT_TRUE(peers.ok());
  ASSERT_EQ(peers->size(), 1u);
  EXPECT_EQ((*peers)[0], (NvLinkPeer{4, 12, false}));
}

TEST_F(TopologyNvmlTest, PcieOnlyGpusHaveNoNvLinks) {
  Client& c = Open("l40s-4");
  ASSERT_NE(client_, nullptr);
  auto links = c.NvLinks(1);
  ASSERT_TRUE(links.ok()) << links.status().ToString();
  EXPECT_TRUE(links->empty());
  EXPECT_TRUE(c.NvLinkPeers(1)->empty());
  EXPECT_EQ(c.CommonAncestor(2, 3).value(), TopologyLevel::kSingle);
  EXPECT_EQ(c.CommonAncestor(9, 3).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c.NvLinkPeers(9).status().code(), StatusCode::kNotFound);
}

TEST_F(TopologyNvmlTest, HealthyGpuAnswersWithNothingPending) {
  Client& c = Open("dgx-a100");
  ASSERT_NE(client_, nullptr);
  auto h = c.ReadHealth(3);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_TRUE(h->responds);
  EXPECT_EQ(h->recovery_action, RecoveryAction::kNone);
  EXPECT_EQ(h->ecc_dbe_volatile, 0u);
  EXPECT_EQ(h->remapped_rows_pending, false);
  EXPECT_EQ(c.ReadHealth(8).status().code(), StatusCode::kNotFound);
}

// The pure peer computation: switch links pair up per switch, direct links count.
TEST(NvLinkPeersFromLinksTest, SharesPerSwitchAndCountsDirectLinks) {
  auto sw = [](unsigned link, const char* bus) {
    return NvLink{link, bus, NvLink::Remote::kSwitch, std::nullopt};
  };
  auto gpu = [](unsigned link, unsigned to) { return NvLink{link, "x", NvLink::Remote::kGpu, to}; };
  std::vector<std::vector<NvLink>> links = {
      {sw(0, "A"), sw(1, "A"), sw(2, "B"), gpu(3, 2)},  // GPU 0
      {sw(0, "A"), sw(1, "B"), sw(2, "B")},             // GPU 1
      {gpu(0, 0)},                                      // GPU 2
      {},                                               // GPU 3: none
  };
  auto p0 = NvLinkPeersFromLinks(0, links);
  ASSERT_EQ(p0.size(), 2u);
  EXPECT_EQ(p0[0], (NvLinkPeer{1, 2, true}));  // min(2,1) on A + min(1,2) on B
  EXPECT_EQ(p0[1], (NvLinkPeer{2, 1, false}));
  EXPECT_TRUE(NvLinkPeersFromLinks(3, links).empty());
  EXPECT_TRUE(NvLinkPeersFromLinks(7, links).empty());
}

}  // namespace
}  // namespace gpuop::nvml

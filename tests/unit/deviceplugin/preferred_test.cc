// GetPreferredAllocation's choice: topology-aware for whole GPUs (on the
// simulator's partial-NVLink machine, h100-nvl-8, built here by hand), and
// distributed or packed for shared devices.
#include "deviceplugin/preferred.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuop::deviceplugin {
namespace {

using nvml::TopologyLevel;
using Ids = std::vector<std::string>;

// 8 H100 NVL cards: NVLink bridges 0-1, 2-3, 4-5, 6-7 (12 links each); each
// on its own root port; GPUs 0-3 on NUMA node 0, 4-7 on node 1.
Topology NvlPairs() {
  Topology t(8);
  for (unsigned a = 0; a < 8; ++a) {
    t.SetNumaNode(a, a < 4 ? 0 : 1);
    for (unsigned b = a + 1; b < 8; ++b) {
      t.SetLevel(a, b, (a < 4) == (b < 4) ? TopologyLevel::kNode : TopologyLevel::kSystem);
    }
  }
  for (unsigned a = 0; a < 8; a += 2) t.SetNvLinks(a, a + 1, 12);
  return t;
}

std::string Id(unsigned gpu) { return "GPU-" + std::to_string(gpu); }

std::vector<DeviceRef> Whole(const std::vector<unsigned>& gpus) {
  std::vector<DeviceRef> out;
  for (unsigned g : gpus) out.push_back({Id(g), g, Id(g), false, 1});
  return out;
}

Ids Pick(const Topology& t, const std::vector<DeviceRef>& avail, const Ids& must, int size,
         SharedPolicy p = SharedPolicy::kDistributed) {
  auto r = PreferredAllocation(t, avail, must, size, p);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Ids{};
}

TEST(DpPreferredTest, TwoGpusGetAnNvLinkPair) {
  Topology t = NvlPairs();
  EXPECT_EQ(Pick(t, Whole({0, 1, 2, 3, 4, 5, 6, 7}), {}, 2), (Ids{Id(0), Id(1)}));
  // PCIe alone ties 1-2, 1-3 and 2-3; the bridge decides.
  EXPECT_EQ(Pick(t, Whole({1, 2, 3, 4}), {}, 2), (Ids{Id(2), Id(3)}));
  // Two bridged pairs left: take the one that keeps 1, 2, 3 together on node 0.
  EXPECT_EQ(Pick(t, Whole({1, 2, 3, 4, 5}), {}, 2), (Ids{Id(4), Id(5)}));
  EXPECT_EQ(Pick(t, Whole({0, 3, 5, 6, 7}), {}, 2), (Ids{Id(6), Id(7)}));
  // No pair left: two on one NUMA node beat two across.
  EXPECT_EQ(Pick(t, Whole({1, 3, 4}), {}, 2), (Ids{Id(1), Id(3)}));
}

TEST(DpPreferredTest, FourGpusGetTwoPairsOnOneNumaNode) {
  Topology t = NvlPairs();
  EXPECT_EQ(Pick(t, Whole({0, 1, 2, 3, 4, 5, 6, 7}), {}, 4), (Ids{Id(0), Id(1), Id(2), Id(3)}));
  // Node 0 has one pair left: node 1's two pairs win over pairs across nodes.
  EXPECT_EQ(Pick(t, Whole({0, 1, 3, 4, 5, 6, 7}), {}, 4), (Ids{Id(4), Id(5), Id(6), Id(7)}));
}

TEST(DpPreferredTest, OneGpuLeavesPairsWhole) {
  Topology t = NvlPairs();
  // GPU 4's partner is taken: giving 4 keeps the 0-1 pair for a later pod.
  EXPECT_EQ(Pick(t, Whole({0, 1, 4}), {}, 1), (Ids{Id(4)}));
}

TEST(DpPreferredTest, MustIncludeIsKeptAndBuiltAround) {
  Topology t = NvlPairs();
  EXPECT_EQ(Pick(t, Whole({0, 1, 2, 3, 4, 5, 6, 7}), {Id(5)}, 2), (Ids{Id(4), Id(5)}));
  EXPECT_EQ(Pick(t, Whole({0, 1, 2, 3, 4, 5, 6, 7}), {Id(6), Id(6)}, 2), (Ids{Id(6), Id(7)}));
  EXPECT_EQ(Pick(t, Whole({0, 1, 2, 3, 5, 6, 7}), {Id(6)}, 3), (Ids{Id(5), Id(6), Id(7)}));
  EXPECT_EQ(Pick(t, Whole({0, 1, 2}), {Id(2), Id(0)}, 2), (Ids{Id(0), Id(2)}));
}

TEST(DpPreferredTest, RejectsImpossibleRequests) {
  Topology t = NvlPairs();
  auto avail = Whole({0, 1, 2});
  auto r = PreferredAllocation(t, avail, {Id(0), Id(1)}, 1, SharedPolicy::kDistributed);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("smaller than the 2 must-include"), std::string::npos);
  r = PreferredAllocation(t, avail, {Id(7)}, 2, SharedPolicy::kDistributed);
  EXPECT_NE(r.status().message().find("\"GPU-7\" is not among the 3 available"), std::string::npos);
  r = PreferredAllocation(t, avail, {}, 4, SharedPolicy::kDistributed);
  EXPECT_NE(r.status().message().find("4 devices requested but only 3"), std::string::npos);
  r = PreferredAllocation(t, avail, {}, 0, SharedPolicy::kDistributed);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(DpPreferredTest, LargeMachinesAreChosenGreedily) {
  // 32 GPUs in NVLink pairs: too many sets to try them all.
  Topology t(32);
  for (unsigned a = 0; a < 32; a += 2) t.SetNvLinks(a, a + 1, 4);
  std::vector<unsigned> all;
  for (unsigned g = 3; g < 32; ++g) all.push_back(g);
  Ids got = Pick(t, Whole(all), {}, 8);
  ASSERT_EQ(got.size(), 8u);
  // Four whole pairs.
  EXPECT_EQ(got, (Ids{Id(4), Id(5), Id(6), Id(7), Id(8), Id(9), Id(10), Id(11)}));
}

// Replicas "<uuid>::<n>" of units; `taken` replicas of each unit are not offered.
std::vector<DeviceRef> Replicas(const std::vector<std::pair<unsigned, unsigned>>& offered,
                                unsigned per_unit) {
  std::vector<DeviceRef> out;
  for (auto [gpu, count] : offered) {
    for (unsigned n = per_unit - count; n < per_unit; ++n) {
      out.push_back({Id(gpu) + "::" + std::to_string(n), gpu, Id(gpu), true, per_unit});
    }
  }
  return out;
}

TEST(DpPreferredTest, DistributedSpreadsOverLeastUsedUnits) {
  Topology t = NvlPairs();
  // GPU 0 offers 4 of 4 replicas, GPU 1 offers 2 (2 taken), GPU 2 offers 3 (1 taken).
  auto avail = Replicas({{0, 4}, {1, 2}, {2, 3}}, 4);
  EXPECT_EQ(Pick(t, avail, {}, 1), (Ids{"GPU-0::0"}));
  EXPECT_EQ(Pick(t, avail, {}, 3), (Ids{"GPU-0::0", "GPU-0::1", "GPU-2::1"}));
  // A must-include replica counts as taken on its unit.
  auto fresh = Replicas({{0, 4}, {2, 4}}, 4);
  EXPECT_EQ(Pick(t, fresh, {"GPU-0::3"}, 2), (Ids{"GPU-0::3", "GPU-2::0"}));
}

TEST(DpPreferredTest, PackedFillsTheBusiestUnitFirst) {
  Topology t = NvlPairs();
  auto avail = Replicas({{0, 4}, {1, 2}, {2, 3}}, 4);
  EXPECT_EQ(Pick(t, avail, {}, 1, SharedPolicy::kPacked), (Ids{"GPU-1::2"}));
  EXPECT_EQ(Pick(t, avail, {}, 3, SharedPolicy::kPacked),
            (Ids{"GPU-1::2", "GPU-1::3", "GPU-2::1"}));
}

TEST(DpPreferredTest, ReplicaIdsSortNumerically) {
  Topology t(1);
  auto avail = Replicas({{0, 12}}, 12);
  EXPECT_EQ(Pick(t, avail, {}, 3), (Ids{"GPU-0::0", "GPU-0::1", "GPU-0::2"}));
  avail.erase(avail.begin(), avail.begin() + 9);  // ::9, ::10, ::11 left
  EXPECT_EQ(Pick(t, avail, {}, 2), (Ids{"GPU-0::9", "GPU-0::10"}));
}

TEST(DpPreferredTest, MigDevicesAreUnitsOfTheirOwn) {
  Topology t = NvlPairs();
  std::vector<DeviceRef> avail = {{"MIG-a", 0, "MIG-a", true, 1},
                                  {"MIG-b", 0, "MIG-b", true, 1},
                                  {"MIG-c", 1, "MIG-c", true, 1}};
  EXPECT_EQ(Pick(t, avail, {}, 2), (Ids{"MIG-a", "MIG-b"}));
  EXPECT_EQ(Pick(t, avail, {"MIG-c"}, 1), (Ids{"MIG-c"}));
}

TEST(DpPreferredTest, ParsesThePolicyName) {
  EXPECT_EQ(ParseSharedPolicy("packed").value(), SharedPolicy::kPacked);
  EXPECT_EQ(ParseSharedPolicy("distributed").value(), SharedPolicy::kDistributed);
  EXPECT_EQ(ParseSharedPolicy("").value(), SharedPolicy::kDistributed);
  auto bad = ParseSharedPolicy("spread");
  EXPECT_NE(bad.status().message().find("\"spread\" is not valid"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::deviceplugin

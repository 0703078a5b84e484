// The pure core of node discovery: sysfs ids → NFD PCI labels, and the label
// diff that touches only the keys it manages.
#include "discovery/pci.h"

#include <gtest/gtest.h>

namespace gpuop::discovery {
namespace {

const std::string kPlain = "feature.node.kubernetes.io/pci-10de.present";
const std::string k3d = "feature.node.kubernetes.io/pci-0302_10de.present";
const std::string kVga = "feature.node.kubernetes.io/pci-0300_10de.present";

TEST(NodeDiscoveryPciTest, ParsesSysfsIds) {
  EXPECT_EQ(ParsePciVendor("0x10de\n").value(), 0x10de);
  EXPECT_EQ(ParsePciVendor("0x1A03").value(), 0x1a03);
  EXPECT_EQ(ParsePciClass("0x030200\n").value(), 0x030200u);
  EXPECT_EQ(ParsePciClass("068000").value(), 0x068000u);
  for (const char* bad : {"", "0x", "nvidia", "0x10de0", "0x10de zz"}) {
    auto r = ParsePciVendor(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(ParsePciClass("0x1000000").ok());  // more than 24 bits
  EXPECT_NE(ParsePciClass("zz").status().message().find("\"zz\""), std::string::npos);
}

TEST(NodeDiscoveryPciTest, DataCentreGpuIsA3dController) {
  // H100 SXM: 3D controller.
  Labels l = NvidiaPciLabels({{"0000:18:00.0", 0x10de, 0x030200}});
  EXPECT_EQ(l, (Labels{{kPlain, "true"}, {k3d, "true"}}));
  EXPECT_EQ(ClassVendorLabel(0x030200, 0x10de), k3d);
}

TEST(NodeDiscoveryPciTest, WorkstationGpuIsAVgaController) {
  Labels l = NvidiaPciLabels({{"0000:01:00.0", 0x10de, 0x030000}});
  EXPECT_EQ(l, (Labels{{kPlain, "true"}, {kVga, "true"}}));
}

TEST(NodeDiscoveryPciTest, MixedNodeGetsBothClassLabelsOnce) {
  Labels l = NvidiaPciLabels({{"0000:01:00.0", 0x10de, 0x030000},
                              {"0000:02:00.0", 0x10de, 0x030200},
                              {"0000:03:00.0", 0x10de, 0x030200}});
  EXPECT_EQ(l, (Labels{{kPlain, "true"}, {k3d, "true"}, {kVga, "true"}}));
}

TEST(NodeDiscoveryPciTest, NvSwitchAloneIsNoGpu) {
  // A bridge (0x0680) is in neither NFD whitelist: no label at all, as NFD.
  EXPECT_TRUE(NvidiaPciLabels({{"0000:05:00.0", 0x10de, 0x068000}}).empty());
  // ... and with a GPU beside it, only the GPU's labels.
  Labels l =
      NvidiaPciLabels({{"0000:05:00.0", 0x10de, 0x068000}, {"0000:18:00.0", 0x10de, 0x030200}});
  EXPECT_EQ(l, (Labels{{kPlain, "true"}, {k3d, "true"}}));
}

TEST(NodeDiscoveryPciTest, OtherNfdDefaultClassesGetOnlyTheClassLabel) {
  // 0x0380 (display, other) and 0x1200 (accelerator) are in NFD's default
  // whitelist but not the GPU Operator chart's: the class label only.
  EXPECT_EQ(NvidiaPciLabels({{"a", 0x10de, 0x038000}}),
            (Labels{{"feature.node.kubernetes.io/pci-0380_10de.present", "true"}}));
  EXPECT_EQ(NvidiaPciLabels({{"a", 0x10de, 0x120000}}),
            (Labels{{"feature.node.kubernetes.io/pci-1200_10de.present", "true"}}));
}

TEST(NodeDiscoveryPciTest, NoNvidiaDeviceNoLabels) {
  // A server's usual devices: host bridge, ASPEED BMC (a VGA controller too),
  // Mellanox and Intel NICs.
  EXPECT_TRUE(NvidiaPciLabels({{"0000:00:00.0", 0x8086, 0x060000},
                               {"0000:03:00.0", 0x1a03, 0x030000},
                               {"0000:0c:00.0", 0x15b3, 0x020700},
                               {"0000:4b:00.0", 0x8086, 0x020000}})
                  .empty());
  EXPECT_TRUE(NvidiaPciLabels({}).empty());
}

TEST(NodeDiscoveryPciTest, ManagedKeysAreOnlyWhatItCanProduce) {
  EXPECT_TRUE(IsManagedLabel(kPlain));
  EXPECT_TRUE(IsManagedLabel(k3d));
  EXPECT_TRUE(IsManagedLabel(kVga));
  EXPECT_TRUE(IsManagedLabel("feature.node.kubernetes.io/pci-0b40_10de.present"));
  EXPECT_FALSE(IsManagedLabel("feature.node.kubernetes.io/pci-0200_10de.present"));  // NIC class
  EXPECT_FALSE(IsManagedLabel("feature.node.kubernetes.io/pci-0300_1a03.present"));  // ASPEED
  EXPECT_FALSE(IsManagedLabel("feature.node.kubernetes.io/pci-15b3.present"));
  EXPECT_FALSE(IsManagedLabel("feature.node.kubernetes.io/pci-0302_10de.sriov.capable"));
  EXPECT_FALSE(IsManagedLabel("feature.node.kubernetes.io/pci-0302_10DE.present"));
  EXPECT_FALSE(IsManagedLabel("nvidia.com/gpu.present"));
}

TEST(NodeDiscoveryPciTest, PlanSetsMissingAndRemovesOnlyManagedKeys) {
  const Labels wanted = {{kPlain, "true"}, {k3d, "true"}};
  Labels current = {{"kubernetes.io/hostname", "n1"},
                    {"nvidia.com/gpu.present", "true"},
                    {"feature.node.kubernetes.io/pci-0200_10de.present", "true"},
                    {kPlain, "false"},
                    {kVga, "true"}};
  LabelChanges c = PlanLabelChanges(current, wanted);
  EXPECT_EQ(c, (LabelChanges{{kPlain, "true"}, {k3d, "true"}, {kVga, std::nullopt}}));

  current = {{"a", "b"}, {kPlain, "true"}, {k3d, "true"}};
  EXPECT_TRUE(PlanLabelChanges(current, wanted).empty());

  // The GPU gone: its keys go, nothing else.
  EXPECT_EQ(PlanLabelChanges(current, {}),
            (LabelChanges{{kPlain, std::nullopt}, {k3d, std::nullopt}}));
}

TEST(NodeDiscoveryPciTest, PatchIsAMergePatchWithNullsForRemovals) {
  nlohmann::json p = LabelPatch({{kPlain, "true"}, {kVga, std::nullopt}});
  EXPECT_EQ(p, nlohmann::json::parse(R"({"metadata":{"labels":{
      "feature.node.kubernetes.io/pci-10de.present":"true",
      "feature.node.kubernetes.io/pci-0300_10de.present":null}}})"));
}

}  // namespace
}  // namespace gpuop::discovery

#include "discovery/system.h"

#include <gtest/gtest.h>

#include "discovery/pci.h"

namespace gpuop::discovery {
namespace {

constexpr const char* kUbuntu =
    "PRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\n"
    "VERSION=\"22.04.4 LTS (Jammy Jellyfish)\"\nID=ubuntu\nID_LIKE=debian\n";

TEST(SystemLabelsTest, OsReleaseAndKernelAsNfdNamesThem) {
  Labels l = SystemLabels(kUbuntu, "5.15.0-105-generic");
  const std::string p = "feature.node.kubernetes.io/";
  EXPECT_EQ(l[p + "system-os_release.ID"], "ubuntu");
  EXPECT_EQ(l[p + "system-os_release.VERSION_ID"], "22.04");
  EXPECT_EQ(l[p + "system-os_release.VERSION_ID.major"], "22");
  EXPECT_EQ(l[p + "system-os_release.VERSION_ID.minor"], "04");
  EXPECT_EQ(l[p + "kernel-version.full"], "5.15.0-105-generic");
  EXPECT_EQ(l[p + "kernel-version.major"], "5");
  EXPECT_EQ(l[p + "kernel-version.minor"], "15");
  EXPECT_EQ(l[p + "kernel-version.revision"], "0");
  EXPECT_EQ(l.size(), 8u);
}

TEST(SystemLabelsTest, RhelSingleQuotesAndInvalidValuesLeftOut) {
  Labels l = SystemLabels("ID='rhel'\nVERSION_ID='9.4'\n", "");
  EXPECT_EQ(l["feature.node.kubernetes.io/system-os_release.ID"], "rhel");
  EXPECT_EQ(l["feature.node.kubernetes.io/system-os_release.VERSION_ID.minor"], "4");
  EXPECT_EQ(l.count("feature.node.kubernetes.io/kernel-version.full"), 0u);
  // A value a label cannot hold is not written.
  EXPECT_TRUE(SystemLabels("ID=\"my os\"\n", "").empty());
  EXPECT_TRUE(SystemLabels("", "").empty());
}

TEST(SystemLabelsTest, ManagedSoRemovedWithNodeDiscovery) {
  EXPECT_TRUE(IsSystemLabel("feature.node.kubernetes.io/kernel-version.full"));
  EXPECT_TRUE(IsManagedLabel("feature.node.kubernetes.io/system-os_release.ID"));
  EXPECT_FALSE(IsSystemLabel("feature.node.kubernetes.io/system-os_release.NAME"));
  EXPECT_FALSE(IsSystemLabel("kernel-version.full"));
}

}  // namespace
}  // namespace gpuop::discovery

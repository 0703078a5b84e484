#include "host/mig_minors.h"

#include <gtest/gtest.h>

#include "sim/host/host_root.h"

namespace gpuop::host {
namespace {

TEST(MigMinorsTest, ParsesGiAndCiEntries) {
  auto m = ParseMigMinors(
      "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
      "gpu7/gi14/ci7/access 4000\n",
      "mig-minors");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->size(), 3u);
  EXPECT_EQ(m->Gi(0, 1), 12u);
  EXPECT_EQ(m->Ci(0, 1, 0), 13u);
  EXPECT_EQ(m->Ci(7, 14, 7), 4000u);
  EXPECT_FALSE(m->Gi(0, 2).has_value());
  EXPECT_FALSE(m->Ci(0, 1, 1).has_value());
}

// The simulator's table (written like the kernel module's) reads back whole.
TEST(MigMinorsTest, ReadsTheSimulatedKernelTable) {
  auto m = ParseMigMinors(sim::MigMinorsFileContent(), "sim");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->size(), sim::kMigCapGpus * sim::kMigCapGisPerGpu * (1 + sim::kMigCapCisPerGi));
  EXPECT_EQ(m->Gi(3, 5), sim::MigGiCapMinor(3, 5));
  EXPECT_EQ(m->Ci(3, 5, 2), sim::MigCiCapMinor(3, 5, 2));
}

TEST(MigMinorsTest, RejectsMalformedLinesNamingThem) {
  for (const char* text :
       {"gpu0/gi1/access\n", "gpu0/gi1/access x\n", "gpuX/gi1/access 3\n", "gpu0/gi1/ci/access 3\n",
        "gpu0/gi1/bogus 3\n", "gpu0 3\n", "gpu0/gi1/ci0/x/access 3\n"}) {
    auto m =
        ParseMigMinors(std::string("config 1\n") + text, "/proc/driver/nvidia-caps/mig-minors");
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_NE(m.status().message().find("/proc/driver/nvidia-caps/mig-minors line 2"),
              std::string::npos)
        << m.status().message();
  }
}

}  // namespace
}  // namespace gpuop::host

#include "host/driver_ready.h"

#include <gtest/gtest.h>

#include "base/files.h"
#include "tests/unit/host/test_util.h"

namespace gpuop::host {
namespace {

TEST(DriverReadyTest, ParsesAHostDriver) {
  auto d = ParseDriverReady(
      "IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=/host\n"
      "NVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=/host\n");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->host_driver);
  EXPECT_EQ(d->driver_root, "/");
  EXPECT_EQ(d->dev_root, "/");
}

TEST(DriverReadyTest, ParsesAContainerDriverWithQuotesAndComments) {
  auto d = ParseDriverReady(
      "# written by the validator\n\nIS_HOST_DRIVER=false\n"
      "NVIDIA_DRIVER_ROOT=\"/run/nvidia/driver\"\nNVIDIA_DEV_ROOT='/'\nSOMETHING_NEW=1\n");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->host_driver);
  EXPECT_EQ(d->driver_root, "/run/nvidia/driver");
  EXPECT_EQ(d->dev_root, "/");
}

TEST(DriverReadyTest, DevRootDefaultsToTheDriverRoot) {
  auto d = ParseDriverReady("NVIDIA_DRIVER_ROOT=/run/nvidia/driver\n");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->dev_root, "/run/nvidia/driver");
}

TEST(DriverReadyTest, RefusesAMissingOrRelativeRoot) {
  for (const char* text : {"IS_HOST_DRIVER=true\n", "NVIDIA_DRIVER_ROOT=\n",
                           "NVIDIA_DRIVER_ROOT=run/nvidia/driver\n", "garbage"}) {
    auto d = ParseDriverReady(text);
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_NE(d.status().message().find("NVIDIA_DRIVER_ROOT"), std::string::npos);
  }
}

TEST(DriverReadyTest, ReadsUnderARootAndSaysWhenAbsent) {
  testing::TempDir dir;
  auto none = ReadDriverReady(dir.path(), "/run/nvidia/validations");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());

  ASSERT_TRUE(MakeDirs(dir.path() + "/run/nvidia/validations").ok());
  const std::string file = dir.path() + "/run/nvidia/validations/driver-ready";
  ASSERT_TRUE(WriteFileAtomic(file, "IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\n").ok());
  auto some = ReadDriverReady(dir.path(), "/run/nvidia/validations");
  ASSERT_TRUE(some.ok()) << some.status().ToString();
  ASSERT_TRUE(some->has_value());
  EXPECT_EQ((*some)->driver_root, "/");

  // A broken file names itself and the fix.
  ASSERT_TRUE(WriteFileAtomic(file, "NVIDIA_DRIVER_ROOT=relative\n").ok());
  auto bad = ReadDriverReady(dir.path(), "/run/nvidia/validations");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(file), std::string::npos);
  EXPECT_NE(bad.status().message().find("delete it"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::host

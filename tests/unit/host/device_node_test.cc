#include "host/device_node.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/files.h"
#include "tests/unit/host/test_util.h"

namespace gpuop::host {
namespace {

TEST(DeviceNodeTest, StatsARealCharacterDevice) {
  auto n = StatDeviceNode("/dev/null");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->type, 'c');
  EXPECT_EQ(n->major, 1u);
  EXPECT_EQ(n->minor, 3u);
  EXPECT_EQ(n->mode, 0666u);
  EXPECT_TRUE(n->WorldReadWrite());
}

TEST(DeviceNodeTest, ReadsModeAndGroupOfAMadeNode) {
  testing::TempDir tmp;
  const std::string path = tmp.path() + "/card1";
  if (::mknod(path.c_str(), S_IFCHR | 0660, makedev(226, 1)) != 0) {
    if (testing::InCi()) FAIL() << "CI runs as root and must be able to mknod";
    GTEST_SKIP() << "mknod is not permitted here (not root)";
  }
  ASSERT_EQ(::chmod(path.c_str(), 0660), 0);
  ASSERT_EQ(::chown(path.c_str(), 0, 44), 0);
  auto n = StatDeviceNode(path);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->major, 226u);
  EXPECT_EQ(n->minor, 1u);
  EXPECT_EQ(n->mode, 0660u);
  EXPECT_EQ(n->gid, 44u);
  EXPECT_FALSE(n->WorldReadWrite());
}

TEST(DeviceNodeTest, MissingAndPlainFilesAreErrorsNamingThePath) {
  testing::TempDir tmp;
  auto missing = StatDeviceNode(tmp.path() + "/dev/nvidiactl");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/dev/nvidiactl"), std::string::npos);

  ASSERT_TRUE(WriteFileAtomic(tmp.path() + "/nvidia0", "").ok());
  auto plain = StatDeviceNode(tmp.path() + "/nvidia0");
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plain.status().message().find("is not a device node"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::host

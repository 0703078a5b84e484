// Driver file discovery on hand-made driver roots: through a real ld.so.cache,
// through the standard directories, and the errors for a root without
// libraries and a corrupt cache.
#include "host/driver_files.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "base/files.h"
#include "sim/host/elf_stub.h"
#include "tests/unit/host/test_util.h"

namespace gpuop::host {
namespace {

constexpr const char* kV = "570.172.08";

class DriverFilesTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = tmp_.path(); }

  void File(const std::string& path, const std::string& content = "x", mode_t mode = 0644) {
    ASSERT_TRUE(MakeDirs(DirName(root_ + path)).ok());
    ASSERT_TRUE(WriteFileAtomic(root_ + path, content, mode).ok());
  }
  void Lib(const std::string& dir, const std::string& file, const std::string& soname) {
    auto m = sim::HostElfMachine();
    ASSERT_TRUE(m.ok());
    File(dir + "/" + file, sim::BuildElfSharedObject(soname, *m), 0755);
  }
  // The libraries a driver install has in `dir`.
  void DriverLibs(const std::string& dir) {
    Lib(dir, std::string("libcuda.so.") + kV, "libcuda.so.1");
    Lib(dir, std::string("libnvidia-ml.so.") + kV, "libnvidia-ml.so.1");
    Lib(dir, std::string("libnvidia-ptxjitcompiler.so.") + kV, "libnvidia-ptxjitcompiler.so.1");
    Lib(dir, "libnvidia-nvvm70.so.4", "libnvidia-nvvm70.so.4");
    Lib(dir + "/vdpau", std::string("libvdpau_nvidia.so.") + kV, "libvdpau_nvidia.so.1");
    Lib(dir, "libunrelated.so.1", "libunrelated.so.1");
    Lib(dir, "libnvidia-ml.so.535.1", "libnvidia-ml.so.1");  // another driver version
  }

  testing::TempDir tmp_;
  std::string root_;
};

TEST_F(DriverFilesTest, FindsLibrariesThroughARealLdCache) {
  const std::string ldconfig = testing::FindTool("ldconfig");
  if (ldconfig.empty()) {
    if (testing::InCi()) FAIL() << "ldconfig is required in CI";
    GTEST_SKIP() << "ldconfig is not installed";
  }
  // A directory no standard search would look in: only the cache finds it.
  DriverLibs("/opt/nvidia/lib");
  File("/etc/ld.so.conf", "/opt/nvidia/lib\n");
  ASSERT_EQ(std::system((ldconfig + " -r " + root_ + " 2>/dev/null").c_str()), 0);

  auto libs = FindDriverLibraries(root_, kV, "/run/nvidia/driver");
  ASSERT_TRUE(libs.ok()) << libs.status().ToString();
  EXPECT_TRUE(libs->from_ld_cache);
  EXPECT_EQ(libs->libcuda_dir, "/opt/nvidia/lib");
  const std::vector<std::string> want = {
      "/opt/nvidia/lib/libcuda.so.570.172.08",
      "/opt/nvidia/lib/libnvidia-ml.so.570.172.08",
      "/opt/nvidia/lib/libnvidia-nvvm70.so.4",
      "/opt/nvidia/lib/libnvidia-ptxjitcompiler.so.570.172.08",
      "/opt/nvidia/lib/vdpau/libvdpau_nvidia.so.570.172.08",
  };
  EXPECT_EQ(libs->paths, want);
}

TEST_F(DriverFilesTest, FallsBackToTheStandardDirectories) {
  DriverLibs("/usr/lib64");
  auto libs = FindDriverLibraries(root_, kV, "/");
  ASSERT_TRUE(libs.ok()) << libs.status().ToString();
  EXPECT_FALSE(libs->from_ld_cache);
  EXPECT_EQ(libs->libcuda_dir, "/usr/lib64");
  EXPECT_EQ(libs->paths.size(), 5u);
}

TEST_F(DriverFilesTest, NoLibrariesNamesTheRootAndVersion) {
  Lib("/usr/lib64", "libnvidia-ml.so.535.1", "libnvidia-ml.so.1");
  auto libs = FindDriverLibraries(root_, kV, "/run/nvidia/driver");
  ASSERT_FALSE(libs.ok());
  EXPECT_EQ(libs.status().code(), StatusCode::kNotFound);
  const std::string& m = libs.status().message();
  EXPECT_NE(m.find("driver version 570.172.08"), std::string::npos) << m;
  EXPECT_NE(m.find("driver root /run/nvidia/driver"), std::string::npos) << m;
  EXPECT_NE(m.find("--driver-root"), std::string::npos) << m;
}

TEST_F(DriverFilesTest, ACorruptLdCacheIsAnErrorNamingIt) {
  DriverLibs("/usr/lib64");
  File("/etc/ld.so.cache", "glibc-ld.so.cache1.1 truncated");
  auto libs = FindDriverLibraries(root_, kV, "/");
  ASSERT_FALSE(libs.ok());
  EXPECT_NE(libs.status().message().find(root_ + "/etc/ld.so.cache is not a valid ld.so.cache"),
            std::string::npos)
      << libs.status().message();
}

TEST_F(DriverFilesTest, FindsBinariesFirmwareAndSockets) {
  File("/usr/bin/nvidia-smi", "#!/bin/sh\n", 0755);
  File("/usr/sbin/nvidia-persistenced", "#!/bin/sh\n", 0755);
  File("/bin/nvidia-persistenced", "#!/bin/sh\n", 0755);  // shadowed by /usr/sbin
  File(std::string("/lib/firmware/nvidia/") + kV + "/gsp_tu10x.bin");
  File(std::string("/lib/firmware/nvidia/") + kV + "/gsp_ga10x.bin");
  File(std::string("/lib/firmware/nvidia/") + kV + "/README");
  File("/lib/firmware/nvidia/535.1/gsp_ga10x.bin");
  ASSERT_TRUE(MakeDirs(root_ + "/var/run/nvidia-persistenced").ok());
  File("/var/run/nvidia-persistenced/socket");
  ASSERT_TRUE(MakeDirs(root_ + "/tmp/nvidia-mps").ok());

  EXPECT_EQ(FindDriverBinaries(root_),
            (std::vector<std::string>{"/usr/bin/nvidia-smi", "/usr/sbin/nvidia-persistenced"}));
  EXPECT_EQ(FindGspFirmware(root_, kV),
            (std::vector<std::string>{"/lib/firmware/nvidia/570.172.08/gsp_ga10x.bin",
                                      "/lib/firmware/nvidia/570.172.08/gsp_tu10x.bin"}));
  EXPECT_EQ(FindIpcSockets(root_),
            (std::vector<std::string>{"/var/run/nvidia-persistenced/socket", "/tmp/nvidia-mps"}));
}

TEST(DirNameTest, Cases) {
  EXPECT_EQ(DirName("/a/b/c"), "/a/b");
  EXPECT_EQ(DirName("/c"), "/");
  EXPECT_EQ(DirName("c"), ".");
}

}  // namespace
}  // namespace gpuop::host

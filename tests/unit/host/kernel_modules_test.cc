#include "host/kernel_modules.h"

#include <gtest/gtest.h>

#include "base/files.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::host {
namespace {

// /proc/modules of a node with the 550 driver loaded and one CUDA process
// (nvidia_uvm in use), taken from a real machine's format.
constexpr const char* kLoaded =
    "nvidia_uvm 1437696 1 - Live 0x0000000000000000 (POE)\n"
    "nvidia_drm 77824 0 - Live 0x0000000000000000 (POE)\n"
    "nvidia_modeset 1306624 1 nvidia_drm, Live 0x0000000000000000 (POE)\n"
    "nvidia 56717312 3 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n"
    "video 65536 2 nvidia_modeset,i915, Live 0x0000000000000000\n"
    "ext4 1011712 2 - Live 0x0000000000000000\n";

TEST(ParseProcModulesTest, ReadsNamesRefcountsAndUsers) {
  auto mods = ParseProcModules(kLoaded, "/proc/modules");
  ASSERT_TRUE(mods.ok()) << mods.status().ToString();
  ASSERT_EQ(mods->size(), 6u);
  EXPECT_EQ((*mods)[0], (KernelModule{"nvidia_uvm", 1, {}}));
  EXPECT_EQ((*mods)[2], (KernelModule{"nvidia_modeset", 1, {"nvidia_drm"}}));
  EXPECT_EQ((*mods)[3], (KernelModule{"nvidia", 3, {"nvidia_uvm", "nvidia_modeset"}}));
  const KernelModule* nvidia = FindModule(*mods, "nvidia");
  ASSERT_NE(nvidia, nullptr);
  EXPECT_EQ(nvidia->refcount, 3);
  EXPECT_EQ(FindModule(*mods, "nvidia_peermem"), nullptr);
}

TEST(ParseProcModulesTest, EmptyFileAndBlankLinesAreNoModules) {
  auto none = ParseProcModules("", "/proc/modules");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto one = ParseProcModules("\nloop 32768 0 - Live 0x0\n\n", "/proc/modules");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].name, "loop");
}

TEST(ParseProcModulesTest, BadLinesNameTheFileLineAndExpectedFormat) {
  auto short_line =
      ParseProcModules("ext4 1011712 2 - Live 0x0\nnvidia 56717312\n", "/h/proc/modules");
  ASSERT_FALSE(short_line.ok());
  EXPECT_EQ(short_line.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_line.status().message().find("/h/proc/modules:2"), std::string::npos)
      << short_line.status().message();
  EXPECT_NE(short_line.status().message().find("too few fields"), std::string::npos);
  EXPECT_NE(short_line.status().message().find("name size refcount deps state address"),
            std::string::npos);

  auto bad_count = ParseProcModules("nvidia 56717312 many - Live 0x0\n", "/proc/modules");
  ASSERT_FALSE(bad_count.ok());
  EXPECT_NE(bad_count.status().message().find("refcount \"many\" is not a count"),
            std::string::npos)
      << bad_count.status().message();
  // A hex number is an address, not a count: the columns are shifted.
  EXPECT_FALSE(ParseProcModules("nvidia 56717312 0x10 - Live 0x0\n", "/proc/modules").ok());
}

TEST(SystemKernelModulesTest, ReadsProcModulesAndTheNvidiaVersionUnderTheRoots) {
  testing::TempDir proc("proc"), sys("sys");
  auto kernel = SystemKernelModules(proc.path(), sys.path());

  // No /proc/modules under the root: the error names the file.
  auto missing = kernel->List();
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(proc.path() + "/proc/modules"), std::string::npos)
      << missing.status().message();

  ASSERT_TRUE(MakeDirs(proc.path() + "/proc").ok());
  ASSERT_TRUE(WriteFileAtomic(proc.path() + "/proc/modules", kLoaded).ok());
  auto mods = kernel->List();
  ASSERT_TRUE(mods.ok()) << mods.status().ToString();
  EXPECT_NE(FindModule(*mods, "nvidia_uvm"), nullptr);

  // Not loaded: no version, not an error.
  auto none = kernel->NvidiaVersion();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(MakeDirs(sys.path() + "/sys/module/nvidia").ok());
  ASSERT_TRUE(WriteFileAtomic(sys.path() + "/sys/module/nvidia/version", "550.127.05\n").ok());
  auto v = kernel->NvidiaVersion();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->value_or(""), "550.127.05");
}

}  // namespace
}  // namespace gpuop::host

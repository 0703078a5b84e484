#include "base/process.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "base/files.h"

namespace gpuop {
namespace {

TEST(RunCommandTest, CollectsOutputAndExitStatus) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 3);
  EXPECT_EQ(r->output, "out\nerr\n");
  auto missing = RunCommand({"gpuop-no-such-program"});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 127);
  EXPECT_EQ(missing->output, "exec failed\n");
}

// Inside a root, as `chroot ROOT CMD` runs it (gpuop's image has no chroot
// binary): the command is found on the root's system PATH, not ours.
TEST(RunCommandTest, RunsInsideARoot) {
  ASSERT_EQ(::geteuid(), 0u) << "chroot(2) needs root";
  char tmpl[] = "/tmp/gpuop-root-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  // busybox-static (a test peer): a program that runs without a libc in the root.
  const char* busybox = "/bin/busybox";
  ASSERT_TRUE(PathExists(busybox)) << "install busybox-static (scripts/install-deps.sh)";
  ASSERT_TRUE(MakeDirs(root + "/usr/sbin").ok());
  std::filesystem::copy_file(busybox, root + "/usr/sbin/busybox");
  ASSERT_TRUE(WriteFileAtomic(root + "/marker", "inside the root\n").ok());

  auto r = RunCommand({"busybox", "cat", "/marker"}, root);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 0) << r->output;
  EXPECT_EQ(r->output, "inside the root\n");

  auto missing = RunCommand({"nvidia-smi"}, root);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 127);
  EXPECT_EQ(missing->output, "exec failed\n");

  auto no_root = RunCommand({"busybox", "true"}, root + "/no-such-dir");
  ASSERT_TRUE(no_root.ok());
  EXPECT_EQ(no_root->status, 127);
  EXPECT_EQ(no_root->output, "cannot enter the root directory\n");
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpuop

// mig/node_commands.h: the GPU reset and reboot command lines the MIG
// manager runs, with {index} and {bus_id} filled in, and their failures
// reported with the command's output.
#include "mig/node_commands.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/testing/temp_dir.h"

namespace gpuop::mig {
namespace {

TEST(NodeCommandsTest, PlaceholdersAreFilledInEveryWord) {
  EXPECT_EQ(ExpandCommand("nvidia-smi -r  -i {bus_id}", 3, "0000:17:00.0"),
            (std::vector<std::string>{"nvidia-smi", "-r", "-i", "0000:17:00.0"}));
  EXPECT_EQ(ExpandCommand("reset --gpu={index} {index}-{bus_id}", 2, "0000:3b:00.0"),
            (std::vector<std::string>{"reset", "--gpu=2", "2-0000:3b:00.0"}));
  EXPECT_TRUE(ExpandCommand("   ", 0, "").empty());
}

TEST(NodeCommandsTest, ResetRunsTheCommandForThatGpu) {
  testing::TempDir dir("mig-cmd");
  auto reset = GpuResetCommand("touch " + dir.path() + "/reset-{index}-{bus_id}");
  ASSERT_TRUE(reset(1, "0000:17:00.0").ok());
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/reset-1-0000:17:00.0"));
}

TEST(NodeCommandsTest, FailuresNameTheCommandAndKeepItsOutput) {
  Status failed = GpuResetCommand("sh -c exit-7-is-not-a-command")(4, "x");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("resetting GPU 4 (sh -c exit-7-is-not-a-command) exited 127"),
            std::string::npos)
      << failed.message();
  EXPECT_NE(failed.message().find("not found"), std::string::npos) << failed.message();

  Status missing = RebootCommand("/nonexistent/reboot")();
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("rebooting the node"), std::string::npos) << missing.message();

  Status empty = RebootCommand(" ")();
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.message().find("empty command"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::mig

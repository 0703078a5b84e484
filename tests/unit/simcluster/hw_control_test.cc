// A simulated node's hardware control (sim/cluster/hw_control.h) and the
// nvidia-smi stand-in that uses it from the node's root.
#include "sim/cluster/hw_control.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "base/files.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"

namespace gpuop::simcluster {
namespace {

class HardwareControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuop-hw-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    machine_ = sim::LoadMachine("dgx-h100", "node-a").value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<sim::StateStore> Store() {
    return sim::StateStore::Open(machine_, dir_ + "/sim", 1000).value();
  }
  // Marks GPU 3 lost, as XID 79 leaves it until a reset.
  void LoseGpu3() { ASSERT_TRUE(sim::MarkGpuLost(*Store(), 3).ok()); }
  bool Gpu3Lost() { return (*Store()->Read())->gpus[3].lost; }

  std::string dir_;
  sim::Machine machine_;
};

TEST_F(HardwareControlTest, ResetsAGpuByIndexOrBusId) {
  auto store = Store();
  LoseGpu3();
  EXPECT_EQ(HandleHardwareRequest("reset 3", *store), "ok " + machine_.gpus[3].bus_id);
  EXPECT_FALSE(Gpu3Lost());
  LoseGpu3();
  std::string lower = machine_.gpus[3].bus_id;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_EQ(HandleHardwareRequest("reset " + lower, *store), "ok " + machine_.gpus[3].bus_id);
  EXPECT_FALSE(Gpu3Lost());
  EXPECT_EQ(HandleHardwareRequest("reset 8", *store),
            "error no GPU 8 on this node (8 GPUs: give an index or a PCI bus id)");
  EXPECT_EQ(HandleHardwareRequest("reboot", *store),
            "error unknown request \"reboot\" (there is: reset ID)");
}

// The node's nvidia-smi, run as the MIG manager runs it (chroot into the
// node's root), resets the GPU through the socket the control serves there.
TEST_F(HardwareControlTest, NodeNvidiaSmiResetsThroughTheSocket) {
  const std::string root = dir_ + "/root";
  auto hw = HardwareControl::Start(root, "dgx-h100", "node-a", dir_ + "/sim");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  ASSERT_TRUE(PathExists(root + kHardwareSocket));
  LoseGpu3();
  ASSERT_TRUE(MakeDirs(root + "/usr/bin").ok());
  std::filesystem::copy_file(std::string(GPUOP_BINARY_DIR) + "/lib/nvidia-smi-sim",
                             root + "/usr/bin/nvidia-smi");
  ASSERT_EQ(::chmod((root + "/usr/bin/nvidia-smi").c_str(), 0755), 0);
  ASSERT_EQ(::geteuid(), 0u) << "this test chroots into a node root: run it as root";
  const std::string out = dir_ + "/out";
  const std::string cmd = "chroot " + root + " /usr/bin/nvidia-smi -r -i " +
                          machine_.gpus[3].bus_id + " >" + out + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(out).value_or("");
  EXPECT_EQ(ReadFile(out).value_or(""),
            "GPU " + machine_.gpus[3].bus_id + " was successfully reset.\nAll done.\n");
  EXPECT_FALSE(Gpu3Lost());

  // A GPU the node does not have: nvidia-smi fails and says why.
  const std::string bad = "chroot " + root + " /usr/bin/nvidia-smi -r -i 9 >" + out + " 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_EQ(ReadFile(out).value_or(""),
            "Unable to reset GPU 9: no GPU 9 on this node (8 GPUs: give an index or a PCI bus "
            "id)\n");

  hw->reset();  // stops: the socket goes, and nvidia-smi says the hardware does not answer
  EXPECT_FALSE(PathExists(root + kHardwareSocket));
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_EQ(ReadFile(out).value_or(""),
            "Unable to reset GPU " + machine_.gpus[3].bus_id +
                ": the simulated hardware does not answer at /run/gpuop-sim-hw.sock: No such "
                "file or directory\n");
}

}  // namespace
}  // namespace gpuop::simcluster

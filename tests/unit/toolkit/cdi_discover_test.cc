// DiscoverCdiInputs against a real simulated host root (dgx-h100 laid out by
// the host-root writer: mknod device nodes, ELF libraries, a real ld.so.cache),
// then BuildSpec on what it found.
#include "toolkit/cdi_discover.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "base/files.h"
#include "sim/host/host_root.h"
#include "sim/nvml/machine.h"

namespace gpuop::toolkit {
namespace {

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

class CdiDiscoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      if (InCi()) FAIL() << "CI runs as root: device nodes must be real";
      GTEST_SKIP() << "needs root for real device nodes (mknod)";
    }
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpuop-cdi-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    auto machine = sim::LoadMachine("dgx-h100", "");
    ASSERT_TRUE(machine.ok()) << machine.status().ToString();
    machine_ = *machine;
    auto plan = sim::PlanHostRoot(machine_, {});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto written = sim::WriteHostRoot(root_, *plan);
    if (!written.ok() && written.status().message().find("ldconfig") != std::string::npos &&
        !InCi()) {
      GTEST_SKIP() << written.status().message();
    }
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    lib_dir_ = plan->lib_dir;
    for (const sim::SimGpu& g : machine_.gpus) {
      nvml::Gpu gpu;
      gpu.index = g.index;
      gpu.minor = static_cast<int>(g.minor);
      gpu.uuid = g.uuid;
      gpu.pci.bus_id = g.bus_id;
      gpus_.push_back(gpu);
    }
    // GPU 0 in MIG mode with two 1g.10gb devices in GIs 9 and 10.
    gpus_[0].mig_enabled = true;
    for (unsigned j = 0; j < 2; ++j) {
      nvml::MigDevice m;
      m.index = j;
      m.gi_id = 9 + j;
      m.ci_id = 0;
      m.uuid = "MIG-" + std::to_string(j);
      m.profile = "1g.10gb";
      gpus_[0].mig_devices.push_back(m);
    }
  }
  void TearDown() override {
    std::error_code ec;
    if (!root_.empty()) std::filesystem::remove_all(root_, ec);
  }

  std::string root_, lib_dir_;
  sim::Machine machine_;
  std::vector<nvml::Gpu> gpus_;
};

TEST_F(CdiDiscoverTest, FindsWhatTheHostRootHolds) {
  CdiHostRoots roots{"/", root_, root_};
  auto in = DiscoverCdiInputs(gpus_, machine_.driver_version, roots);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->gpus.size(), 8u);
  EXPECT_EQ(in->gpus[0].pci_bus_id, "0000:18:00.0");
  ASSERT_TRUE(in->device_nodes.count("/dev/nvidiactl"));
  EXPECT_EQ(in->device_nodes.at("/dev/nvidiactl").major, sim::kNvidiaMajor);
  EXPECT_EQ(in->device_nodes.at("/dev/nvidiactl").minor, sim::kNvidiaCtlMinor);
  EXPECT_EQ(in->device_nodes.at("/dev/nvidia-uvm").major, sim::kNvidiaUvmMajor);
  const std::string cap =
      "/dev/nvidia-caps/nvidia-cap" + std::to_string(sim::MigCiCapMinor(0, 10, 0));
  ASSERT_TRUE(in->device_nodes.count(cap)) << cap;
  EXPECT_EQ(in->cap_minors.Gi(0, 9), sim::MigGiCapMinor(0, 9));
  EXPECT_EQ(in->libcuda_dir, lib_dir_);
  EXPECT_NE(std::find(in->libraries.begin(), in->libraries.end(),
                      lib_dir_ + "/libcuda.so." + machine_.driver_version),
            in->libraries.end());
  EXPECT_EQ(in->binaries.size(), 5u);
  EXPECT_EQ(in->firmware.size(), 2u);
  EXPECT_EQ(in->sockets.size(), 3u);

  CdiBuildOptions o;
  o.hook_path = "/usr/bin/gpuop";
  o.driver_root = root_;
  o.dev_root = root_;
  auto spec = BuildSpec(*in, o);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->edits.device_nodes.back().host_path, root_ + "/dev/nvidiactl");
  EXPECT_EQ(spec->devices.front().name, "0:0");
}

TEST_F(CdiDiscoverTest, HostRootReadsButTheSpecSaysHostPaths) {
  CdiHostRoots roots{root_, "/", "/"};
  auto in = DiscoverCdiInputs(gpus_, machine_.driver_version, roots);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  CdiBuildOptions o;
  o.hook_path = "/usr/local/nvidia/toolkit/gpuop";
  auto spec = BuildSpec(*in, o);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->edits.device_nodes.back().host_path.empty());
  EXPECT_EQ(spec->edits.mounts.front().host_path, spec->edits.mounts.front().container_path);
  EXPECT_EQ(spec->cdi_version, "0.5.0");  // readable by podman 4.3 and containerd 1.7
}

TEST_F(CdiDiscoverTest, BrokenRootsGiveOneClearError) {
  ASSERT_EQ(::unlink((root_ + "/dev/nvidiactl").c_str()), 0);
  CdiHostRoots roots{"/", root_, root_};
  auto in = DiscoverCdiInputs(gpus_, machine_.driver_version, roots);
  ASSERT_TRUE(in.ok());
  CdiBuildOptions o;
  o.hook_path = "/usr/bin/gpuop";
  o.driver_root = o.dev_root = root_;
  auto spec = BuildSpec(*in, o);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find(root_ + "/dev/nvidiactl is missing"), std::string::npos);

  ASSERT_TRUE(WriteFileAtomic(root_ + "/etc/ld.so.cache", "garbage").ok());
  auto corrupt = DiscoverCdiInputs(gpus_, machine_.driver_version, roots);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find(root_ + "/etc/ld.so.cache is not a valid ld.so.cache"),
            std::string::npos)
      << corrupt.status().message();
}

TEST(SysfsBusIdTest, Converts) {
  EXPECT_EQ(*SysfsBusId("00000000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(*SysfsBusId("0000:AB:1F.7"), "0000:ab:1f.7");
  EXPECT_FALSE(SysfsBusId("18:00.0").ok());
  EXPECT_FALSE(SysfsBusId("00010000:18:00.0").ok());
  EXPECT_FALSE(SysfsBusId("0000:18:00").ok());
}

}  // namespace
}  // namespace gpuop::toolkit

// The simulated host root holds libcuda-sim.so as the driver's
// libcuda.so.<version>, and the CUDA check runs through that copy, found by
// its soname link as on a real node.
#include <gtest/gtest.h>

#include <string>

#include "base/files.h"
#include "sim/host/elf_stub.h"
#include "sim/host/host_root.h"
#include "sim/nvml/machine.h"
#include "tests/testing/sim_node.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace gpuop::cuda {
namespace {

TEST(HostRootCudaTest, PlanInstallsTheCudaSimulatorAsLibcuda) {
  auto m = sim::LoadMachine("dgx-h100", "root");
  ASSERT_TRUE(m.ok());
  sim::HostRootOptions o;
  o.cuda_sim_library = "/opt/gpuop/lib/libcuda-sim.so";
  auto plan = sim::PlanHostRoot(*m, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const sim::HostEntry* e = plan->Find(plan->lib_dir + "/libcuda.so." + m->driver_version);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, sim::HostEntryType::kCopy);
  EXPECT_EQ(e->content, o.cuda_sim_library);
  EXPECT_EQ(e->soname, "libcuda.so.1");
  // Without it: the stub, as before.
  auto stub = sim::PlanHostRoot(*m, {});
  ASSERT_TRUE(stub.ok());
  e = stub->Find(stub->lib_dir + "/libcuda.so." + m->driver_version);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, sim::HostEntryType::kFile);
}

TEST(HostRootCudaTest, VectorAddRunsThroughTheDriverRootsLibcuda) {
  gpuop::testing::SimNode node("dgx-h100", "root-run");
  ASSERT_TRUE(node.booted());
  auto elf = sim::HostElfMachine();
  ASSERT_TRUE(elf.ok());
  sim::HostRootOptions o;
  o.elf_machine = *elf;
  o.cuda_sim_library = testing::kSimCuda;
  o.nvml_sim_library = testing::kSimNvmlLib;
  auto plan = sim::PlanHostRoot(node.store().machine(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::string root = node.dir() + "/root";
  auto written = sim::WriteHostRoot(root, *plan);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  // ldconfig made the soname link, as on a driver install.
  const std::string soname_link = root + plan->lib_dir + "/libcuda.so.1";
  ASSERT_TRUE(PathExists(soname_link));
  auto opts = testing::SimOptions();
  opts.library = soname_link;
  auto r = RunVectorAdd(opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->device_count, 8);
  EXPECT_EQ(r->uuid, node.store().machine().gpus[0].uuid);
}

}  // namespace
}  // namespace gpuop::cuda

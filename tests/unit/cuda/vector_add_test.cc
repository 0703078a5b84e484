// The CUDA check (cuda/vector_add.h) against the CUDA and NVML simulators:
// a passing run, and each failure a node really has (driver unloaded, lost
// GPU, CUDA too old, no GPU visible), with the message naming the fix.
#include "cuda/vector_add.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace gpuop::cuda {
namespace {

using testing::ScopedEnv;
using testing::SimOptions;

TEST(VectorAddTest, PassesOnASimulatedDgxH100AndMatchesNvml) {
  gpuop::testing::SimNode node("dgx-h100", "cuda-pass");
  ASSERT_TRUE(node.booted());
  auto r = RunVectorAdd(SimOptions());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->driver_cuda_version, node.store().machine().cuda_driver_version);
  EXPECT_EQ(r->driver_version, node.store().machine().driver_version);
  EXPECT_EQ(r->elements, 5000u);
  EXPECT_EQ(r->blocks, 20u);  // 5000 / 256, rounded up
  EXPECT_EQ(r->device_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(r->cc_major, 9);
  EXPECT_EQ(r->cc_minor, 0);
  std::vector<std::string> nvml = testing::NvmlUuids();
  ASSERT_EQ(nvml.size(), 8u);
  EXPECT_EQ(r->device_count, 8);
  EXPECT_EQ(r->uuid, nvml[0]);

  auto second = SimOptions();
  second.device = 5;
  auto r5 = RunVectorAdd(second);
  ASSERT_TRUE(r5.ok()) << r5.status().ToString();
  EXPECT_EQ(r5->uuid, nvml[5]);

  // The work is on the GPUs' record: one kernel each, and no process left.
  auto state = node.store().Read();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)->gpus[0].kernel_launches, 1u);
  EXPECT_EQ((*state)->gpus[5].kernel_launches, 1u);
  EXPECT_EQ((*state)->gpus[1].kernel_launches, 0u);
  EXPECT_GT((*state)->gpus[0].last_kernel_unix_ms, 0);
  EXPECT_TRUE((*state)->gpus[0].processes.empty());
}

TEST(VectorAddTest, DeviceOutOfRangeNamesTheCount) {
  gpuop::testing::SimNode node("l40s-4", "cuda-range");
  ASSERT_TRUE(node.booted());
  auto o = SimOptions();
  o.device = 4;
  auto r = RunVectorAdd(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("sees 4 GPU(s)"), std::string::npos) << r.status().message();
}

TEST(VectorAddTest, DriverUnloadedSaysSo) {
  gpuop::testing::SimNode node("dgx-h100", "cuda-unloaded");
  ASSERT_TRUE(node.booted());
  ASSERT_TRUE(sim::SetDriverLoaded(node.store(), false).ok());
  auto r = RunVectorAdd(SimOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("the NVIDIA driver is not loaded"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("CUDA_ERROR_NO_DEVICE"), std::string::npos);
  // Driver back: the check passes again in the same process.
  ASSERT_TRUE(sim::SetDriverLoaded(node.store(), true).ok());
  auto again = RunVectorAdd(SimOptions());
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST(VectorAddTest, LostGpuFailsAndNamesXid79OthersStillPass) {
  gpuop::testing::SimNode node("dgx-h100", "cuda-lost");
  ASSERT_TRUE(node.booted());
  ASSERT_TRUE(sim::MarkGpuLost(node.store(), 0).ok());  // XID 79, fallen off the bus
  auto r = RunVectorAdd(SimOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("CUDA_ERROR_DEVICE_UNAVAILABLE"), std::string::npos) << m;
  EXPECT_NE(m.find("XID 79"), std::string::npos) << m;
  EXPECT_NE(m.find(node.store().machine().gpus[0].uuid), std::string::npos) << m;
  auto o = SimOptions();
  o.device = 1;
  auto other = RunVectorAdd(o);
  EXPECT_TRUE(other.ok()) << other.status().ToString();
  // A reset brings GPU 0 back.
  ASSERT_TRUE(sim::ResetGpu(node.store(), 0).ok());
  EXPECT_TRUE(RunVectorAdd(SimOptions()).ok());
}

TEST(VectorAddTest, CudaTooNewNamesBothVersionsAndTheFix) {
  gpuop::testing::SimNode node;
  const std::string yaml = node.dir() + "/old-driver.yaml";
  std::ofstream(yaml) << "name: old-driver\ndriverVersion: \"535.129.03\"\ngpus:\n"
                         "  - model: h100-80gb\n    count: 2\n";
  ASSERT_TRUE(node.Boot(yaml, "cuda-old"));
  EXPECT_EQ(node.store().machine().cuda_driver_version, 12020);  // follows the driver
  auto o = SimOptions();
  o.required_cuda_version = 12040;
  auto r = RunVectorAdd(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            "driver 535.129.03 supports CUDA 12.2; this workload needs 12.4: raise driver.version");
  o.required_cuda_version = 12020;
  auto ok = RunVectorAdd(o);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->driver_cuda_version, 12020);
}

TEST(VectorAddTest, NoVisibleGpuNamesTheRequest) {
  gpuop::testing::SimNode node("dgx-h100", "cuda-invisible");
  ASSERT_TRUE(node.booted());
  const std::string dev = node.dir() + "/dev";
  ASSERT_EQ(::mkdir(dev.c_str(), 0755), 0);
  ScopedEnv mode("GPUOP_SIM_VISIBLE", "devnodes");
  ScopedEnv dir("GPUOP_SIM_DEV_DIR", dev);
  auto r = RunVectorAdd(SimOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("no GPU is visible to this container"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("request nvidia.com/gpu or set NVIDIA_VISIBLE_DEVICES"),
            std::string::npos);
}

TEST(VectorAddTest, DevNodesDecideWhatBothLibrariesSee) {
  gpuop::testing::SimNode node("dgx-h100", "cuda-devnodes");
  ASSERT_TRUE(node.booted());
  const auto& gpus = node.store().machine().gpus;
  const std::string dev = node.dir() + "/dev";
  ASSERT_EQ(::mkdir(dev.c_str(), 0755), 0);
  for (unsigned i : {3u, 5u}) std::ofstream(dev + "/nvidia" + std::to_string(gpus[i].minor));
  std::ofstream(dev + "/nvidiactl");
  ScopedEnv mode("GPUOP_SIM_VISIBLE", "devnodes");
  ScopedEnv dir("GPUOP_SIM_DEV_DIR", dev);

  std::vector<std::string> nvml = testing::NvmlUuids();
  EXPECT_EQ(nvml, (std::vector<std::string>{gpus[3].uuid, gpus[5].uuid}));
  ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(NV(nvmlDeviceGetHandleByUUID)(gpus[0].uuid.c_str(), &d), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(NV(nvmlDeviceGetHandleByUUID)(gpus[5].uuid.c_str(), &d), NVML_SUCCESS);
  unsigned index = 99;
  EXPECT_EQ(NV(nvmlDeviceGetIndex)(d, &index), NVML_SUCCESS);
  EXPECT_EQ(index, 1u);
  EXPECT_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(2, &d), NVML_ERROR_INVALID_ARGUMENT);
  NV(nvmlShutdown)();

  auto o = SimOptions();
  o.device = 1;
  auto r = RunVectorAdd(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->device_count, 2);
  EXPECT_EQ(r->uuid, gpus[5].uuid);
}

TEST(VectorAddTest, CudaVisibleDevicesSelectsAndOrders) {
  gpuop::testing::SimNode node("dgx-h100", "cuda-cvd");
  ASSERT_TRUE(node.booted());
  const auto& gpus = node.store().machine().gpus;
  {
    ScopedEnv cvd("CUDA_VISIBLE_DEVICES", gpus[6].uuid + ",2");
    auto r = RunVectorAdd(SimOptions());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->device_count, 2);
    EXPECT_EQ(r->uuid, gpus[6].uuid);
    auto o = SimOptions();
    o.device = 1;
    auto r1 = RunVectorAdd(o);
    ASSERT_TRUE(r1.ok()) << r1.status().ToString();
    EXPECT_EQ(r1->uuid, gpus[2].uuid);
  }
  {
    ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "");
    auto r = RunVectorAdd(SimOptions());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("no GPU is visible"), std::string::npos);
  }
  {
    // NVML does not read CUDA_VISIBLE_DEVICES.
    ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "7");
    EXPECT_EQ(testing::NvmlUuids().size(), 8u);
    auto r = RunVectorAdd(SimOptions());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->device_count, 1);
    EXPECT_EQ(r->uuid, gpus[7].uuid);
  }
}

TEST(VectorAddTest, MissingLibraryNamesTheFix) {
  auto o = SimOptions();
  o.library = "/nonexistent/libcuda.so.1";
  auto r = RunVectorAdd(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(
      r.status().message().find("cannot load the CUDA driver library /nonexistent/libcuda.so.1"),
      std::string::npos);
  EXPECT_NE(r.status().message().find("request nvidia.com/gpu"), std::string::npos);
}

TEST(VectorAddTest, NotALibcudaNamesTheMissingSymbol) {
  auto lib = Library::Load(testing::kSimNvmlLib);
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(lib.status().message().find("has no cuInit: this driver is too old"), std::string::npos)
      << lib.status().message();
}

TEST(VectorAddTest, BadOptionsAreRejectedBeforeLoading) {
  auto o = SimOptions();
  o.elements = 0;
  EXPECT_EQ(RunVectorAdd(o).status().code(), StatusCode::kInvalidArgument);
  o = SimOptions();
  o.device = -1;
  EXPECT_EQ(RunVectorAdd(o).status().code(), StatusCode::kInvalidArgument);
}

// ---- Pure helpers ---------------------------------------------------------------

TEST(VectorAddHelpersTest, CudaVersions) {
  EXPECT_EQ(CudaVersionText(12040), "12.4");
  EXPECT_EQ(CudaVersionText(13000), "13.0");
  EXPECT_EQ(*ParseCudaVersion("12.4"), 12040);
  EXPECT_EQ(*ParseCudaVersion("13"), 13000);
  EXPECT_FALSE(ParseCudaVersion("12.x").ok());
  EXPECT_FALSE(ParseCudaVersion("").ok());
  EXPECT_FALSE(ParseCudaVersion("12.10").ok());
  EXPECT_TRUE(CheckCudaVersion(12020, 0, "").ok());
  EXPECT_TRUE(CheckCudaVersion(12080, 12040, "570.1").ok());
  EXPECT_EQ(CheckCudaVersion(12020, 12040, "").message(),
            "the NVIDIA driver supports CUDA 12.2; this workload needs 12.4: raise driver.version");
}

TEST(VectorAddHelpersTest, FirstWrongElementAndUuid) {
  std::vector<float> a{1, 2, 3}, b{0.5f, 0.25f, 1}, c{1.5f, 2.25f, 4};
  EXPECT_EQ(FirstWrongElement(a, b, c), std::nullopt);
  c[1] = 2.5f;
  EXPECT_EQ(FirstWrongElement(a, b, c), std::optional<size_t>(1));
  const unsigned char bytes[16] = {0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xa, 0xb};
  EXPECT_EQ(FormatGpuUuid(bytes), "GPU-deadbeef-0001-0203-0405-060708090a0b");
}

}  // namespace
}  // namespace gpuop::cuda

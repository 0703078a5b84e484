// libcuda-sim.so through its C ABI (loaded with the binding's Library, as the
// check loads libcuda.so.1): PTX it accepts and refuses, memory bounds, and
// the work it shows to NVML. Also the visibility rule's pure core.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "base/clock.h"
#include "cuda/library.h"
#include "cuda/vector_add.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"
#include "sim/nvml/visibility.h"
#include "tests/testing/sim_node.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace gpuop::cuda {
namespace {

// A booted simulated node with the CUDA simulator initialised and device 0's
// primary context current on this thread.
class CudaSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(node_.Boot("dgx-h100", "cuda-sim"));
    auto lib = Library::Load(testing::kSimCuda);
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    lib_ = std::move(lib).value();
    ASSERT_EQ(cu().Init(0), kCudaSuccess);
    ASSERT_EQ(cu().DevicePrimaryCtxRetain(&ctx_, 0), kCudaSuccess);
    ASSERT_EQ(cu().CtxSetCurrent(ctx_), kCudaSuccess);
  }
  void TearDown() override {
    if (ctx_ != nullptr) {
      cu().CtxSetCurrent(nullptr);
      cu().DevicePrimaryCtxRelease(0);
    }
  }
  const Functions& cu() { return lib_->fn(); }

  CUresult Load(const std::string& ptx, CUmodule* m) { return cu().ModuleLoadData(m, ptx.c_str()); }

  gpuop::testing::SimNode node_;
  std::unique_ptr<Library> lib_;
  CUcontext ctx_ = nullptr;
};

// kVectorAddPtx with `from` replaced by `to`.
std::string Edited(const std::string& from, const std::string& to) {
  std::string s = kVectorAddPtx;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST_F(CudaSimTest, LoadsTheVectorAddAndFindsItsEntry) {
  CUmodule m = nullptr;
  ASSERT_EQ(Load(kVectorAddPtx, &m), kCudaSuccess);
  CUfunction f = nullptr;
  EXPECT_EQ(cu().ModuleGetFunction(&f, m, "vectorAdd"), kCudaSuccess);
  EXPECT_EQ(cu().ModuleGetFunction(&f, m, "vectorSub"), kCudaErrorNotFound);
  EXPECT_EQ(cu().ModuleUnload(m), kCudaSuccess);
  EXPECT_NE(cu().ModuleGetFunction(&f, m, "vectorAdd"), kCudaSuccess);  // unloaded
}

TEST_F(CudaSimTest, RefusesPtxItCannotRun) {
  CUmodule m = nullptr;
  EXPECT_EQ(Load("this is not PTX", &m), kCudaErrorInvalidPtx);
  EXPECT_EQ(Load("", &m), kCudaErrorInvalidPtx);
  // A different computation (a product) is not run as a sum.
  EXPECT_EQ(Load(Edited("add.f32", "mul.f32"), &m), kCudaErrorInvalidPtx);
  // An unterminated body.
  std::string cut = kVectorAddPtx;
  cut.resize(cut.rfind('}'));
  EXPECT_EQ(Load(cut, &m), kCudaErrorInvalidPtx);
  // A target newer than the GPU (H100 is sm_90).
  EXPECT_EQ(Load(Edited(".target sm_70", ".target sm_100"), &m), kCudaErrorInvalidPtx);
  // The entry under another name loads, and is found under that name only.
  ASSERT_EQ(Load(Edited(".entry vectorAdd", ".entry addVectors"), &m), kCudaSuccess);
  CUfunction f = nullptr;
  EXPECT_EQ(cu().ModuleGetFunction(&f, m, "addVectors"), kCudaSuccess);
  EXPECT_EQ(cu().ModuleGetFunction(&f, m, "vectorAdd"), kCudaErrorNotFound);
}

TEST_F(CudaSimTest, PtxNewerThanTheDriverIsUnsupported) {
  // The dgx-h100 preset's driver is CUDA 12.8: PTX ISA 8.7 at most.
  CUmodule m = nullptr;
  EXPECT_EQ(Load(Edited(".version 6.0", ".version 8.7"), &m), kCudaSuccess);
  EXPECT_EQ(Load(Edited(".version 6.0", ".version 8.8"), &m), kCudaErrorUnsupportedPtxVersion);
  EXPECT_EQ(Load(Edited(".version 6.0", ".version 9.0"), &m), kCudaErrorUnsupportedPtxVersion);
}

TEST_F(CudaSimTest, KernelRunningOffAnAllocationIsAnIllegalAddress) {
  CUmodule m = nullptr;
  ASSERT_EQ(Load(kVectorAddPtx, &m), kCudaSuccess);
  CUfunction f = nullptr;
  ASSERT_EQ(cu().ModuleGetFunction(&f, m, "vectorAdd"), kCudaSuccess);
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(cu().MemAlloc(&a, 64 * sizeof(float)), kCudaSuccess);
  ASSERT_EQ(cu().MemAlloc(&b, 64 * sizeof(float)), kCudaSuccess);
  ASSERT_EQ(cu().MemAlloc(&c, 32 * sizeof(float)), kCudaSuccess);  // too short for n = 64
  // Copies past an allocation are refused.
  std::vector<float> host(65, 1.0f);
  EXPECT_NE(cu().MemcpyHtoD(a, host.data(), 65 * sizeof(float)), kCudaSuccess);
  ASSERT_EQ(cu().MemcpyHtoD(a, host.data(), 64 * sizeof(float)), kCudaSuccess);
  int n = 64;
  void* params[] = {&a, &b, &c, &n};
  EXPECT_EQ(cu().LaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr),
            kCudaErrorIllegalAddress);
  // The context is broken from then on, as on a real GPU.
  EXPECT_EQ(cu().CtxSynchronize(), kCudaErrorIllegalAddress);
}

TEST_F(CudaSimTest, ContextShowsAsProcessAndKernelAsUtilisation) {
  const unsigned pid = static_cast<unsigned>(::getpid());
  using ProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, void*);
  auto processes = testing::Sym<ProcessesFn>(testing::Open(testing::kSimNvmlLib),
                                             "nvmlDeviceGetComputeRunningProcesses_v3");
  struct Info {
    unsigned pid;
    unsigned long long used;
    unsigned gi, ci;
  } infos[4] = {};
  ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
  nvmlDevice_t d0 = nullptr, d1 = nullptr;
  ASSERT_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(0, &d0), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(1, &d1), NVML_SUCCESS);
  unsigned count = 4;
  ASSERT_EQ(processes(d0, &count, infos), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(infos[0].pid, pid);
  EXPECT_GT(infos[0].used, 0u);
  count = 4;
  ASSERT_EQ(processes(d1, &count, infos), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);

  // A kernel within the last sample period reads as a busy GPU. The state
  // is set to a kernel "now" plus a margin, so no clock race decides it.
  ASSERT_TRUE(node_.store()
                  .Update([](sim::SimState& s) {
                    s.gpus[1].last_kernel_unix_ms = NowUnixMillis() + 600000;
                    return Status::Ok();
                  })
                  .ok());
  nvmlUtilization_t u{};
  ASSERT_EQ(NV(nvmlDeviceGetUtilizationRates)(d1, &u), NVML_SUCCESS);
  EXPECT_EQ(u.gpu, 100u);

  // Releasing the context ends the process.
  ASSERT_EQ(cu().CtxSetCurrent(nullptr), kCudaSuccess);
  ASSERT_EQ(cu().DevicePrimaryCtxRelease(0), kCudaSuccess);
  ctx_ = nullptr;
  count = 4;
  ASSERT_EQ(processes(d0, &count, infos), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
  NV(nvmlShutdown)();
}

TEST_F(CudaSimTest, LostGpuBreaksTheLiveContext) {
  CUdeviceptr a = 0;
  ASSERT_EQ(cu().MemAlloc(&a, 256), kCudaSuccess);
  ASSERT_TRUE(sim::MarkGpuLost(node_.store(), 0).ok());
  std::vector<char> host(256);
  EXPECT_EQ(cu().MemcpyHtoD(a, host.data(), host.size()), kCudaErrorLaunchFailed);
  EXPECT_EQ(cu().CtxSynchronize(), kCudaErrorLaunchFailed);
  // A new context on the lost GPU is refused; another GPU still works.
  CUcontext other = nullptr;
  EXPECT_EQ(cu().DevicePrimaryCtxRetain(&other, 1), kCudaSuccess);
  EXPECT_EQ(cu().DevicePrimaryCtxRelease(1), kCudaSuccess);
}

TEST_F(CudaSimTest, DeviceQueriesMatchTheMachine) {
  const auto& gpu = node_.store().machine().gpus[2];
  char name[8] = {};
  EXPECT_EQ(cu().DeviceGetName(name, sizeof(name), 2), kCudaSuccess);
  EXPECT_EQ(std::string(name), gpu.model.name.substr(0, 7));  // truncated like the driver
  CUuuid uuid{};
  ASSERT_EQ(cu().DeviceGetUuid(&uuid, 2), kCudaSuccess);
  EXPECT_EQ(FormatGpuUuid(reinterpret_cast<unsigned char*>(uuid.bytes)), gpu.uuid);
  size_t total = 0;
  ASSERT_EQ(cu().DeviceTotalMem(&total, 2), kCudaSuccess);
  EXPECT_EQ(total, static_cast<size_t>(gpu.model.memory_mib) << 20);
  CUdevice dev = 0;
  EXPECT_EQ(cu().DeviceGet(&dev, 8), kCudaErrorInvalidDevice);
  int version = 0;
  ASSERT_EQ(cu().DriverGetVersion(&version), kCudaSuccess);
  EXPECT_EQ(version, node_.store().machine().cuda_driver_version);
  EXPECT_EQ(lib_->ErrorText(kCudaErrorNoDevice),
            "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
}

// ---- Pure cores ---------------------------------------------------------------

TEST(CudaVersionForDriverTest, FollowsTheBranch) {
  EXPECT_EQ(sim::CudaVersionForDriver("535.129.03"), 12020);
  EXPECT_EQ(sim::CudaVersionForDriver("550.54.15"), 12040);
  EXPECT_EQ(sim::CudaVersionForDriver("570.172.08"), 12080);
  EXPECT_EQ(sim::CudaVersionForDriver("580.65.06"), 13000);
  EXPECT_EQ(sim::CudaVersionForDriver("not-a-version"), 0);
}

TEST(VisibilityTest, DevNodesAndCudaVisibleDevices) {
  auto m = sim::LoadMachine("dgx-h100", "vis");
  ASSERT_TRUE(m.ok());
  sim::VisibilityConfig all;
  auto none_exist = [](const std::string&) { return false; };
  EXPECT_EQ(sim::VisibleGpus(*m, all, none_exist).size(), 8u);  // unset: the host's view
  sim::VisibilityConfig nodes{true, "/x"};
  EXPECT_TRUE(sim::VisibleGpus(*m, nodes, none_exist).empty());
  auto some = [](const std::string& p) { return p == "/x/nvidia1" || p == "/x/nvidia6"; };
  const std::vector<unsigned> visible = sim::VisibleGpus(*m, nodes, some);
  EXPECT_EQ(visible, (std::vector<unsigned>{1, 6}));

  EXPECT_EQ(sim::ApplyCudaVisibleDevices(*m, visible, "1"), (std::vector<unsigned>{6}));
  EXPECT_EQ(sim::ApplyCudaVisibleDevices(*m, visible, "1,0"), (std::vector<unsigned>{6, 1}));
  EXPECT_TRUE(sim::ApplyCudaVisibleDevices(*m, visible, "2").empty());  // past the end
  EXPECT_EQ(sim::ApplyCudaVisibleDevices(*m, visible, "0,5,1"),         // cut at the bad one
            (std::vector<unsigned>{1}));
  EXPECT_EQ(sim::ApplyCudaVisibleDevices(*m, visible, "0,0"), (std::vector<unsigned>{1}));
  EXPECT_TRUE(sim::ApplyCudaVisibleDevices(*m, visible, "").empty());
  const std::string uuid6 = m->gpus[6].uuid;
  EXPECT_EQ(sim::ApplyCudaVisibleDevices(*m, visible, uuid6.substr(0, 12)),
            (std::vector<unsigned>{6}));
  // A GPU this process cannot see cannot be named by UUID either.
  EXPECT_TRUE(sim::ApplyCudaVisibleDevices(*m, visible, m->gpus[0].uuid).empty());
}

}  // namespace
}  // namespace gpuop::cuda

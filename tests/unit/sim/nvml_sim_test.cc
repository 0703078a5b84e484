// Drives libnvml-sim.so through its C ABI, as the NVML binding and real NVML
// clients do: dlopen, dlsym, call. The control side (faults, resets) uses the
// state store linked into this test, a separate copy of that code from the
// library's, or real second processes (fork, the gpuop CLI).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/files.h"
#include "nvml/nvml_abi.h"
#include "sim/nvml/driver_env.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"
#include "tests/testing/wait.h"

namespace gpuop::sim {
namespace {

void* Library() {
  static void* handle = [] {
    void* h = ::dlopen(GPUOP_BINARY_DIR "/lib/libnvml-sim.so", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) std::fprintf(stderr, "dlopen: %s\n", ::dlerror());
    return h;
  }();
  return handle;
}

template <typename F>
F Sym(const char* name) {
  void* p = ::dlsym(Library(), name);
  if (p == nullptr) {
    std::fprintf(stderr, "missing symbol %s\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(p);
}

// NV(nvmlFoo)(args...) calls the library's nvmlFoo with the header's signature.
#define NV(fn) Sym<decltype(&fn)>(#fn)

std::string Name(nvmlDevice_t d) {
  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  EXPECT_EQ(NV(nvmlDeviceGetName)(d, buf, sizeof(buf)), NVML_SUCCESS);
  return buf;
}

std::string Uuid(nvmlDevice_t d) {
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  EXPECT_EQ(NV(nvmlDeviceGetUUID)(d, buf, sizeof(buf)), NVML_SUCCESS);
  return buf;
}

nvmlDevice_t Gpu(unsigned i) {
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(i, &d), NVML_SUCCESS);
  return d;
}

using gpuop::testing::WaitFor;

class NvmlSimTest : public ::testing::Test {
 public:
  void SetUp() override {
    ASSERT_NE(Library(), nullptr);
    char tmpl[] = "/tmp/gpuop-nvmlsim-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    ::unsetenv("GPUOP_SIM_DRIVER");
    ::unsetenv("GPUOP_SIM_SEED");
    ::unsetenv("GPUOP_SIM_MACHINE");
    ::unsetenv("GPUOP_SIM_STATE");
    UnsetProcessEnv();
  }

  // The variables driver_env.h reads, and the container view's.
  static void UnsetProcessEnv() {
    for (const char* v : {"GPUOP_SIM_MIG_PRIVILEGED", "GPUOP_SIM_DEPRECATED", "GPUOP_SIM_DENY_GPUS",
                          "GPUOP_SIM_LIBCUDA", "GPUOP_SIM_VISIBLE", "GPUOP_SIM_DEV_DIR"}) {
      ::unsetenv(v);
    }
  }

  void TearDown() override {
    while (NV(nvmlShutdown)() == NVML_SUCCESS) {
    }
    ::unsetenv("GPUOP_SIM_DRIVER");
    ::unsetenv("GPUOP_SIM_MACHINE");
    ::unsetenv("GPUOP_SIM_STATE");
    UnsetProcessEnv();
    std::system(("rm -rf '" + tmp_ + "'").c_str());
  }

  // Points the library at `machine` with shared state under the temp dir.
  void Use(const std::string& machine) {
    machine_ = machine;
    ::setenv("GPUOP_SIM_MACHINE", machine.c_str(), 1);
    ::setenv("GPUOP_SIM_STATE", StateDir().c_str(), 1);
  }

  void Init(const std::string& machine) {
    Use(machine);
    ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
  }

  std::string StateDir() const { return tmp_ + "/state"; }

  // A control handle on the same state, as `gpuop sim gpu ...` has.
  std::unique_ptr<StateStore> Control() {
    auto m = LoadMachine(machine_, "");
    EXPECT_TRUE(m.ok());
    auto s = StateStore::Open(*m, StateDir(), 0);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Enables MIG on GPU `i` the way an admin does: set the mode, reset the GPU.
  void EnableMig(unsigned i) {
    nvmlReturn_t activation = NVML_SUCCESS;
    ASSERT_EQ(NV(nvmlDeviceSetMigMode)(Gpu(i), NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
    unsigned cur = 9, pend = 9;
    ASSERT_EQ(NV(nvmlDeviceGetMigMode)(Gpu(i), &cur, &pend), NVML_SUCCESS);
    EXPECT_EQ(pend, 1u);
    if (cur == 0) {
      EXPECT_EQ(activation, NVML_ERROR_RESET_REQUIRED);
      ASSERT_TRUE(ResetGpu(*Control(), i).ok());
    }
    ASSERT_EQ(NV(nvmlDeviceGetMigMode)(Gpu(i), &cur, &pend), NVML_SUCCESS);
    EXPECT_EQ(cur, 1u);
  }

  // Creates a GI of NVML enum profile `index` and a CI using all of it.
  nvmlGpuInstance_t CreateFull(nvmlDevice_t d, unsigned index, nvmlComputeInstance_t* ci) {
    nvmlGpuInstanceProfileInfo_t info{};
    EXPECT_EQ(NV(nvmlDeviceGetGpuInstanceProfileInfo)(d, index, &info), NVML_SUCCESS);
    nvmlGpuInstance_t gi = nullptr;
    EXPECT_EQ(NV(nvmlDeviceCreateGpuInstance)(d, info.id, &gi), NVML_SUCCESS);
    unsigned ci_index = info.sliceCount == 7 ? 4 : info.sliceCount - 1;
    nvmlComputeInstanceProfileInfo_t cinfo{};
    EXPECT_EQ(NV(nvmlGpuInstanceGetComputeInstanceProfileInfo)(
                  gi, ci_index, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cinfo),
              NVML_SUCCESS);
    EXPECT_EQ(NV(nvmlGpuInstanceCreateComputeInstance)(gi, cinfo.id, ci), NVML_SUCCESS);
    return gi;
  }

  std::string tmp_;
  std::string machine_;
};

TEST_F(NvmlSimTest, OnlyNvmlSymbolsAreExported) {
  EXPECT_NE(::dlsym(Library(), "nvmlInit_v2"), nullptr);
  EXPECT_EQ(::dlsym(Library(), "_ZN5gpuop3sim13BuiltinModelsEv"), nullptr);
  EXPECT_EQ(::dlsym(Library(),
                    "_ZN5gpuop8ReadFileERKNSt7__cxx1112basic_stringIcSt11char_"
                    "traitsIcESaIcEEE"),
            nullptr);
}

TEST_F(NvmlSimTest, EverythingNeedsInit) {
  unsigned n = 0;
  EXPECT_EQ(NV(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(0, &d), NVML_ERROR_UNINITIALIZED);
  char buf[80];
  EXPECT_EQ(NV(nvmlSystemGetDriverVersion)(buf, sizeof(buf)), NVML_ERROR_UNINITIALIZED);
  nvmlEventSet_t set = nullptr;
  EXPECT_EQ(NV(nvmlEventSetCreate)(&set), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(NV(nvmlShutdown)(), NVML_ERROR_UNINITIALIZED);
  EXPECT_STREQ(NV(nvmlErrorString)(NVML_SUCCESS), "Success");
  EXPECT_STREQ(NV(nvmlErrorString)(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
  EXPECT_STREQ(NV(nvmlErrorString)(NVML_ERROR_DRIVER_NOT_LOADED), "Driver Not Loaded");
  EXPECT_STREQ(NV(nvmlErrorString)(static_cast<nvmlReturn_t>(12345)), "Unknown Error");
}

TEST_F(NvmlSimTest, InitIsRefCounted) {
  Init("t4-1");
  ASSERT_EQ(NV(nvmlInitWithFlags)(0), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
  unsigned n = 0;
  EXPECT_EQ(NV(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
  EXPECT_EQ(n, 1u);
  nvmlDevice_t d = Gpu(0);
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
  EXPECT_EQ(NV(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
  char buf[96];
  EXPECT_EQ(NV(nvmlDeviceGetName)(d, buf, sizeof(buf)), NVML_ERROR_UNINITIALIZED);
}

TEST_F(NvmlSimTest, DefaultMachineIsDgxH100AndStateMayBeLocal) {
  ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
  unsigned n = 0;
  ASSERT_EQ(NV(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
  EXPECT_EQ(n, 8u);
  EXPECT_EQ(Name(Gpu(0)), "NVIDIA H100 80GB HBM3");
}

TEST_F(NvmlSimTest, EveryPresetEnumerates) {
  for (const auto& preset : PresetNames()) {
    SCOPED_TRACE(preset);
    Init(preset);
    Machine want = LoadMachine(preset, "").value();
    char buf[96];
    ASSERT_EQ(NV(nvmlSystemGetDriverVersion)(buf, sizeof(buf)), NVML_SUCCESS);
    EXPECT_EQ(std::string(buf), want.driver_version);
    ASSERT_EQ(NV(nvmlSystemGetNVMLVersion)(buf, sizeof(buf)), NVML_SUCCESS);
    EXPECT_EQ(std::string(buf),
              std::to_string(want.cuda_driver_version / 1000) + "." + want.driver_version);
    int cuda = 0;
    ASSERT_EQ(NV(nvmlSystemGetCudaDriverVersion_v2)(&cuda), NVML_SUCCESS);
    EXPECT_EQ(cuda, want.cuda_driver_version);
    unsigned n = 0;
    ASSERT_EQ(NV(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
    ASSERT_EQ(n, want.gpus.size());
    for (unsigned i = 0; i < n; ++i) {
      const SimGpu& g = want.gpus[i];
      nvmlDevice_t d = Gpu(i);
      EXPECT_EQ(Name(d), g.model.name);
      EXPECT_EQ(Uuid(d), g.uuid);
      unsigned v = 99;
      ASSERT_EQ(NV(nvmlDeviceGetIndex)(d, &v), NVML_SUCCESS);
      EXPECT_EQ(v, i);
      ASSERT_EQ(NV(nvmlDeviceGetMinorNumber)(d, &v), NVML_SUCCESS);
      EXPECT_EQ(v, g.minor);
      ASSERT_EQ(NV(nvmlDeviceGetNumaNodeId)(d, &v), NVML_SUCCESS);
      EXPECT_EQ(static_cast<int>(v), g.numa_node);
      nvmlPciInfo_t pci{};
      ASSERT_EQ(NV(nvmlDeviceGetPciInfo_v3)(d, &pci), NVML_SUCCESS);
      EXPECT_EQ(std::string(pci.busId), g.bus_id);
      EXPECT_EQ(pci.pciDeviceId, g.model.pci_device_id);
      EXPECT_EQ(pci.pciSubSystemId, g.model.pci_subsystem_id);
      nvmlMemory_t mem{};
      ASSERT_EQ(NV(nvmlDeviceGetMemoryInfo)(d, &mem), NVML_SUCCESS);
      EXPECT_EQ(mem.total, g.model.memory_mib << 20);
      EXPECT_EQ(mem.free + mem.used, mem.total);
      nvmlMemory_v2_t mem2{};
      mem2.version = nvmlMemory_v2;
      ASSERT_EQ(NV(nvmlDeviceGetMemoryInfo_v2)(d, &mem2), NVML_SUCCESS);
      EXPECT_EQ(mem2.free + mem2.used + mem2.reserved, mem2.total);
      int major = 0, minor = 0;
      ASSERT_EQ(NV(nvmlDeviceGetCudaComputeCapability)(d, &major, &minor), NVML_SUCCESS);
      EXPECT_EQ(major, g.model.cc_major);
      EXPECT_EQ(minor, g.model.cc_minor);
      nvmlBrandType_t brand{};
      ASSERT_EQ(NV(nvmlDeviceGetBrand)(d, &brand), NVML_SUCCESS);
      EXPECT_EQ(static_cast<unsigned>(brand), g.model.brand);
      nvmlDeviceArchitecture_t arch = 0;
      ASSERT_EQ(NV(nvmlDeviceGetArchitecture)(d, &arch), NVML_SUCCESS);
      EXPECT_EQ(arch, g.model.architecture);
      ASSERT_EQ(NV(nvmlDeviceGetSerial)(d, buf, sizeof(buf)), NVML_SUCCESS);
      EXPECT_EQ(std::string(buf), g.serial);

      nvmlDevice_t by = nullptr;
      ASSERT_EQ(NV(nvmlDeviceGetHandleByUUID)(g.uuid.c_str(), &by), NVML_SUCCESS);
      EXPECT_EQ(by, d);
      ASSERT_EQ(NV(nvmlDeviceGetHandleByPciBusId_v2)(g.bus_id.c_str(), &by), NVML_SUCCESS);
      EXPECT_EQ(by, d);
      std::string short_bus = g.bus_id.substr(4);  // "0000:18:00.0"
      ASSERT_EQ(NV(nvmlDeviceGetHandleByPciBusId_v2)(short_bus.c_str(), &by), NVML_SUCCESS);
      EXPECT_EQ(by, d);
    }
    nvmlDevice_t d = nullptr;
    EXPECT_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(n, &d), NVML_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(NV(nvmlDeviceGetHandleByUUID)("GPU-nope", &d), NVML_ERROR_NOT_FOUND);
    EXPECT_EQ(NV(nvmlDeviceGetHandleByPciBusId_v2)("0000:FF:00.0", &d), NVML_ERROR_NOT_FOUND);
    ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
    std::system(("rm -rf '" + StateDir() + "'").c_str());
  }
}

TEST_F(NvmlSimTest, HeterogeneousMachineFromYaml) {
  const std::string file = tmp_ + "/mixed.yaml";
  std::ofstream(file) << "name: mixed\n"
                         "gpus:\n"
                         "  - {model: h100-80gb, count: 2, migEnabled: true}\n"
                         "  - {model: l40s, count: 2}\n";
  Init(file);
  unsigned n = 0;
  ASSERT_EQ(NV(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
  ASSERT_EQ(n, 4u);
  EXPECT_EQ(Name(Gpu(1)), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(Name(Gpu(2)), "NVIDIA L40S");
  unsigned cur = 0, pend = 0;
  ASSERT_EQ(NV(nvmlDeviceGetMigMode)(Gpu(1), &cur, &pend), NVML_SUCCESS);
  EXPECT_EQ(cur, 1u);  // migEnabled at boot
  EXPECT_EQ(NV(nvmlDeviceGetMigMode)(Gpu(2), &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
  nvmlComputeInstance_t ci = nullptr;
  ASSERT_NE(CreateFull(Gpu(1), 1, &ci), nullptr);  // a 2g.20gb
  nvmlDevice_t mig = nullptr;
  ASSERT_EQ(NV(nvmlDeviceGetMigDeviceHandleByIndex)(Gpu(1), 0, &mig), NVML_SUCCESS);
  EXPECT_EQ(Name(mig), "NVIDIA H100 80GB HBM3 MIG 2g.20gb");
}

TEST_F(NvmlSimTest, SmallBuffersAndBadArguments) {
  Init("dgx-a100");
  char small[5];
  EXPECT_EQ(NV(nvmlDeviceGetName)(Gpu(0), small, sizeof(small)), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(NV(nvmlDeviceGetUUID)(Gpu(0), small, sizeof(small)), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(NV(nvmlSystemGetDriverVersion)(small, sizeof(small)), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(NV(nvmlDeviceGetName)(Gpu(0), nullptr, 64), NVML_ERROR_INVALID_ARGUMENT);
  unsigned v = 0;
  EXPECT_EQ(NV(nvmlDeviceGetIndex)(nullptr, &v), NVML_ERROR_INVALID_ARGUMENT);
  // A pointer the library never handed out is refused, not dereferenced.
  int bogus = 0;
  EXPECT_EQ(NV(nvmlDeviceGetIndex)(reinterpret_cast<nvmlDevice_t>(&bogus), &v),
            NVML_ERROR_INVALID_ARGUMENT);
  nvmlMemory_v2_t mem{};
  mem.version = 1;
  EXPECT_EQ(NV(nvmlDeviceGetMemoryInfo_v2)(Gpu(0), &mem), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

TEST_F(NvmlSimTest, BadMachineFailsInitWithOneClearLine) {
  Use("dgx-z900");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(NV(nvmlInit_v2)(), NVML_ERROR_UNKNOWN);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("dgx-z900"), std::string::npos) << err;
  EXPECT_NE(err.find("dgx-h100"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST_F(NvmlSimTest, CorruptStateFailsInitNamingTheFile) {
  Init("dgx-h100");
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
  std::ofstream(StateDir() + "/state.json") << "{ this is not json";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(NV(nvmlInit_v2)(), NVML_ERROR_UNKNOWN);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(StateDir() + "/state.json"), std::string::npos) << err;
  EXPECT_NE(err.find("not valid JSON"), std::string::npos) << err;
}

TEST_F(NvmlSimTest, StateOfAnotherMachineFailsInit) {
  Init("dgx-h100");
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
  Use("dgx-a100");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(NV(nvmlInit_v2)(), NVML_ERROR_UNKNOWN);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("belongs to machine 'dgx-h100'"), std::string::npos) << err;
}

TEST_F(NvmlSimTest, DriverUnloaded) {
  Use("dgx-h100");
  ::setenv("GPUOP_SIM_DRIVER", "unloaded", 1);
  EXPECT_EQ(NV(nvmlInit_v2)(), NVML_ERROR_DRIVER_NOT_LOADED);
  ::unsetenv("GPUOP_SIM_DRIVER");
  ASSERT_TRUE(SetDriverLoaded(*Control(), false).ok());
  EXPECT_EQ(NV(nvmlInit_v2)(), NVML_ERROR_DRIVER_NOT_LOADED);
  ASSERT_TRUE(SetDriverLoaded(*Control(), true).ok());
  EXPECT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
}

// Create and destroy GPU and compute instances through the C ABI.
void MigLifecycle(NvmlSimTest* t, const std::string& preset) {
  SCOPED_TRACE(preset);
  Machine m = LoadMachine(preset, "").value();
  const GpuModel& model = m.gpus[0].model;
  nvmlDevice_t d = Gpu(0);
  unsigned cur = 9, pend = 9;
  ASSERT_EQ(NV(nvmlDeviceGetMigMode)(d, &cur, &pend), NVML_SUCCESS);
  EXPECT_EQ(cur, 0u);
  EXPECT_EQ(pend, 0u);
  const GiProfile& full = model.mig_profiles.back().slices == model.compute_slices
                              ? model.mig_profiles.back()
                              : *model.ProfileByNvmlIndex(4);
  nvmlGpuInstance_t gi = nullptr;
  EXPECT_EQ(NV(nvmlDeviceCreateGpuInstance)(d, full.id, &gi), NVML_ERROR_NOT_SUPPORTED);
  unsigned count = 0;
  EXPECT_EQ(NV(nvmlDeviceGetGpuInstances)(d, full.id, nullptr, &count), NVML_ERROR_NOT_SUPPORTED);

  ASSERT_NO_FATAL_FAILURE(t->EnableMig(0));

  // Profile info for every index the driver knows: the model's profiles,
  // NOT_SUPPORTED otherwise; enumeration ends with INVALID_ARGUMENT.
  const unsigned known = GiProfileCountForDriver(m.driver_version);
  nvmlGpuInstanceProfileInfo_t past{};
  EXPECT_EQ(NV(nvmlDeviceGetGpuInstanceProfileInfo)(d, known, &past), NVML_ERROR_INVALID_ARGUMENT);
  for (unsigned idx = 0; idx < known; ++idx) {
    nvmlGpuInstanceProfileInfo_t info{};
    const GiProfile* p = model.ProfileByNvmlIndex(idx);
    nvmlReturn_t r = NV(nvmlDeviceGetGpuInstanceProfileInfo)(d, idx, &info);
    if (p == nullptr) {
      EXPECT_EQ(r, NVML_ERROR_NOT_SUPPORTED) << idx;
      continue;
    }
    ASSERT_EQ(r, NVML_SUCCESS) << idx;
    EXPECT_EQ(info.id, p->id);
    EXPECT_EQ(info.sliceCount, p->slices);
    EXPECT_EQ(info.instanceCount, p->max_count);
    EXPECT_EQ(info.multiprocessorCount, p->multiprocessors);
    EXPECT_EQ(info.memorySizeMB, p->memory_mib);
    nvmlGpuInstanceProfileInfo_v2_t v2{};
    v2.version = nvmlGpuInstanceProfileInfo_v2;
    ASSERT_EQ(NV(nvmlDeviceGetGpuInstanceProfileInfoV)(d, idx, &v2), NVML_SUCCESS);
    EXPECT_EQ(std::string(v2.name), "MIG " + p->name);
    EXPECT_EQ(v2.memorySizeMB, p->memory_mib);
  }

  // The whole GPU as one MIG device.
  nvmlComputeInstance_t ci = nullptr;
  gi = t->CreateFull(d, full.nvml_index, &ci);
  ASSERT_NE(gi, nullptr);
  ASSERT_NE(ci, nullptr);
  nvmlGpuInstanceInfo_t gi_info{};
  ASSERT_EQ(NV(nvmlGpuInstanceGetInfo)(gi, &gi_info), NVML_SUCCESS);
  EXPECT_EQ(gi_info.id, 0u);
  EXPECT_EQ(gi_info.device, d);
  EXPECT_EQ(gi_info.profileId, full.id);
  EXPECT_EQ(gi_info.placement.start, 0u);
  EXPECT_EQ(gi_info.placement.size, model.memory_slices);
  nvmlComputeInstanceInfo_t ci_info{};
  ASSERT_EQ(NV(nvmlComputeInstanceGetInfo_v2)(ci, &ci_info), NVML_SUCCESS);
  EXPECT_EQ(ci_info.id, 0u);
  EXPECT_EQ(ci_info.gpuInstance, gi);
  EXPECT_EQ(ci_info.device, d);
  EXPECT_EQ(ci_info.placement.size, model.compute_slices);

  unsigned max = 0;
  ASSERT_EQ(NV(nvmlDeviceGetMaxMigDeviceCount)(d, &max), NVML_SUCCESS);
  EXPECT_EQ(max, model.compute_slices);
  nvmlDevice_t mig = nullptr;
  ASSERT_EQ(NV(nvmlDeviceGetMigDeviceHandleByIndex)(d, 0, &mig), NVML_SUCCESS);
  EXPECT_EQ(NV(nvmlDeviceGetMigDeviceHandleByIndex)(d, 1, &mig), NVML_ERROR_NOT_FOUND);
  ASSERT_EQ(NV(nvmlDeviceGetMigDeviceHandleByIndex)(d, 0, &mig), NVML_SUCCESS);
  EXPECT_EQ(Name(mig), model.name + " MIG " + full.name);
  std::string mig_uuid = Uuid(mig);
  EXPECT_EQ(mig_uuid.rfind("MIG-", 0), 0u) << mig_uuid;
  EXPECT_EQ(mig_uuid.size(), 40u);
  unsigned is_mig = 0, id = 9;
  ASSERT_EQ(NV(nvmlDeviceIsMigDeviceHandle)(mig, &is_mig), NVML_SUCCESS);
  EXPECT_EQ(is_mig, 1u);
  ASSERT_EQ(NV(nvmlDeviceIsMigDeviceHandle)(d, &is_mig), NVML_SUCCESS);
  EXPECT_EQ(is_mig, 0u);
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstanceId)(mig, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 0u);
  ASSERT_EQ(NV(nvmlDeviceGetComputeInstanceId)(mig, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 0u);
  EXPECT_EQ(NV(nvmlDeviceGetGpuInstanceId)(d, &id), NVML_ERROR_INVALID_ARGUMENT);
  nvmlDevice_t parent = nullptr;
  ASSERT_EQ(NV(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(mig, &parent), NVML_SUCCESS);
  EXPECT_EQ(parent, d);
  nvmlDevice_t by_uuid = nullptr;
  ASSERT_EQ(NV(nvmlDeviceGetHandleByUUID)(mig_uuid.c_str(), &by_uuid), NVML_SUCCESS);
  EXPECT_EQ(by_uuid, mig);
  nvmlDeviceAttributes_t attr{};
  ASSERT_EQ(NV(nvmlDeviceGetAttributes_v2)(mig, &attr), NVML_SUCCESS);
  EXPECT_EQ(attr.multiprocessorCount, full.multiprocessors);
  EXPECT_EQ(attr.gpuInstanceSliceCount, full.slices);
  EXPECT_EQ(attr.computeInstanceSliceCount, full.slices);
  EXPECT_EQ(attr.memorySizeMB, full.memory_mib);
  nvmlMemory_t mem{};
  ASSERT_EQ(NV(nvmlDeviceGetMemoryInfo)(mig, &mem), NVML_SUCCESS);
  EXPECT_EQ(mem.total, full.memory_mib << 20);
  // Like hardware, a MIG-enabled GPU reports no utilisation.
  nvmlUtilization_t util{};
  EXPECT_EQ(NV(nvmlDeviceGetUtilizationRates)(d, &util), NVML_ERROR_NOT_SUPPORTED);

  // Nothing else fits; a GI with a CI cannot go; MIG cannot be turned off while GIs exist.
  nvmlGpuInstance_t more = nullptr;
  const GiProfile& small = *model.ProfileByNvmlIndex(0);
  EXPECT_EQ(NV(nvmlDeviceCreateGpuInstance)(d, small.id, &more), NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(NV(nvmlGpuInstanceDestroy)(gi), NVML_ERROR_IN_USE);
  nvmlReturn_t activation{};
  EXPECT_EQ(NV(nvmlDeviceSetMigMode)(d, NVML_DEVICE_MIG_DISABLE, &activation), NVML_ERROR_IN_USE);

  ASSERT_EQ(NV(nvmlComputeInstanceDestroy)(ci), NVML_SUCCESS);
  EXPECT_EQ(NV(nvmlComputeInstanceDestroy)(ci), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(NV(nvmlComputeInstanceGetInfo_v2)(ci, &ci_info), NVML_ERROR_NOT_FOUND);
  char buf[96];
  EXPECT_EQ(NV(nvmlDeviceGetName)(mig, buf, sizeof(buf)), NVML_ERROR_NOT_FOUND);
  ASSERT_EQ(NV(nvmlGpuInstanceDestroy)(gi), NVML_SUCCESS);
  EXPECT_EQ(NV(nvmlGpuInstanceGetInfo)(gi, &gi_info), NVML_ERROR_NOT_FOUND);

  // Fill with the smallest profile: as many as its max, each with a CI, GI ids by placement.
  std::vector<nvmlGpuInstance_t> gis;
  for (unsigned i = 0; i < small.max_count; ++i) {
    nvmlComputeInstance_t c = nullptr;
    gis.push_back(t->CreateFull(d, small.nvml_index, &c));
    ASSERT_NE(c, nullptr);
  }
  EXPECT_EQ(NV(nvmlDeviceCreateGpuInstance)(d, small.id, &more), NVML_ERROR_INSUFFICIENT_RESOURCES);
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstanceRemainingCapacity)(d, small.id, &count), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
  std::vector<nvmlGpuInstance_t> listed(small.max_count);
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstances)(d, small.id, listed.data(), &count), NVML_SUCCESS);
  EXPECT_EQ(count, small.max_count);
  std::vector<std::string> uuids;
  for (unsigned i = 0; i < small.max_count; ++i) {
    ASSERT_EQ(NV(nvmlDeviceGetMigDeviceHandleByIndex)(d, i, &mig), NVML_SUCCESS);
    ASSERT_EQ(NV(nvmlDeviceGetGpuInstanceId)(mig, &id), NVML_SUCCESS);
    EXPECT_EQ(id, model.memory_slices - 1 + i);  // 1g GIs: (M-1) + start
    EXPECT_EQ(Name(mig), model.name + " MIG " + small.name);
    uuids.push_back(Uuid(mig));
  }
  EXPECT_EQ(std::set<std::string>(uuids.begin(), uuids.end()).size(), uuids.size());
  nvmlGpuInstance_t by_id = nullptr;
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstanceById)(d, model.memory_slices - 1, &by_id), NVML_SUCCESS);
  EXPECT_EQ(by_id, gis[0]);
  EXPECT_EQ(NV(nvmlDeviceGetGpuInstanceById)(d, 0, &by_id), NVML_ERROR_NOT_FOUND);
}

TEST_F(NvmlSimTest, MigLifecycleA100_40) {
  Init("a100-40gb");
  MigLifecycle(this, "a100-40gb");
}
TEST_F(NvmlSimTest, MigLifecycleA100_80) {
  Init("a100-80gb");
  MigLifecycle(this, "a100-80gb");
}
TEST_F(NvmlSimTest, MigLifecycleH100) {
  Init("h100-80gb");
  MigLifecycle(this, "h100-80gb");
}
TEST_F(NvmlSimTest, MigLifecycleH200) {
  Init("h200-141gb");
  MigLifecycle(this, "h200-141gb");
}
TEST_F(NvmlSimTest, MigLifecycleA30) {
  Init("a30");
  MigLifecycle(this, "a30");
}
TEST_F(NvmlSimTest, MigLifecycleB200) {
  Init("b200");
  MigLifecycle(this, "b200");
}
// Its whole-GPU profile is the +gfx one (the last of its table).
TEST_F(NvmlSimTest, MigLifecycleRtxPro6000) {
  Init("rtx-pro-6000");
  MigLifecycle(this, "rtx-pro-6000");
}

// A process that shuts NVML down and initialises again on a fresh state
// directory sees creation serials restart; its handles must still name the
// instances that exist now.
TEST_F(NvmlSimTest, HandlesStayRightAfterReinitWithFreshState) {
  Init("h100-80gb");
  EnableMig(0);
  nvmlComputeInstance_t ci = nullptr;
  nvmlGpuInstance_t gi = CreateFull(Gpu(0), NVML_GPU_INSTANCE_PROFILE_7_SLICE, &ci);
  nvmlGpuInstanceInfo_t info{};
  ASSERT_EQ(NV(nvmlGpuInstanceGetInfo)(gi, &info), NVML_SUCCESS);
  EXPECT_EQ(info.id, 0u);
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);

  std::system(("rm -rf '" + StateDir() + "'").c_str());
  Init("h100-80gb");
  EnableMig(0);
  // Same creation serial as before, another GI id: a 1g instance at start 0.
  gi = CreateFull(Gpu(0), NVML_GPU_INSTANCE_PROFILE_1_SLICE, &ci);
  ASSERT_NE(gi, nullptr);
  ASSERT_EQ(NV(nvmlGpuInstanceGetInfo)(gi, &info), NVML_SUCCESS);
  EXPECT_EQ(info.id, 7u);
  nvmlComputeInstanceInfo_t ci_info{};
  ASSERT_EQ(NV(nvmlComputeInstanceGetInfo_v2)(ci, &ci_info), NVML_SUCCESS);
  EXPECT_EQ(ci_info.gpuInstance, gi);
}

TEST_F(NvmlSimTest, MigNotSupportedOnL40sAndT4) {
  for (const std::string preset : {"l40s", "t4"}) {
    SCOPED_TRACE(preset);
    Init(preset);
    nvmlDevice_t d = Gpu(0);
    unsigned cur = 0, pend = 0;
    EXPECT_EQ(NV(nvmlDeviceGetMigMode)(d, &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
    nvmlReturn_t activation{};
    EXPECT_EQ(NV(nvmlDeviceSetMigMode)(d, NVML_DEVICE_MIG_ENABLE, &activation),
              NVML_ERROR_NOT_SUPPORTED);
    nvmlGpuInstanceProfileInfo_t info{};
    EXPECT_EQ(NV(nvmlDeviceGetGpuInstanceProfileInfo)(d, 0, &info), NVML_ERROR_NOT_SUPPORTED);
    nvmlGpuInstance_t gi = nullptr;
    EXPECT_EQ(NV(nvmlDeviceCreateGpuInstance)(d, 19, &gi), NVML_ERROR_NOT_SUPPORTED);
    unsigned max = 9;
    ASSERT_EQ(NV(nvmlDeviceGetMaxMigDeviceCount)(d, &max), NVML_SUCCESS);
    EXPECT_EQ(max, 0u);
    nvmlUtilization_t util{};
    EXPECT_EQ(NV(nvmlDeviceGetUtilizationRates)(d, &util), NVML_SUCCESS);
    ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
    std::system(("rm -rf '" + StateDir() + "'").c_str());
  }
}

TEST_F(NvmlSimTest, PlacementsOnH100) {
  Init("dgx-h100");
  ASSERT_NO_FATAL_FAILURE(EnableMig(3));
  nvmlDevice_t d = Gpu(3);
  nvmlGpuInstancePlacement_t pl[8] = {};
  unsigned count = 0;
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(d, 9, nullptr, &count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(d, 9, pl, &count), NVML_SUCCESS);
  EXPECT_EQ(pl[0].start, 0u);
  EXPECT_EQ(pl[1].start, 4u);
  EXPECT_EQ(pl[1].size, 4u);
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(d, 19, pl, &count), NVML_SUCCESS);
  EXPECT_EQ(count, 7u);
  EXPECT_EQ(NV(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(d, 77, pl, &count),
            NVML_ERROR_INVALID_ARGUMENT);

  nvmlGpuInstance_t gi = nullptr;
  nvmlGpuInstancePlacement_t at{4, 4};
  ASSERT_EQ(NV(nvmlDeviceCreateGpuInstanceWithPlacement)(d, 9, &at, &gi), NVML_SUCCESS);
  nvmlGpuInstanceInfo_t info{};
  ASSERT_EQ(NV(nvmlGpuInstanceGetInfo)(gi, &info), NVML_SUCCESS);
  EXPECT_EQ(info.id, 2u);
  EXPECT_EQ(info.placement.start, 4u);
  nvmlGpuInstance_t other = nullptr;
  EXPECT_EQ(NV(nvmlDeviceCreateGpuInstanceWithPlacement)(d, 9, &at, &other),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  nvmlGpuInstancePlacement_t bad_start{2, 4}, bad_size{0, 2};
  EXPECT_EQ(NV(nvmlDeviceCreateGpuInstanceWithPlacement)(d, 9, &bad_start, &other),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(NV(nvmlDeviceCreateGpuInstanceWithPlacement)(d, 9, &bad_size, &other),
            NVML_ERROR_INVALID_ARGUMENT);
  // Automatic placement fills the lower half: 1g at 0 → GI 7.
  ASSERT_EQ(NV(nvmlDeviceCreateGpuInstance)(d, 19, &other), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlGpuInstanceGetInfo)(other, &info), NVML_SUCCESS);
  EXPECT_EQ(info.id, 7u);
  unsigned remaining = 0;
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstanceRemainingCapacity)(d, 19, &remaining), NVML_SUCCESS);
  EXPECT_EQ(remaining, 3u);

  // Compute instances inside the 3g GI: 1c x3, then none; ids lowest-free.
  nvmlComputeInstanceProfileInfo_t cinfo{};
  ASSERT_EQ(NV(nvmlGpuInstanceGetComputeInstanceProfileInfo)(gi, 0, 0, &cinfo), NVML_SUCCESS);
  EXPECT_EQ(cinfo.sliceCount, 1u);
  EXPECT_EQ(cinfo.instanceCount, 3u);
  EXPECT_EQ(cinfo.multiprocessorCount, 20u);
  EXPECT_EQ(NV(nvmlGpuInstanceGetComputeInstanceProfileInfo)(gi, 3, 0, &cinfo),
            NVML_ERROR_NOT_SUPPORTED);
  std::vector<nvmlComputeInstance_t> cis(3);
  for (auto& ci : cis) {
    ASSERT_EQ(NV(nvmlGpuInstanceCreateComputeInstance)(gi, 0, &ci), NVML_SUCCESS);
  }
  nvmlComputeInstance_t extra = nullptr;
  EXPECT_EQ(NV(nvmlGpuInstanceCreateComputeInstance)(gi, 0, &extra),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  unsigned n = 0;
  std::vector<nvmlComputeInstance_t> listed(3);
  ASSERT_EQ(NV(nvmlGpuInstanceGetComputeInstances)(gi, 0, listed.data(), &n), NVML_SUCCESS);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(listed, cis);
  nvmlComputeInstance_t by_id = nullptr;
  ASSERT_EQ(NV(nvmlGpuInstanceGetComputeInstanceById)(gi, 1, &by_id), NVML_SUCCESS);
  EXPECT_EQ(by_id, cis[1]);
  ASSERT_EQ(NV(nvmlComputeInstanceDestroy)(cis[1]), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlGpuInstanceGetComputeInstanceRemainingCapacity)(gi, 0, &n), NVML_SUCCESS);
  EXPECT_EQ(n, 1u);
  ASSERT_EQ(NV(nvmlGpuInstanceCreateComputeInstance)(gi, 0, &extra), NVML_SUCCESS);
  nvmlComputeInstanceInfo_t ci_info{};
  ASSERT_EQ(NV(nvmlComputeInstanceGetInfo_v2)(extra, &ci_info), NVML_SUCCESS);
  EXPECT_EQ(ci_info.id, 1u);
  EXPECT_EQ(ci_info.placement.start, 1u);
  // MIG devices come in (GI id, CI id) order: GI 2's three CIs, then GI 7 has none.
  nvmlDevice_t mig = nullptr;
  ASSERT_EQ(NV(nvmlDeviceGetMigDeviceHandleByIndex)(d, 1, &mig), NVML_SUCCESS);
  unsigned id = 0;
  ASSERT_EQ(NV(nvmlDeviceGetComputeInstanceId)(mig, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 1u);
  EXPECT_EQ(Name(mig), "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb");
  nvmlDeviceAttributes_t attr{};
  ASSERT_EQ(NV(nvmlDeviceGetAttributes_v2)(mig, &attr), NVML_SUCCESS);
  EXPECT_EQ(attr.multiprocessorCount, 20u);
  EXPECT_EQ(attr.gpuInstanceSliceCount, 3u);
  EXPECT_EQ(attr.computeInstanceSliceCount, 1u);
}

TEST_F(NvmlSimTest, TwoProcessesShareMigState) {
  Init("dgx-h100");
  ASSERT_NO_FATAL_FAILURE(EnableMig(1));
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);

  // A second process creates a 2g GI with a CI through its own copy of the library.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    nvmlDevice_t d = nullptr;
    nvmlGpuInstance_t gi = nullptr;
    nvmlComputeInstance_t ci = nullptr;
    if (NV(nvmlInit_v2)() != NVML_SUCCESS) rc = 10;
    if (!rc && NV(nvmlDeviceGetHandleByIndex_v2)(1, &d) != NVML_SUCCESS) rc = 11;
    if (!rc && NV(nvmlDeviceCreateGpuInstance)(d, 14, &gi) != NVML_SUCCESS) rc = 12;
    if (!rc && NV(nvmlGpuInstanceCreateComputeInstance)(gi, 1, &ci) != NVML_SUCCESS) rc = 13;
    if (!rc && NV(nvmlShutdown)() != NVML_SUCCESS) rc = 14;
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
  nvmlDevice_t mig = nullptr;
  ASSERT_EQ(NV(nvmlDeviceGetMigDeviceHandleByIndex)(Gpu(1), 0, &mig), NVML_SUCCESS);
  EXPECT_EQ(Name(mig), "NVIDIA H100 80GB HBM3 MIG 2g.20gb");
  unsigned id = 0;
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstanceId)(mig, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 3u);

  // While this process stays initialised, another process destroys it; we see that.
  pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto store = StateStore::Open(LoadMachine("dgx-h100", "").value(), StateDir(), 0);
    if (!store.ok()) ::_exit(20);
    Status s = (*store)->Update([](SimState& st) {
      st.gpus[1].gis.clear();
      return Status::Ok();
    });
    ::_exit(s.ok() ? 0 : 21);
  }
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(WaitFor([&] {
    nvmlDevice_t m = nullptr;
    return NV(nvmlDeviceGetMigDeviceHandleByIndex)(Gpu(1), 0, &m) == NVML_ERROR_NOT_FOUND;
  }));
  char buf[96];
  EXPECT_EQ(NV(nvmlDeviceGetName)(mig, buf, sizeof(buf)), NVML_ERROR_NOT_FOUND);
}

TEST_F(NvmlSimTest, XidEventsReachEventSets) {
  Init("dgx-h100");
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(NV(nvmlEventSetCreate)(&set), NVML_SUCCESS);
  unsigned long long supported = 0;
  ASSERT_EQ(NV(nvmlDeviceGetSupportedEventTypes)(Gpu(2), &supported), NVML_SUCCESS);
  EXPECT_TRUE(supported & nvmlEventTypeXidCriticalError);
  ASSERT_EQ(
      NV(nvmlDeviceRegisterEvents)(Gpu(2),
                                   nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError |
                                       nvmlEventTypeDoubleBitEccError,
                                   set),
      NVML_SUCCESS);
  nvmlEventData_t ev{};
  EXPECT_EQ(NV(nvmlEventSetWait_v2)(set, &ev, 0), NVML_ERROR_TIMEOUT);

  auto control = Control();
  ASSERT_TRUE(InjectXid(*control, 3, 31, std::nullopt, std::nullopt).ok());  // not registered
  ASSERT_TRUE(InjectXid(*control, 2, 13, std::nullopt, std::nullopt).ok());
  ASSERT_EQ(NV(nvmlEventSetWait_v2)(set, &ev, 30000), NVML_SUCCESS);
  EXPECT_EQ(ev.device, Gpu(2));
  EXPECT_EQ(ev.eventType, nvmlEventTypeXidCriticalError);
  EXPECT_EQ(ev.eventData, 13u);
  EXPECT_EQ(ev.gpuInstanceId, 0xFFFFFFFFu);
  EXPECT_EQ(ev.computeInstanceId, 0xFFFFFFFFu);
  EXPECT_EQ(NV(nvmlEventSetWait_v2)(set, &ev, 20), NVML_ERROR_TIMEOUT);

  ASSERT_TRUE(InjectEcc(*control, 2, false).ok());
  ASSERT_EQ(NV(nvmlEventSetWait_v2)(set, &ev, 30000), NVML_SUCCESS);
  EXPECT_EQ(ev.eventType, nvmlEventTypeSingleBitEccError);
  ASSERT_TRUE(InjectEcc(*control, 2, true).ok());
  ASSERT_EQ(NV(nvmlEventSetWait_v2)(set, &ev, 30000), NVML_SUCCESS);
  EXPECT_EQ(ev.eventType, nvmlEventTypeDoubleBitEccError);
  unsigned long long n = 0;
  ASSERT_EQ(NV(nvmlDeviceGetTotalEccErrors)(Gpu(2), NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                            NVML_AGGREGATE_ECC, &n),
            NVML_SUCCESS);
  EXPECT_EQ(n, 1u);
  unsigned corr = 9, unc = 9, pending = 9, failed = 9;
  ASSERT_EQ(NV(nvmlDeviceGetRemappedRows)(Gpu(2), &corr, &unc, &pending, &failed), NVML_SUCCESS);
  EXPECT_EQ(unc, 1u);
  EXPECT_EQ(pending, 1u);

  // A set created later sees only later events.
  nvmlEventSet_t late = nullptr;
  ASSERT_EQ(NV(nvmlEventSetCreate)(&late), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceRegisterEvents)(Gpu(2), nvmlEventTypeXidCriticalError, late),
            NVML_SUCCESS);
  EXPECT_EQ(NV(nvmlEventSetWait_v2)(late, &ev, 0), NVML_ERROR_TIMEOUT);

  // An XID for a MIG device carries its GI and CI ids.
  ASSERT_NO_FATAL_FAILURE(EnableMig(2));
  nvmlComputeInstance_t ci = nullptr;
  CreateFull(Gpu(2), 0, &ci);  // 1g at 0: GI 7, CI 0
  ASSERT_TRUE(InjectXid(*control, 2, 43, 7u, 0u).ok());
  ASSERT_EQ(NV(nvmlEventSetWait_v2)(late, &ev, 30000), NVML_SUCCESS);
  EXPECT_EQ(ev.eventData, 43u);
  EXPECT_EQ(ev.gpuInstanceId, 7u);
  EXPECT_EQ(ev.computeInstanceId, 0u);
  EXPECT_EQ(ev.device, Gpu(2));

  ASSERT_EQ(NV(nvmlEventSetFree)(set), NVML_SUCCESS);
  EXPECT_EQ(NV(nvmlEventSetWait_v2)(set, &ev, 0), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(NV(nvmlEventSetFree)(late), NVML_SUCCESS);
}

TEST_F(NvmlSimTest, EventsFromTheGpuopCli) {
  const std::string gpuop = GPUOP_BINARY_DIR "/bin/gpuop";
  if (!PathExists(gpuop)) GTEST_SKIP() << "needs " << gpuop;
  Init("dgx-h100");
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(NV(nvmlEventSetCreate)(&set), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceRegisterEvents)(Gpu(5), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  // The waiter runs while another process injects.
  std::atomic<int> got{-1};
  std::thread waiter([&] {
    nvmlEventData_t ev{};
    if (NV(nvmlEventSetWait_v2)(set, &ev, 60000) == NVML_SUCCESS)
      got = static_cast<int>(ev.eventData);
  });
  int rc = std::system((gpuop + " sim gpu inject --gpu 5 --xid 48 >/dev/null").c_str());
  waiter.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(got.load(), 48);
  EXPECT_NE(std::system((gpuop + " sim gpu inject --gpu 5 2>/dev/null").c_str()), 0);
  EXPECT_EQ(WEXITSTATUS(std::system((gpuop + " sim gpu inject --gpu 5 2>/dev/null").c_str())), 2);
  EXPECT_EQ(
      WEXITSTATUS(std::system((gpuop + " sim gpu inject --gpu 99 --lost 2>/dev/null").c_str())), 1);
  ASSERT_EQ(NV(nvmlEventSetFree)(set), NVML_SUCCESS);
}

TEST_F(NvmlSimTest, LostGpu) {
  Init("dgx-a100");
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(NV(nvmlEventSetCreate)(&set), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceRegisterEvents)(Gpu(4), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  ASSERT_TRUE(MarkGpuLost(*Control(), 4).ok());
  nvmlEventData_t ev{};
  ASSERT_EQ(NV(nvmlEventSetWait_v2)(set, &ev, 30000), NVML_SUCCESS);
  EXPECT_EQ(ev.eventData, 79u);
  unsigned temp = 0;
  EXPECT_EQ(NV(nvmlDeviceGetTemperature)(Gpu(4), NVML_TEMPERATURE_GPU, &temp),
            NVML_ERROR_GPU_IS_LOST);
  char buf[96];
  EXPECT_EQ(NV(nvmlDeviceGetName)(Gpu(4), buf, sizeof(buf)), NVML_ERROR_GPU_IS_LOST);
  unsigned cur, pend;
  EXPECT_EQ(NV(nvmlDeviceGetMigMode)(Gpu(4), &cur, &pend), NVML_ERROR_GPU_IS_LOST);
  EXPECT_FALSE(Uuid(Gpu(4)).empty());  // identity stays readable
  EXPECT_EQ(NV(nvmlDeviceGetTemperature)(Gpu(3), NVML_TEMPERATURE_GPU, &temp), NVML_SUCCESS);
  ASSERT_TRUE(ResetGpu(*Control(), 4).ok());
  EXPECT_EQ(NV(nvmlDeviceGetTemperature)(Gpu(4), NVML_TEMPERATURE_GPU, &temp), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlEventSetFree)(set), NVML_SUCCESS);
}

TEST_F(NvmlSimTest, Telemetry) {
  Init("dgx-h100");
  nvmlDevice_t d = Gpu(0);
  unsigned power = 0, limit = 0, temp = 0, clock = 0, max_clock = 0, v = 0, period = 0;
  ASSERT_EQ(NV(nvmlDeviceGetPowerUsage)(d, &power), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceGetPowerManagementLimit)(d, &limit), NVML_SUCCESS);
  EXPECT_EQ(limit, 700000u);
  EXPECT_GT(power, 0u);
  EXPECT_LE(power, limit);
  ASSERT_EQ(NV(nvmlDeviceGetTemperature)(d, NVML_TEMPERATURE_GPU, &temp), NVML_SUCCESS);
  EXPECT_GT(temp, 20u);
  ASSERT_EQ(NV(nvmlDeviceGetClockInfo)(d, NVML_CLOCK_SM, &clock), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceGetMaxClockInfo)(d, NVML_CLOCK_SM, &max_clock), NVML_SUCCESS);
  EXPECT_LE(clock, max_clock);
  nvmlUtilization_t util{};
  ASSERT_EQ(NV(nvmlDeviceGetUtilizationRates)(d, &util), NVML_SUCCESS);
  EXPECT_LE(util.gpu, 100u);
  ASSERT_EQ(NV(nvmlDeviceGetEncoderUtilization)(d, &v, &period), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceGetDecoderUtilization)(d, &v, &period), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceGetPcieThroughput)(d, NVML_PCIE_UTIL_TX_BYTES, &v), NVML_SUCCESS);
  EXPECT_GT(v, 0u);
  ASSERT_EQ(NV(nvmlDeviceGetPcieReplayCounter)(d, &v), NVML_SUCCESS);
  unsigned long long reasons = 0, e1 = 0, e2 = 0;
  ASSERT_EQ(NV(nvmlDeviceGetCurrentClocksEventReasons)(d, &reasons), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceGetCurrentClocksThrottleReasons)(d, &reasons), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlDeviceGetTotalEnergyConsumption)(d, &e1), NVML_SUCCESS);
  EXPECT_TRUE(WaitFor(
      [&] { return NV(nvmlDeviceGetTotalEnergyConsumption)(d, &e2) == NVML_SUCCESS && e2 > e1; }));
  nvmlEnableState_t ecc_cur{}, ecc_pend{};
  ASSERT_EQ(NV(nvmlDeviceGetEccMode)(d, &ecc_cur, &ecc_pend), NVML_SUCCESS);
  EXPECT_EQ(ecc_cur, NVML_FEATURE_ENABLED);

  nvmlFieldValue_t f[4] = {};
  f[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
  f[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
  f[1].scopeId = UINT_MAX;
  f[2].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
  f[2].scopeId = 3;
  f[3].fieldId = 9999;
  ASSERT_EQ(NV(nvmlDeviceGetFieldValues)(d, 4, f), NVML_SUCCESS);
  EXPECT_EQ(f[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(f[0].valueType, NVML_VALUE_TYPE_UNSIGNED_INT);
  EXPECT_GT(f[0].value.uiVal, temp);
  EXPECT_EQ(f[1].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(f[2].nvmlReturn, NVML_SUCCESS);
  EXPECT_GT(f[1].value.ullVal, f[2].value.ullVal);  // all 18 links against one
  EXPECT_EQ(f[3].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);

  nvmlEnableState_t link{};
  ASSERT_EQ(NV(nvmlDeviceGetNvLinkState)(d, 17, &link), NVML_SUCCESS);
  EXPECT_EQ(link, NVML_FEATURE_ENABLED);
  nvmlPciInfo_t remote{};
  ASSERT_EQ(NV(nvmlDeviceGetNvLinkRemotePciInfo_v2)(d, 0, &remote), NVML_SUCCESS);
  nvmlGpuTopologyLevel_t level{};
  ASSERT_EQ(NV(nvmlDeviceGetTopologyCommonAncestor)(Gpu(0), Gpu(1), &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SINGLE);
  ASSERT_EQ(NV(nvmlDeviceGetTopologyCommonAncestor)(Gpu(0), Gpu(7), &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SYSTEM);
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
  std::system(("rm -rf '" + StateDir() + "'").c_str());

  Init("t4-1");
  unsigned a = 0, b = 0, c = 0, e = 0;
  EXPECT_EQ(NV(nvmlDeviceGetRemappedRows)(Gpu(0), &a, &b, &c, &e), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(NV(nvmlDeviceGetNvLinkState)(Gpu(0), 0, &link), NVML_ERROR_NOT_SUPPORTED);
  f[1].scopeId = 0;
  ASSERT_EQ(NV(nvmlDeviceGetFieldValues)(Gpu(0), 2, f), NVML_SUCCESS);
  EXPECT_EQ(f[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(NvmlSimTest, ManyThreads) {
  Init("dgx-h100");
  ASSERT_NO_FATAL_FAILURE(EnableMig(0));
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      while (!stop) {
        for (unsigned i = 0; i < 8; ++i) {
          char buf[96];
          if (NV(nvmlDeviceGetName)(Gpu(i), buf, sizeof(buf)) != NVML_SUCCESS) ++failures;
          unsigned power = 0;
          if (NV(nvmlDeviceGetPowerUsage)(Gpu(i), &power) != NVML_SUCCESS) ++failures;
        }
        nvmlDevice_t mig = nullptr;
        nvmlReturn_t r = NV(nvmlDeviceGetMigDeviceHandleByIndex)(Gpu(0), 0, &mig);
        if (r == NVML_SUCCESS) {
          char buf[96];
          r = NV(nvmlDeviceGetName)(mig, buf, sizeof(buf));  // may race with a destroy
          if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_FOUND) ++failures;
        } else if (r != NVML_ERROR_NOT_FOUND) {
          ++failures;
        }
      }
    });
  }
  for (int round = 0; round < 15; ++round) {
    nvmlComputeInstance_t ci = nullptr;
    nvmlGpuInstance_t gi = CreateFull(Gpu(0), 0, &ci);
    ASSERT_EQ(NV(nvmlComputeInstanceDestroy)(ci), NVML_SUCCESS);
    ASSERT_EQ(NV(nvmlGpuInstanceDestroy)(gi), NVML_SUCCESS);
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// ---- Issue 21: what a current driver and an unprivileged process show ------

// A machine file of one `model` GPU under driver `version`.
std::string DriverMachine(const std::string& dir, const std::string& model,
                          const std::string& version) {
  const std::string file = dir + "/" + model + "-" + version + ".yaml";
  std::ofstream(file) << "name: " << model << "-" << version << "\n"
                      << "driverVersion: \"" << version << "\"\n"
                      << "gpus:\n  - {model: " << model << ", migEnabled: true}\n";
  return file;
}

nvmlReturn_t ProfileInfo(unsigned index, nvmlGpuInstanceProfileInfo_t* info) {
  return NV(nvmlDeviceGetGpuInstanceProfileInfo)(Gpu(0), index, info);
}

TEST_F(NvmlSimTest, B200IsABlackwellWithNvidiasMigTable) {
  Init("dgx-b200");
  unsigned n = 0;
  ASSERT_EQ(NV(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
  ASSERT_EQ(n, 8u);
  nvmlDevice_t d = Gpu(0);
  EXPECT_EQ(Name(d), "NVIDIA B200");
  nvmlMemory_t mem{};
  ASSERT_EQ(NV(nvmlDeviceGetMemoryInfo)(d, &mem), NVML_SUCCESS);
  EXPECT_EQ(mem.total, 183359ull << 20);
  int major = 0, minor = 9;
  ASSERT_EQ(NV(nvmlDeviceGetCudaComputeCapability)(d, &major, &minor), NVML_SUCCESS);
  EXPECT_EQ(major, 10);
  EXPECT_EQ(minor, 0);
  nvmlDeviceArchitecture_t arch = 0;
  ASSERT_EQ(NV(nvmlDeviceGetArchitecture)(d, &arch), NVML_SUCCESS);
  EXPECT_EQ(arch, static_cast<nvmlDeviceArchitecture_t>(NVML_DEVICE_ARCH_BLACKWELL));
  nvmlPciInfo_t pci{};
  ASSERT_EQ(NV(nvmlDeviceGetPciInfo_v3)(d, &pci), NVML_SUCCESS);
  EXPECT_EQ(pci.pciDeviceId, 0x290110DEu);
  char version[80] = {};
  ASSERT_EQ(NV(nvmlSystemGetDriverVersion)(version, sizeof(version)), NVML_SUCCESS);
  EXPECT_EQ(DriverBranch(version), 580u);

  // Every index the 580 driver knows, in order: NVIDIA's seven B200 profiles
  // and NOT_SUPPORTED for the kinds the B200 lacks (+gfx, -me, +me.all).
  std::vector<std::string> names;
  unsigned idx = 0;
  for (;; ++idx) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    nvmlReturn_t r = NV(nvmlDeviceGetGpuInstanceProfileInfoV)(d, idx, &info);
    if (r == NVML_ERROR_INVALID_ARGUMENT) break;
    if (r == NVML_ERROR_NOT_SUPPORTED) continue;
    ASSERT_EQ(r, NVML_SUCCESS) << idx;
    names.push_back(info.name);
  }
  EXPECT_EQ(idx, 0x11u);
  EXPECT_EQ(names,
            (std::vector<std::string>{"MIG 1g.23gb", "MIG 2g.45gb", "MIG 3g.90gb", "MIG 4g.90gb",
                                      "MIG 7g.180gb", "MIG 1g.23gb+me", "MIG 1g.45gb"}));
}

// The +gfx, -me and +me.all kinds (RTX PRO 6000 Blackwell): listed with their
// driver ids, created, and named on their MIG devices.
TEST_F(NvmlSimTest, NewProfileKindsAreListedCreatedAndNamed) {
  Init("rtx-pro-6000");
  ASSERT_NO_FATAL_FAILURE(EnableMig(0));
  struct Want {
    unsigned index, id;
    const char* name;
  };
  for (const Want& w : {Want{0xA, 47, "MIG 1g.24gb+gfx"}, Want{0xB, 35, "MIG 2g.48gb+gfx"},
                        Want{0xC, 32, "MIG 4g.96gb+gfx"}, Want{0xD, 67, "MIG 1g.24gb-me"},
                        Want{0xE, 66, "MIG 2g.48gb-me"}, Want{0xF, 65, "MIG 1g.24gb+me.all"},
                        Want{0x10, 64, "MIG 2g.48gb+me.all"}}) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    ASSERT_EQ(NV(nvmlDeviceGetGpuInstanceProfileInfoV)(Gpu(0), w.index, &info), NVML_SUCCESS)
        << w.index;
    EXPECT_EQ(info.id, w.id);
    EXPECT_EQ(std::string(info.name), w.name);
  }
  nvmlGpuInstanceProfileInfo_t all{};
  ASSERT_EQ(ProfileInfo(0xF, &all), NVML_SUCCESS);
  EXPECT_EQ(all.decoderCount, 4u);
  EXPECT_EQ(all.instanceCount, 1u);
  nvmlGpuInstanceProfileInfo_t none{};
  ASSERT_EQ(ProfileInfo(0xD, &none), NVML_SUCCESS);
  EXPECT_EQ(none.decoderCount + none.encoderCount + none.jpegCount + none.ofaCount, 0u);

  // A 2g.48gb+me.all with one 1-slice CI, then 1g.24gb+gfx and 1g.24gb-me.
  nvmlGpuInstance_t gi = nullptr;
  ASSERT_EQ(NV(nvmlDeviceCreateGpuInstance)(Gpu(0), 64, &gi), NVML_SUCCESS);
  // +me.all holds the GPU's extra media engines: no +me beside it.
  nvmlGpuInstance_t me = nullptr;
  EXPECT_EQ(NV(nvmlDeviceCreateGpuInstance)(Gpu(0), 21, &me), NVML_ERROR_INSUFFICIENT_RESOURCES);
  nvmlComputeInstance_t ci = nullptr;
  ASSERT_EQ(
      NV(nvmlGpuInstanceCreateComputeInstance)(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci),
      NVML_SUCCESS);
  ASSERT_NE(CreateFull(Gpu(0), 0xA, &ci), nullptr);
  ASSERT_NE(CreateFull(Gpu(0), 0xD, &ci), nullptr);
  std::vector<std::string> names;
  for (unsigned i = 0;; ++i) {
    nvmlDevice_t mig = nullptr;
    if (NV(nvmlDeviceGetMigDeviceHandleByIndex)(Gpu(0), i, &mig) != NVML_SUCCESS) break;
    names.push_back(Name(mig));
  }
  const std::string prefix = "NVIDIA RTX PRO 6000 Blackwell Server Edition MIG ";
  EXPECT_EQ(names, (std::vector<std::string>{prefix + "1c.2g.48gb+me.all", prefix + "1g.24gb+gfx",
                                             prefix + "1g.24gb-me"}));
}

// Each driver branch enumerates the GI profile indices its header knows:
// INVALID_ARGUMENT past them, NOT_SUPPORTED for a known index the GPU lacks.
TEST_F(NvmlSimTest, DriverVersionDecidesTheProfileIndices) {
  struct Case {
    const char* version;
    unsigned count;
  };
  for (const Case& c : {Case{"550.163.01", 0xA}, Case{"570.172.08", 0xD}, Case{"575.57.08", 0x11},
                        Case{"580.95.05", 0x11}, Case{"595.45.04", 0x12}}) {
    SCOPED_TRACE(c.version);
    Use(DriverMachine(tmp_, "rtx-pro-6000", c.version));
    ::setenv("GPUOP_SIM_STATE", (tmp_ + "/state-" + c.version).c_str(), 1);
    ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
    nvmlGpuInstanceProfileInfo_t info{};
    EXPECT_EQ(ProfileInfo(c.count, &info), NVML_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(ProfileInfo(0x40, &info), NVML_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(ProfileInfo(c.count - 1, &info), c.count == 0xA    ? NVML_ERROR_NOT_SUPPORTED
                                               : c.count == 0xD  ? NVML_SUCCESS  // 4g+gfx
                                               : c.count == 0x11 ? NVML_SUCCESS  // 2g+me.all
                                                                 : NVML_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(ProfileInfo(0x9, &info), NVML_ERROR_NOT_SUPPORTED);  // 1g REV2: not on this board
    // A profile id of a kind the driver predates cannot be created either.
    nvmlGpuInstance_t gi = nullptr;
    EXPECT_EQ(NV(nvmlDeviceCreateGpuInstance)(Gpu(0), 47, &gi),
              c.count == 0xA ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS);
    while (NV(nvmlShutdown)() == NVML_SUCCESS) {
    }
  }
  // The default (570) driver on an H100: +gfx indices known, none of them its own.
  Init("h100-80gb");
  nvmlGpuInstanceProfileInfo_t info{};
  EXPECT_EQ(ProfileInfo(0xA, &info), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(ProfileInfo(0xD, &info), NVML_ERROR_INVALID_ARGUMENT);
}

// A MIG-enabled H100 with one 1g.10gb GI holding one CI.
class MigPrivilegeTest : public NvmlSimTest {
 public:
  void SetUp() override {
    NvmlSimTest::SetUp();
    Use("h100-80gb");
    ASSERT_TRUE(SetMigLayout(*Control(), 0, true, {"1g.10gb"}).ok());
    dev_ = tmp_ + "/dev";
    ASSERT_TRUE(MakeDirs(dev_ + "/nvidia-caps").ok());
    std::ofstream(dev_ + "/nvidia0") << "";
  }

  // Initialises NVML in the container view of `dev_`.
  void InitContainer() {
    ::setenv("GPUOP_SIM_VISIBLE", "devnodes", 1);
    ::setenv("GPUOP_SIM_DEV_DIR", dev_.c_str(), 1);
    ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
  }

  // What the calls the header marks privileged answer, in order; the
  // unprivileged reads must work either way.
  std::vector<nvmlReturn_t> PrivilegedCalls() {
    nvmlDevice_t d = Gpu(0);
    nvmlDevice_t mig = nullptr;
    EXPECT_EQ(NV(nvmlDeviceGetMigDeviceHandleByIndex)(d, 0, &mig), NVML_SUCCESS);
    EXPECT_EQ(Name(mig), "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
    nvmlGpuInstanceProfileInfo_t info{};
    EXPECT_EQ(ProfileInfo(0, &info), NVML_SUCCESS);
    unsigned gi_id = 99;
    EXPECT_EQ(NV(nvmlDeviceGetGpuInstanceId)(mig, &gi_id), NVML_SUCCESS);

    std::vector<nvmlReturn_t> out;
    nvmlGpuInstancePlacement_t placements[8];
    unsigned count = 8;
    out.push_back(
        NV(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(d, info.id, placements, &count));
    nvmlGpuInstance_t gi = nullptr;
    out.push_back(NV(nvmlDeviceGetGpuInstanceById)(d, gi_id, &gi));
    nvmlGpuInstance_t gis[7];
    out.push_back(NV(nvmlDeviceGetGpuInstances)(d, info.id, gis, &count));
    out.push_back(NV(nvmlDeviceGetGpuInstanceRemainingCapacity)(d, info.id, &count));
    nvmlGpuInstance_t created = nullptr;
    out.push_back(NV(nvmlDeviceCreateGpuInstance)(d, info.id, &created));
    return out;
  }
  std::string dev_;
};

TEST_F(MigPrivilegeTest, ContainerWithoutTheConfigCapabilityMayNotManageMig) {
  InitContainer();
  for (nvmlReturn_t r : PrivilegedCalls()) EXPECT_EQ(r, NVML_ERROR_NO_PERMISSION);
}

TEST_F(MigPrivilegeTest, ContainerWithTheConfigCapabilityMayManageMig) {
  std::ofstream(MigConfigCapPath(dev_)) << "";
  InitContainer();
  for (nvmlReturn_t r : PrivilegedCalls()) EXPECT_EQ(r, NVML_SUCCESS);
}

TEST_F(MigPrivilegeTest, TheVariableOverridesTheCapability) {
  ::setenv("GPUOP_SIM_MIG_PRIVILEGED", "1", 1);
  InitContainer();
  for (nvmlReturn_t r : PrivilegedCalls()) EXPECT_EQ(r, NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
  ::setenv("GPUOP_SIM_MIG_PRIVILEGED", "0", 1);
  std::ofstream(MigConfigCapPath(dev_)) << "";
  InitContainer();
  for (nvmlReturn_t r : PrivilegedCalls()) EXPECT_EQ(r, NVML_ERROR_NO_PERMISSION);
}

// GI and CI handles obtained while privileged: the CI and destroy calls are
// privileged too.
TEST_F(MigPrivilegeTest, ComputeInstanceCallsNeedPrivilege) {
  ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);  // the host view: privileged
  nvmlGpuInstance_t gi = nullptr;
  ASSERT_EQ(NV(nvmlDeviceGetGpuInstanceById)(Gpu(0), 7, &gi), NVML_SUCCESS);
  nvmlComputeInstance_t ci = nullptr;
  ASSERT_EQ(NV(nvmlGpuInstanceGetComputeInstanceById)(gi, 0, &ci), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
  ::setenv("GPUOP_SIM_MIG_PRIVILEGED", "0", 1);
  ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
  nvmlComputeInstance_t again = nullptr;
  EXPECT_EQ(NV(nvmlGpuInstanceGetComputeInstanceById)(gi, 0, &again), NVML_ERROR_NO_PERMISSION);
  nvmlComputeInstance_t cis[7];
  unsigned count = 7;
  EXPECT_EQ(NV(nvmlGpuInstanceGetComputeInstances)(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, cis,
                                                   &count),
            NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(NV(nvmlGpuInstanceGetComputeInstanceRemainingCapacity)(
                gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &count),
            NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(
      NV(nvmlGpuInstanceCreateComputeInstance)(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &again),
      NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(NV(nvmlComputeInstanceDestroy)(ci), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(NV(nvmlGpuInstanceDestroy)(gi), NVML_ERROR_NO_PERMISSION);
  // Reads that need no privilege still answer.
  nvmlComputeInstanceInfo_t info{};
  EXPECT_EQ(NV(nvmlComputeInstanceGetInfo_v2)(ci, &info), NVML_SUCCESS);
}

TEST_F(NvmlSimTest, NoLibcudaFailsOnlyTheLibcudaQuery) {
  ::setenv("GPUOP_SIM_LIBCUDA", "absent", 1);
  Init("dgx-h100");
  int version = 0;
  EXPECT_EQ(NV(nvmlSystemGetCudaDriverVersion_v2)(&version), NVML_ERROR_LIBRARY_NOT_FOUND);
  // The unversioned call answers a version the driver supports, as documented.
  ASSERT_EQ(NV(nvmlSystemGetCudaDriverVersion)(&version), NVML_SUCCESS);
  EXPECT_EQ(version, 12080);
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
  ::setenv("GPUOP_SIM_LIBCUDA", "present", 1);
  ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
  EXPECT_EQ(NV(nvmlSystemGetCudaDriverVersion_v2)(&version), NVML_SUCCESS);
  EXPECT_EQ(version, 12080);
}

TEST_F(NvmlSimTest, DeprecatedCallsAnswerDeprecated) {
  ::setenv("GPUOP_SIM_DEPRECATED", "nvmlDeviceGetTemperature, nvmlDeviceGetMemoryInfo", 1);
  Init("dgx-h100");
  unsigned temp = 0;
  EXPECT_EQ(NV(nvmlDeviceGetTemperature)(Gpu(0), NVML_TEMPERATURE_GPU, &temp),
            NVML_ERROR_DEPRECATED);
  nvmlMemory_t mem{};
  EXPECT_EQ(NV(nvmlDeviceGetMemoryInfo)(Gpu(0), &mem), NVML_ERROR_DEPRECATED);
  nvmlMemory_v2_t mem2{};
  mem2.version = nvmlMemory_v2;
  EXPECT_EQ(NV(nvmlDeviceGetMemoryInfo_v2)(Gpu(0), &mem2), NVML_SUCCESS);
  unsigned power = 0;
  EXPECT_EQ(NV(nvmlDeviceGetPowerUsage)(Gpu(0), &power), NVML_SUCCESS);
}

TEST_F(NvmlSimTest, DeniedGpuIsCountedButCannotBeOpened) {
  ::setenv("GPUOP_SIM_DENY_GPUS", "1,6", 1);
  Init("dgx-h100");
  unsigned n = 0;
  ASSERT_EQ(NV(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
  EXPECT_EQ(n, 8u);
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(1, &d), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(6, &d), NVML_ERROR_NO_PERMISSION);
  Machine m = LoadMachine("dgx-h100", "").value();
  EXPECT_EQ(NV(nvmlDeviceGetHandleByUUID)(m.gpus[1].uuid.c_str(), &d), NVML_ERROR_NO_PERMISSION);
  for (unsigned i : {0u, 2u, 7u}) EXPECT_EQ(Name(Gpu(i)), "NVIDIA H100 80GB HBM3");
}

TEST_F(NvmlSimTest, BadProcessEnvironmentFailsInitNamingTheVariable) {
  Use("dgx-h100");
  ::setenv("GPUOP_SIM_DENY_GPUS", "one", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(NV(nvmlInit_v2)(), NVML_ERROR_UNKNOWN);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("GPUOP_SIM_DENY_GPUS: 'one' is not a GPU index"), std::string::npos) << err;
}

using RunningProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);

// A GPU a CUDA process holds: the mode change is accepted but not activated,
// the modes stay, the activation status says IN_USE and the process is listed.
TEST_F(NvmlSimTest, MigModeChangeOnABusyGpuSaysInUse) {
  Init("dgx-h100");
  ASSERT_TRUE(Control()
                  ->Update([](SimState& s) {
                    s.gpus[0].processes.push_back({4242, 1ull << 30});
                    return Status::Ok();
                  })
                  .ok());
  nvmlReturn_t activation = NVML_SUCCESS;
  ASSERT_EQ(NV(nvmlDeviceSetMigMode)(Gpu(0), NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_ERROR_IN_USE);
  unsigned cur = 9, pend = 9;
  ASSERT_EQ(NV(nvmlDeviceGetMigMode)(Gpu(0), &cur, &pend), NVML_SUCCESS);
  EXPECT_EQ(cur, 0u);
  EXPECT_EQ(pend, 0u);
  auto running = reinterpret_cast<RunningProcessesFn>(
      ::dlsym(Library(), "nvmlDeviceGetComputeRunningProcesses_v3"));
  ASSERT_NE(running, nullptr);
  nvmlProcessInfo_t infos[4] = {};
  unsigned count = 4;
  ASSERT_EQ(running(Gpu(0), &count, infos), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(infos[0].pid, 4242u);
  EXPECT_EQ(infos[0].usedGpuMemory, 1ull << 30);
  // Another GPU, idle, takes the change pending a reset.
  ASSERT_EQ(NV(nvmlDeviceSetMigMode)(Gpu(1), NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_ERROR_RESET_REQUIRED);
  // Once the process is gone the busy GPU takes it too.
  ASSERT_TRUE(Control()
                  ->Update([](SimState& s) {
                    s.gpus[0].processes.clear();
                    return Status::Ok();
                  })
                  .ok());
  ASSERT_EQ(NV(nvmlDeviceSetMigMode)(Gpu(0), NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_ERROR_RESET_REQUIRED);
  ASSERT_EQ(NV(nvmlDeviceGetMigMode)(Gpu(0), &cur, &pend), NVML_SUCCESS);
  EXPECT_EQ(pend, 1u);
}

// The versioned temperature call answers as the deprecated one did; a driver
// before the 565 branch lacks it.
TEST_F(NvmlSimTest, TemperatureVAnswersLikeTemperature) {
  Init("dgx-h100");
  unsigned old = 0;
  ASSERT_EQ(NV(nvmlDeviceGetTemperature)(Gpu(2), NVML_TEMPERATURE_GPU, &old), NVML_SUCCESS);
  nvmlTemperature_t t{};
  t.version = nvmlTemperature_v1;
  t.sensorType = NVML_TEMPERATURE_GPU;
  ASSERT_EQ(NV(nvmlDeviceGetTemperatureV)(Gpu(2), &t), NVML_SUCCESS);
  // The model's GPU temperature: 32 C idle to 77 C at full load.
  EXPECT_GE(t.temperature, 32);
  EXPECT_LE(t.temperature, 77);
  t.version = nvmlTemperature_v1 + 1;
  EXPECT_EQ(NV(nvmlDeviceGetTemperatureV)(Gpu(2), &t), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  EXPECT_EQ(NV(nvmlDeviceGetTemperatureV)(Gpu(2), nullptr), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);

  Use(DriverMachine(tmp_, "h100-80gb", "560.35.03"));
  ::setenv("GPUOP_SIM_STATE", (tmp_ + "/state-560").c_str(), 1);
  ASSERT_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
  t.version = nvmlTemperature_v1;
  EXPECT_EQ(NV(nvmlDeviceGetTemperatureV)(Gpu(0), &t), NVML_ERROR_FUNCTION_NOT_FOUND);
  EXPECT_EQ(NV(nvmlDeviceGetTemperature)(Gpu(0), NVML_TEMPERATURE_GPU, &old), NVML_SUCCESS);
}

}  // namespace
}  // namespace gpuop::sim

namespace gpuop::sim {
namespace {

TEST_F(NvmlSimTest, GpmSamplesAndMetricsThroughTheAbi) {
  Init("dgx-h100");
  nvmlGpmSupport_t support{};
  support.version = 7;
  EXPECT_EQ(NV(nvmlGpmQueryDeviceSupport)(Gpu(0), &support), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  support.version = NVML_GPM_SUPPORT_VERSION;
  ASSERT_EQ(NV(nvmlGpmQueryDeviceSupport)(Gpu(0), &support), NVML_SUCCESS);
  EXPECT_EQ(support.isSupportedDevice, 1u);

  auto live = Sym<int (*)()>("gpuopSimGpmSamples");
  const int before = live();
  nvmlGpmSample_t a{}, b{}, other{};
  ASSERT_EQ(NV(nvmlGpmSampleAlloc)(&a), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlGpmSampleAlloc)(&b), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlGpmSampleAlloc)(&other), NVML_SUCCESS);
  EXPECT_EQ(live(), before + 3);

  auto get = std::make_unique<nvmlGpmMetricsGet_t>();
  get->version = NVML_GPM_METRICS_GET_VERSION;
  get->numMetrics = 2;
  get->metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
  get->metrics[1].metricId = 30;  // NVDEC 0: not modelled
  get->sample1 = a;
  get->sample2 = b;
  EXPECT_EQ(NV(nvmlGpmMetricsGet)(get.get()), NVML_ERROR_INVALID_ARGUMENT) << "samples not taken";

  ASSERT_EQ(NV(nvmlGpmSampleGet)(Gpu(0), a), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlGpmSampleGet)(Gpu(0), b), NVML_SUCCESS);
  ASSERT_EQ(NV(nvmlGpmMetricsGet)(get.get()), NVML_SUCCESS);
  EXPECT_EQ(get->metrics[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(get->metrics[0].value, 0) << "nothing ran";
  EXPECT_EQ(get->metrics[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);

  ASSERT_EQ(NV(nvmlGpmSampleGet)(Gpu(1), other), NVML_SUCCESS);
  get->sample2 = other;
  EXPECT_EQ(NV(nvmlGpmMetricsGet)(get.get()), NVML_ERROR_INVALID_ARGUMENT) << "two GPUs' samples";
  get->sample2 = b;
  get->version = 2;
  EXPECT_EQ(NV(nvmlGpmMetricsGet)(get.get()), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  get->version = NVML_GPM_METRICS_GET_VERSION;
  get->numMetrics = NVML_GPM_METRIC_MAX + 1;
  EXPECT_EQ(NV(nvmlGpmMetricsGet)(get.get()), NVML_ERROR_INVALID_ARGUMENT);

  // Not in MIG mode: no GPU instance to sample.
  EXPECT_EQ(NV(nvmlGpmMigSampleGet)(Gpu(0), 1, a), NVML_ERROR_NOT_FOUND);

  for (nvmlGpmSample_t s : {a, b, other}) EXPECT_EQ(NV(nvmlGpmSampleFree)(s), NVML_SUCCESS);
  EXPECT_EQ(NV(nvmlGpmSampleFree)(a), NVML_ERROR_INVALID_ARGUMENT) << "freed twice";
  EXPECT_EQ(live(), before);
  ASSERT_EQ(NV(nvmlShutdown)(), NVML_SUCCESS);
  std::system(("rm -rf '" + StateDir() + "'").c_str());

  Init("dgx-a100");
  ASSERT_EQ(NV(nvmlGpmQueryDeviceSupport)(Gpu(0), &support), NVML_SUCCESS);
  EXPECT_EQ(support.isSupportedDevice, 0u);
  ASSERT_EQ(NV(nvmlGpmSampleAlloc)(&a), NVML_SUCCESS);
  EXPECT_EQ(NV(nvmlGpmSampleGet)(Gpu(0), a), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(NV(nvmlGpmSampleFree)(a), NVML_SUCCESS);
}

}  // namespace
}  // namespace gpuop::sim

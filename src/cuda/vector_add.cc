#include "cuda/vector_add.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>

#include "cuda/library.h"

namespace gpuop::cuda {

// One thread per element: c[i] = a[i] + b[i] while i < n. PTX ISA 6.0 and
// sm_70 so that every driver since CUDA 9 can JIT it for any GPU from Volta on.
const char* const kVectorAddPtx = R"PTX(
// gpuop CUDA check: element-wise float vector add.
.version 6.0
.target sm_70
.address_size 64

.visible .entry vectorAdd(
    .param .u64 vectorAdd_a,
    .param .u64 vectorAdd_b,
    .param .u64 vectorAdd_c,
    .param .u32 vectorAdd_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [vectorAdd_a];
    ld.param.u64 %rd2, [vectorAdd_b];
    ld.param.u64 %rd3, [vectorAdd_c];
    ld.param.u32 %r1, [vectorAdd_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mul.wide.s32 %rd4, %r5, 4;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    add.s64 %rd7, %rd3, %rd4;
    ld.global.f32 %f1, [%rd5];
    ld.global.f32 %f2, [%rd6];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd7], %f3;
DONE:
    ret;
}
)PTX";

namespace {

constexpr unsigned kThreadsPerBlock = 256;
constexpr size_t kMaxElements = size_t{1} << 28;  // 1 GiB per vector
constexpr int kNvmlErrorDriverNotLoaded = 9;

// What NVML says about the driver, to explain a CUDA failure.
struct NvmlFacts {
  bool available = false;
  bool driver_not_loaded = false;
  std::string driver_version;
};

NvmlFacts ReadNvml(const std::string& path) {
  NvmlFacts facts;
  if (path.empty()) return facts;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (h == nullptr) return facts;
  using InitFn = int (*)();
  using VersionFn = int (*)(char*, unsigned int);
  void* init_sym = dlsym(h, "nvmlInit_v2");
  if (init_sym == nullptr) init_sym = dlsym(h, "nvmlInit");
  auto init = reinterpret_cast<InitFn>(init_sym);
  auto version = reinterpret_cast<VersionFn>(dlsym(h, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(h, "nvmlShutdown"));
  if (init != nullptr) {
    facts.available = true;
    int r = init();
    if (r == kNvmlErrorDriverNotLoaded) {
      facts.driver_not_loaded = true;
    } else if (r == 0) {
      char buf[96] = {};
      if (version != nullptr && version(buf, sizeof(buf)) == 0) facts.driver_version = buf;
      if (shutdown != nullptr) shutdown();
    }
  }
  dlclose(h);
  return facts;
}

Status InitFailure(const Library& lib, CUresult r, const NvmlFacts& nvml) {
  const std::string what = "cuInit: " + lib.ErrorText(r);
  if (r == kCudaErrorNoDevice && nvml.driver_not_loaded) {
    return Unavailable("the NVIDIA driver is not loaded (" + what +
                       "; NVML: Driver Not Loaded): load the nvidia kernel module on the node or "
                       "wait for the driver container to finish");
  }
  if (r == kCudaErrorNoDevice) {
    return FailedPrecondition("no GPU is visible to this container (" + what +
                              "): request nvidia.com/gpu or set NVIDIA_VISIBLE_DEVICES (and check "
                              "CUDA_VISIBLE_DEVICES)");
  }
  if (r == kCudaErrorStubLibrary) {
    return FailedPrecondition(lib.path() +
                              " is the CUDA toolkit's stub library, not the driver's (" + what +
                              "): put the NVIDIA driver's libcuda.so.1 first on the "
                              "library path");
  }
  if (r == kCudaErrorSystemDriverMismatch) {
    return FailedPrecondition("the CUDA driver library " + lib.path() +
                              " does not match the loaded NVIDIA kernel module (" + what +
                              "): reload the driver or reboot the node so both are one version");
  }
  if (r == kCudaErrorCompatNotSupportedOnDevice) {
    return FailedPrecondition(
        "the container's CUDA forward-compatibility libraries do not work "
        "on this GPU (" +
        what +
        "): remove the cuda-compat package from "
        "the image or raise driver.version");
  }
  return Unavailable("the CUDA driver cannot start (" + what +
                     "): check the NVIDIA driver on the node (dmesg, nvidia-smi)");
}

bool IsGpuFault(CUresult r) {
  return r == kCudaErrorDeviceUnavailable || r == kCudaErrorLaunchFailed ||
         r == kCudaErrorEccUncorrectable || r == kCudaErrorIllegalAddress || r == kCudaErrorUnknown;
}

// Releases what the check took, in reverse order, on every path.
class Cleanup {
 public:
  ~Cleanup() {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) (*it)();
  }
  void Add(std::function<void()> step) { steps_.push_back(std::move(step)); }

 private:
  std::vector<std::function<void()>> steps_;
};

// Deterministic inputs in [0, 1), exact in a float (multiples of 2^-24).
std::vector<float> Inputs(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<float>(x >> 8) / static_cast<float>(1u << 24);
  }
  return v;
}

}  // namespace

std::string CudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

Result<int> ParseCudaVersion(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument("CUDA version '" + std::string(text) + "' is not like 12.4");
  };
  size_t dot = text.find('.');
  std::string_view major = text.substr(0, dot);
  std::string_view minor = dot == std::string_view::npos ? "0" : text.substr(dot + 1);
  auto number = [](std::string_view s, int max) -> int {
    if (s.empty() || s.size() > 3) return -1;
    int v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return -1;
      v = v * 10 + (c - '0');
    }
    return v <= max ? v : -1;
  };
  int ma = number(major, 99), mi = number(minor, 9);
  if (ma <= 0 || mi < 0) return bad();
  return ma * 1000 + mi * 10;
}

Status CheckCudaVersion(int driver_cuda, int required, const std::string& driver_version) {
  if (required <= 0 || driver_cuda >= required) return Status::Ok();
  std::string who = driver_version.empty() ? "the NVIDIA driver" : "driver " + driver_version;
  return FailedPrecondition(who + " supports CUDA " + CudaVersionText(driver_cuda) +
                            "; this workload needs " + CudaVersionText(required) +
                            ": raise driver.version");
}

std::optional<size_t> FirstWrongElement(const std::vector<float>& a, const std::vector<float>& b,
                                        const std::vector<float>& c) {
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i] != a[i] + b[i]) return i;
  }
  return std::nullopt;
}

std::string FormatGpuUuid(const unsigned char bytes[16]) {
  char buf[48];
  std::snprintf(
      buf, sizeof(buf), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
      bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
      bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]);
  return buf;
}

Result<VectorAddReport> RunVectorAdd(const VectorAddOptions& options) {
  if (options.elements == 0 || options.elements > kMaxElements) {
    return InvalidArgument("--elements must be 1.." + std::to_string(kMaxElements) + ", not " +
                           std::to_string(options.elements));
  }
  if (options.device < 0) return InvalidArgument("--device must be 0 or more");
  GPUOP_ASSIGN_OR_RETURN(std::unique_ptr<Library> lib, Library::Load(options.library));
  const Functions& cu = lib->fn();
  const NvmlFacts nvml = ReadNvml(options.nvml_library);
  VectorAddReport rep;
  rep.driver_version = nvml.driver_version;

  if (CUresult r = cu.Init(0); r != kCudaSuccess) return InitFailure(*lib, r, nvml);
  if (CUresult r = cu.DriverGetVersion(&rep.driver_cuda_version); r != kCudaSuccess) {
    return Unavailable("cuDriverGetVersion: " + lib->ErrorText(r) +
                       ": check the NVIDIA driver on the node");
  }
  GPUOP_RETURN_IF_ERROR(
      CheckCudaVersion(rep.driver_cuda_version, options.required_cuda_version, rep.driver_version));
  if (CUresult r = cu.DeviceGetCount(&rep.device_count); r != kCudaSuccess) {
    return Unavailable("cuDeviceGetCount: " + lib->ErrorText(r));
  }
  if (options.device >= rep.device_count) {
    return NotFound("GPU " + std::to_string(options.device) +
                    " does not exist: this container sees " + std::to_string(rep.device_count) +
                    " GPU(s); choose --device 0.." + std::to_string(rep.device_count - 1) +
                    " or request more nvidia.com/gpu");
  }
  CUdevice dev = 0;
  if (CUresult r = cu.DeviceGet(&dev, options.device); r != kCudaSuccess) {
    return Unavailable("cuDeviceGet(" + std::to_string(options.device) + "): " + lib->ErrorText(r));
  }
  rep.device = options.device;
  char name[256] = {};
  if (CUresult r = cu.DeviceGetName(name, sizeof(name), dev); r != kCudaSuccess) {
    return Unavailable("cuDeviceGetName: " + lib->ErrorText(r));
  }
  rep.device_name = name;
  CUuuid uuid{};
  if (CUresult r = cu.DeviceGetUuid(&uuid, dev); r != kCudaSuccess) {
    return Unavailable("cuDeviceGetUuid: " + lib->ErrorText(r));
  }
  rep.uuid = FormatGpuUuid(reinterpret_cast<const unsigned char*>(uuid.bytes));
  cu.DeviceGetAttribute(&rep.cc_major, kCuAttrComputeCapabilityMajor, dev);
  cu.DeviceGetAttribute(&rep.cc_minor, kCuAttrComputeCapabilityMinor, dev);
  cu.DeviceTotalMem(&rep.total_memory_bytes, dev);

  const std::string gpu =
      "GPU " + std::to_string(options.device) + " (" + rep.device_name + ", " + rep.uuid + ")";
  auto fail = [&](const char* call, CUresult r) -> Status {
    std::string what = gpu + ": " + call + ": " + lib->ErrorText(r);
    if (r == kCudaErrorOutOfMemory) {
      return Unavailable(what +
                         ": the GPU's memory is taken by other processes; retry when they "
                         "end, or lower --elements");
    }
    if (IsGpuFault(r)) {
      return Unavailable(what +
                         ": the GPU cannot run work; it may have fallen off the bus (XID 79) "
                         "or hit an uncorrectable error: check the node's XID events "
                         "(dmesg, nvidia-smi -q), then reset the GPU or reboot the node");
    }
    return Internal(what);
  };

  Cleanup cleanup;
  CUcontext ctx = nullptr;
  if (CUresult r = cu.DevicePrimaryCtxRetain(&ctx, dev); r != kCudaSuccess) {
    return fail("cuDevicePrimaryCtxRetain", r);
  }
  cleanup.Add([&cu, dev] { cu.DevicePrimaryCtxRelease(dev); });
  if (CUresult r = cu.CtxSetCurrent(ctx); r != kCudaSuccess) return fail("cuCtxSetCurrent", r);
  cleanup.Add([&cu] { cu.CtxSetCurrent(nullptr); });

  CUmodule module = nullptr;
  if (CUresult r = cu.ModuleLoadData(&module, kVectorAddPtx); r != kCudaSuccess) {
    if (r == kCudaErrorUnsupportedPtxVersion) {
      return FailedPrecondition(
          gpu + ": cuModuleLoadData: " + lib->ErrorText(r) + ": " +
          (rep.driver_version.empty() ? "the NVIDIA driver" : "driver " + rep.driver_version) +
          " (CUDA " + CudaVersionText(rep.driver_cuda_version) +
          ") cannot compile the check's PTX: raise driver.version");
    }
    if (r == kCudaErrorInvalidPtx) {
      return FailedPrecondition(gpu + ": cuModuleLoadData: " + lib->ErrorText(r) +
                                ": the driver's PTX compiler rejected the check's kernel for "
                                "compute capability " +
                                std::to_string(rep.cc_major) + "." + std::to_string(rep.cc_minor) +
                                " (GPUs before Volta cannot run it)");
    }
    return fail("cuModuleLoadData", r);
  }
  cleanup.Add([&cu, module] { cu.ModuleUnload(module); });
  CUfunction fn = nullptr;
  if (CUresult r = cu.ModuleGetFunction(&fn, module, kVectorAddKernel); r != kCudaSuccess) {
    return fail("cuModuleGetFunction(vectorAdd)", r);
  }

  const size_t n = options.elements;
  const size_t bytes = n * sizeof(float);
  const std::vector<float> a = Inputs(n, 1), b = Inputs(n, 2);
  std::vector<float> c(n, -1.0f);
  CUdeviceptr da = 0, db = 0, dc = 0;
  for (CUdeviceptr* p : {&da, &db, &dc}) {
    if (CUresult r = cu.MemAlloc(p, bytes); r != kCudaSuccess) return fail("cuMemAlloc", r);
    cleanup.Add([&cu, p] { cu.MemFree(*p); });
  }
  if (CUresult r = cu.MemcpyHtoD(da, a.data(), bytes); r != kCudaSuccess) {
    return fail("cuMemcpyHtoD", r);
  }
  if (CUresult r = cu.MemcpyHtoD(db, b.data(), bytes); r != kCudaSuccess) {
    return fail("cuMemcpyHtoD", r);
  }
  int count = static_cast<int>(n);
  void* params[] = {&da, &db, &dc, &count};
  rep.threads_per_block = kThreadsPerBlock;
  rep.blocks = static_cast<unsigned>((n + kThreadsPerBlock - 1) / kThreadsPerBlock);
  if (CUresult r = cu.LaunchKernel(fn, rep.blocks, 1, 1, kThreadsPerBlock, 1, 1, 0, nullptr, params,
                                   nullptr);
      r != kCudaSuccess) {
    return fail("cuLaunchKernel", r);
  }
  if (CUresult r = cu.CtxSynchronize(); r != kCudaSuccess) return fail("cuCtxSynchronize", r);
  if (CUresult r = cu.MemcpyDtoH(c.data(), dc, bytes); r != kCudaSuccess) {
    return fail("cuMemcpyDtoH", r);
  }
  if (auto wrong = FirstWrongElement(a, b, c)) {
    size_t bad = 0;
    for (size_t i = *wrong; i < n; ++i) bad += c[i] != a[i] + b[i] ? 1 : 0;
    const size_t i = *wrong;
    char detail[160];
    std::snprintf(detail, sizeof(detail), "element %zu is %.9g, expected %.9g (%.9g + %.9g)", i,
                  static_cast<double>(c[i]), static_cast<double>(a[i] + b[i]),
                  static_cast<double>(a[i]), static_cast<double>(b[i]));
    return Internal(gpu + " computed a wrong vector sum: " + detail + "; " + std::to_string(bad) +
                    " of " + std::to_string(n) +
                    " elements wrong: the GPU is faulty; drain the node and check its XID and ECC "
                    "errors");
  }
  rep.elements = n;
  return rep;
}

}  // namespace gpuop::cuda

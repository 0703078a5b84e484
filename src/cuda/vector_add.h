// The CUDA check: does a GPU really compute? RunVectorAdd does what NVIDIA's
// cuda-samples vectorAdd does, through the driver API only (library.h): init,
// check the driver's CUDA version, pick the device, take its primary context,
// JIT-load an embedded PTX vector-add kernel, copy two vectors in, launch,
// copy the sum back and check every element. Every failure is a Status whose
// message names the cause and the fix (no GPU visible, driver not loaded,
// CUDA too old for the workload, GPU lost, wrong result).
//
// The pure helpers below are what RunVectorAdd decides with; tests drive them
// without a library. All functions are thread-safe; RunVectorAdd uses the
// calling thread's CUDA context slot.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::cuda {

struct VectorAddOptions {
  std::string library = "libcuda.so.1";
  // NVML, read only to explain failures: the driver version string and
  // whether the driver is loaded. Optional: failures are still reported when
  // it cannot be loaded.
  std::string nvml_library = "libnvidia-ml.so.1";
  int device = 0;
  size_t elements = 50000;
  int required_cuda_version = 0;  // 1000 * major + 10 * minor, e.g. 12040; 0: none
};

struct VectorAddReport {
  int driver_cuda_version = 0;  // cuDriverGetVersion
  std::string driver_version;   // "570.172.08" from NVML; empty when unknown
  int device_count = 0;
  int device = 0;
  std::string device_name;
  std::string uuid;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  int cc_major = 0, cc_minor = 0;
  size_t total_memory_bytes = 0;
  size_t elements = 0;
  unsigned blocks = 0, threads_per_block = 0;
};

Result<VectorAddReport> RunVectorAdd(const VectorAddOptions& options);

// The embedded kernel: vectorAdd(const float* a, const float* b, float* c, int n).
extern const char* const kVectorAddPtx;
inline constexpr const char* kVectorAddKernel = "vectorAdd";

// ---- Pure helpers ---------------------------------------------------------------

// 12040 -> "12.4".
std::string CudaVersionText(int version);
// "12.4" or "12" -> 12040 / 12000; InvalidArgument otherwise.
Result<int> ParseCudaVersion(std::string_view text);
// Ok when the driver's CUDA version covers `required` (0: nothing required);
// otherwise "driver 535.129.03 supports CUDA 12.2; this workload needs 12.4:
// raise driver.version" (without the driver version when it is empty).
Status CheckCudaVersion(int driver_cuda, int required, const std::string& driver_version);
// The first i with c[i] != a[i] + b[i] (float arithmetic), or nullopt.
// REQUIRES: a, b and c have the same size.
std::optional<size_t> FirstWrongElement(const std::vector<float>& a, const std::vector<float>& b,
                                        const std::vector<float>& c);
// "GPU-" and the 16 bytes as 8-4-4-4-12 lowercase hex.
std::string FormatGpuUuid(const unsigned char bytes[16]);

}  // namespace gpuop::cuda

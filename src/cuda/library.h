// Library: the CUDA driver API (libcuda.so.1) loaded with dlopen, and the
// typed table of the functions gpuop's CUDA check calls.
//
// gpuop never links against CUDA: a node without the driver must still start
// and say what is wrong. Load() resolves each function under the versioned
// name the real library exports (cuMemAlloc_v2, cuDevicePrimaryCtxRelease_v2,
// ...; cuDeviceGetUuid_v2 with cuDeviceGetUuid as the older fallback) and
// fails, naming the symbol, when the library lacks one: "this driver is too
// old for the CUDA check", never a crash.
//
// Only the part of cuda.h that gpuop uses is declared here, with the ABI's
// types and values. A Library is immutable after Load and may be used from
// any thread (the driver API is thread-safe).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"

namespace gpuop::cuda {

// ---- cuda.h (the subset used) ------------------------------------------------
using CUresult = int;  // enum cudaError_enum
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // 64-bit on every platform gpuop supports
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
struct CUuuid {
  char bytes[16];
};
static_assert(sizeof(CUuuid) == 16);
static_assert(sizeof(CUdeviceptr) == 8);

inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorOutOfMemory = 2;
inline constexpr CUresult kCudaErrorStubLibrary = 34;
inline constexpr CUresult kCudaErrorDeviceUnavailable = 46;
inline constexpr CUresult kCudaErrorNoDevice = 100;
inline constexpr CUresult kCudaErrorInvalidDevice = 101;
inline constexpr CUresult kCudaErrorEccUncorrectable = 214;
inline constexpr CUresult kCudaErrorInvalidPtx = 218;
inline constexpr CUresult kCudaErrorUnsupportedPtxVersion = 222;
inline constexpr CUresult kCudaErrorNotFound = 500;
inline constexpr CUresult kCudaErrorIllegalAddress = 700;
inline constexpr CUresult kCudaErrorLaunchFailed = 719;
inline constexpr CUresult kCudaErrorSystemDriverMismatch = 803;
inline constexpr CUresult kCudaErrorCompatNotSupportedOnDevice = 804;
inline constexpr CUresult kCudaErrorUnknown = 999;

// CUdevice_attribute values used.
inline constexpr int kCuAttrComputeCapabilityMajor = 75;
inline constexpr int kCuAttrComputeCapabilityMinor = 76;

struct Functions {
  CUresult (*Init)(unsigned int flags) = nullptr;
  CUresult (*DriverGetVersion)(int* version) = nullptr;
  CUresult (*GetErrorName)(CUresult error, const char** str) = nullptr;
  CUresult (*GetErrorString)(CUresult error, const char** str) = nullptr;
  CUresult (*DeviceGetCount)(int* count) = nullptr;
  CUresult (*DeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*DeviceGetName)(char* name, int len, CUdevice dev) = nullptr;
  CUresult (*DeviceGetUuid)(CUuuid* uuid, CUdevice dev) = nullptr;
  CUresult (*DeviceTotalMem)(size_t* bytes, CUdevice dev) = nullptr;
  CUresult (*DeviceGetAttribute)(int* value, int attribute, CUdevice dev) = nullptr;
  CUresult (*DevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice dev) = nullptr;
  CUresult (*DevicePrimaryCtxRelease)(CUdevice dev) = nullptr;
  CUresult (*CtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*CtxSynchronize)() = nullptr;
  CUresult (*ModuleLoadData)(CUmodule* module, const void* image) = nullptr;
  CUresult (*ModuleUnload)(CUmodule module) = nullptr;
  CUresult (*ModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name) = nullptr;
  CUresult (*MemAlloc)(CUdeviceptr* ptr, size_t bytes) = nullptr;
  CUresult (*MemFree)(CUdeviceptr ptr) = nullptr;
  CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes) = nullptr;
  CUresult (*MemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes) = nullptr;
  CUresult (*LaunchKernel)(CUfunction fn, unsigned int grid_x, unsigned int grid_y,
                           unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                           unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                           void** params, void** extra) = nullptr;
};

class Library {
 public:
  // dlopen()s `path` ("libcuda.so.1": the loader's search, or a file) and
  // resolves every function. Unavailable when the library cannot be loaded,
  // FailedPrecondition naming the symbol when one is missing.
  static Result<std::unique_ptr<Library>> Load(const std::string& path);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const Functions& fn() const { return fn_; }
  const std::string& path() const { return path_; }

  // "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)", or the
  // number when the library does not know it.
  std::string ErrorText(CUresult r) const;

 private:
  Library(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}
  std::string path_;
  void* handle_ = nullptr;
  Functions fn_;
};

}  // namespace gpuop::cuda

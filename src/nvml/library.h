// Library: one loaded NVML shared object and the table of its functions.
//
// Load() dlopen()s the library the caller names (the driver's
// libnvidia-ml.so.1, or the simulator) and resolves every function gpuop uses
// with dlsym() into typed pointers, trying the versioned names the real
// library exports (nvmlInit_v2, then nvmlInit, ...). gpuop never links against
// NVML: a node without the driver must still start and say what is wrong.
// A few functions are required (init, shutdown, error string, count, handle by
// index, name, UUID); without one of them Load fails. Any other function may
// be missing in an older driver: its pointer stays null and Call() returns
// NotSupported naming the symbol and the feature that needs it.
//
// This header is internal to src/nvml (it exposes the C ABI); components use
// client.h. A Library is immutable after Load and may be used from any
// thread, as NVML itself is thread-safe. Init() and the destructor are called
// by the owner (Client) once each.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "nvml/errors.h"
#include "nvml/nvml_abi.h"

namespace gpuop::nvml {

// One resolved function: the pointer (null when the library lacks every
// candidate name), the name that resolved (or the preferred one) and what it
// is for, used in the "driver too old" message.
template <typename F>
struct Fn {
  F ptr = nullptr;
  const char* symbol = "";
  const char* feature = "";
  explicit operator bool() const { return ptr != nullptr; }
};

// X(member, type-of, feature, candidate symbol names...). The pointer type is
// taken from the newest declaration; older names are listed only where their
// ABI is the same.
// clang-format off
#define GPUOP_NVML_REQUIRED_FUNCTIONS(X)                                             \
  X(Init, nvmlInit_v2, "initialising NVML", "nvmlInit_v2", "nvmlInit")                \
  X(Shutdown, nvmlShutdown, "shutting NVML down", "nvmlShutdown")                      \
  X(ErrorString, nvmlErrorString, "error messages", "nvmlErrorString")                 \
  X(DeviceGetCount, nvmlDeviceGetCount_v2, "counting GPUs", "nvmlDeviceGetCount_v2",   \
    "nvmlDeviceGetCount")                                                              \
  X(DeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex_v2, "enumerating GPUs",         \
    "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex")                     \
  X(DeviceGetName, nvmlDeviceGetName, "GPU names", "nvmlDeviceGetName")                \
  X(DeviceGetUUID, nvmlDeviceGetUUID, "GPU UUIDs", "nvmlDeviceGetUUID")

#define GPUOP_NVML_OPTIONAL_FUNCTIONS(X)                                                       \
  X(SystemGetDriverVersion, nvmlSystemGetDriverVersion, "the driver version",                   \
    "nvmlSystemGetDriverVersion")                                                               \
  X(SystemGetNVMLVersion, nvmlSystemGetNVMLVersion, "the NVML version",                         \
    "nvmlSystemGetNVMLVersion")                                                                 \
  X(SystemGetCudaDriverVersion, nvmlSystemGetCudaDriverVersion_v2, "the CUDA driver version",   \
    "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")                      \
  X(DeviceGetHandleByUUID, nvmlDeviceGetHandleByUUID, "finding a GPU by UUID",                  \
    "nvmlDeviceGetHandleByUUID")                                                                \
  X(DeviceGetSerial, nvmlDeviceGetSerial, "serial numbers", "nvmlDeviceGetSerial")              \
  X(DeviceGetMinorNumber, nvmlDeviceGetMinorNumber, "device minor numbers",                     \
    "nvmlDeviceGetMinorNumber")                                                                 \
  X(DeviceGetIndex, nvmlDeviceGetIndex, "GPU indices", "nvmlDeviceGetIndex")                    \
  X(DeviceGetPciInfo, nvmlDeviceGetPciInfo_v3, "PCI information", "nvmlDeviceGetPciInfo_v3",    \
    "nvmlDeviceGetPciInfo_v2")                                                                  \
  X(DeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo, "memory information",                         \
    "nvmlDeviceGetMemoryInfo")                                                                  \
  X(DeviceGetMemoryInfoV2, nvmlDeviceGetMemoryInfo_v2, "reserved-memory information",           \
    "nvmlDeviceGetMemoryInfo_v2")                                                               \
  X(DeviceGetCudaComputeCapability, nvmlDeviceGetCudaComputeCapability,                         \
    "the compute capability", "nvmlDeviceGetCudaComputeCapability")                             \
  X(DeviceGetBrand, nvmlDeviceGetBrand, "the brand", "nvmlDeviceGetBrand")                      \
  X(DeviceGetArchitecture, nvmlDeviceGetArchitecture, "the architecture",                       \
    "nvmlDeviceGetArchitecture")                                                                \
  X(DeviceGetNumaNodeId, nvmlDeviceGetNumaNodeId, "the NUMA node", "nvmlDeviceGetNumaNodeId")   \
  X(DeviceGetTemperatureV, nvmlDeviceGetTemperatureV, "temperatures",                         \
    "nvmlDeviceGetTemperatureV")                                                                \
  X(DeviceGetTemperature, nvmlDeviceGetTemperature, "temperatures", "nvmlDeviceGetTemperature") \
  X(DeviceGetComputeRunningProcesses, nvmlDeviceGetComputeRunningProcesses_v3,                 \
    "the processes using a GPU", "nvmlDeviceGetComputeRunningProcesses_v3")                     \
  X(DeviceGetUtilizationRates, nvmlDeviceGetUtilizationRates, "utilization",                    \
    "nvmlDeviceGetUtilizationRates")                                                            \
  X(DeviceGetEncoderUtilization, nvmlDeviceGetEncoderUtilization, "encoder utilization",        \
    "nvmlDeviceGetEncoderUtilization")                                                          \
  X(DeviceGetDecoderUtilization, nvmlDeviceGetDecoderUtilization, "decoder utilization",        \
    "nvmlDeviceGetDecoderUtilization")                                                          \
  X(DeviceGetPowerUsage, nvmlDeviceGetPowerUsage, "power readings", "nvmlDeviceGetPowerUsage")  \
  X(DeviceGetPowerManagementLimit, nvmlDeviceGetPowerManagementLimit, "the power limit",        \
    "nvmlDeviceGetPowerManagementLimit")                                                        \
  X(DeviceGetTotalEnergyConsumption, nvmlDeviceGetTotalEnergyConsumption, "energy counters",    \
    "nvmlDeviceGetTotalEnergyConsumption")                                                      \
  X(DeviceGetClockInfo, nvmlDeviceGetClockInfo, "clock readings", "nvmlDeviceGetClockInfo")     \
  X(DeviceGetTotalEccErrors, nvmlDeviceGetTotalEccErrors, "ECC counters",                       \
    "nvmlDeviceGetTotalEccErrors")                                                              \
  X(DeviceGetRemappedRows, nvmlDeviceGetRemappedRows, "row remapping",                          \
    "nvmlDeviceGetRemappedRows")                                                                \
  X(DeviceGetPcieReplayCounter, nvmlDeviceGetPcieReplayCounter, "PCIe replay counters",         \
    "nvmlDeviceGetPcieReplayCounter")                                                           \
  X(DeviceGetPcieThroughput, nvmlDeviceGetPcieThroughput, "PCIe throughput",                    \
    "nvmlDeviceGetPcieThroughput")                                                              \
  X(DeviceGetCurrentClocksEventReasons, nvmlDeviceGetCurrentClocksEventReasons,                 \
    "clock event reasons", "nvmlDeviceGetCurrentClocksEventReasons",                            \
    "nvmlDeviceGetCurrentClocksThrottleReasons")                                                \
  X(DeviceGetFieldValues, nvmlDeviceGetFieldValues, "field values (memory temperature, NVLink " \
    "throughput)", "nvmlDeviceGetFieldValues")                                                  \
  X(DeviceGetNvLinkState, nvmlDeviceGetNvLinkState, "NVLink state", "nvmlDeviceGetNvLinkState") \
  X(DeviceGetNvLinkRemotePciInfo, nvmlDeviceGetNvLinkRemotePciInfo_v2, "NVLink peers",          \
    "nvmlDeviceGetNvLinkRemotePciInfo_v2")                                                      \
  X(DeviceGetNvLinkRemoteDeviceType, nvmlDeviceGetNvLinkRemoteDeviceType, "NVLink peer types",  \
    "nvmlDeviceGetNvLinkRemoteDeviceType")                                                      \
  X(DeviceGetTopologyCommonAncestor, nvmlDeviceGetTopologyCommonAncestor, "the PCIe topology",  \
    "nvmlDeviceGetTopologyCommonAncestor")                                                      \
  X(DeviceGetMigMode, nvmlDeviceGetMigMode, "MIG", "nvmlDeviceGetMigMode")                      \
  X(DeviceSetMigMode, nvmlDeviceSetMigMode, "MIG mode changes", "nvmlDeviceSetMigMode")         \
  X(DeviceGetMaxMigDeviceCount, nvmlDeviceGetMaxMigDeviceCount, "MIG devices",                  \
    "nvmlDeviceGetMaxMigDeviceCount")                                                           \
  X(DeviceGetMigDeviceHandleByIndex, nvmlDeviceGetMigDeviceHandleByIndex, "MIG devices",        \
    "nvmlDeviceGetMigDeviceHandleByIndex")                                                      \
  X(DeviceGetGpuInstanceId, nvmlDeviceGetGpuInstanceId, "MIG devices",                          \
    "nvmlDeviceGetGpuInstanceId")                                                               \
  X(DeviceGetComputeInstanceId, nvmlDeviceGetComputeInstanceId, "MIG devices",                  \
    "nvmlDeviceGetComputeInstanceId")                                                           \
  X(DeviceGetAttributes, nvmlDeviceGetAttributes_v2, "MIG device attributes",                   \
    "nvmlDeviceGetAttributes_v2")                                                               \
  X(DeviceGetGpuInstanceProfileInfo, nvmlDeviceGetGpuInstanceProfileInfo, "MIG profiles",       \
    "nvmlDeviceGetGpuInstanceProfileInfo")                                                      \
  X(DeviceGetGpuInstanceProfileInfoV, nvmlDeviceGetGpuInstanceProfileInfoV,                     \
    "MIG profile names", "nvmlDeviceGetGpuInstanceProfileInfoV")                                \
  X(DeviceGetGpuInstancePossiblePlacements, nvmlDeviceGetGpuInstancePossiblePlacements_v2,      \
    "MIG placements", "nvmlDeviceGetGpuInstancePossiblePlacements_v2")                          \
  X(DeviceCreateGpuInstance, nvmlDeviceCreateGpuInstance, "creating MIG GPU instances",         \
    "nvmlDeviceCreateGpuInstance")                                                              \
  X(DeviceCreateGpuInstanceWithPlacement, nvmlDeviceCreateGpuInstanceWithPlacement,             \
    "creating MIG GPU instances at a placement", "nvmlDeviceCreateGpuInstanceWithPlacement")    \
  X(DeviceGetGpuInstances, nvmlDeviceGetGpuInstances, "listing MIG GPU instances",              \
    "nvmlDeviceGetGpuInstances")                                                                \
  X(DeviceGetGpuInstanceById, nvmlDeviceGetGpuInstanceById, "MIG GPU instances",                \
    "nvmlDeviceGetGpuInstanceById")                                                             \
  X(GpuInstanceGetInfo, nvmlGpuInstanceGetInfo, "MIG GPU instances", "nvmlGpuInstanceGetInfo")  \
  X(GpuInstanceDestroy, nvmlGpuInstanceDestroy, "destroying MIG GPU instances",                 \
    "nvmlGpuInstanceDestroy")                                                                   \
  X(GpuInstanceGetComputeInstanceProfileInfo, nvmlGpuInstanceGetComputeInstanceProfileInfo,     \
    "MIG compute instance profiles", "nvmlGpuInstanceGetComputeInstanceProfileInfo")            \
  X(GpuInstanceCreateComputeInstance, nvmlGpuInstanceCreateComputeInstance,                     \
    "creating MIG compute instances", "nvmlGpuInstanceCreateComputeInstance")                   \
  X(GpuInstanceGetComputeInstances, nvmlGpuInstanceGetComputeInstances,                         \
    "listing MIG compute instances", "nvmlGpuInstanceGetComputeInstances")                      \
  X(GpuInstanceGetComputeInstanceById, nvmlGpuInstanceGetComputeInstanceById,                   \
    "MIG compute instances", "nvmlGpuInstanceGetComputeInstanceById")                           \
  X(ComputeInstanceGetInfo, nvmlComputeInstanceGetInfo_v2, "MIG compute instances",             \
    "nvmlComputeInstanceGetInfo_v2")                                                            \
  X(ComputeInstanceDestroy, nvmlComputeInstanceDestroy, "destroying MIG compute instances",     \
    "nvmlComputeInstanceDestroy")                                                               \
  X(DeviceGetGpuFabricInfoV, nvmlDeviceGetGpuFabricInfoV, "GPU fabric (NVLink domain) "        \
    "information", "nvmlDeviceGetGpuFabricInfoV")                                               \
  X(DeviceGetGpuFabricInfo, nvmlDeviceGetGpuFabricInfo, "GPU fabric (NVLink domain) "           \
    "information", "nvmlDeviceGetGpuFabricInfo")                                                \
  X(EventSetCreate, nvmlEventSetCreate, "NVML events", "nvmlEventSetCreate")                    \
  X(DeviceGetSupportedEventTypes, nvmlDeviceGetSupportedEventTypes, "NVML events",              \
    "nvmlDeviceGetSupportedEventTypes")                                                         \
  X(DeviceRegisterEvents, nvmlDeviceRegisterEvents, "NVML events", "nvmlDeviceRegisterEvents")  \
  X(EventSetWait, nvmlEventSetWait_v2, "NVML events", "nvmlEventSetWait_v2", "nvmlEventSetWait") \
  X(EventSetFree, nvmlEventSetFree, "NVML events", "nvmlEventSetFree")                          \
  X(GpmQueryDeviceSupport, nvmlGpmQueryDeviceSupport, "GPM profiling metrics",                  \
    "nvmlGpmQueryDeviceSupport")                                                                \
  X(GpmSampleAlloc, nvmlGpmSampleAlloc, "GPM profiling metrics", "nvmlGpmSampleAlloc")          \
  X(GpmSampleFree, nvmlGpmSampleFree, "GPM profiling metrics", "nvmlGpmSampleFree")             \
  X(GpmSampleGet, nvmlGpmSampleGet, "GPM profiling metrics", "nvmlGpmSampleGet")                \
  X(GpmMigSampleGet, nvmlGpmMigSampleGet, "GPM profiling metrics of MIG instances",             \
    "nvmlGpmMigSampleGet")                                                                      \
  X(GpmMetricsGet, nvmlGpmMetricsGet, "GPM profiling metrics", "nvmlGpmMetricsGet")
// clang-format on

struct Functions {
#define GPUOP_NVML_MEMBER(member, decl, feature, ...) Fn<decltype(&::decl)> member;
  GPUOP_NVML_REQUIRED_FUNCTIONS(GPUOP_NVML_MEMBER)
  GPUOP_NVML_OPTIONAL_FUNCTIONS(GPUOP_NVML_MEMBER)
#undef GPUOP_NVML_MEMBER
};

class Library {
 public:
  // Loads `path` (a file path, or a soname the dynamic linker searches for).
  static Result<std::unique_ptr<Library>> Load(const std::string& path);

  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  // Calls nvmlShutdown if Init succeeded, then dlclose.
  ~Library();

  // nvmlInit. REQUIRES: called once, before any other call.
  Status Init();

  const std::string& path() const { return path_; }
  const Functions& fn() const { return fn_; }
  // Whether the library is gpuop's simulator (it exports gpuopSimulated).
  bool simulated() const { return simulated_; }

  // NVML's own text for a return code ("GPU is lost").
  std::string ErrorText(nvmlReturn_t ret) const;

  // The NotSupported status for a function this library lacks.
  Status Missing(const char* symbol, const char* feature) const;

  // Calls f with args; a missing function gives Missing(), a failure the
  // mapped status "<object>: <symbol>: <NVML text>".
  template <typename F, typename... Args>
  Status Call(const Fn<F>& f, std::string_view object, Args&&... args) const {
    if (!f) return Missing(f.symbol, f.feature);
    nvmlReturn_t ret = f.ptr(std::forward<Args>(args)...);
    if (ret == NVML_SUCCESS) return Status::Ok();
    return Error(ret, object, f.symbol);
  }

  Status Error(nvmlReturn_t ret, std::string_view object, std::string_view symbol) const {
    return NvmlStatus(ret, ErrorText(ret), object, symbol);
  }

 private:
  Library(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}

  std::string path_;
  void* handle_ = nullptr;
  bool initialized_ = false;
  bool simulated_ = false;
  Functions fn_;
};

}  // namespace gpuop::nvml

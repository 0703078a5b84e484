#include "cuda/library.h"

#include <dlfcn.h>

#include <initializer_list>

#include "base/dynamic_library.h"

namespace gpuop::cuda {
namespace {

// Resolves the first of `names` the library exports into `*fn`; the name that
// resolved (or the preferred one) into `*symbol`.
template <typename F>
bool Bind(void* handle, F* fn, std::initializer_list<const char*> names, const char** symbol) {
  void* p = ResolveFirstSymbol(handle, names, symbol);
  if (p == nullptr) return false;
  // POSIX guarantees that dlsym's data pointer converts to a function pointer.
  *fn = reinterpret_cast<F>(p);
  return true;
}

}  // namespace

Result<std::unique_ptr<Library>> Library::Load(const std::string& path) {
  dlerror();
  // NODELETE: the driver keeps process-wide state and threads that must not
  // be unmapped; dlclose then only drops our reference.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Unavailable("cannot load the CUDA driver library " + path + " (" +
                       (err ? err : "unknown error") +
                       "): the NVIDIA driver's libraries are not in this container; run it with "
                       "a GPU allocated (request nvidia.com/gpu, so that the NVIDIA runtime or "
                       "CDI mounts them) or install the NVIDIA driver on the node");
  }
  std::unique_ptr<Library> lib(new Library(path, handle));
  Functions& f = lib->fn_;
  const char* symbol = "";
  auto need = [&](auto* fn, std::initializer_list<const char*> names) {
    return Bind(handle, fn, names, &symbol);
  };
  bool ok =
      need(&f.Init, {"cuInit"}) && need(&f.DriverGetVersion, {"cuDriverGetVersion"}) &&
      need(&f.GetErrorName, {"cuGetErrorName"}) && need(&f.GetErrorString, {"cuGetErrorString"}) &&
      need(&f.DeviceGetCount, {"cuDeviceGetCount"}) && need(&f.DeviceGet, {"cuDeviceGet"}) &&
      need(&f.DeviceGetName, {"cuDeviceGetName"}) &&
      need(&f.DeviceGetUuid, {"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}) &&
      need(&f.DeviceTotalMem, {"cuDeviceTotalMem_v2"}) &&
      need(&f.DeviceGetAttribute, {"cuDeviceGetAttribute"}) &&
      need(&f.DevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}) &&
      need(&f.DevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2"}) &&
      need(&f.CtxSetCurrent, {"cuCtxSetCurrent"}) &&
      need(&f.CtxSynchronize, {"cuCtxSynchronize"}) &&
      need(&f.ModuleLoadData, {"cuModuleLoadData"}) && need(&f.ModuleUnload, {"cuModuleUnload"}) &&
      need(&f.ModuleGetFunction, {"cuModuleGetFunction"}) && need(&f.MemAlloc, {"cuMemAlloc_v2"}) &&
      need(&f.MemFree, {"cuMemFree_v2"}) && need(&f.MemcpyHtoD, {"cuMemcpyHtoD_v2"}) &&
      need(&f.MemcpyDtoH, {"cuMemcpyDtoH_v2"}) && need(&f.LaunchKernel, {"cuLaunchKernel"});
  if (!ok) {
    return FailedPrecondition("the CUDA driver library " + path + " has no " + symbol +
                              ": this driver is too old for the CUDA check (or the library is "
                              "not NVIDIA's libcuda); upgrade the NVIDIA driver");
  }
  return lib;
}

Library::~Library() {
  if (handle_ != nullptr) dlclose(handle_);
}

std::string Library::ErrorText(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (fn_.GetErrorName(r, &name) != kCudaSuccess || name == nullptr) {
    return "CUDA error " + std::to_string(r);
  }
  std::string out = name;
  if (fn_.GetErrorString(r, &text) == kCudaSuccess && text != nullptr) {
    out += " (" + std::string(text) + ")";
  }
  return out;
}

}  // namespace gpuop::cuda

#include "nvml/library.h"

#include <dlfcn.h>

#include <initializer_list>

#include "base/dynamic_library.h"

namespace gpuop::nvml {
namespace {

template <typename F>
void Bind(void* handle, Fn<F>* fn, const char* feature, std::initializer_list<const char*> names) {
  fn->feature = feature;
  // dlsym gives a data pointer; POSIX guarantees it converts to a function pointer.
  fn->ptr = reinterpret_cast<F>(ResolveFirstSymbol(handle, names, &fn->symbol));
}

}  // namespace

Result<std::unique_ptr<Library>> Library::Load(const std::string& path) {
  dlerror();
  // NODELETE: NVML keeps process-wide state (handles, threads) that is not
  // meant to be unmapped; dlclose then only drops our reference.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Unavailable("cannot load NVML from " + path + ": " + (err ? err : "unknown error") +
                       "; is the NVIDIA driver installed? (set --nvml-lib or GPUOP_NVML_LIB to "
                       "use another library)");
  }
  std::unique_ptr<Library> lib(new Library(path, handle));
  lib->simulated_ = dlsym(handle, "gpuopSimulated") != nullptr;
  Functions& f = lib->fn_;
#define GPUOP_NVML_BIND(member, decl, feature, ...) Bind(handle, &f.member, feature, {__VA_ARGS__});
  GPUOP_NVML_REQUIRED_FUNCTIONS(GPUOP_NVML_BIND)
  GPUOP_NVML_OPTIONAL_FUNCTIONS(GPUOP_NVML_BIND)
#undef GPUOP_NVML_BIND

  // Without one of these NVML is unusable; say which, once.
#define GPUOP_NVML_CHECK(member, decl, feature, ...)                                          \
  if (!f.member) {                                                                            \
    return FailedPrecondition("NVML library " + path + " has no " + f.member.symbol +         \
                              " (needed for " + feature +                                     \
                              "): it is not a usable NVML; install a current NVIDIA driver"); \
  }
  GPUOP_NVML_REQUIRED_FUNCTIONS(GPUOP_NVML_CHECK)
#undef GPUOP_NVML_CHECK
  return lib;
}

Library::~Library() {
  if (initialized_ && fn_.Shutdown) fn_.Shutdown.ptr();
  if (handle_ != nullptr) dlclose(handle_);
}

Status Library::Init() {
  nvmlReturn_t ret = fn_.Init.ptr();
  if (ret == NVML_SUCCESS) {
    initialized_ = true;
    return Status::Ok();
  }
  std::string text = ErrorText(ret);
  if (ret == NVML_ERROR_DRIVER_NOT_LOADED) {
    return Unavailable("NVIDIA driver is not loaded (nvmlInit: " + text +
                       "): load the nvidia kernel module or wait for the driver container");
  }
  if (ret == NVML_ERROR_LIB_RM_VERSION_MISMATCH) {
    return FailedPrecondition("NVML (" + path_ +
                              ") does not match the loaded NVIDIA kernel module (" + text +
                              "): reboot or reload the driver so both are one version");
  }
  if (ret == NVML_ERROR_NO_PERMISSION) {
    return PermissionDenied("no permission to open the NVIDIA devices (" + text +
                            "): run privileged or give access to /dev/nvidia*");
  }
  return NvmlStatus(ret, text, "NVML (" + path_ + ")", fn_.Init.symbol);
}

std::string Library::ErrorText(nvmlReturn_t ret) const {
  const char* s = fn_.ErrorString.ptr(ret);
  return s ? std::string(s) : std::string();
}

Status Library::Missing(const char* symbol, const char* feature) const {
  return NotSupported("the NVIDIA driver's NVML (" + path_ + ") has no " + symbol +
                      ": this driver is too old for " + feature + "; upgrade the driver");
}

}  // namespace gpuop::nvml

// Helpers for the CUDA tests: the simulator libraries, called through their C
// ABIs as real clients call libcuda.so.1 and libnvidia-ml.so.1. Not thread-safe.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/library.h"
#include "cuda/vector_add.h"
#include "nvml/nvml_abi.h"
#include "tests/testing/scoped_env.h"

namespace gpuop::cuda::testing {

using gpuop::testing::ScopedEnv;

inline const std::string kSimCuda = std::string(GPUOP_BINARY_DIR) + "/lib/libcuda-sim.so";
inline const std::string kSimNvmlLib = std::string(GPUOP_BINARY_DIR) + "/lib/libnvml-sim.so";

inline void* Open(const std::string& path) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (h == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", path.c_str(), ::dlerror());
    std::abort();
  }
  return h;
}

template <typename F>
F Sym(void* lib, const char* name) {
  void* p = ::dlsym(lib, name);
  if (p == nullptr) {
    std::fprintf(stderr, "missing symbol %s\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(p);
}

// NV(nvmlFoo)(args...): the NVML simulator's nvmlFoo with the header's signature.
#define NV(fn)                                \
  ::gpuop::cuda::testing::Sym<decltype(&fn)>( \
      ::gpuop::cuda::testing::Open(::gpuop::cuda::testing::kSimNvmlLib), #fn)

// The options that run the check against the simulators.
inline VectorAddOptions SimOptions() {
  VectorAddOptions o;
  o.library = kSimCuda;
  o.nvml_library = kSimNvmlLib;
  o.elements = 5000;
  return o;
}

// What NVML (the simulator) enumerates: UUIDs by index.
inline std::vector<std::string> NvmlUuids() {
  std::vector<std::string> out;
  if (NV(nvmlInit_v2)() != NVML_SUCCESS) return out;
  unsigned n = 0;
  EXPECT_EQ(NV(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t d = nullptr;
    EXPECT_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(i, &d), NVML_SUCCESS);
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    EXPECT_EQ(NV(nvmlDeviceGetUUID)(d, buf, sizeof(buf)), NVML_SUCCESS);
    out.push_back(buf);
  }
  NV(nvmlShutdown)();
  return out;
}

}  // namespace gpuop::cuda::testing

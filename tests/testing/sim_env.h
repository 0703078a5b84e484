// Test helpers for the GPU simulator's environment: a temporary directory and
// the GPUOP_SIM_* variables that point libnvml-sim.so at a simulated machine.
// Header-only; needs only gpuop_nvml (the state store is in sim_node.h).
//
// The simulator reads its environment when NVML is first initialised in the
// process, so a test owns one SimEnv at a time and closes its nvml::Client
// before pointing the simulator elsewhere. Not thread-safe (setenv).
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>

#include "nvml/client.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::testing {

// The GPU simulator's NVML library, loaded as the driver's libnvidia-ml.so.1 is.
inline const std::string kSimNvml = std::string(GPUOP_BINARY_DIR) + "/lib/libnvml-sim.so";

// GPM sample buffers the simulator's NVML has allocated in this process and
// not freed (its gpuopSimGpmSamples); -1 when the library is not loaded.
inline int SimGpmSamples() {
  void* lib = ::dlopen(kSimNvml.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return -1;
  auto count = reinterpret_cast<int (*)()>(::dlsym(lib, "gpuopSimGpmSamples"));
  const int n = count ? count() : -1;
  ::dlclose(lib);
  return n;
}

// A fresh /tmp directory (short, for unix socket paths) and the simulator's
// variables; on destruction the variables are unset (GPUOP_SIM_DRIVER too)
// and the directory removed with everything in it.
class SimEnv {
 public:
  SimEnv() { ::unsetenv("GPUOP_SIM_DRIVER"); }
  ~SimEnv() {
    for (const char* name :
         {"GPUOP_SIM_MACHINE", "GPUOP_SIM_STATE", "GPUOP_SIM_SEED", "GPUOP_SIM_DRIVER"}) {
      ::unsetenv(name);
    }
  }
  SimEnv(const SimEnv&) = delete;
  SimEnv& operator=(const SimEnv&) = delete;

  // The temporary directory (empty when it could not be made).
  const std::string& dir() const { return dir_.path(); }

  // Points the simulator at `machine` (a preset or a YAML file) with its state
  // in dir()/`state` and GPU identities derived from `seed`. A state
  // directory belongs to one machine: use a new `state` for another machine.
  void Point(const std::string& machine, const std::string& seed,
             const std::string& state = "state") {
    ::setenv("GPUOP_SIM_MACHINE", machine.c_str(), 1);
    ::setenv("GPUOP_SIM_STATE", (dir() + "/" + state).c_str(), 1);
    ::setenv("GPUOP_SIM_SEED", seed.c_str(), 1);
  }

  // NVML through the simulator, as the components open it.
  static Result<std::unique_ptr<nvml::Client>> OpenNvml() { return nvml::Client::Open(kSimNvml); }
  // The same, a failure recorded in the test (and nullptr returned).
  static std::unique_ptr<nvml::Client> OpenNvmlOrFail() {
    auto c = OpenNvml();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

 private:
  TempDir dir_{"sim"};  // removed after the variables are unset
};

}  // namespace gpuop::testing

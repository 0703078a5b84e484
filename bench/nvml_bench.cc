// NVML binding over the simulator: what one enumeration and one telemetry
// read cost, with and without the shared state directory (the simulator's
// cross-process mode re-reads state.json only when it changed).
//
// Run: make bench (figures go to docs/performance.md).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "nvml/client.h"

namespace {

std::string SimLibrary() {
  const char* dir = std::getenv("GPUOP_BENCH_BUILD_DIR");
  return std::string(dir ? dir : "build") + "/lib/libnvml-sim.so";
}

std::unique_ptr<gpuop::nvml::Client> OpenSim(bool shared_state) {
  setenv("GPUOP_SIM_MACHINE", "dgx-h100", 1);
  if (shared_state) {
    static std::string dir = [] {
      char tmpl[] = "/tmp/gpuop-bench-XXXXXX";
      return std::string(mkdtemp(tmpl));
    }();
    setenv("GPUOP_SIM_STATE", dir.c_str(), 1);
  } else {
    unsetenv("GPUOP_SIM_STATE");
  }
  auto c = gpuop::nvml::Client::Open(SimLibrary());
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(c).value();
}

void BM_EnumerateGpus(benchmark::State& state) {
  auto client = OpenSim(state.range(0) != 0);
  for (auto _ : state) {
    auto gpus = client->Gpus();
    benchmark::DoNotOptimize(gpus);
  }
}
BENCHMARK(BM_EnumerateGpus)->Arg(0)->Arg(1)->ArgName("shared_state");

void BM_ReadTelemetryAllGpus(benchmark::State& state) {
  auto client = OpenSim(state.range(0) != 0);
  for (auto _ : state) {
    for (unsigned i = 0; i < 8; ++i) {
      auto t = client->ReadTelemetry(i);
      benchmark::DoNotOptimize(t);
    }
  }
}
BENCHMARK(BM_ReadTelemetryAllGpus)->Arg(0)->Arg(1)->ArgName("shared_state");

}  // namespace

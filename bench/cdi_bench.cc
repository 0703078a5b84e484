// CDI spec generation's pure core: BuildSpec and rendering for a DGX-class
// node with every GPU in MIG mode (8 GPUs × 7 MIG devices = 56), the largest
// spec a node produces. Whole-process figures are in scripts/bench.sh.
#include <benchmark/benchmark.h>

#include <string>

#include "toolkit/cdi_build.h"
#include "toolkit/cdi_spec.h"

namespace {

using gpuop::toolkit::CdiBuildOptions;
using gpuop::toolkit::CdiInputs;

CdiInputs EightMigGpus() {
  const std::string v = "570.172.08";
  const std::string lib = "/usr/lib/x86_64-linux-gnu";
  CdiInputs in;
  in.driver_version = v;
  gpuop::host::DeviceNodeInfo node;
  node.mode = 0666;
  auto add = [&](const std::string& path, uint32_t major, uint32_t minor, uint32_t mode) {
    node.major = major;
    node.minor = minor;
    node.mode = mode;
    in.device_nodes[path] = node;
  };
  add("/dev/nvidiactl", 195, 255, 0666);
  add("/dev/nvidia-modeset", 195, 254, 0666);
  add("/dev/nvidia-uvm", 510, 0, 0666);
  add("/dev/nvidia-uvm-tools", 510, 1, 0666);
  unsigned cap = 3;
  for (unsigned g = 0; g < 8; ++g) {
    gpuop::toolkit::CdiGpuInput gpu;
    gpu.index = g;
    gpu.minor = static_cast<int>(g);
    gpu.uuid = "GPU-" + std::to_string(10000000 + g) + "-1111-2222-3333-444444444444";
    gpu.pci_bus_id = "0000:" + std::to_string(18 + g) + ":00.0";
    gpu.mig_enabled = true;
    add("/dev/nvidia" + std::to_string(g), 195, g, 0666);
    for (unsigned j = 0; j < 7; ++j) {
      const unsigned gi = 7 + j;
      gpu.migs.push_back(
          {j, gi, 0,
           "MIG-" + std::to_string(20000000 + g * 10 + j) + "-1111-2222-3333-444444444444",
           "1g.10gb"});
      in.cap_minors.Add(g, gi, -1, cap);
      add("/dev/nvidia-caps/nvidia-cap" + std::to_string(cap), 511, cap, 0444);
      ++cap;
      in.cap_minors.Add(g, gi, 0, cap);
      add("/dev/nvidia-caps/nvidia-cap" + std::to_string(cap), 511, cap, 0444);
      ++cap;
    }
    in.gpus.push_back(std::move(gpu));
  }
  for (const char* stem :
       {"libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler", "libnvidia-nvvm", "libcudadebugger",
        "libnvidia-opencl", "libnvidia-cfg", "libnvidia-gpucomp", "libnvidia-allocator",
        "libnvidia-pkcs11", "libnvidia-encode", "libnvcuvid", "libnvidia-opticalflow",
        "libnvidia-fbc"}) {
    in.libraries.push_back(lib + "/" + stem + ".so." + v);
  }
  in.libcuda_dir = lib;
  in.binaries = {"/usr/bin/nvidia-smi", "/usr/bin/nvidia-debugdump", "/usr/bin/nvidia-persistenced",
                 "/usr/bin/nvidia-cuda-mps-control", "/usr/bin/nvidia-cuda-mps-server"};
  in.firmware = {"/lib/firmware/nvidia/" + v + "/gsp_ga10x.bin",
                 "/lib/firmware/nvidia/" + v + "/gsp_tu10x.bin"};
  in.sockets = {"/run/nvidia-persistenced/socket", "/run/nvidia-fabricmanager/socket",
                "/tmp/nvidia-mps"};
  return in;
}

CdiBuildOptions Options() {
  CdiBuildOptions o;
  o.hook_path = "/usr/local/nvidia/toolkit/gpuop";
  return o;
}

void BM_CdiBuildSpec56Mig(benchmark::State& state) {
  const CdiInputs in = EightMigGpus();
  const CdiBuildOptions o = Options();
  for (auto _ : state) {
    auto spec = gpuop::toolkit::BuildSpec(in, o);
    if (!spec.ok()) state.SkipWithError(spec.status().message().c_str());
    benchmark::DoNotOptimize(spec);
  }
}
BENCHMARK(BM_CdiBuildSpec56Mig);

void BM_CdiBuildAndRenderYaml56Mig(benchmark::State& state) {
  const CdiInputs in = EightMigGpus();
  const CdiBuildOptions o = Options();
  size_t bytes = 0;
  for (auto _ : state) {
    auto spec = gpuop::toolkit::BuildSpec(in, o);
    if (!spec.ok()) state.SkipWithError(spec.status().message().c_str());
    std::string yaml = gpuop::toolkit::cdi::ToYaml(*spec);
    bytes = yaml.size();
    benchmark::DoNotOptimize(yaml);
  }
  state.counters["yaml_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_CdiBuildAndRenderYaml56Mig);

void BM_CdiRenderJson56Mig(benchmark::State& state) {
  auto spec = gpuop::toolkit::BuildSpec(EightMigGpus(), Options());
  if (!spec.ok()) {
    state.SkipWithError(spec.status().message().c_str());
    return;
  }
  for (auto _ : state) {
    std::string json = gpuop::toolkit::cdi::ToJson(*spec);
    benchmark::DoNotOptimize(json);
  }
}
BENCHMARK(BM_CdiRenderJson56Mig);

}  // namespace

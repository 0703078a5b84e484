// The simulator's machine files (GPUOP_SIM_MACHINE=<path>): GPUs, models,
// topology. Read by path, so each input goes through a scratch file.
#include "fuzz_util.h"
#include "sim/nvml/machine.h"

using gpuop::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = gpuop::fuzz::ScratchFile(gpuop::fuzz::AsText(data, size), "machine.yaml");
  auto m = gpuop::sim::LoadMachine(path, "node-1");
  if (!m.ok()) return 0;
  unsigned n = static_cast<unsigned>(m->gpus.size());
  for (unsigned a = 0; a < n; ++a) {
    Check(m->gpus[a].index == a, "GPU indexes are not 0..n-1", std::to_string(a));
    for (unsigned b = 0; b < n; ++b) (void)gpuop::sim::TopologyLevel(*m, a, b);
    for (const auto& link : m->gpus[a].nvlinks) {
      Check(link.to_switch ? link.remote < m->nvswitches.size() : link.remote < n,
            "an NVLink names a GPU or switch the machine does not have", std::to_string(a));
    }
  }
  (void)gpuop::sim::CudaVersionForDriver(m->driver_version);
  return 0;
}

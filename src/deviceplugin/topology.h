// Topology: how close each pair of GPUs is, for topology-aware allocation.
//
// A plain value indexed by NVML GPU index: the PCIe level at which two GPUs
// meet (nvmlDeviceGetTopologyCommonAncestor) and how many NVLinks join them
// (directly or through NVSwitches). Score() turns both into one number, higher
// for closer pairs: NVLinks dominate (each link is worth more than any PCIe
// relation), then the PCIe level. Tests build a Topology directly;
// ReadTopology fills one from NVML.
//
// Topology is copyable and immutable once built; safe to read from any
// thread. ReadTopology calls NVML through the client (thread-safe).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "nvml/client.h"
#include "nvml/device.h"

namespace gpuop::deviceplugin {

class Topology {
 public:
  // Score of one NVLink between two GPUs; every PCIe score is below it.
  static constexpr int kNvLinkScore = 100;

  Topology() = default;
  // `gpus` GPUs (indices 0..gpus-1), all meeting at SYSTEM with no NVLink.
  explicit Topology(unsigned gpus);

  unsigned size() const { return static_cast<unsigned>(numa_.size()); }

  // Setters are symmetric. Indices past size() grow the topology.
  void SetLevel(unsigned a, unsigned b, nvml::TopologyLevel level);
  void SetNvLinks(unsigned a, unsigned b, unsigned links);
  void SetNumaNode(unsigned gpu, int node);

  // SYSTEM / 0 / -1 for indices outside the topology.
  nvml::TopologyLevel Level(unsigned a, unsigned b) const;
  unsigned NvLinks(unsigned a, unsigned b) const;
  int NumaNode(unsigned gpu) const;

  // kNvLinkScore per link plus the PCIe score: INTERNAL 60, SINGLE 50,
  // MULTIPLE 40, HOSTBRIDGE 30, NODE 20, SYSTEM 10. 0 for a == b.
  int Score(unsigned a, unsigned b) const;

  // What could not be read, one line each (empty when NVML answered all).
  std::vector<std::string> notes;

 private:
  void Grow(unsigned n);

  std::vector<int> numa_;
  std::vector<std::vector<nvml::TopologyLevel>> level_;
  std::vector<std::vector<unsigned>> nvlinks_;
};

// Reads the topology of `gpus` (Gpu::index are NVML indices) from NVML.
// Degrades rather than fails: a pair NVML cannot place (an old driver, a lost
// GPU) is placed from the NUMA nodes (same node: NODE, else SYSTEM), a GPU
// whose NVLinks cannot be read counts as having none; each such gap adds a
// line to Topology::notes. Fails only when the GPU count cannot be read.
Result<Topology> ReadTopology(const nvml::Client& client, const std::vector<nvml::Gpu>& gpus);

}  // namespace gpuop::deviceplugin

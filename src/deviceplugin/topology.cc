#include "deviceplugin/topology.h"

#include <algorithm>

namespace gpuop::deviceplugin {
namespace {

int PcieScore(nvml::TopologyLevel l) {
  switch (l) {
    case nvml::TopologyLevel::kInternal:
      return 60;
    case nvml::TopologyLevel::kSingle:
      return 50;
    case nvml::TopologyLevel::kMultiple:
      return 40;
    case nvml::TopologyLevel::kHostBridge:
      return 30;
    case nvml::TopologyLevel::kNode:
      return 20;
    case nvml::TopologyLevel::kSystem:
      return 10;
  }
  return 10;
}

}  // namespace

Topology::Topology(unsigned gpus) { Grow(gpus); }

void Topology::Grow(unsigned n) {
  if (n <= size()) return;
  numa_.resize(n, -1);
  level_.resize(n);
  nvlinks_.resize(n);
  for (unsigned i = 0; i < n; ++i) {
    level_[i].resize(n, nvml::TopologyLevel::kSystem);
    nvlinks_[i].resize(n, 0);
    level_[i][i] = nvml::TopologyLevel::kInternal;
  }
}

void Topology::SetLevel(unsigned a, unsigned b, nvml::TopologyLevel level) {
  Grow(std::max(a, b) + 1);
  level_[a][b] = level_[b][a] = level;
}

void Topology::SetNvLinks(unsigned a, unsigned b, unsigned links) {
  Grow(std::max(a, b) + 1);
  nvlinks_[a][b] = nvlinks_[b][a] = links;
}

void Topology::SetNumaNode(unsigned gpu, int node) {
  Grow(gpu + 1);
  numa_[gpu] = node;
}

nvml::TopologyLevel Topology::Level(unsigned a, unsigned b) const {
  if (a >= size() || b >= size()) return nvml::TopologyLevel::kSystem;
  return level_[a][b];
}

unsigned Topology::NvLinks(unsigned a, unsigned b) const {
  if (a >= size() || b >= size()) return 0;
  return nvlinks_[a][b];
}

int Topology::NumaNode(unsigned gpu) const { return gpu < size() ? numa_[gpu] : -1; }

int Topology::Score(unsigned a, unsigned b) const {
  if (a == b) return 0;
  return kNvLinkScore * static_cast<int>(NvLinks(a, b)) + PcieScore(Level(a, b));
}

Result<Topology> ReadTopology(const nvml::Client& client, const std::vector<nvml::Gpu>& gpus) {
  GPUOP_ASSIGN_OR_RETURN(unsigned count, client.GpuCount());
  Topology t(count);
  for (const nvml::Gpu& g : gpus) t.SetNumaNode(g.index, g.numa_node);

  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      const nvml::Gpu& a = gpus[i];
      const nvml::Gpu& b = gpus[j];
      auto level = client.CommonAncestor(a.index, b.index);
      if (level.ok()) {
        t.SetLevel(a.index, b.index, *level);
        continue;
      }
      const bool same_node = a.numa_node >= 0 && a.numa_node == b.numa_node;
      t.SetLevel(a.index, b.index,
                 same_node ? nvml::TopologyLevel::kNode : nvml::TopologyLevel::kSystem);
      t.notes.push_back("PCIe topology of GPUs " + std::to_string(a.index) + " and " +
                        std::to_string(b.index) +
                        " unknown, placed by NUMA node: " + level.status().message());
    }
  }

  // Links of every GPU first: peers through an NVSwitch need both sides.
  std::vector<std::vector<nvml::NvLink>> links(count);
  for (const nvml::Gpu& g : gpus) {
    if (g.index >= count) continue;
    auto l = client.NvLinks(g.index);
    if (l.ok()) {
      links[g.index] = std::move(l).value();
    } else if (l.status().code() != StatusCode::kNotSupported) {
      t.notes.push_back("NVLinks of GPU " + std::to_string(g.index) +
                        " unknown, counted as none: " + l.status().message());
    }
  }
  for (const nvml::Gpu& g : gpus) {
    if (g.index >= count) continue;
    for (const nvml::NvLinkPeer& p : nvml::NvLinkPeersFromLinks(g.index, links)) {
      t.SetNvLinks(g.index, p.gpu, std::max(p.links, t.NvLinks(g.index, p.gpu)));
    }
  }
  return t;
}

}  // namespace gpuop::deviceplugin
